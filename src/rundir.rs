//! The run directory: every file a run leaves, written atomically, and read back by `judge`.
//!
//! Files: run.json ([`RunManifest`]), serve.log, replies.jsonl (one [`ReplyRecord`] a line,
//! rewritten whole after each reply), load.json ([`LoadSnapshot`]), result.json ([`ResultFile`]).
//! Each whole file is replaced by rename, so a reader (or a crash) never sees half a file.

use std::fs::Permissions;
use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::record::{LoadSnapshot, ReplyRecord, RunManifest, Startup, SCHEMA};
use crate::verdict::{self, Criteria, Evidence, Verdict};

/// run.json
pub const MANIFEST: &str = "run.json";
/// serve.log
pub const SERVE_LOG: &str = "serve.log";
/// replies.jsonl
pub const REPLIES: &str = "replies.jsonl";
/// load.json
pub const LOAD: &str = "load.json";
/// result.json
pub const RESULT: &str = "result.json";
/// timeline.svg
pub const TIMELINE: &str = "timeline.svg";

/// result.json: the verdict's lines and result, and the text a person read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultFile {
    /// File format version.
    pub schema: u32,
    /// The lines and the result.
    #[serde(flatten)]
    pub verdict: Verdict,
    /// The last line as printed, e.g. `RESULT: PASS`.
    pub summary: String,
}

impl ResultFile {
    /// Wrap a verdict for writing.
    pub fn new(verdict: Verdict) -> Self {
        let summary = format!("RESULT: {}", verdict.outcome);
        ResultFile {
            schema: SCHEMA,
            verdict,
            summary,
        }
    }
}

/// A run directory being written.
#[derive(Debug)]
pub struct RunDir {
    path: PathBuf,
}

impl RunDir {
    /// Create `path` (and its parents). A directory that exists and is not empty is refused:
    /// a run never mixes its files with another's.
    pub fn create(path: &Path) -> Result<Self> {
        if path.exists() {
            let mut entries = fs::read_dir(path).with_context(|| {
                format!("failed to read the output directory {}", path.display())
            })?;
            if entries.next().is_some() {
                bail!(
                    "the output directory {} is not empty: give a new --out DIR",
                    path.display()
                );
            }
        }
        fs::create_dir_all(path)
            .with_context(|| format!("failed to create the output directory {}", path.display()))?;
        Ok(RunDir {
            path: path.to_path_buf(),
        })
    }

    /// Where the run directory is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Write `value` as pretty JSON to `name`, atomically.
    pub fn write_json<T: Serialize>(&self, name: &str, value: &T) -> Result<()> {
        write_atomic_with(&self.path.join(name), |out| {
            serde_json::to_writer_pretty(&mut *out, value)?;
            Ok(out.write_all(b"\n")?)
        })
    }

    /// Rewrite replies.jsonl with every reply so far, atomically. Written straight into the
    /// file through a buffer: a 20,000-token reply is over a megabyte of JSON, and building it
    /// in memory first costs the gate a copy and the page faults of the growing buffer.
    pub fn write_replies(&self, replies: &[ReplyRecord]) -> Result<()> {
        write_atomic_with(&self.path.join(REPLIES), |out| {
            for r in replies {
                serde_json::to_writer(&mut *out, r)?;
                out.write_all(b"\n")?;
            }
            Ok(())
        })
    }

    /// Open serve.log for the serve to write into directly, as its output arrives.
    pub fn open_serve_log(&self) -> Result<File> {
        let path = self.path.join(SERVE_LOG);
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .with_context(|| format!("failed to create {}", path.display()))
    }
}

/// Replace `path` with `bytes`: write a temporary file beside it, flush it to disk, rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic_with(path, |out| Ok(out.write_all(bytes)?))
}

/// Write a file atomically from what `fill` writes into a buffer over it: a temporary file in
/// the same directory, synced, then renamed over `path`. Readers see the old file or the new
/// one, never a part.
fn write_atomic_with(
    path: &Path,
    fill: impl FnOnce(&mut BufWriter<&File>) -> Result<()>,
) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("failed to create a temporary file in {}", dir.display()))?;
    let write = || -> Result<()> {
        let mut out = BufWriter::with_capacity(64 * 1024, tmp.as_file());
        fill(&mut out)?;
        out.into_inner().map_err(|e| e.into_error())?;
        // A temporary file is created 0600; a run's files are for everyone on the box to read.
        tmp.as_file()
            .set_permissions(Permissions::from_mode(0o644))?;
        tmp.as_file().sync_all()?;
        Ok(())
    };
    write().with_context(|| format!("failed to write {}", path.display()))?;
    tmp.persist(path)
        .with_context(|| format!("failed to write {}", path.display()))?;
    Ok(())
}

/// An archived run, as `judge` reads it.
#[derive(Debug)]
pub struct Archive {
    /// run.json
    pub manifest: RunManifest,
    /// replies.jsonl (empty when the run made none)
    pub replies: Vec<ReplyRecord>,
    /// serve.log, when the run had one
    pub serve_log: Option<String>,
    /// load.json, when present and readable
    pub load: Option<LoadSnapshot>,
    /// Why load.json was not used, when it exists but could not be read
    pub load_problem: Option<String>,
}

