//! Where the verdict goes: stdout (human lines, or result.json with `--json`), a JUnit file,
//! and GitHub's step summary when `GITHUB_STEP_SUMMARY` is set. `run` and `judge` share it.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;

use crate::record::ReplyRecord;
use crate::report;
use crate::rundir::{write_atomic, ResultFile};
use crate::verdict::Verdict;

/// How to report the verdict.
#[derive(Debug, Clone, Default, Args)]
pub struct OutputArgs {
    /// Print result.json to stdout; the human lines go to stderr.
    #[arg(long)]
    pub json: bool,
    /// Write the verdict as JUnit XML to FILE (one testcase per judged line).
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
}

/// Report `verdict` as asked. `title` names the run (its directory).
pub fn emit(
    verdict: &Verdict,
    replies: &[ReplyRecord],
    title: &str,
    opts: &OutputArgs,
) -> Result<()> {
    if opts.json {
        let mut text = serde_json::to_string_pretty(&ResultFile::new(verdict.clone()))?;
        text.push('\n');
        std::io::stdout().write_all(text.as_bytes())?;
        eprint!("{}", report::human(verdict, false));
    } else {
        print!("{}", report::human(verdict, report::colour_wanted()));
    }
    if let Some(path) = &opts.junit {
        write_atomic(path, &report::junit(verdict, title))?;
    }
    if let Some(path) = std::env::var_os("GITHUB_STEP_SUMMARY").filter(|p| !p.is_empty()) {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .with_context(|| {
                format!(
                    "failed to open GITHUB_STEP_SUMMARY {}",
                    path.to_string_lossy()
                )
            })?;
        f.write_all(report::markdown(verdict, replies, title).as_bytes())
            .context("failed to write GITHUB_STEP_SUMMARY")?;
    }
    Ok(())
}
