//! Where the verdict goes: stdout (human lines, or result.json with `--json`), a JUnit file,
//! a Prometheus metrics file, and GitHub's step summary when `GITHUB_STEP_SUMMARY` is set. `run` and `judge` share it.
//!
//! Every place a report goes is checked before the run starts ([`Outputs::check`]), so a path
//! that cannot be written is exit 2 before anything is held, started or created. Once the
//! verdict exists, failing to report it somewhere is said on stderr and never changes the exit
//! code: result.json and the exit code always agree.
//!
//! Every output is also *opened* when it is checked, before the serve starts, and never looked
//! up by name again ([`OutputFile`], issue 30 item 2): a serve runs as the gate's own user and
//! can replace any path the gate names with a symbolic link (a step summary once linked to a
//! stand-in for ~/.bashrc had a line of the serve's appended to it). The user's path is
//! resolved once, at the check; what is written afterwards goes through the descriptors taken
//! then.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use nix::fcntl::OFlag;

use anyhow::{bail, Context, Result};
use clap::Args;

use crate::archive::record::ReplyRecord;
use crate::archive::rundir::ResultFile;
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

/// Where the verdict will go, checked and opened.
#[derive(Debug)]
pub struct Outputs {
    json: bool,
    junit: Option<OutputFile>,
    prom: Option<OutputFile>,
    step_summary: Option<OutputFile>,
}

impl Outputs {
    /// Check that every file the report goes to can be written, and open it (see
    /// [`OutputFile::open`]): the JUnit file, the metrics file, and the step summary named by
    /// `GITHUB_STEP_SUMMARY`. Nothing is created or changed.
    pub fn check(args: &OutputArgs) -> Result<Outputs> {
        let replaced = |path: &Option<PathBuf>, what: &str| {
            path.as_deref()
                .map(|p| {
                    OutputFile::open(p, Writing::Replace, Want::Output).context(what.to_string())
                })
                .transpose()
        };
        let junit = replaced(&args.junit, "--junit")?;
        let prom = replaced(&args.prom, "--prom")?;
        let step_summary = std::env::var_os(STEP_SUMMARY_VAR)
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
            .map(|p| OutputFile::open(&p, Writing::Append, Want::Output).context(STEP_SUMMARY_VAR))
            .transpose()?;
        Ok(Outputs {
            json: args.json,
            junit,
            prom,
            step_summary,
        })
    }