impl Archive {
    /// Judge this run. The live run and `judge DIR` both come through here, so the same
    /// evidence and criteria always give the same lines.
    pub fn judge(&self, criteria: &Criteria) -> Verdict {
        let hold_reason = self
            .manifest
            .hold
            .as_ref()
            .filter(|h| !h.acquired)
            .map(|h| {
                format!(
                    "hold not acquired in {} s; held by {}",
                    h.timeout_s,
                    h.waited_for.as_deref().unwrap_or("an unknown process")
                )
            });
        let never_started = Startup::SpawnFailed {
            error: "the run recorded no startup: it ended before the serve was launched".into(),
        };
        let evidence = Evidence {
            replies: &self.replies,
            replies_planned: self.manifest.replies_planned,
            startup: self.manifest.startup.as_ref().unwrap_or(&never_started),
            serve_log: self.serve_log.as_deref(),
            load: self.load.as_ref(),
            interrupted: self.manifest.interrupted.as_deref(),
            hold_not_acquired: hold_reason.as_deref(),
            stop: self
                .manifest
                .stop
                .as_ref()
                .map(|s| (s, self.manifest.limits.grace_s)),
            serve_died: self.manifest.serve_died.as_deref(),
        };
        verdict::judge(&evidence, criteria)
    }
}

/// Read an archived run. run.json must be there and readable; a missing or unreadable
/// load.json only means no load line.
pub fn load_archive(dir: &Path) -> Result<Archive> {
    let manifest_path = dir.join(MANIFEST);
    let text = fs::read(&manifest_path).with_context(|| {
        format!(
            "failed to read {}: is {} a run directory?",
            manifest_path.display(),
            dir.display()
        )
    })?;
    let manifest = parse_manifest(&text)
        .with_context(|| format!("failed to read {}", manifest_path.display()))?;
    let replies_path = dir.join(REPLIES);
    let replies = match fs::read(&replies_path) {
        Ok(bytes) => parse_replies(&bytes)
            .with_context(|| format!("failed to read {}", replies_path.display()))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => {
            return Err(e).with_context(|| format!("failed to read {}", replies_path.display()))
        }
    };
    let serve_log = if manifest.serve_log_source == "none" {
        None
    } else {
        fs::read(dir.join(SERVE_LOG))
            .ok()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
    };
    let (load, load_problem) = match fs::read(dir.join(LOAD)) {
        Ok(bytes) => match serde_json::from_slice::<LoadSnapshot>(&bytes) {
            Ok(l) => (Some(l), None),
            Err(e) => (None, Some(format!("{LOAD} is unreadable ({e})"))),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (None, None),
        Err(e) => (None, Some(format!("{LOAD} is unreadable ({e})"))),
    };
    Ok(Archive {
        manifest,
        replies,
        serve_log,
        load,
        load_problem,
    })
}

/// Parse run.json, refusing a schema this build does not know.
pub fn parse_manifest(bytes: &[u8]) -> Result<RunManifest> {
    #[derive(Deserialize)]
    struct SchemaOnly {
        schema: u32,
    }
    let s: SchemaOnly = serde_json::from_slice(bytes).context("not a run.json: no schema")?;
    if s.schema > SCHEMA {
        bail!(
            "schema {} is newer than this build's {SCHEMA}: judge it with a newer npu-serve-smoke",
            s.schema
        );
    }
    serde_json::from_slice(bytes).context("not a run.json this build reads")
}

/// Parse replies.jsonl: one reply a line, blank lines skipped. A bad line is an error naming
/// the line.
pub fn parse_replies(bytes: &[u8]) -> Result<Vec<ReplyRecord>> {
    let mut replies = Vec::new();
    for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let r: ReplyRecord = serde_json::from_slice(line)
            .with_context(|| format!("line {} is not a reply record", i + 1))?;
        replies.push(r);
    }
    Ok(replies)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_non_empty_directory_is_refused() {
        let d = tempfile::tempdir().unwrap();
        fs::write(d.path().join("x"), "y").unwrap();
        let e = RunDir::create(d.path()).unwrap_err();
        assert!(format!("{e:#}").contains("is not empty"), "{e:#}");
        assert!(RunDir::create(&d.path().join("new/nested")).is_ok());
    }

    #[test]
    fn atomic_writes_replace_and_leave_no_temp_files() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f.json");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        assert_eq!(fs::read_dir(d.path()).unwrap().count(), 1);
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o644
        );
    }

    #[test]
    fn garbled_replies_name_the_line() {
        let e = parse_replies(b"\n{\"index\": 1}\n").unwrap_err();
        assert!(format!("{e:#}").contains("line 2"), "{e:#}");
        assert!(parse_replies(b"").unwrap().is_empty());
    }

    #[test]
    fn a_newer_schema_is_refused_with_advice() {
        let e = parse_manifest(br#"{"schema": 99}"#).unwrap_err();
        assert!(
            format!("{e:#}").contains("newer than this build's 1"),
            "{e:#}"
        );
        let e = parse_manifest(br#"{"schema": 1}"#).unwrap_err();
        assert!(
            format!("{e:#}").contains("not a run.json this build reads"),
            "{e:#}"
        );
    }

    proptest! {
        #[test]
        fn the_archive_parsers_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = parse_replies(&bytes);
            let _ = parse_manifest(&bytes);
        }
    }
}
