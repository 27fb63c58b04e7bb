//! `compare DIR...`: runs side by side, oldest first, with the conditions each ran under, so a
//! trend in rate or first-token is read beside the box's load and the serve binary's hash.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use serde::Serialize;

use crate::measure::{measure, median};
use crate::rundir;
use crate::verdict::Criteria;

/// `compare`'s arguments.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Run directories to compare.
    #[arg(value_name = "DIR", required = true)]
    pub dirs: Vec<PathBuf>,
    /// Print the rows as JSON.
    #[arg(long)]
    pub json: bool,
}

/// One run's row.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Row {
    /// The run directory.
    pub dir: String,
    /// Start, UTC.
    pub started_utc: String,
    /// Host name.
    pub host: String,
    /// The serve binary's sha256, first 12 hex digits.
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
    /// The RESULT, judged again with the run's own floors.
    pub result: String,
}

/// Read each run and build its row; oldest first.
pub fn rows(dirs: &[PathBuf]) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for dir in dirs {
        let a = rundir::load_archive(dir)?;
        let verdict = a.judge(&Criteria::new(a.manifest.floors.clone())?)?;
        let metrics: Vec<_> = a.replies.iter().map(measure).collect();
        let rates: Vec<f64> = metrics.iter().filter_map(|m| m.rate_tok_s).collect();
        let firsts: Vec<f64> = metrics.iter().filter_map(|m| m.first_token_ms).collect();
        rows.push(Row {
            dir: dir.display().to_string(),
            started_utc: a.manifest.started_utc.clone(),
            host: a.manifest.host.clone(),
            serve_sha256: a
                .manifest
                .serve_binary
                .as_ref()
                .map(|b| b.sha256.chars().take(12).collect()),
            load1: a.load.as_ref().map(|l| l.load1),
            ncpu: a.load.as_ref().map(|l| l.ncpu),
            serve_cpu_wait: a
                .load
                .as_ref()
                .and_then(|l| l.during.as_ref())
                .and_then(|d| d.wait_fraction),
            median_rate_tok_s: median(&rates),
            median_first_token_ms: median(&firsts),
            result: verdict.outcome.to_string(),
        });
    }
    rows.sort_by(|a, b| a.started_utc.cmp(&b.started_utc));
    Ok(rows)
}

/// The rows as an aligned table.
pub fn table(rows: &[Row]) -> String {
    let dash = || "-".to_string();
    let mut cells: Vec<[String; 8]> = vec![[
        "started (UTC)".into(),
        "host".into(),
        "serve sha256".into(),
        "load before".into(),
        "serve CPU wait".into(),
        "median rate".into(),
        "median first token".into(),
        "RESULT".into(),
    ]];
    for r in rows {
        cells.push([
            r.started_utc.clone(),
            r.host.clone(),
            r.serve_sha256.clone().unwrap_or_else(dash),
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
        ]);
    }
    let widths: Vec<usize> = (0..8)
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
    out
}

/// Run `compare`.
pub fn run(args: CompareArgs) -> Result<u8> {
    let rows = rows(&args.dirs)?;
    if args.json {
        crate::console::out(&format!("{}\n", serde_json::to_string_pretty(&rows)?));
    } else {
        crate::console::out(&table(&rows));
    }
    Ok(crate::exit_codes::PASS)
}
