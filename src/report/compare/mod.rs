//! `compare DIR...`: runs side by side, grouped by what they ran on and with, oldest first in
//! each group, with the conditions each ran under, so a trend in rate or first-token is read
//! beside the box's load and the serve binary's hash; and below the table, what in each later
//! run's provenance differs from the oldest run's (issue 18): a model file, the workload or the
//! serve's arguments (the runs are not comparable), or the box.
//!
//! History across a fleet (issue 21): a group is the runs of one host, one serve binary and one
//! model (by hash, where provenance records one). `--svg FILE` draws each host's median rate
//! and first-token over time ([`svg`]); `--csv FILE` writes a row a run for spreadsheets
//! ([`csv`]). Hundreds of run directories read in well under a second (docs/performance.md,
//! "compare over hundreds of runs"); a directory that cannot be read is a row saying why.
//!
//! A file a step, none importing this one: [`row`] the row of a run (a leaf the others read),
//! [`read`] the run directories read into rows, [`table`](mod@table) the rows in groups and as
//! the table printed, [`csv`], [`svg`] and [`html`] the other writers; each writer takes rows
//! and returns text. Here, the arguments and `run`, which wires them.

pub mod csv;
pub mod html;
pub mod read;
pub mod row;
pub mod svg;
pub mod table;

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use clap::Args;

use crate::archive::safe_open::Want;
use crate::report::output::{OutputFile, Writing};

pub use read::rows;
pub use row::{model_hash, unix_seconds, GroupKey, Latency, Row, UNREADABLE};
pub use table::{differs, grouped, table};

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
    /// Write the table and the picture as one self-contained HTML page to FILE, each run
    /// linking to its own report.html by relative path.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

/// Where the reports other than the table go, each opened before any run is read.
#[derive(Debug)]
struct ReportFiles {
    svg: Option<OutputFile>,
    csv: Option<OutputFile>,
    html: Option<OutputFile>,
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
drawn as steps. --html FILE: the table and that picture on one self-contained page, each run
linking to its own report.html. --csv FILE (or - for stdout): a header and a row a run: dir, host,
serve_sha256, model_sha256, started_utc, result, the medians, load1, ncpu, serve_cpu_wait, the
floor and limit, the latency percentiles (count, mean, p50, p90, p99 of ttft_ms, itl_ms,
tpot_ms, e2el_ms, where the verdict has them) and why a directory was unreadable. Each is
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

/// Where `--csv` writes: a file, or stdout in place of the table.
fn csv_to_stdout(args: &CompareArgs) -> bool {
    args.csv.as_deref() == Some(Path::new("-"))
}

/// Refuse what cannot be done before any run is read: a report file that cannot be written
/// (its directory missing), or two outputs for stdout.
/// Each is opened here, before any run is read, and written through what was opened.
fn check_args(args: &CompareArgs) -> Result<ReportFiles> {
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
    let html = open(args.html.as_ref(), "--html")?;
    Ok(ReportFiles { svg, csv, html })
}

/// The way from the page `page` to each row's report.html, or why there is none to link: no
/// report.html there as a file (a run from before it), one changed after the run, or no way
/// from the page.
fn run_links(page: &Path, rows: &[Row]) -> Vec<Result<String, String>> {
    use crate::archive::rundir::REPORT;
    rows.iter()
        .map(|r| {
            let dir = Path::new(&r.dir);
            let is_file = std::fs::symlink_metadata(dir.join(REPORT)).is_ok_and(|m| m.is_file());
            if r.group.is_none() || !is_file {
                return Err(format!("no {REPORT}: a run from before it, or not a file"));
            }
            if r.changed
                .as_deref()
                .is_some_and(|c| c.contains(&format!("{REPORT} ")))
            {
                return Err(format!("its {REPORT} was changed after the run"));
            }
            let way = crate::report::html::way_to(page, dir)?;
            Ok(format!("{way}{REPORT}"))
        })
        .collect()
}

/// Run `compare`: exit 0 when at least one run could be read, 2 when none could (or a report
/// file cannot be written).
pub fn run(args: CompareArgs) -> Result<u8> {
    let ReportFiles {
        svg,
        csv,
        html: page,
    } = check_args(&args)?;
    let rows = rows(&args.dirs);
    if args.json {
        crate::console::out(&format!("{}\n", serde_json::to_string_pretty(&rows)?));
    } else if csv_to_stdout(&args) {
        crate::console::out(&csv::csv(&rows));
    } else {
        crate::console::out(&table(&rows));
    }
    if let Some(out) = &csv {
        out.write(csv::csv(&rows).as_bytes())?;
    }
    let picture = if svg.is_some() || page.is_some() {
        Some(svg::svg(&rows)?)
    } else {
        None
    };
    if let (Some(out), Some(picture)) = (&svg, &picture) {
        out.write(picture.as_bytes())?;
    }
    if let Some(out) = &page {
        let links = run_links(out.path(), &rows);
        out.write(html::render(&rows, &links, picture.as_deref()).as_bytes())?;
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

    #[test]
    fn two_outputs_on_stdout_and_a_missing_directory_are_refused_before_reading() {
        let args = |json: bool, svg: Option<&str>, csv: Option<&str>| CompareArgs {
            dirs: vec![PathBuf::from("/nonexistent/run")],
            json,
            svg: svg.map(PathBuf::from),
            csv: csv.map(PathBuf::from),
            html: None,
        };
        let e = check_args(&args(true, None, Some("-"))).unwrap_err();
        assert!(format!("{e:#}").contains("both write to stdout"), "{e:#}");
        let e = check_args(&args(false, Some("/nonexistent/dir/h.svg"), None)).unwrap_err();
        assert!(format!("{e:#}").starts_with("--svg: "), "{e:#}");
        assert!(format!("{e:#}").contains("does not exist"), "{e:#}");
        let e = check_args(&args(false, None, Some("/nonexistent/dir/h.csv"))).unwrap_err();
        assert!(format!("{e:#}").starts_with("--csv: "), "{e:#}");
        let html = CompareArgs {
            html: Some(PathBuf::from("/nonexistent/dir/h.html")),
            ..args(false, None, None)
        };
        let e = check_args(&html).unwrap_err();
        assert!(format!("{e:#}").starts_with("--html: "), "{e:#}");
        assert!(check_args(&args(false, None, Some("-"))).is_ok());
        assert!(check_args(&args(true, None, None)).is_ok());
    }
}
