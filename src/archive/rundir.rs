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
//!
//! Every file is written through the descriptor of the directory opened when it was claimed,
//! never by its path again, and hashed as written; run.json, written last, holds those
//! digests, and the loader holds the files it finds to them ([`RunDir`], [`digest`]).

use std::collections::{BTreeMap, HashSet};
use std::fs::Permissions;
use std::fs::{self, File};
use std::io::{BufWriter, Read, Write};
use std::os::unix::fs::{FileExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use anyhow::{bail, Context, Result};
use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::stat::Mode;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::archive::digest::{self, Found, Integrity};

use crate::archive::record::{
    LoadSnapshot, MetricsRecord, NotArchived, ReanchorRecord, ReplyRecord, RouteRecord,
    RunManifest, Verdict, SCHEMA,
};
use crate::archive::reply_stream;
use crate::archive::safe_open::{self, OpenError};

/// run.json
pub const MANIFEST: &str = "run.json";
/// serve.log
pub const SERVE_LOG: &str = "serve.log";
/// The most bytes serve.log keeps of the start of what the serve wrote: the route evidence
/// and the startup lines are there.
pub const SERVE_LOG_HEAD: u64 = 32 << 20;
/// The most bytes serve.log keeps of the end of what the serve wrote (its last words, a
/// crash's backtrace), past [`SERVE_LOG_HEAD`]; a flood's middle is dropped and marked.
pub const SERVE_LOG_TAIL: u64 = 32 << 20;
/// replies.jsonl
pub const REPLIES: &str = "replies.jsonl";
/// load.json
pub const LOAD: &str = "load.json";
/// result.json
pub const RESULT: &str = "result.json";
/// timeline.svg
pub const TIMELINE: &str = "timeline.svg";
/// report.html: the run as a person opens it (issue 39), the verdict, figures and timeline on
/// one self-contained page.
pub const REPORT: &str = "report.html";
/// What the serve's processes mapped and held open, and the busy counter ([`RouteRecord`]).
pub const ROUTE: &str = "route.json";
/// The serve's own metrics, scraped around the concurrent bursts ([`MetricsRecord`]).
pub const METRICS: &str = "metrics.json";
/// The re-anchors made past divergences from the reference ([`ReanchorRecord`], issue 31).
pub const REANCHORS: &str = "reanchors.json";
/// Where run directories go when `--out` is not given.
pub const DEFAULT_PARENT: &str = "runs";

/// The most of each file of a run the loader reads, bytes (issue 30): it holds run.json and
/// the small JSON files whole and reads replies.jsonl a line at a time (serve.log is
/// streamed), so a file past its cap is refused from its size before anything is read, not a
/// gigabyte in memory (a replies.jsonl linked to /dev/zero is not a file at all, and is
/// refused as such). replies.jsonl: a reply of 200 tokens is about 5.4 kB, so 256 MiB holds
/// some 49,000 of them, past the 20,000 of a long soak; its records are held, the file's
/// bytes never whole (issue 52). run.json holds the settings and provenance: kilobytes.
/// load.json, route.json, metrics.json and result.json: kilobytes to a few MiB.
pub const MOST_READ: &[(&str, u64)] = &[
    (MANIFEST, 16 << 20),
    (REPLIES, 256 << 20),
    (LOAD, 64 << 20),
    (ROUTE, 64 << 20),
    (METRICS, 64 << 20),
    (REANCHORS, 64 << 20),
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
///
/// It is opened once, when it is created, and every file of the run is written relative to
/// that descriptor (`openat`, `renameat`, never following a link), never by its path again: a
/// serve that learns the path (from its own stdout, `/proc/self/fd/1`, or the gate's command
/// line) and renames the directory, or puts a link where a file of the run was, cannot turn
/// the gate's writes to a file of its choosing (issue 30, item 2). replies.jsonl is opened once
/// too, before the serve starts, and every reply is appended through that descriptor: a serve
/// that relinked the name to a file outside once had the gate append its replies there.
///
/// What the gate writes is hashed as it is written ([`RunDir::digests`]), and
/// [`RunDir::seal`] writes run.json last with those digests, so `judge` and `compare` can tell
/// an archive changed after the run from the one the gate wrote ([`crate::archive::digest`]).
#[derive(Debug)]
pub struct RunDir {
    path: PathBuf,
    /// The directory, opened O_DIRECTORY | O_NOFOLLOW when the run claimed it.
    dir: File,
    /// replies.jsonl, created with run.json and kept open for every append.
    replies: File,
    /// What was written so far, for the digests. Behind a lock so that writing keeps `&self`.
    written: Mutex<Written>,
}

/// What a run directory's writer has written, as digests.
#[derive(Debug, Default)]
struct Written {
    /// Each file written whole: the sha256 (hex) of the bytes of its last write that went
    /// through.
    whole: BTreeMap<String, String>,
    /// replies.jsonl: every line appended, hashed as appended.
    replies: Sha256,
    /// serve.log opened for the serve ([`RunDir::open_serve_log`]): the gate's own descriptor,
    /// read when the digests are taken (the serve is stopped by then).
    serve_log: Option<File>,
    /// The last run.json asked to be written, which [`RunDir::seal`] writes again with the
    /// digests.
    manifest: Option<Vec<u8>>,
}

/// A file of the run is created with these: never through a link, never into a child.
fn create_flags() -> OFlag {
    OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC
}

/// Temporary files get distinct names within one gate.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

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

    /// Make the run directory this run's: open it (the descriptor every later write goes
    /// through), then create its run.json, failing if it exists, and its replies.jsonl. Every
    /// later write of run.json replaces it by rename; replies.jsonl is appended to through the
    /// descriptor opened here, made before the serve is started, so nothing it planted can be
    /// what the gate appends to.
    fn claim(path: &Path) -> Result<Self> {
        let dir = match nix::fcntl::open(
            path,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        ) {
            Ok(fd) => File::from(fd),
            // O_NOFOLLOW says ELOOP of a link, or ENOTDIR beside O_DIRECTORY.
            Err(Errno::ELOOP | Errno::ENOTDIR) if path.is_symlink() => bail!(
                "the output directory {} is a symbolic link: give the directory itself as --out DIR",
                path.display()
            ),
            Err(e) => {
                return Err(std::io::Error::from(e)).with_context(|| {
                    format!("failed to open the output directory {}", path.display())
                })
            }
        };
        let create = |name: &str, flags: OFlag| -> std::io::Result<File> {
            let fd = nix::fcntl::openat(&dir, name, create_flags() | flags, FILE_MODE)?;
            let file = File::from(fd);
            // For everyone on the box to read, whatever the umask, as the run's other files are.
            file.set_permissions(Permissions::from_mode(0o644))?;
            Ok(file)
        };
        match create(MANIFEST, OFlag::O_WRONLY) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => bail!(
                "the output directory {} was just taken by another run: give a new --out DIR",
                path.display()
            ),
            Err(e) => {
                return Err(e)
                    .with_context(|| format!("failed to create {}", path.join(MANIFEST).display()))
            }
        }
        let replies = create(REPLIES, OFlag::O_WRONLY | OFlag::O_APPEND)
            .with_context(|| format!("failed to create {}", path.join(REPLIES).display()))?;
        Ok(RunDir {
            path: path.to_path_buf(),
            dir,
            replies,
            written: Mutex::new(Written::default()),
        })
    }

    /// Where the run directory is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn written(&self) -> std::sync::MutexGuard<'_, Written> {
        // A panic while it was held left digests that may lack a write, never a wrong one
        // that the check would miss: a digest that differs says "changed", which is then
        // the gate's bug, said.
        self.written.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Write `value` as pretty JSON to `name`, atomically.
    pub fn write_json<T: Serialize>(&self, name: &str, value: &T) -> Result<()> {
        let mut bytes = serde_json::to_vec_pretty(value)
            .with_context(|| format!("failed to write {name} as JSON"))?;
        bytes.push(b'\n');
        self.write_bytes(name, &bytes)
    }

    /// Replace the run's `name` with `bytes`, atomically.
    pub fn write_bytes(&self, name: &str, bytes: &[u8]) -> Result<()> {
        if name == MANIFEST {
            self.written().manifest = Some(bytes.to_vec());
        }
        self.write_whole(name, |out| Ok(out.write_all(bytes)?))
    }

    /// Append `line` (one reply's JSON and its newline) to replies.jsonl in one write, through
    /// the descriptor opened when the run claimed the directory, and sync it: the file holds
    /// every reply finished so far, and the cost of a reply does not grow with the run (the
    /// whole file was once rewritten after each reply: 20 ms a reply by reply 1,000). A write
    /// that fails part-way is cut back, so the file never ends in part of a line the gate
    /// wrote. Only replies.jsonl is appended to; `name` says so.
    pub fn append_line(&self, name: &str, line: &[u8]) -> Result<()> {
        if name != REPLIES {
            bail!("failed to write {name}: only {REPLIES} is appended to");
        }
        let mut file = &self.replies;
        let mut append = || -> std::io::Result<()> {
            let held = file.metadata()?;
            if held.nlink() == 0 {
                // Removed from the run directory (a cleaner on the runner, or the serve): a
                // line appended now would be in no archive.
                return Err(Errno::ENOENT.into());
            }
            let before = held.len();
            if let Err(e) = file.write_all(line).and_then(|()| file.sync_data()) {
                let _ = file.set_len(before);
                return Err(e);
            }
            Ok(())
        };
        append().with_context(|| format!("failed to write {}", self.path.join(name).display()))?;
        self.written().replies.update(line);
        Ok(())
    }

    /// Append replies to `file` from now on (tests: /dev/full for a full disk).
    #[cfg(test)]
    pub(crate) fn append_replies_to(&mut self, file: File) {
        self.replies = file;
    }

    /// Create serve.log for the gate to copy the serve's output into (the serve never has it:
    /// its output comes through a pipe) and to read it back from. The gate keeps a descriptor
    /// of its own, and hashes what the file holds through it when the digests are taken,
    /// after the serve is stopped ([`RunDir::digests`]).
    pub fn open_serve_log(&self) -> Result<File> {
        let opened = || -> std::io::Result<(File, File)> {
            let fd = nix::fcntl::openat(
                &self.dir,
                SERVE_LOG,
                create_flags() | OFlag::O_RDWR | OFlag::O_APPEND,
                FILE_MODE,
            )?;
            let file = File::from(fd);
            file.set_permissions(Permissions::from_mode(0o644))?;
            let own = file.try_clone()?;
            Ok((file, own))
        };
        let (file, own) = opened()
            .with_context(|| format!("failed to create {}", self.path.join(SERVE_LOG).display()))?;
        let mut written = self.written();
        written.whole.remove(SERVE_LOG);
        written.serve_log = Some(own);
        Ok(file)
    }

    /// Copy the log of a serve that was already running into serve.log, atomically, as a
    /// stream: it may be larger than the gate should hold. Its first [`SERVE_LOG_HEAD`] and
    /// last [`SERVE_LOG_TAIL`] bytes, with a marker line between where more was dropped: a
    /// log of a terabyte, sparse or not, takes the time its kept bytes take. Hashed as it is
    /// copied.
    pub fn copy_serve_log(&self, from: &Path) -> Result<()> {
        // A regular file only: a FIFO would hang the copy, /dev/zero would fill the disk.
        let mut source = safe_open::open_read(from)?;
        self.write_whole(SERVE_LOG, |out| {
            copy_head_and_tail(&mut source, out, SERVE_LOG_HEAD, SERVE_LOG_TAIL)
                .with_context(|| format!("failed to copy {}", from.display()))?;
            Ok(())
        })
    }

    /// Write the run's `name` whole from what `fill` writes: a temporary file created (O_EXCL,
    /// never through a link) in the run directory, synced, renamed over `name` within the
    /// directory, and the directory synced. Readers see the old file or the new one, never a
    /// part; a link put where `name` was is replaced, never followed. The bytes are hashed as
    /// they are written, and the hash kept once the rename went through.
    fn write_whole(
        &self,
        name: &str,
        fill: impl FnOnce(&mut dyn Write) -> Result<()>,
    ) -> Result<()> {
        let shown = self.path.join(name);
        if name.is_empty() || name.contains('/') || name == "." || name == ".." {
            bail!("failed to write {}: not a file name", shown.display());
        }
        let (tmp_name, tmp) = self.create_temp(name).with_context(|| {
            format!(
                "failed to create a temporary file in {}",
                self.path.display()
            )
        })?;
        let write = || -> Result<String> {
            let mut out = Hashing {
                inner: BufWriter::with_capacity(64 * 1024, &tmp),
                hasher: Sha256::new(),
            };
            fill(&mut out)?;
            out.inner.into_inner().map_err(|e| e.into_error())?;
            tmp.sync_all()?;
            nix::fcntl::renameat(&self.dir, tmp_name.as_str(), &self.dir, name)?;
            // The rename itself made durable, as the file's bytes are.
            self.dir.sync_all()?;
            Ok(digest::hex(&out.hasher.finalize()))
        };
        match write() {
            Ok(sha) => {
                let mut written = self.written();
                if name == SERVE_LOG {
                    written.serve_log = None;
                }
                written.whole.insert(name.to_string(), sha);
                Ok(())
            }
            Err(e) => {
                let _ = nix::unistd::unlinkat(
                    &self.dir,
                    tmp_name.as_str(),
                    nix::unistd::UnlinkatFlags::NoRemoveDir,
                );
                Err(e).with_context(|| format!("failed to write {}", shown.display()))
            }
        }
    }

    /// A new temporary file in the run directory, for `name`: its name and the file. A name
    /// someone else took (a link planted where the gate would write) is passed over.
    fn create_temp(&self, name: &str) -> std::io::Result<(String, File)> {
        let pid = std::process::id();
        loop {
            let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
            let tmp_name = format!(".{name}.{pid}.{n}.tmp");
            match nix::fcntl::openat(
                &self.dir,
                tmp_name.as_str(),
                create_flags() | OFlag::O_WRONLY,
                FILE_MODE,
            ) {
                Ok(fd) => {
                    let file = File::from(fd);
                    file.set_permissions(Permissions::from_mode(0o644))?;
                    return Ok((tmp_name, file));
                }
                Err(Errno::EEXIST) if n % 1000 != 999 => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// The sha256 (hex) of every file of the run the gate wrote but run.json: each file written
    /// whole as its last write that went through had it, replies.jsonl as every line appended,
    /// and serve.log as the gate's own descriptor reads it now (take these after the serve is
    /// stopped). run.json cannot hold its own digest.
    pub fn digests(&self) -> Result<BTreeMap<String, String>> {
        let written = self.written();
        let mut digests = written.whole.clone();
        digests.remove(MANIFEST);
        digests.insert(
            REPLIES.to_string(),
            digest::hex(&written.replies.clone().finalize()),
        );
        if let Some(log) = &written.serve_log {
            let sha = digest::sha256_of(ReadAt { file: log, at: 0 }).with_context(|| {
                format!("failed to read {}", self.path.join(SERVE_LOG).display())
            })?;
            digests.insert(SERVE_LOG.to_string(), sha);
        }
        Ok(digests)
    }

    /// Write run.json last, as the last run.json written said, with the digests of every other
    /// file ([`RunDir::digests`]); what it holds, hashed (hex). `None` when no run.json was
    /// written through this directory (there is nothing to seal). Call it once every other
    /// file is written and the serve is stopped.
    pub fn seal(&self) -> Result<Option<String>> {
        let Some(last) = self.written().manifest.clone() else {
            return Ok(None);
        };
        let mut manifest: RunManifest = serde_json::from_slice(&last)
            .with_context(|| format!("failed to read back the {MANIFEST} the gate wrote"))?;
        manifest.digests = Some(self.digests()?);
        let mut bytes = serde_json::to_vec_pretty(&manifest)
            .with_context(|| format!("failed to write {MANIFEST} as JSON"))?;
        bytes.push(b'\n');
        self.write_bytes(MANIFEST, &bytes)?;
        Ok(Some(digest::sha256(&bytes)))
    }
}

/// The mode a file of the run is created with (then set exactly, whatever the umask).
const FILE_MODE: Mode = Mode::from_bits_truncate(0o644);

/// A writer that hashes what goes through it.
struct Hashing<W> {
    inner: W,
    hasher: Sha256,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// A reader of a file by position (`pread`), from `at` on: the file's offset, which a serve
/// shares when the file is its stdout, is never moved.
struct ReadAt<'a> {
    file: &'a File,
    at: u64,
}

impl Read for ReadAt<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.file.read_at(buf, self.at)?;
        self.at += n as u64;
        Ok(n)
    }
}

/// Replace `path` with `bytes`: write a temporary file beside it, flush it to disk, rename.
/// For the reports written outside a run directory (`--junit`, `compare --csv`, ...); a run's
/// own files go through [`RunDir`].
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
        // A temporary file is created 0600; a report is for everyone on the box to read.
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
    /// reanchors.json: the re-anchors past divergences from the reference (empty without).
    pub reanchors: Vec<ReanchorRecord>,
    /// Why reanchors.json was not used, when it exists but could not be read.
    pub reanchors_problem: Option<String>,
    /// The files the run said it could not write (result.json's list, else run.json's): the
    /// archive is incomplete, and judging it judges what is there.
    pub not_archived: Vec<NotArchived>,
    /// Whether its files are as the gate wrote them, by run.json's digests. The live run's
    /// own archive, judged from memory, is [`Integrity::Intact`].
    pub integrity: Integrity,
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
/// why it could not be used when it exists but cannot be read; and what was found, for the
/// digests.
fn read_optional_json<T: serde::de::DeserializeOwned>(
    dir: &Path,
    name: &str,
    found: &mut BTreeMap<String, Found>,
) -> (Option<T>, Option<String>) {
    match read_run_file(&dir.join(name), name) {
        Ok(bytes) => {
            found.insert(name.to_string(), Found::Sha256(digest::sha256(&bytes)));
            match serde_json::from_slice::<T>(&bytes) {
                Ok(v) => (Some(v), None),
                Err(e) => (None, Some(format!("{name} is unreadable ({e})"))),
            }
        }
        Err(e) if e.is_not_found() => {
            found.insert(name.to_string(), Found::Absent);
            (None, None)
        }
        Err(e) => {
            found.insert(name.to_string(), Found::Unreadable(e.to_string()));
            (None, Some(format!("{name} is unreadable ({e})")))
        }
    }
}

/// What is at the run's `name`, hashed as a stream (serve.log can be a gigabyte).
fn find_streamed(dir: &Path, name: &str) -> Found {
    let path = dir.join(name);
    match safe_open::open_read(&path) {
        Ok(file) => match digest::sha256_of(file) {
            Ok(sha) => Found::Sha256(sha),
            Err(e) => Found::Unreadable(e.to_string()),
        },
        Err(e) if e.is_not_found() => Found::Absent,
        Err(e) => Found::Unreadable(e.to_string()),
    }
}

/// The files of a run the loader hashes besides those it reads whole: what the digests are
/// held against, with every name the run's digests give that is a plain file name.
const STREAMED: &[&str] = &[SERVE_LOG, TIMELINE];

/// Read an archived run. run.json must be there and readable; a missing or unreadable
/// load.json only means no load line.
pub fn load_archive(dir: &Path) -> Result<Archive> {
    let mut replies: Vec<ReplyRecord> = Vec::new();
    let mut judged_prompts = HashSet::new();
    let mut archive = load_archive_with(dir, &mut |_, mut r| {
        // What the live run judged of it, no more: `run` and `judge` agree.
        r.keep_judged_after(&mut judged_prompts);
        replies.push(r);
    })?;
    archive.replies = replies;
    Ok(archive)
}

/// Read the run.json of the run at `dir` alone (its digests are not held: [`load_archive`]
/// holds them).
pub fn load_manifest(dir: &Path) -> Result<RunManifest> {
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
    parse_manifest(&text).with_context(|| format!("failed to read {}", manifest_path.display()))
}

/// Read an archived run as [`load_archive`] does, handing each of its replies to `take` as
/// replies.jsonl is read (with the run's re-anchors) instead of keeping them: the archive
/// comes back without replies. A known-good build's replies are walked so and dropped (issue
/// 52), never held whole.
pub fn load_archive_with(
    dir: &Path,
    take: &mut dyn FnMut(&[ReanchorRecord], ReplyRecord),
) -> Result<Archive> {
    let manifest = load_manifest(dir)?;
    let mut found = BTreeMap::new();
    // The re-anchors first: a reply handed on is walked past them.
    let (reanchors, reanchors_problem) =
        read_optional_json::<Vec<ReanchorRecord>>(dir, REANCHORS, &mut found);
    let reanchors = reanchors.unwrap_or_default();
    let replies_path = dir.join(REPLIES);
    let mut taken = 0usize;
    let streamed = reply_stream::stream_replies(&replies_path, most_read(REPLIES), &mut |r| {
        taken += 1;
        take(&reanchors, r)
    })?;
    let replies_problem = match streamed {
        Ok(s) => {
            found.insert(REPLIES.to_string(), Found::Sha256(s.sha256));
            s.cut.map(|bytes| {
                format!(
                    "{REPLIES} ends in {bytes} bytes of a line that was never finished (the run was killed while writing it); judging the {taken} whole replies"
                )
            })
        }
        Err(e) if e.is_not_found() => {
            found.insert(REPLIES.to_string(), Found::Absent);
            None
        }
        Err(e) => return Err(e.into()),
    };
    let log_path = dir.join(SERVE_LOG);
    let serve_log = (manifest.serve_log_source.has_log() && log_path.is_file()).then_some(log_path);
    let (load, load_problem) = read_optional_json::<LoadSnapshot>(dir, LOAD, &mut found);
    let (route, route_problem) = read_optional_json::<RouteRecord>(dir, ROUTE, &mut found);
    let (metrics, metrics_problem) = read_optional_json::<MetricsRecord>(dir, METRICS, &mut found);
    // Only what result.json says of the archive; its verdict is judged again, not read.
    #[derive(Deserialize)]
    struct ResultNotArchived {
        #[serde(default)]
        not_archived: Vec<NotArchived>,
    }
    let not_archived = match read_optional_json::<ResultNotArchived>(dir, RESULT, &mut found) {
        (Some(r), _) if !r.not_archived.is_empty() => r.not_archived,
        _ => manifest.not_archived.clone(),
    };
    let integrity = match &manifest.digests {
        None => Integrity::NotRecorded,
        Some(recorded) => {
            let plain = |n: &&String| {
                !n.is_empty() && !n.contains('/') && n.as_str() != "." && n.as_str() != ".."
            };
            let more: Vec<String> = STREAMED
                .iter()
                .map(|n| n.to_string())
                .chain(recorded.keys().filter(plain).cloned())
                .filter(|n| n != MANIFEST && !found.contains_key(n))
                .collect();
            for name in more {
                let f = find_streamed(dir, &name);
                found.insert(name, f);
            }
            // A name no run writes (a path, `..`) is no file of this directory: never read.
            for name in recorded.keys().filter(|n| !plain(n)) {
                found.insert(
                    name.clone(),
                    Found::Unreadable("not a file name of a run".to_string()),
                );
            }
            digest::check(Some(recorded), &found, &not_archived)
        }
    };
    Ok(Archive {
        manifest,
        replies: Vec::new(),
        serve_log,
        load,
        load_problem,
        replies_problem,
        route,
        route_problem,
        metrics,
        metrics_problem,
        reanchors,
        reanchors_problem,
        not_archived,
        integrity,
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
                // A baseline holds a run to figures: ones changed after its run are refused.
                if let Some(changed) = a.integrity.changed_line() {
                    Err(format!("{}: {changed}", dir.display()))
                } else if a.replies.is_empty() {
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
    let mut judged_prompts = HashSet::new();
    for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        // What the live run judged of it, no more: `run` and `judge` agree.
        let mut r = reply_stream::parse_line(i + 1, line)?;
        r.keep_judged_after(&mut judged_prompts);
        replies.push(r);
    }
    Ok(replies)
}

/// Copy `from` (a regular file, opened) to `to`, keeping at most its first `head` and its last
/// `tail` bytes with a marker line between them where more was dropped; how many were.
/// Bounded by the size seen when the copy began: a file that grows meanwhile is not followed.
pub fn copy_head_and_tail(
    from: &mut File,
    to: &mut dyn Write,
    head: u64,
    tail: u64,
) -> std::io::Result<u64> {
    use std::io::{Read, Seek, SeekFrom};
    let size = from.metadata()?.len();
    if size <= head + tail {
        std::io::copy(&mut (&mut *from).take(size), to)?;
        return Ok(0);
    }
    std::io::copy(&mut (&mut *from).take(head), to)?;
    let dropped = size - head - tail;
    write!(
        to,
        "\n[npu-serve-smoke: {dropped} bytes of the serve's log were dropped here; serve.log keeps the first {head} and the last {tail}]\n"
    )?;
    from.seek(SeekFrom::Start(size - tail))?;
    std::io::copy(&mut from.take(tail), to)?;
    Ok(dropped)
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

    /// A file outside the run, and a link to it put where a file of the run is, the file moved
    /// aside (issue 30).
    fn outside_linked_as(dir: &Path, name: &str) -> PathBuf {
        let outside = dir.parent().unwrap().join(format!("outside-{name}"));
        fs::write(&outside, "").unwrap();
        let _ = fs::rename(dir.join(name), dir.join(format!("{name}.moved")));
        std::os::unix::fs::symlink(&outside, dir.join(name)).unwrap();
        outside
    }

    #[test]
    fn replies_removed_from_the_run_directory_are_not_appended_to() {
        let d = tempfile::tempdir().unwrap();
        let run = RunDir::create(&d.path().join("run")).unwrap();
        run.append_line(REPLIES, b"one\n").unwrap();
        fs::remove_file(run.path().join(REPLIES)).unwrap();
        let e = run.append_line(REPLIES, b"two\n").unwrap_err();
        assert_eq!(
            e.root_cause().to_string(),
            "No such file or directory (os error 2)"
        );
        assert_eq!(run.digests().unwrap()[REPLIES], digest::sha256(b"one\n"));
    }

    #[test]
    fn a_link_put_where_a_file_of_the_run_was_is_never_written_through() {
        let d = tempfile::tempdir().unwrap();
        let run = RunDir::create(&d.path().join("run")).unwrap();
        run.append_line(REPLIES, b"one\n").unwrap();
        let replies_outside = outside_linked_as(run.path(), REPLIES);
        let load_outside = outside_linked_as(run.path(), LOAD);
        run.append_line(REPLIES, b"two\n").unwrap();
        run.write_bytes(LOAD, b"{}").unwrap();
        assert_eq!(fs::read(&replies_outside).unwrap(), b"");
        assert_eq!(fs::read(&load_outside).unwrap(), b"");
        // The link was replaced by the gate's file, not followed.
        assert!(fs::symlink_metadata(run.path().join(LOAD))
            .unwrap()
            .file_type()
            .is_file());
        assert_eq!(fs::read(run.path().join(LOAD)).unwrap(), b"{}");
        // What the gate appended is hashed, whatever the name now points at.
        assert_eq!(
            run.digests().unwrap()[REPLIES],
            digest::sha256(b"one\ntwo\n")
        );
        assert_eq!(run.digests().unwrap()[LOAD], digest::sha256(b"{}"));
    }

    #[test]
    fn writes_follow_the_directory_opened_not_its_path() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("run");
        let run = RunDir::create(&path).unwrap();
        // The directory moved, and a link to elsewhere put in its place.
        let moved = d.path().join("moved");
        fs::rename(&path, &moved).unwrap();
        let elsewhere = d.path().join("elsewhere");
        fs::create_dir(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &path).unwrap();
        run.write_bytes(RESULT, b"r").unwrap();
        run.append_line(REPLIES, b"x\n").unwrap();
        assert_eq!(fs::read_dir(&elsewhere).unwrap().count(), 0);
        assert_eq!(fs::read(moved.join(RESULT)).unwrap(), b"r");
        assert_eq!(fs::read(moved.join(REPLIES)).unwrap(), b"x\n");
        // A directory given as a link is refused, in one line.
        let e = RunDir::create(&path).unwrap_err();
        assert!(format!("{e:#}").contains("is a symbolic link"), "{e:#}");
    }

    #[test]
    fn a_temporary_name_taken_by_a_link_is_passed_over() {
        let d = tempfile::tempdir().unwrap();
        let run = RunDir::create(&d.path().join("run")).unwrap();
        let next = TEMP_COUNTER.load(Ordering::Relaxed);
        let pid = std::process::id();
        let outside = d.path().join("outside");
        fs::write(&outside, "").unwrap();
        for n in next..next + 5 {
            std::os::unix::fs::symlink(&outside, run.path().join(format!(".{LOAD}.{pid}.{n}.tmp")))
                .unwrap();
        }
        run.write_bytes(LOAD, b"{}").unwrap();
        assert_eq!(fs::read(&outside).unwrap(), b"");
        assert_eq!(fs::read(run.path().join(LOAD)).unwrap(), b"{}");
    }

    #[test]
    fn the_seal_writes_run_json_last_with_the_digest_of_every_other_file() {
        let d = tempfile::tempdir().unwrap();
        let run = RunDir::create(&d.path().join("run")).unwrap();
        assert_eq!(run.seal().unwrap(), None, "nothing to seal yet");
        let manifest: serde_json::Value =
            serde_json::from_str(include_str!("../../tests/data/run-without-digests.json"))
                .unwrap();
        run.write_json(MANIFEST, &manifest).unwrap();
        let mut log = run.open_serve_log().unwrap();
        log.write_all(b"route: npu-fast\n").unwrap();
        let reply = br#"{"index":1,"prompt":"p","expect":null,"content":"c","reasoning":"","sent_ns":1,"end_ns":2,"chunks":[],"usage_completion_tokens":null,"finish_reason":"stop","server_timings":null,"error":null}
"#;
        run.append_line(REPLIES, reply).unwrap();
        run.write_bytes(RESULT, b"p").unwrap();
        // The serve wrote more before it stopped: its log is hashed at the seal, from the
        // gate's own descriptor.
        log.write_all(b"bye\n").unwrap();
        let sealed = run.seal().unwrap().unwrap();
        let written = fs::read(run.path().join(MANIFEST)).unwrap();
        assert_eq!(digest::sha256(&written), sealed);
        let mut back: serde_json::Value = serde_json::from_slice(&written).unwrap();
        let digests = back.as_object_mut().unwrap().remove("digests").unwrap();
        assert_eq!(back, manifest, "the seal changes nothing but the digests");
        assert_eq!(
            digests,
            serde_json::json!({
                "replies.jsonl": digest::sha256(reply),
                "result.json": digest::sha256(b"p"),
                "serve.log": digest::sha256(b"route: npu-fast\nbye\n"),
            })
        );
        let archive = load_archive(run.path()).unwrap();
        assert_eq!(archive.integrity, Integrity::Intact);
        fs::write(run.path().join(LOAD), "{}").unwrap();
        let archive = load_archive(run.path()).unwrap();
        assert_eq!(
            archive.integrity.changed_line().unwrap(),
            "the archive was changed after the run: load.json was not written by the gate"
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
