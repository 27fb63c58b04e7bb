//! `compare DIR...`: runs side by side, grouped by what they ran on and with, oldest first in
//! each group, with the conditions each ran under, so a trend in rate or first-token is read
//! beside the box's load and the serve binary's hash; and below the table, what in each later
//! run's provenance differs from the oldest run's (issue 18): a model file, the workload or the
//! serve's arguments (the runs are not comparable), or the box.
//!
//! History across a fleet (issue 21): a group is the runs of one host, one serve binary and one
//! model (by hash, where provenance records one). `--svg FILE` draws each host's median rate
//! and first-token over time ([`crate::report::compare_svg`]); `--csv FILE` writes a row a run
//! for spreadsheets ([`crate::report::compare_csv`]). Hundreds of run directories read in well
//! under a second (docs/performance.md, "compare over hundreds of runs"); a directory that
//! cannot be read is a row saying why.

use crate::archive::check::Check;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use clap::Args;
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::archive::record::{Percentiles, Provenance, Verdict};
use crate::archive::rundir::{self, BaselineRun};
use crate::archive::safe_open::Want;
use crate::judging::archived::judge_archive;
use crate::judging::measure::{measure, median};
use crate::judging::provenance::{differences, Difference};
use crate::judging::verdict::Criteria;
use crate::report::output::{OutputFile, Writing};
use crate::report::{compare_csv, compare_svg};

/// `compare`'s arguments.
#[derive(Debug, Args)]
#[command(after_help = COMPARE_HELP)]
pub struct CompareArgs {
    /// Run directories to compare.
    #[arg(value_name = "DIR", required = true)]
    pub dirs: Vec<PathBuf>,
    /// Print the rows as JSON.
    #[arg(long)]
    pub json: bool,
    /// Write each host's median rate and first-token over time as SVG to FILE.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Write a row a run as CSV (RFC 4180) to FILE; `-` for stdout, instead of the table.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
}

/// What `compare --help` says of the groups, the result, the outputs and the section below
/// the table.
const COMPARE_HELP: &str = "\
The runs are grouped by host, serve binary (sha256) and model: the sha256 of the one file
run.json's provenance hashed among the serve's arguments, or of the sorted hashes where it
hashed several (a model and its config); \"model not recorded\" where it hashed none or the run
is from before provenance. Groups are ordered by host, then by their oldest run; each group's
runs oldest first; each group has a line naming host / serve / model (12 hex digits).

RESULT is each run judged again as `judge DIR` judges it: with the floors and the baseline its
run.json records, so a run recorded under other floors is held to its own. A run whose files
are not what its gate wrote (run.json's digests) is FAIL, and a line below the table says
`the archive was changed after the run` and what changed (`changed` with --json).

--svg FILE: a panel a host (its groups share it, a grey line where the serve or the model
changed), the median rate on the left and the median first-token on the right over the runs'
start times (UTC), each run a marker by its RESULT, the floor and the limit each run recorded
drawn as steps. --csv FILE (or - for stdout): a header and a row a run: dir, host,
serve_sha256, model_sha256, started_utc, result, the medians, load1, ncpu, serve_cpu_wait, the
floor and limit, the latency percentiles (count, mean, p50, p90, p99 of ttft_ms, itl_ms,
tpot_ms, e2el_ms, where the verdict has them) and why a directory was unreadable. Both are
written atomically; a FILE whose directory does not exist is refused (exit 2) before any run is
read.

Below the table, for each run after the oldest one, what in its provenance (run.json
`provenance`) differs from the oldest run's (\"the first run\"): a model file's hash, the
serve's arguments or the workload (prompts, max_tokens, extra body), which make the two runs
measure different things (`not comparable`); or a fact of the box (`box: NAME`, NAME being
host, cpu, memory, kernel, modules, firmware or tool). A run recorded without provenance is
named as such. Nothing is printed when every run matches the first. With --json, each row has
`group` (host, serve_sha256, model_sha256), `provenance` (whether the run recorded it) and
`differences` (against the first run; null for the first).";

/// What a run ran on and with: its group. Runs of one group measure the same thing on the same
/// box; a trend within one is the serve's.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct GroupKey {
    /// Host name (run.json `host`).
    pub host: String,
    /// The serve binary's sha256, hex; `None` when attached to a serve already running.
    pub serve_sha256: Option<String>,
    /// The model's hash ([`model_hash`]); `None` where provenance records no model file.
    pub model_sha256: Option<String>,
}