    /// The files the report will write, each with what names it (as the user named it), for
    /// refusing one inside an archive being judged.
    pub fn files(&self) -> impl Iterator<Item = (&'static str, &Path)> {
        let junit = self.junit.iter().map(|p| ("--junit", p.path()));
        let prom = self.prom.iter().map(|p| ("--prom", p.path()));
        let summary = self
            .step_summary
            .iter()
            .map(|p| (STEP_SUMMARY_VAR, p.path()));
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
                    console::out(&crate::inert::json(&text));
                }
                Err(e) => say!("failed to write result.json to stdout: {e}"),
            }
            console::err(&report::human(verdict, false));
        } else {
            console::out(&report::human(verdict, report::colour_wanted()));
        }
        if let Some(out) = &self.junit {
            if let Err(e) = out.write(&report::junit(verdict, run)) {
                say!("no JUnit report: {e:#}");
            }
        }
        // Atomically, as node_exporter's textfile collector asks: it may read the file at any
        // moment, and half a file is a scrape error.
        if let Some(out) = &self.prom {
            if let Err(e) = out.write(prom::exposition(verdict, run).as_bytes()) {
                say!("no Prometheus metrics: {e:#}");
            }
        }
        if let Some(out) = &self.step_summary {
            if let Err(e) = out.write(report::markdown(verdict, replies, title).as_bytes()) {
                say!("no step summary: {STEP_SUMMARY_VAR}: {e:#}");
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

/// How an output is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writing {
    /// Appended to (GitHub's step summary, which earlier steps wrote too).
    Append,
    /// Replaced whole, atomically (a temporary file renamed over it), so a reader never sees
    /// half of it: the JUnit and metrics files, an SVG, compare's CSV.
    Replace,
}

/// An output opened when it was checked, before the serve started: written through what was
/// opened then, never by looking its name up again.
///
/// - A terminal or /dev/null, and an existing file appended to: the file itself, opened.
/// - A file replaced, and a new file appended to: the directory it is in, opened (its path
///   resolved once, links the user made included); the file is created in that directory
///   with `O_NOFOLLOW | O_EXCL` (a temporary name for a replace, then `renameat` over the
///   name, which replaces a link put there rather than following it; the name itself for an
///   append, so anything put at it since the check is refused, never written into).
#[derive(Debug)]
pub struct OutputFile {
    /// The path as the user named it, for what is said of it.
    path: PathBuf,
    how: Writing,
    target: Target,
}

#[derive(Debug)]
enum Target {
    /// Written straight into.
    Open(File),
    /// A name in a directory held open.
    InDir {
        dir: std::os::fd::OwnedFd,
        name: std::ffi::OsString,
    },
}

impl OutputFile {
    /// Check `path` can take an output `how` says, and open it (see the type's doc). A FIFO,
    /// a directory, a device `want` does not take, a missing or unwritable directory, and a
    /// symbolic link to nothing are refused: one line each.
    pub fn open(path: &Path, how: Writing, want: Want) -> Result<OutputFile> {
        let found = match safe_open::check(path, want) {
            Ok(found) => found,
            Err(e @ safe_open::OpenError::NotAFile(..)) => return Err(e.into()),
            Err(e) => {
                return Err(e).with_context(|| format!("{} cannot be written", path.display()))
            }
        };
        let target = match found {
            // A device (a terminal, /dev/null) is written into: renaming over it would replace
            // it. An existing file appended to is appended to through this descriptor, wherever
            // it is moved to since.
            Some(meta) if !meta.is_file() || how == Writing::Append => {
                let mut options = OpenOptions::new();
                match how {
                    Writing::Append => options.append(true),
                    Writing::Replace => options.write(true),
                };
                let file = safe_open::open(path, &options, want)
                    .with_context(|| format!("{} cannot be written", path.display()))?;
                Target::Open(file)
            }
            // A file replaced: the user's path resolved once, now, links included; then the
            // directory it is in, opened.
            Some(_) => {
                let real = path
                    .canonicalize()
                    .with_context(|| format!("{} cannot be written", path.display()))?;
                in_dir(path, dir_of(&real), real.file_name())?
            }
            None => {
                if std::fs::symlink_metadata(path).is_ok() {
                    bail!(
                        "{} is a symbolic link to a file that does not exist: give the file's own path",
                        path.display()
                    );
                }
                in_dir(path, dir_of(path), path.file_name())?
            }
        };
        Ok(OutputFile {
            path: path.to_path_buf(),
            how,
            target,
        })
    }

    /// The path as the user named it.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Write `bytes` to the output: appended, or replacing it whole (see [`Writing`]).
    pub fn write(&self, bytes: &[u8]) -> Result<()> {
        let shown = self.path.display();
        match &self.target {
            Target::Open(file) => {
                let mut file = file;
                file.write_all(bytes)
                    .with_context(|| format!("failed to write {shown}"))
            }
            Target::InDir { dir, name } if self.how == Writing::Append => {
                // Created now, never opened if it is there: whatever was put at the name since
                // the check (a link, another file) is not the user's.
                let fd = nix::fcntl::openat(
                    dir,
                    name.as_os_str(),
                    create_flags() | OFlag::O_APPEND,
                    nix::sys::stat::Mode::from_bits_truncate(0o644),
                )
                .map_err(|e| match e {
                    nix::errno::Errno::EEXIST => anyhow::anyhow!(
                        "{shown} was not there when the run started and something was put there since (the serve?): not written"
                    ),
                    e => anyhow::anyhow!("failed to create {shown}: {}", std::io::Error::from(e)),
                })?;
                File::from(fd)
                    .write_all(bytes)
                    .with_context(|| format!("failed to write {shown}"))
            }
            Target::InDir { dir, name } => {
                replace_in(dir, name, bytes).with_context(|| format!("failed to write {shown}"))
            }
        }
    }
}

/// Flags of a file created in a directory held open: never following a link, never opening
/// what is there.
fn create_flags() -> OFlag {
    OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC
}

/// The directory `dir` opened, to create `name` (of `path`, as the user named it) in.
fn in_dir(path: &Path, dir: &Path, name: Option<&std::ffi::OsStr>) -> Result<Target> {
    let Some(name) = name else {
        bail!("{} cannot be written: it names no file", path.display());
    };
    let fd = nix::fcntl::open(
        dir,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .map_err(|e| match e {
        nix::errno::Errno::ENOENT | nix::errno::Errno::ENOTDIR => anyhow::anyhow!(
            "{} cannot be written: the directory {} does not exist",
            path.display(),
            dir.display()
        ),
        e => anyhow::anyhow!(
            "{} cannot be written: failed to open the directory {}: {}",
            path.display(),
            dir.display(),
            std::io::Error::from(e)
        ),
    })?;
    nix::unistd::access(dir, nix::unistd::AccessFlags::W_OK).with_context(|| {
        format!(
            "{} cannot be written: the directory {} is not writable",
            path.display(),
            dir.display()
        )
    })?;
    Ok(Target::InDir {
        dir: fd,
        name: name.to_os_string(),
    })
}

/// Replace `name` in `dir` with `bytes`: a temporary file created there (never following a
/// link, never opening one that is there), synced, then renamed over `name` (`renameat`
/// replaces whatever is at the name, a link included, and follows nothing).
fn replace_in(dir: &std::os::fd::OwnedFd, name: &std::ffi::OsStr, bytes: &[u8]) -> Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let mut tmp_name = None;
    let mut file = None;
    for attempt in 0..100u32 {
        let mut candidate = std::ffi::OsString::from(".");
        candidate.push(name);
        candidate.push(format!(".{}.{attempt}.tmp", std::process::id()));
        match nix::fcntl::openat(
            dir,
            candidate.as_os_str(),
            create_flags(),
            nix::sys::stat::Mode::from_bits_truncate(0o644),
        ) {
            Ok(fd) => {
                tmp_name = Some(candidate);
                file = Some(File::from(fd));
                break;
            }
            Err(nix::errno::Errno::EEXIST) => continue,
            Err(e) => {
                return Err(std::io::Error::from(e)).context("failed to create a temporary file")
            }
        }
    }
    let (Some(tmp_name), Some(file)) = (tmp_name, file) else {
        bail!(
            "failed to create a temporary file beside {}: 100 names taken",
            String::from_utf8_lossy(name.as_bytes())
        );
    };
    let written = (|| -> Result<()> {
        let mut out = std::io::BufWriter::with_capacity(64 * 1024, &file);
        out.write_all(bytes)?;
        out.into_inner().map_err(|e| e.into_error())?;
        // Created 0644 less the umask, as a file the gate writes by name would be.
        file.sync_all()?;
        nix::fcntl::renameat(dir, tmp_name.as_os_str(), dir, name)?;
        Ok(())
    })();
    if written.is_err() {
        let _ = nix::unistd::unlinkat(
            dir,
            tmp_name.as_os_str(),
            nix::unistd::UnlinkatFlags::NoRemoveDir,
        );
    }
    written
}

/// Whether `path` can be written as a file the gate writes (the hold's lock file): a regular
/// file that opens for appending (which changes nothing), or a new name in an existing,
/// writable directory. A FIFO, a device or a directory is refused before it is opened, so
/// nothing blocks.
pub fn check_writable(path: &Path) -> Result<()> {
    let want = Want::Regular;
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

    /// Issue 30, item 2: what is put at an output's name after it was opened is never written
    /// through.
    #[test]
    fn an_output_is_written_through_what_was_opened_at_the_check() {
        let d = tempfile::tempdir().unwrap();
        let outside = d.path().join("outside");
        std::fs::write(&outside, "mine").unwrap();
        let link_now = |name: &Path| std::os::unix::fs::symlink(&outside, name).unwrap();
        // Replaced: the link put at the name is replaced, not followed.
        let report = d.path().join("report.xml");
        let replaced = OutputFile::open(&report, Writing::Replace, Want::Output).unwrap();
        link_now(&report);
        replaced.write(b"report").unwrap();
        assert_eq!(std::fs::read_to_string(&report).unwrap(), "report");
        assert!(!std::fs::symlink_metadata(&report).unwrap().is_symlink());
        // Appended to, there at the check: the file itself, moved since.
        let summary = d.path().join("summary.md");
        std::fs::write(&summary, "a\n").unwrap();
        let appended = OutputFile::open(&summary, Writing::Append, Want::Output).unwrap();
        std::fs::rename(&summary, d.path().join("moved.md")).unwrap();
        link_now(&summary);
        appended.write(b"b\n").unwrap();
        assert_eq!(
            std::fs::read_to_string(d.path().join("moved.md")).unwrap(),
            "a\nb\n"
        );
        // Appended to, not there at the check: anything at the name since is refused.
        let new = d.path().join("new.md");
        let fresh = OutputFile::open(&new, Writing::Append, Want::Output).unwrap();
        link_now(&new);
        let e = fresh.write(b"x").unwrap_err();
        assert!(
            format!("{e:#}").contains("was not there when the run started"),
            "{e:#}"
        );
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "mine");
        // A link to nothing is refused at the check.
        let dangling = d.path().join("dangling");
        std::os::unix::fs::symlink(d.path().join("nothing"), &dangling).unwrap();
        let e = OutputFile::open(&dangling, Writing::Replace, Want::Output).unwrap_err();
        assert!(format!("{e:#}").contains("symbolic link to a file that does not exist"));
    }
}
