//! The run directory: every file a run leaves, written atomically, and read back by `judge`.
//!
//! Files: run.json ([`RunManifest`]), serve.log, replies.jsonl (one [`ReplyRecord`] a line,
//! appended after each reply), load.json ([`LoadSnapshot`]), result.json ([`ResultFile`]).
//! Each whole file is replaced by rename, so a reader (or a crash) never sees half a file;
//! replies.jsonl grows by one line a reply, each line one write, so a crash leaves at most a
//! part of its last line, which the reader sets aside and says so.
//!
//! A run directory is one run's: it is created (or, when it exists and is empty, claimed) by
//! creating its run.json with O_EXCL, so of two gates given the same `--out` at once exactly
//! one gets it.

use std::fs::Permissions;
use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::archive::record::{
    LoadSnapshot, MetricsRecord, NotArchived, ReplyRecord, RouteRecord, RunManifest, Verdict,
    SCHEMA,
};
use crate::archive::safe_open::{self, OpenError};

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
/// What the serve's processes mapped and held open, and the busy counter ([`RouteRecord`]).
pub const ROUTE: &str = "route.json";
/// The serve's own metrics, scraped around the concurrent bursts ([`MetricsRecord`]).
pub const METRICS: &str = "metrics.json";
/// Where run directories go when `--out` is not given.
pub const DEFAULT_PARENT: &str = "runs";

/// The most of each file of a run the loader reads, bytes (issue 30): it holds run.json,
/// replies.jsonl and the small JSON files whole (serve.log is streamed), so a file past its
/// cap is refused from its size before anything is read, not a gigabyte in memory (a
/// replies.jsonl linked to /dev/zero is not a file at all, and is refused as such).
/// replies.jsonl: a reply of 200 tokens is about 5.4 kB, so 256 MiB holds some 49,000 of
/// them, past the 20,000 of a long soak; the loader's peak is about 1.75 times the file
/// (measured: docs/performance.md), so about 450 MiB at the cap. run.json holds the settings
/// and provenance: kilobytes.
/// load.json, route.json, metrics.json and result.json: kilobytes to a few MiB.
pub const MOST_READ: &[(&str, u64)] = &[
    (MANIFEST, 16 << 20),
    (REPLIES, 256 << 20),
    (LOAD, 64 << 20),
    (ROUTE, 64 << 20),
    (METRICS, 64 << 20),
    (RESULT, 64 << 20),
];

/// The most of the run's file `name` the loader reads, bytes.
pub fn most_read(name: &str) -> u64 {
    MOST_READ
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(16 << 20, |(_, most)| *most)
}

/// Read the run's file `path` (named `name` in a run directory) whole, within its cap; never
/// blocks on a FIFO, never reads a device.
fn read_run_file(path: &Path, name: &str) -> std::result::Result<Vec<u8>, OpenError> {
    safe_open::read_capped(path, most_read(name))
}

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
    /// The files of the run directory the gate failed to write: the archive is incomplete,
    /// and the verdict above stands on what the gate held in memory. Absent when the archive
    /// is whole.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_archived: Vec<NotArchived>,
}

impl ResultFile {
    /// Wrap a verdict for writing.
    pub fn new(verdict: Verdict) -> Self {
        let summary = format!("RESULT: {}", verdict.outcome);
        ResultFile {
            schema: SCHEMA,
            verdict,
            summary,
            not_archived: Vec::new(),
        }
    }
}

/// A run directory being written.
#[derive(Debug)]
pub struct RunDir {
    path: PathBuf,
}