impl GroupKey {
    /// The group's line in the table: `host H / serve 0123456789ab / model 0123456789ab`.
    pub fn header(&self) -> String {
        let short = |s: &Option<String>, none: &str| {
            s.as_ref()
                .map_or_else(|| none.to_string(), |h| h.chars().take(12).collect())
        };
        format!(
            "host {} / serve {} / model {}",
            self.host,
            short(&self.serve_sha256, "not recorded (attached)"),
            short(&self.model_sha256, "not recorded"),
        )
    }
}

/// The model a run's provenance names: the sha256 of its one hashed file, or, where it hashed
/// several (a model and its config), the sha256 of their sorted hashes one a line, so the key
/// is the same whatever the files' paths or order. `None` where it hashed none.
pub fn model_hash(p: &Provenance) -> Option<String> {
    let mut hashes: Vec<&str> = p.model_files.iter().map(|f| f.sha256.as_str()).collect();
    hashes.sort_unstable();
    hashes.dedup();
    match hashes.as_slice() {
        [] => None,
        [one] => Some(one.to_string()),
        many => {
            let digest = Sha256::digest(many.join("\n").as_bytes());
            Some(digest.iter().map(|b| format!("{b:02x}")).collect())
        }
    }
}

/// The latency percentiles the verdict's lines carry (issue 21, item 5), each where it has
/// them: filled by the latency line once the gate judges one; empty before.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Default)]
pub struct Latency {
    /// Time to first token, ms.
    pub ttft_ms: Option<Percentiles>,
    /// Inter-token latency, ms.
    pub itl_ms: Option<Percentiles>,
    /// Time per output token after the first, ms.
    pub tpot_ms: Option<Percentiles>,
    /// End-to-end latency per reply, ms.
    pub e2el_ms: Option<Percentiles>,
}

impl Latency {
    /// The first figure of each kind among `verdict`'s lines (the latency line's).
    pub fn of(verdict: &Verdict) -> Latency {
        let mut l = Latency::default();
        for f in verdict
            .lines
            .iter()
            .filter_map(|line| line.figures.as_ref())
        {
            l.ttft_ms = l.ttft_ms.or(f.ttft_ms);
            l.itl_ms = l.itl_ms.or(f.itl_ms);
            l.tpot_ms = l.tpot_ms.or(f.tpot_ms);
            l.e2el_ms = l.e2el_ms.or(f.e2el_ms);
        }
        l
    }
}

