//! Where the verdict goes: stdout (human lines, or result.json with `--json`), a JUnit file,
//! a Prometheus metrics file, and GitHub's step summary when `GITHUB_STEP_SUMMARY` is set. `run` and `judge` share it.
//!
//! Every place a report goes is checked before the run starts ([`Outputs::check`]), so a path
//! that cannot be written is exit 2 before anything is held, started or created. Once the
//! verdict exists, failing to report it somewhere is said on stderr and never changes the exit
//! code: result.json and the exit code always agree.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use nix::fcntl::OFlag;

use anyhow::{bail, Context, Result};
use clap::Args;

use crate::archive::record::ReplyRecord;
use crate::archive::rundir::{write_atomic, ResultFile};
use crate::archive::safe_open::{self, Want};
use crate::report::{self, prom, RunInfo};
use crate::{console, say};

/// The environment variable GitHub Actions names its step summary file in.
pub const STEP_SUMMARY_VAR: &str = "GITHUB_STEP_SUMMARY";

/// How to report the verdict.
#[derive(Debug, Clone, Default, Args)]
pub struct OutputArgs {
    /// Print result.json to stdout; the human lines go to stderr.
    #[arg(long)]
    pub json: bool,
    /// Write the verdict as JUnit XML to FILE (one testcase per judged line).
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Write the run's figures as Prometheus metrics to FILE (text format, written
    /// atomically), e.g. into node_exporter's --collector.textfile.directory as NAME.prom.
    #[arg(long, value_name = "FILE")]
    pub prom: Option<PathBuf>,
}

/// Where the verdict will go, checked.
#[derive(Debug, Clone)]
pub struct Outputs {
    json: bool,
    junit: Option<PathBuf>,
    prom: Option<PathBuf>,
    step_summary: Option<PathBuf>,
}

impl Outputs {
    /// Check that every file the report goes to can be written: the JUnit file, the metrics
    /// file, and the step summary named by `GITHUB_STEP_SUMMARY`. Nothing is created or changed.
    pub fn check(args: &OutputArgs) -> Result<Outputs> {
        if let Some(path) = &args.junit {
            check_output(path).context("--junit")?;
        }
        if let Some(path) = &args.prom {
            check_output(path).context("--prom")?;
        }
        let step_summary = std::env::var_os(STEP_SUMMARY_VAR)
            .filter(|p| !p.is_empty())
            .map(PathBuf::from);
        if let Some(path) = &step_summary {
            check_output(path).context(STEP_SUMMARY_VAR)?;
        }
        Ok(Outputs {
            json: args.json,
            junit: args.junit.clone(),
            prom: args.prom.clone(),
            step_summary,
        })
    }

    /// The files the report will write, each with what names it, for refusing one inside an
    /// archive being judged.
    pub fn files(&self) -> impl Iterator<Item = (&'static str, &Path)> {
        let junit = self.junit.iter().map(|p| ("--junit", p.as_path()));
        let prom = self.prom.iter().map(|p| ("--prom", p.as_path()));
        let summary = self
            .step_summary
            .iter()
            .map(|p| (STEP_SUMMARY_VAR, p.as_path()));
        junit.chain(prom).chain(summary)
    }

    /// Report `result` of the run `run` (its directory names it). What cannot be written is said
    /// on stderr (when stderr can take it) and skipped.
    pub fn emit(&self, result: &ResultFile, replies: &[ReplyRecord], run: &RunInfo<'_>) {
        let title = run.title;
        let verdict = &result.verdict;
        if self.json {
            match serde_json::to_string_pretty(result) {
                Ok(mut text) => {
                    text.push('\n');
                    console::out(&text);
                }
                Err(e) => say!("failed to write result.json to stdout: {e}"),
            }
            console::err(&report::human(verdict, false));
        } else {
            console::out(&report::human(verdict, report::colour_wanted()));
        }
        if let Some(path) = &self.junit {
            if let Err(e) = write_report(path, &report::junit(verdict, run)) {
                say!("no JUnit report: {e:#}");
            }
        }
        // Atomically, as node_exporter's textfile collector asks: it may read the file at any
        // moment, and half a file is a scrape error.
        if let Some(path) = &self.prom {
            if let Err(e) = write_report(path, prom::exposition(verdict, run).as_bytes()) {
                say!("no Prometheus metrics: {e:#}");
            }
        }
        if let Some(path) = &self.step_summary {
            let appended = open_appending(path).and_then(|mut f| {
                f.write_all(report::markdown(verdict, replies, title).as_bytes())
                    .map_err(anyhow::Error::from)
            });
            if let Err(e) = appended {
                say!(
                    "no step summary: failed to append to {STEP_SUMMARY_VAR} {}: {e:#}",
                    path.display()
                );
            }
        }
    }
}