impl RunDir {
    /// Create `path` (and its parents) and claim it. A directory that exists and is not empty
    /// is refused, and so is one another gate claimed first: a run never mixes its files with
    /// another's.
    pub fn create(path: &Path) -> Result<Self> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            fs::create_dir_all(parent).with_context(|| {
                format!("failed to create the output directory {}", parent.display())
            })?;
        }
        match fs::create_dir(path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
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
            Err(e) => {
                return Err(e).with_context(|| {
                    format!("failed to create the output directory {}", path.display())
                })
            }
        }
        Self::claim(path)
    }

    /// Create a new directory under `parent` named `name`, or `name-2`, `name-3`, ... when
    /// another run has that name (two gates started in the same second).
    pub fn create_new_under(parent: &Path, name: &str) -> Result<Self> {
        fs::create_dir_all(parent).with_context(|| {
            format!("failed to create the output directory {}", parent.display())
        })?;
        for n in 1..=1000 {
            let path = match n {
                1 => parent.join(name),
                n => parent.join(format!("{name}-{n}")),
            };
            match fs::create_dir(&path) {
                Ok(()) => return Self::claim(&path),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(e).with_context(|| {
                        format!("failed to create the output directory {}", path.display())
                    })
                }
            }
        }
        bail!(
            "failed to find a free name for a run directory in {}: give --out DIR",
            parent.display()
        )
    }

    /// Make the run directory this run's: create its run.json, failing if it exists. Every
    /// later write of run.json replaces it by rename.
    fn claim(path: &Path) -> Result<Self> {
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path.join(MANIFEST))
        {
            Ok(_) => Ok(RunDir {
                path: path.to_path_buf(),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => bail!(
                "the output directory {} was just taken by another run: give a new --out DIR",
                path.display()
            ),
            Err(e) => Err(e)
                .with_context(|| format!("failed to create {}", path.join(MANIFEST).display())),
        }
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

    /// Replace the run's `name` with `bytes`, atomically.
    pub fn write_bytes(&self, name: &str, bytes: &[u8]) -> Result<()> {
        write_atomic(&self.path.join(name), bytes)
    }

    /// Append `line` (one reply's JSON and its newline) to the run's `name` in one write, and
    /// sync it: the file holds every reply finished so far, and the cost of a reply does not
    /// grow with the run (the whole file was once rewritten after each reply: 20 ms a reply by
    /// reply 1,000). A write that fails part-way is cut back, so the file never ends in part of
    /// a line the gate wrote.
    pub fn append_line(&self, name: &str, line: &[u8]) -> Result<()> {
        let path = self.path.join(name);
        let append = || -> std::io::Result<()> {
            let mut file = OpenOptions::new().create(true).append(true).open(&path)?;
            let before = file.metadata()?.len();
            if before == 0 {
                // For everyone on the box to read, as the run's other files are.
                file.set_permissions(Permissions::from_mode(0o644))?;
            }
            if let Err(e) = file.write_all(line).and_then(|()| file.sync_data()) {
                let _ = file.set_len(before);
                return Err(e);
            }
            Ok(())
        };
        append().with_context(|| format!("failed to write {}", path.display()))
    }

    /// Open serve.log for the gate to copy the serve's output into, and to read it back from
    /// the same descriptor: the serve never has it (its output comes through a pipe).
    pub fn open_serve_log(&self) -> Result<File> {
        let path = self.path.join(SERVE_LOG);
        OpenOptions::new()
            .read(true)
            .create(true)
            .append(true)
            .open(&path)
            .with_context(|| format!("failed to create {}", path.display()))
    }
}

/// Copy the log of a serve that was already running into `dir`'s serve.log, atomically, as a
/// stream: it may be larger than the gate should hold.
pub fn copy_serve_log(dir: &Path, from: &Path) -> Result<()> {
    // A regular file only: a FIFO would hang the copy, /dev/zero would fill the disk.
    let mut source = safe_open::open_read(from)?;
    write_atomic_with(&dir.join(SERVE_LOG), |out| {
        std::io::copy(&mut source, out)
            .with_context(|| format!("failed to copy {}", from.display()))?;
        Ok(())
    })
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
    /// serve.log, when the run had one: read as a stream when judged, never held whole.
    pub serve_log: Option<PathBuf>,
    /// load.json, when present and readable
    pub load: Option<LoadSnapshot>,
    /// Why load.json was not used, when it exists but could not be read
    pub load_problem: Option<String>,
    /// What was set aside of replies.jsonl: a part of a last line, from a run killed while it
    /// wrote the line.
    pub replies_problem: Option<String>,
    /// route.json, when present and readable (runs from before it have none).
    pub route: Option<RouteRecord>,
    /// Why route.json was not used, when it exists but could not be read.
    pub route_problem: Option<String>,
    /// metrics.json: the serve's metrics scraped around the bursts, when there were any.
    pub metrics: Option<MetricsRecord>,
    /// Why metrics.json was not used, when it exists but could not be read.
    pub metrics_problem: Option<String>,
    /// The files the run said it could not write (result.json's list, else run.json's): the
    /// archive is incomplete, and judging it judges what is there.
    pub not_archived: Vec<NotArchived>,
}

impl Archive {
    /// Open the run's serve log, where it kept one. Judging scans it
    /// ([`crate::judging::archived::judge_archive`]).
    pub fn read_serve_log(&self) -> Result<Option<File>> {
        self.serve_log
            .as_ref()
            .map(|path| Ok(safe_open::open_read(path)?))
            .transpose()
    }
}

/// A file of the run that may be absent (runs from before it have none): what it holds, or
/// why it could not be used when it exists but cannot be read.
fn read_optional_json<T: serde::de::DeserializeOwned>(
    dir: &Path,
    name: &str,
) -> (Option<T>, Option<String>) {
    match read_run_file(&dir.join(name), name) {
        Ok(bytes) => match serde_json::from_slice::<T>(&bytes) {
            Ok(v) => (Some(v), None),
            Err(e) => (None, Some(format!("{name} is unreadable ({e})"))),
        },
        Err(e) if e.is_not_found() => (None, None),
        Err(e) => (None, Some(format!("{name} is unreadable ({e})"))),
    }
}

/// Read an archived run. run.json must be there and readable; a missing or unreadable
/// load.json only means no load line.
pub fn load_archive(dir: &Path) -> Result<Archive> {
    let manifest_path = dir.join(MANIFEST);
    // One line naming run.json once: the system's word, or what the path is instead.
    let text = read_run_file(&manifest_path, MANIFEST).map_err(|e| match e {
        OpenError::Io(_, why) => anyhow::anyhow!(
            "failed to read {}: is {} a run directory?: {why}",
            manifest_path.display(),
            dir.display()
        ),
        other => anyhow::anyhow!("{other}"),
    })?;
    let manifest = parse_manifest(&text)
        .with_context(|| format!("failed to read {}", manifest_path.display()))?;
    let replies_path = dir.join(REPLIES);
    let (replies, replies_problem) = match read_run_file(&replies_path, REPLIES) {
        Ok(bytes) => {
            let (whole, cut) = split_cut_line(&bytes);
            let replies = parse_replies(whole)
                .with_context(|| format!("failed to read {}", replies_path.display()))?;
            let problem = cut.map(|c| {
                format!(
                    "{REPLIES} ends in {} bytes of a line that was never finished (the run was killed while writing it); judging the {} whole replies",
                    c.len(),
                    replies.len()
                )
            });
            (replies, problem)
        }
        Err(e) if e.is_not_found() => (Vec::new(), None),
        Err(e) => return Err(e.into()),
    };
    let log_path = dir.join(SERVE_LOG);
    let serve_log = (manifest.serve_log_source != "none" && log_path.is_file()).then_some(log_path);
    let (load, load_problem) = read_optional_json::<LoadSnapshot>(dir, LOAD);
    let (route, route_problem) = read_optional_json::<RouteRecord>(dir, ROUTE);
    let (metrics, metrics_problem) = read_optional_json::<MetricsRecord>(dir, METRICS);
    // Only what result.json says of the archive; its verdict is judged again, not read.
    #[derive(Deserialize)]
    struct ResultNotArchived {
        #[serde(default)]
        not_archived: Vec<NotArchived>,
    }
    let not_archived = match read_optional_json::<ResultNotArchived>(dir, RESULT) {
        (Some(r), _) if !r.not_archived.is_empty() => r.not_archived,
        _ => manifest.not_archived.clone(),
    };
    Ok(Archive {
        manifest,
        replies,
        serve_log,
        load,
        load_problem,
        replies_problem,
        route,
        route_problem,
        metrics,
        metrics_problem,
        not_archived,
    })
}

/// The accepted baseline a run is judged against: its archive, or why it cannot be read.
#[derive(Debug)]
pub struct BaselineRun {
    /// Its directory, as given.
    pub name: String,
    /// Its archive, or why it could not be loaded.
    pub archive: std::result::Result<Archive, String>,
}

impl BaselineRun {
    /// Load the baseline at `dir`; a problem is kept, not returned: whether it stops the run
    /// is the caller's to say.
    pub fn load(dir: &std::path::Path) -> BaselineRun {
        let archive = load_archive(dir)
            .map_err(|e| format!("{e:#}"))
            .and_then(|a| {
                if a.replies.is_empty() {
                    Err(format!("{} holds no replies", dir.display()))
                } else {
                    Ok(a)
                }
            });
        BaselineRun {
            name: dir.display().to_string(),
            archive,
        }
    }
}

/// replies.jsonl split into its whole lines and a last line that was never finished: one
/// without its newline that is not a reply. (A last line without a newline that does read as a
/// reply, as a hand-written file may have, is whole.)
pub fn split_cut_line(bytes: &[u8]) -> (&[u8], Option<&[u8]>) {
    if bytes.ends_with(b"\n") {
        return (bytes, None);
    }
    let start = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let last = &bytes[start..];
    if last.iter().all(u8::is_ascii_whitespace)
        || serde_json::from_slice::<ReplyRecord>(last).is_ok()
    {
        return (bytes, None);
    }
    (&bytes[..start], Some(last))
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
        if let Some(why) = r.impossible() {
            bail!(
                "line {}: {} cannot be a record of a run: {why}",
                i + 1,
                r.name()
            );
        }
        // What the live run judged of it, no more: `run` and `judge` agree.
        let mut r = r;
        r.keep_judged_text();
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

    /// A reply edited so its first chunk comes before its send (first token 0 ms), with chunks
    /// out of order, or ending before its last chunk is refused, naming the line (issue 30).
    #[test]
    fn replies_that_cannot_be_true_are_refused_naming_the_line() {
        let line = |sent: u64, at: &[u64], end: u64| {
            let chunks: Vec<String> = at
                .iter()
                .map(|t| format!(r#"{{"at_ns":{t},"content_chars":1,"reasoning_chars":0}}"#))
                .collect();
            format!(
                r#"{{"index":1,"prompt":"p","expect":null,"content":"c","reasoning":"","sent_ns":{sent},"end_ns":{end},"chunks":[{}],"usage_completion_tokens":null,"finish_reason":"stop","server_timings":null,"error":null}}"#,
                chunks.join(",")
            )
        };
        let ok = line(100, &[200, 300], 300);
        assert_eq!(parse_replies(ok.as_bytes()).unwrap().len(), 1);
        for (bad, says) in [
            (
                line(500, &[200, 300], 600),
                "line 2: reply 1 cannot be a record of a run: its chunk 1 arrived at 200 ns, before the request was sent at 500 ns",
            ),
            (
                line(100, &[300, 200], 300),
                "line 2: reply 1 cannot be a record of a run: its chunk 2 arrived at 200 ns, before chunk 1 at 300 ns",
            ),
            (
                line(100, &[200, 300], 250),
                "line 2: reply 1 cannot be a record of a run: it ended at 250 ns, before its last stamp at 300 ns",
            ),
            (
                line(100, &[], 50),
                "line 2: reply 1 cannot be a record of a run: it ended at 50 ns, before its last stamp at 100 ns",
            ),
        ] {
            let text = format!("{ok}\n{bad}\n");
            let e = parse_replies(text.as_bytes()).unwrap_err();
            assert_eq!(format!("{e:#}"), says);
        }
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