/// One run's row. A run directory that cannot be read has its `dir`, `result` and
/// `unreadable` only.
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct Row {
    /// The run directory, as given.
    pub dir: String,
    /// What the run ran on and with; `None` for a directory that cannot be read.
    pub group: Option<GroupKey>,
    /// Start, UTC.
    pub started_utc: Option<String>,
    /// Host name.
    pub host: Option<String>,
    /// The serve binary's sha256, hex (the table shows its first 12 digits).
    pub serve_sha256: Option<String>,
    /// 1-minute load average before the serve started.
    pub load1: Option<f64>,
    /// CPUs of the box.
    pub ncpu: Option<usize>,
    /// The serve's CPU-wait fraction during the replies.
    pub serve_cpu_wait: Option<f64>,
    /// Median decode rate, tok/s.
    pub median_rate_tok_s: Option<f64>,
    /// Median first-token time, ms.
    pub median_first_token_ms: Option<f64>,
    /// The rate floor the run recorded (of the median), tok/s.
    pub rate_floor_tok_s: Option<f64>,
    /// The first-token limit the run recorded (of the median), ms.
    pub first_token_limit_ms: Option<f64>,
    /// The latency percentiles of the verdict's lines, where it has them.
    pub latency: Latency,
    /// The determinism line's trials and how many differed (`--deterministic`), where the
    /// verdict has it.
    pub determinism_trials: Option<usize>,
    /// How many of those trials differed.
    pub determinism_mismatches: Option<usize>,
    /// The reference line's positions judged (`--reference`), where the verdict has it.
    pub reference_positions: Option<usize>,
    /// Its top-1 agreement, a share.
    pub reference_agreement: Option<f64>,
    /// Its hard divergences.
    pub reference_hard_divergences: Option<usize>,
    /// The RESULT, judged again as `judge DIR` judges it (the run's own floors and recorded
    /// baseline), in result.json's words: `PASS`, `FAIL`, `SKIP`, `INCONCLUSIVE`,
    /// `INTERRUPTED`; `UNREADABLE` for a directory that cannot be read.
    pub result: String,
    /// The RESULT line as printed, e.g. `RESULT: SKIP (hold not acquired ...)`.
    pub summary: Option<String>,
    /// Why the directory could not be read.
    pub unreadable: Option<String>,
    /// `the archive was changed after the run: ...` when its files are not what the gate
    /// wrote (its result is then FAIL); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub changed: Option<String>,
    /// Whether run.json records the run's provenance.
    pub provenance: bool,
    /// For a run after the oldest, what in its provenance differs from the oldest run's;
    /// `None` for the oldest run, and where either run has no provenance.
    pub differences: Option<Vec<Difference>>,
    /// The provenance itself, to compare with.
    #[serde(skip)]
    pub recorded: Option<Provenance>,
    /// The start as seconds since the Unix epoch, for the picture; `None` where `started_utc`
    /// is not RFC 3339.
    #[serde(skip)]
    pub started_unix_s: Option<f64>,
    /// Whether this is the oldest run, the one the others' provenance is compared with (of
    /// runs started in the same second, the one given first).
    #[serde(skip)]
    pub oldest: bool,
}

/// `result` of a run directory that cannot be read.
pub const UNREADABLE: &str = "UNREADABLE";

/// Put `rows` in groups: by host, then by the group's oldest run; each group's runs oldest
/// first. Rows without a group (unreadable) keep their order, after the rest. Stable: rows of
/// one start keep the order given.
pub fn grouped(rows: Vec<Row>) -> Vec<Row> {
    let (mut readable, bad): (Vec<Row>, Vec<Row>) =
        rows.into_iter().partition(|r| r.group.is_some());
    readable.sort_by(|a, b| a.started_utc.cmp(&b.started_utc));
    // Each group's place: its host, its oldest run's start, and where that run stands in the
    // stable order above, so groups whose oldest runs started in the same second keep the
    // order they were given in (not the order of their keys' hashes).
    let mut first_start: HashMap<&GroupKey, (&Option<String>, usize)> = HashMap::new();
    for (i, r) in readable.iter().enumerate() {
        first_start
            .entry(r.group.as_ref().expect("partitioned"))
            .or_insert((&r.started_utc, i));
    }
    let order: HashMap<GroupKey, (String, Option<String>, usize)> = first_start
        .into_iter()
        .map(|(k, (s, i))| (k.clone(), (k.host.clone(), s.clone(), i)))
        .collect();
    readable.sort_by(|a, b| {
        let (ka, kb) = (a.group.as_ref().unwrap(), b.group.as_ref().unwrap());
        (&order[ka], &a.started_utc).cmp(&(&order[kb], &b.started_utc))
    });
    readable.extend(bad);
    readable
}