/// The directory `path` names a file in: its parent, or `.` for a bare name.
pub fn dir_of(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// Write a report to `path`: replaced atomically when it is a file (or absent), written
/// straight into it when it is a terminal or /dev/null ([`check_output`] took nothing else):
/// a rename over /dev/null would replace the device.
pub fn write_report(path: &Path, bytes: &[u8]) -> Result<()> {
    match safe_open::check(path, Want::Output)? {
        Some(meta) if !meta.is_file() => {
            let mut out = safe_open::open(path, OpenOptions::new().write(true), Want::Output)?;
            out.write_all(bytes)
                .with_context(|| format!("failed to write {}", path.display()))
        }
        _ => write_atomic(path, bytes),
    }
}

/// Open `path` to append to it, creating it when absent: a file, a terminal or /dev/null,
/// never a FIFO (whose open would wait for a reader).
fn open_appending(path: &Path) -> Result<File> {
    let mut options = OpenOptions::new();
    options.append(true);
    match safe_open::open(path, &options, Want::Output) {
        Err(e) if e.is_not_found() => {
            // Non-blocking even here: a FIFO put at the path since is refused (ENXIO), not
            // waited on.
            let file = options
                .create(true)
                .custom_flags((OFlag::O_NONBLOCK | OFlag::O_NOCTTY).bits())
                .open(path)
                .with_context(|| format!("failed to create {}", path.display()))?;
            if !file.metadata()?.is_file() {
                bail!("{} is not a file", path.display());
            }
            Ok(file)
        }
        r => Ok(r?),
    }
}

/// Whether `path` can take a report (`--junit`, `--prom`, `GITHUB_STEP_SUMMARY`, `judge
/// --svg`): as [`check_writable`], and a terminal or /dev/null too, which take it as it is
/// written. Never blocks: a FIFO is refused before it is opened.
pub fn check_output(path: &Path) -> Result<()> {
    check_path(path, Want::Output)
}

/// Whether `path` can be written as a file the gate writes (the hold's lock file, compare's
/// outputs): a regular file that opens for appending (which changes nothing), or a new name
/// in an existing, writable directory. A FIFO, a device or a directory is refused before it
/// is opened, so nothing blocks.
pub fn check_writable(path: &Path) -> Result<()> {
    check_path(path, Want::Regular)
}

fn check_path(path: &Path, want: Want) -> Result<()> {
    match safe_open::check(path, want) {
        Ok(Some(_)) => {
            safe_open::open(path, OpenOptions::new().append(true), want)
                .with_context(|| format!("{} cannot be written", path.display()))?;
            Ok(())
        }
        Err(e @ safe_open::OpenError::NotAFile(..)) => Err(e.into()),
        Ok(None) => {
            let dir = dir_of(path);
            if !dir.is_dir() {
                bail!(
                    "{} cannot be written: the directory {} does not exist",
                    path.display(),
                    dir.display()
                );
            }
            nix::unistd::access(dir, nix::unistd::AccessFlags::W_OK).with_context(|| {
                format!(
                    "{} cannot be written: the directory {} is not writable",
                    path.display(),
                    dir.display()
                )
            })?;
            Ok(())
        }
        Err(e) => Err(e).with_context(|| format!("{} cannot be written", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_paths_are_checked_without_creating_anything() {
        let d = tempfile::tempdir().unwrap();
        assert!(check_writable(&d.path().join("new.xml")).is_ok());
        assert!(
            !d.path().join("new.xml").exists(),
            "the check created the file"
        );
        let e = check_writable(d.path()).unwrap_err();
        assert!(format!("{e:#}").contains("is a directory"), "{e:#}");
        let e = check_writable(&d.path().join("missing/junit.xml")).unwrap_err();
        assert!(format!("{e:#}").contains("does not exist"), "{e:#}");
        let existing = d.path().join("old.xml");
        std::fs::write(&existing, "kept").unwrap();
        assert!(check_writable(&existing).is_ok());
        assert_eq!(std::fs::read_to_string(&existing).unwrap(), "kept");
    }
}
