//! `compare DIR...`: runs side by side, oldest first, with the conditions each ran under, so a
//! trend in rate or first-token is read beside the box's load and the serve binary's hash; and
//! below the table, what in each later run's provenance differs from the first run's (issue 18):
//! a model file, the workload or the serve's arguments (the runs are not comparable), or the box.

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use clap::Args;
use serde::Serialize;

use crate::archive::record::Provenance;
use crate::archive::rundir;
use crate::judging::archived::judge_archive;
use crate::judging::measure::{measure, median};
use crate::judging::provenance::{differences, Difference};
use crate::judging::verdict::Criteria;

/// `compare`'s arguments.
#[derive(Debug, Args)]
#[command(after_help = DIFFERS_HELP)]
pub struct CompareArgs {
    /// Run directories to compare.
    #[arg(value_name = "DIR", required = true)]
    pub dirs: Vec<PathBuf>,
    /// Print the rows as JSON.
    #[arg(long)]
    pub json: bool,
}

/// What `compare --help` says of the section below the table.
const DIFFERS_HELP: &str = "\
Below the table, for each run after the first (oldest) one, what in its provenance (run.json
`provenance`) differs from the first run's: a model file's hash, the serve's arguments or the
workload (prompts, max_tokens, extra body), which make the two runs measure different things
(`not comparable`); or a fact of the box (`box: NAME`, NAME being host, cpu, memory, kernel,
modules, firmware or tool). A run recorded without provenance is named as such. Nothing is
printed when every run matches the first. With --json, each row has `provenance` (whether
the run recorded it) and `differences` (against the first run; null for the first).";

/// One run's row. A run directory that cannot be read has its `dir` and `unreadable` only.
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct Row {
    /// The run directory, as given.
    pub dir: String,
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
    /// The RESULT, judged again with the run's own floors, in result.json's words: `PASS`,
    /// `FAIL`, `SKIP`, `INTERRUPTED`; `UNREADABLE` for a directory that cannot be read.
    pub result: String,
    /// The RESULT line as printed, e.g. `RESULT: SKIP (hold not acquired ...)`.
    pub summary: Option<String>,
    /// Why the directory could not be read.
    pub unreadable: Option<String>,
    /// Whether run.json records the run's provenance.
    pub provenance: bool,
    /// For a run after the first, what in its provenance differs from the first run's; `None`
    /// for the first run, and where either run has no provenance.
    pub differences: Option<Vec<Difference>>,
    /// The provenance itself, to compare with.
    #[serde(skip)]
    pub recorded: Option<Provenance>,
}

/// `result` of a run directory that cannot be read.
pub const UNREADABLE: &str = "UNREADABLE";

/// Read each run and build its row; oldest first, then the directories that could not be
/// read, in the order given. One bad directory never hides the others.
pub fn rows(dirs: &[PathBuf]) -> Vec<Row> {
    let mut rows = Vec::new();
    let mut bad = Vec::new();
    for dir in dirs {
        match row(dir) {
            Ok(r) => rows.push(r),
            Err(e) => bad.push(Row {
                dir: dir.display().to_string(),
                result: UNREADABLE.to_string(),
                unreadable: Some(format!("{e:#}")),
                ..Row::default()
            }),
        }
    }
    rows.sort_by(|a, b| a.started_utc.cmp(&b.started_utc));
    if let Some((first, later)) = rows.split_first_mut() {
        if let Some(baseline) = &first.recorded {
            for r in later {
                r.differences = r
                    .recorded
                    .as_ref()
                    .map(|candidate| differences(candidate, baseline));
            }
        }
    }
    rows.extend(bad);
    rows
}

fn row(dir: &Path) -> Result<Row> {
    let a = rundir::load_archive(dir)?;
    let verdict = judge_archive(
        &a,
        &Criteria::new(a.manifest.floors.clone())?,
        a.read_serve_log()?,
        None,
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
    Ok(Row {
        dir: dir.display().to_string(),
        started_utc: Some(a.manifest.started_utc.clone()),
        host: Some(a.manifest.host.clone()),
        serve_sha256: a.manifest.serve_binary.as_ref().map(|b| b.sha256.clone()),
        load1: a.load.as_ref().map(|l| l.load1),
        ncpu: a.load.as_ref().map(|l| l.ncpu),
        serve_cpu_wait: a
            .load
            .as_ref()
            .and_then(|l| l.during.as_ref())
            .and_then(|d| d.wait_fraction),
        median_rate_tok_s: median(&rates),
        median_first_token_ms: median(&firsts),
        result: verdict.outcome.word().to_string(),
        summary: Some(format!("RESULT: {}", verdict.outcome)),
        unreadable: None,
        provenance: a.manifest.provenance.is_some(),
        differences: None,
        recorded: a.manifest.provenance.clone(),
    })
}

/// What each run after the first differs in from the first run's provenance, one line a
/// difference; empty when every run matches the first.
pub fn differs(rows: &[Row]) -> String {
    let readable: Vec<&Row> = rows.iter().filter(|r| r.unreadable.is_none()).collect();
    let Some((first, later)) = readable.split_first() else {
        return String::new();
    };
    if later.is_empty() {
        return String::new();
    }
    let mut lines = Vec::new();
    if first.recorded.is_none() {
        lines.push(format!(
            "  {}: no provenance recorded (a run from before it was): nothing to compare with",
            first.dir
        ));
    } else {
        for r in later {
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

/// The rows as an aligned table.
pub fn table(rows: &[Row]) -> String {
    let dash = || "-".to_string();
    let mut cells: Vec<[String; 9]> = vec![[
        "started (UTC)".into(),
        "host".into(),
        "serve sha256".into(),
        "load before".into(),
        "serve CPU wait".into(),
        "median rate".into(),
        "median first token".into(),
        "RESULT".into(),
        "run".into(),
    ]];
    let mut unreadable = Vec::new();
    for r in rows {
        if let Some(why) = &r.unreadable {
            unreadable.push(format!("{}: unreadable: {why}", r.dir));
            continue;
        }
        cells.push([
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
        ]);
    }
    let widths: Vec<usize> = (0..9)
        .map(|i| {
            cells
                .iter()
                .map(|c| c[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for c in &cells {
        let line: Vec<String> = c
            .iter()
            .zip(&widths)
            .map(|(s, w)| format!("{s:<w$}"))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    for u in unreadable {
        out.push_str(&u);
        out.push('\n');
    }
    out.push_str(&differs(rows));
    out
}

/// Run `compare`: exit 0 when at least one run could be read, 2 when none could.
pub fn run(args: CompareArgs) -> Result<u8> {
    let rows = rows(&args.dirs);
    if args.json {
        crate::console::out(&format!("{}\n", serde_json::to_string_pretty(&rows)?));
    } else {
        crate::console::out(&table(&rows));
    }
    if rows.iter().all(|r| r.unreadable.is_some()) {
        bail!(
            "none of the {} directories is a run that can be read",
            rows.len()
        );
    }
    Ok(crate::exit_codes::PASS)
}