/// Read each run and build its row, in groups ([`grouped`]), then the directories that could
/// not be read, in the order given. One bad directory never hides the others.
pub fn rows(dirs: &[PathBuf]) -> Vec<Row> {
    let mut baselines = HashMap::new();
    let mut rows: Vec<Row> = dirs
        .iter()
        .map(|dir| {
            row(dir, &mut baselines).unwrap_or_else(|e| Row {
                dir: dir.display().to_string(),
                result: UNREADABLE.to_string(),
                unreadable: Some(format!("{e:#}")),
                ..Row::default()
            })
        })
        .collect();
    // Against the oldest run of all (issue 18), whichever group it is in: across groups the
    // differences are what tells them apart.
    // min_by gives the first of equal starts: the one given first.
    let oldest = rows
        .iter_mut()
        .filter(|r| r.group.is_some())
        .min_by(|a, b| a.started_utc.cmp(&b.started_utc));
    if let Some(oldest) = oldest {
        oldest.oldest = true;
        if let Some(baseline) = oldest.recorded.clone() {
            for r in rows.iter_mut().filter(|r| r.group.is_some() && !r.oldest) {
                r.differences = r
                    .recorded
                    .as_ref()
                    .map(|candidate| differences(candidate, &baseline));
            }
        }
    }
    rows = grouped(rows);
    rows
}

/// The run's row. Its result is judged again rather than read from result.json: a run killed
/// before it wrote result.json still has one, a result.json edited or from an older build
/// cannot disagree with the table's figures, and `compare` says what `judge DIR` says. The
/// run's recorded baseline is loaded once for all the runs that name it.
fn row(dir: &Path, baselines: &mut HashMap<String, BaselineRun>) -> Result<Row> {
    let a = rundir::load_archive(dir)?;
    let criteria = Criteria::new(a.manifest.floors.clone())?;
    let baseline = criteria.floors().baseline.as_ref().map(|recorded| {
        baselines.entry(recorded.clone()).or_insert_with(|| {
            let mut run = BaselineRun::load(Path::new(recorded));
            if let Err(why) = &run.archive {
                run.archive = Err(format!(
                    "the run's baseline {recorded} cannot be read now ({why})"
                ));
            }
            run
        }) as &BaselineRun
    });
    // The recorded reference too, so the row's result is `judge DIR`'s (read per run: a
    // reference is compared token by token, not shared figures).
    let reference = criteria.floors().reference.as_ref().map(|recorded| {
        let mut run = BaselineRun::load(Path::new(recorded));
        if let Err(why) = &run.archive {
            run.archive = Err(format!(
                "the run's reference {recorded} cannot be read now ({why})"
            ));
        }
        run
    });
    let verdict = judge_archive(
        &a,
        &criteria,
        a.read_serve_log()?,
        baseline,
        reference.as_ref(),
    )?;
    // Warm-ups (`--warmup`) are not judged, and are no part of the run's figures.
    let metrics: Vec<_> = a
        .replies
        .iter()
        .filter(|r| !r.warmup)
        .map(measure)
        .collect();
    let rates: Vec<f64> = metrics.iter().filter_map(|m| m.rate_tok_s).collect();
    let firsts: Vec<f64> = metrics.iter().filter_map(|m| m.first_token_ms).collect();
    let serve_sha256 = a.manifest.serve_binary.as_ref().map(|b| b.sha256.clone());
    let started = &a.manifest.started_utc;
    let determinism = verdict
        .lines
        .iter()
        .find(|l| l.check == Check::Determinism)
        .and_then(|l| l.figures.as_ref());
    let reference = verdict
        .lines
        .iter()
        .find(|l| l.check == Check::Reference)
        .and_then(|l| l.figures.as_ref())
        .and_then(|f| f.reference.as_ref());
    Ok(Row {
        dir: dir.display().to_string(),
        group: Some(GroupKey {
            host: a.manifest.host.clone(),
            serve_sha256: serve_sha256.clone(),
            model_sha256: a.manifest.provenance.as_ref().and_then(model_hash),
        }),
        started_utc: Some(started.clone()),
        host: Some(a.manifest.host.clone()),
        serve_sha256,
        load1: a.load.as_ref().map(|l| l.load1),
        ncpu: a.load.as_ref().map(|l| l.ncpu),
        serve_cpu_wait: a
            .load
            .as_ref()
            .and_then(|l| l.during.as_ref())
            .and_then(|d| d.wait_fraction),
        median_rate_tok_s: median(&rates),
        median_first_token_ms: median(&firsts),
        rate_floor_tok_s: Some(a.manifest.floors.floor),
        first_token_limit_ms: Some(a.manifest.floors.first_token_ms),
        latency: Latency::of(&verdict),
        determinism_trials: determinism.and_then(|f| f.trials),
        determinism_mismatches: determinism.and_then(|f| f.mismatches),
        reference_positions: reference.map(|f| f.positions),
        reference_agreement: reference.and_then(|f| f.agreement),
        reference_hard_divergences: reference.map(|f| f.hard_divergences),
        result: verdict.outcome.word().to_string(),
        summary: Some(format!("RESULT: {}", verdict.outcome)),
        unreadable: None,
        changed: a.integrity.changed_line(),
        provenance: a.manifest.provenance.is_some(),
        differences: None,
        recorded: a.manifest.provenance.clone(),
        started_unix_s: unix_seconds(started),
        oldest: false,
    })
}

/// An RFC 3339 time as seconds since the Unix epoch.
pub fn unix_seconds(rfc3339: &str) -> Option<f64> {
    let t = humantime::parse_rfc3339_weak(rfc3339.trim_end_matches('Z')).ok()?;
    Some(t.duration_since(std::time::UNIX_EPOCH).ok()?.as_secs_f64())
}

/// What each run after the oldest differs in from the oldest run's provenance, one line a
/// difference; empty when every run matches it.
pub fn differs(rows: &[Row]) -> String {
    let readable: Vec<&Row> = rows.iter().filter(|r| r.group.is_some()).collect();
    let Some(first) = readable.iter().copied().find(|r| r.oldest).or_else(|| {
        readable
            .iter()
            .copied()
            .min_by(|a, b| a.started_utc.cmp(&b.started_utc))
    }) else {
        return String::new();
    };
    if readable.len() < 2 {
        return String::new();
    }
    let mut lines = Vec::new();
    if first.recorded.is_none() {
        lines.push(format!(
            "  {}: no provenance recorded (a run from before it was): nothing to compare with",
            first.dir
        ));
    } else {
        let mut seen_first = false;
        for r in readable {
            if !seen_first && std::ptr::eq(r, first) {
                seen_first = true;
                continue;
            }
            match &r.differences {
                Some(d) => lines.extend(d.iter().map(|d| format!("  {}: {d}", r.dir))),
                None => lines.push(format!(
                    "  {}: no provenance recorded (a run from before it was)",
                    r.dir
                )),
            }
        }
    }
    if lines.is_empty() {
        return String::new();
    }
    format!(
        "\ndiffers from the first run ({}):\n{}\n",
        first.dir,
        lines.join("\n")
    )
}

/// The rows as an aligned table, a line naming each group above its runs.
pub fn table(rows: &[Row]) -> String {
    let dash = || "-".to_string();
    let header: [String; 9] = [
        "started (UTC)".into(),
        "host".into(),
        "serve sha256".into(),
        "load before".into(),
        "serve CPU wait".into(),
        "median rate".into(),
        "median first token".into(),
        "RESULT".into(),
        "run".into(),
    ];
    // A group's line, or a run's cells.
    enum Line {
        Group(String),
        Cells([String; 9]),
    }
    let mut lines = vec![Line::Cells(header)];
    let mut unreadable = Vec::new();
    let mut changed = Vec::new();
    let mut current: Option<&GroupKey> = None;
    for r in rows {
        let Some(group) = &r.group else {
            let why = r.unreadable.as_deref().unwrap_or("no run.json");
            unreadable.push(format!("{}: unreadable: {why}", r.dir));
            continue;
        };
        if let Some(line) = &r.changed {
            changed.push(format!("{}: {line}", r.dir));
        }
        if current != Some(group) {
            lines.push(Line::Group(group.header()));
            current = Some(group);
        }
        lines.push(Line::Cells([
            r.started_utc.clone().unwrap_or_else(dash),
            r.host.clone().unwrap_or_else(dash),
            r.serve_sha256
                .as_ref()
                .map_or_else(dash, |s| s.chars().take(12).collect()),
            match (r.load1, r.ncpu) {
                (Some(l), Some(n)) => format!("{l:.1} on {n} CPUs"),
                _ => dash(),
            },
            r.serve_cpu_wait
                .map_or_else(dash, |w| format!("{:.0}%", w * 100.0)),
            r.median_rate_tok_s
                .map_or_else(dash, |v| format!("{v:.1} tok/s")),
            r.median_first_token_ms
                .map_or_else(dash, |v| format!("{v:.0} ms")),
            r.result.clone(),
            r.dir.clone(),
        ]));
    }
    let widths: Vec<usize> = (0..9)
        .map(|i| {
            lines
                .iter()
                .filter_map(|l| match l {
                    Line::Cells(c) => Some(c[i].chars().count()),
                    Line::Group(_) => None,
                })
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for l in &lines {
        match l {
            Line::Group(g) => out.push_str(g),
            Line::Cells(c) => {
                let line: Vec<String> = c
                    .iter()
                    .zip(&widths)
                    .map(|(s, w)| format!("{s:<w$}"))
                    .collect();
                out.push_str(line.join("  ").trim_end());
            }
        }
        out.push('\n');
    }
    for u in changed.into_iter().chain(unreadable) {
        out.push_str(&u);
        out.push('\n');
    }
    out.push_str(&differs(rows));
    out
}

/// Where `--csv` writes: a file, or stdout in place of the table.
fn csv_to_stdout(args: &CompareArgs) -> bool {
    args.csv.as_deref() == Some(Path::new("-"))
}

/// Refuse what cannot be done before any run is read: a report file that cannot be written
/// (its directory missing), or two outputs for stdout.
/// Both are opened here, before any run is read, and written through what was opened.
fn check_args(args: &CompareArgs) -> Result<(Option<OutputFile>, Option<OutputFile>)> {
    if csv_to_stdout(args) && args.json {
        bail!("--csv - and --json both write to stdout: give --csv a FILE, or drop one");
    }
    let open = |path: Option<&PathBuf>, what: &str| {
        path.map(|p| {
            OutputFile::open(p, Writing::Replace, Want::Regular)
                .map_err(|e| anyhow::anyhow!("{what}: {e:#}"))
        })
        .transpose()
    };
    let svg = open(args.svg.as_ref(), "--svg")?;
    let csv = open(args.csv.as_ref().filter(|_| !csv_to_stdout(args)), "--csv")?;
    Ok((svg, csv))
}

/// Run `compare`: exit 0 when at least one run could be read, 2 when none could (or a report
/// file cannot be written).
pub fn run(args: CompareArgs) -> Result<u8> {
    let (svg, csv) = check_args(&args)?;
    let rows = rows(&args.dirs);
    if args.json {
        crate::console::out(&format!("{}\n", serde_json::to_string_pretty(&rows)?));
    } else if csv_to_stdout(&args) {
        crate::console::out(&compare_csv::csv(&rows));
    } else {
        crate::console::out(&table(&rows));
    }
    if let Some(out) = &csv {
        out.write(compare_csv::csv(&rows).as_bytes())?;
    }
    if let Some(out) = &svg {
        out.write(compare_svg::svg(&rows)?.as_bytes())?;
    }
    if rows.iter().all(|r| r.group.is_none()) {
        bail!(
            "none of the {} directories is a run that can be read",
            rows.len()
        );
    }
    Ok(crate::exit_codes::PASS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::record::HashedFile;

    fn run(dir: &str, host: &str, serve: &str, model: Option<&str>, start: &str) -> Row {
        Row {
            dir: dir.into(),
            group: Some(GroupKey {
                host: host.into(),
                serve_sha256: Some(serve.repeat(64)),
                model_sha256: model.map(|m| m.repeat(64)),
            }),
            started_utc: Some(start.into()),
            host: Some(host.into()),
            result: "PASS".into(),
            ..Row::default()
        }
    }

    fn unreadable(dir: &str) -> Row {
        Row {
            dir: dir.into(),
            result: UNREADABLE.into(),
            unreadable: Some("garbage".into()),
            ..Row::default()
        }
    }

    fn dirs(rows: &[Row]) -> Vec<&str> {
        rows.iter().map(|r| r.dir.as_str()).collect()
    }

    #[test]
    fn groups_go_by_host_then_by_their_oldest_run_and_runs_oldest_first() {
        let rows = vec![
            unreadable("bad1"),
            run("b-new", "b", "1", None, "2026-11-05T00:00:00Z"),
            run("a-2nd-serve", "a", "2", None, "2026-11-02T00:00:00Z"),
            run("a-old", "a", "1", None, "2026-11-01T00:00:00Z"),
            unreadable("bad2"),
            run("b-old", "b", "1", None, "2026-10-01T00:00:00Z"),
            run("a-1st-serve-late", "a", "1", None, "2026-11-09T00:00:00Z"),
            run("a-model", "a", "2", Some("m"), "2026-11-03T00:00:00Z"),
        ];
        let g = grouped(rows);
        assert_eq!(
            dirs(&g),
            [
                // Host a before b though b's run is older; a's serve 1 first (its oldest run
                // is the oldest), its late run with it; then serve 2, then serve 2 with a
                // model recorded.
                "a-old",
                "a-1st-serve-late",
                "a-2nd-serve",
                "a-model",
                "b-old",
                "b-new",
                // The unreadable ones last, as given.
                "bad1",
                "bad2",
            ]
        );
    }

    #[test]
    fn runs_of_one_start_keep_the_order_given() {
        let rows = vec![
            run("x", "a", "1", None, "2026-11-01T00:00:00Z"),
            run("y", "a", "1", None, "2026-11-01T00:00:00Z"),
        ];
        assert_eq!(dirs(&grouped(rows.clone())), ["x", "y"]);
        let reversed: Vec<Row> = rows.into_iter().rev().collect();
        assert_eq!(dirs(&grouped(reversed)), ["y", "x"]);
    }

    #[test]
    fn groups_whose_oldest_runs_share_a_second_keep_the_order_given() {
        // Two models on one host in the same second (CI found this: the groups went by their
        // keys, and the second run's group came first).
        let rows = vec![
            run("x", "a", "2", Some("d"), "2026-11-01T00:00:00Z"),
            run("y", "a", "1", Some("c"), "2026-11-01T00:00:00Z"),
        ];
        assert_eq!(dirs(&grouped(rows.clone())), ["x", "y"]);
        let reversed: Vec<Row> = rows.into_iter().rev().collect();
        assert_eq!(dirs(&grouped(reversed)), ["y", "x"]);
    }

    #[test]
    fn the_table_names_each_group_above_its_runs() {
        let rows = grouped(vec![
            run("r1", "a", "1", None, "2026-11-01T00:00:00Z"),
            run("r2", "a", "1", None, "2026-11-02T00:00:00Z"),
            run("r3", "a", "2", Some("c"), "2026-11-03T00:00:00Z"),
            unreadable("bad"),
        ]);
        let t = table(&rows);
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].starts_with("started (UTC)"), "{t}");
        assert_eq!(
            lines[1], "host a / serve 111111111111 / model not recorded",
            "{t}"
        );
        assert!(lines[2].ends_with("r1") && lines[3].ends_with("r2"), "{t}");
        assert_eq!(lines[4], "host a / serve 222222222222 / model cccccccccccc");
        assert!(lines[5].ends_with("r3"), "{t}");
        assert_eq!(lines[6], "bad: unreadable: garbage");
    }

    fn hashed(path: &str, sha: &str) -> HashedFile {
        HashedFile {
            path: path.into(),
            size: 1,
            sha256: sha.repeat(64),
            cached: false,
        }
    }

    #[test]
    fn the_model_is_its_one_file_or_its_files_whatever_their_paths_and_order() {
        let p = |files: Vec<HashedFile>| Provenance {
            model_files: files,
            ..Provenance::default()
        };
        assert_eq!(model_hash(&p(vec![])), None);
        assert_eq!(
            model_hash(&p(vec![hashed("/m/x.gguf", "a")])),
            Some("a".repeat(64))
        );
        let two = model_hash(&p(vec![hashed("/m/x", "a"), hashed("/m/cfg", "b")])).unwrap();
        assert_eq!(two.len(), 64);
        assert_ne!(two, "a".repeat(64));
        let moved = model_hash(&p(vec![hashed("/n/cfg", "b"), hashed("/n/x", "a")])).unwrap();
        assert_eq!(two, moved, "moved and listed the other way: the same model");
        let other = model_hash(&p(vec![hashed("/m/x", "a"), hashed("/m/cfg", "c")])).unwrap();
        assert_ne!(two, other);
    }

    #[test]
    fn a_start_reads_as_unix_seconds() {
        assert_eq!(unix_seconds("1970-01-01T00:01:00Z"), Some(60.0));
        assert_eq!(unix_seconds("yesterday"), None);
    }

    #[test]
    fn unreadable_directories_are_rows_saying_why() {
        let d = tempfile::tempdir().unwrap();
        let garbage = d.path().join("garbage");
        std::fs::create_dir(&garbage).unwrap();
        std::fs::write(garbage.join("run.json"), b"{not json").unwrap();
        let file = d.path().join("a-file");
        std::fs::write(&file, b"x").unwrap();
        let missing = d.path().join("missing");
        // A replies.jsonl over its cap, or no file at all, is the loader's to refuse
        // (tests/compare.rs runs_whose_replies_are_no_file_or_too_large_are_unreadable_rows).
        let rows = rows(&[garbage.clone(), file.clone(), missing.clone()]);
        assert_eq!(rows.len(), 3);
        assert!(rows
            .iter()
            .all(|r| r.result == UNREADABLE && r.group.is_none()));
        let why = |i: usize| rows[i].unreadable.clone().unwrap();
        assert!(why(0).contains("run.json"), "{}", why(0));
        assert!(why(1).contains("a-file/run.json"), "{}", why(1));
        assert!(why(2).contains("missing/run.json"), "{}", why(2));
    }

    #[test]
    fn two_outputs_on_stdout_and_a_missing_directory_are_refused_before_reading() {
        let args = |json: bool, svg: Option<&str>, csv: Option<&str>| CompareArgs {
            dirs: vec![PathBuf::from("/nonexistent/run")],
            json,
            svg: svg.map(PathBuf::from),
            csv: csv.map(PathBuf::from),
        };
        let e = check_args(&args(true, None, Some("-"))).unwrap_err();
        assert!(format!("{e:#}").contains("both write to stdout"), "{e:#}");
        let e = check_args(&args(false, Some("/nonexistent/dir/h.svg"), None)).unwrap_err();
        assert!(format!("{e:#}").starts_with("--svg: "), "{e:#}");
        assert!(format!("{e:#}").contains("does not exist"), "{e:#}");
        let e = check_args(&args(false, None, Some("/nonexistent/dir/h.csv"))).unwrap_err();
        assert!(format!("{e:#}").starts_with("--csv: "), "{e:#}");
        assert!(check_args(&args(false, None, Some("-"))).is_ok());
        assert!(check_args(&args(true, None, None)).is_ok());
    }
}
