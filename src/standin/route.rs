//! Route evidence a real serve leaves in /proc, made by the stand-in so the gate's readers of
//! it can be tested against a real process: files it maps (`--map-file` as data, `--map-exec`
//! as code, seen in /proc/PID/maps), files it holds open (`--hold-open`, seen in
//! /proc/PID/fd), and two busy counters that advance while it streams: the held files'
//! positions (`--held-pos-per-token`, /proc/PID/fdinfo/FD `pos:`) and a counter file of busy
//! microseconds (`--busy-counter`, like intel_vpu's sysfs `npu_busy_time_us`).
//!
//! Everything is opened at startup, before the stand-in listens, so a bad path is refused
//! (exit 2) before anything could be measured.

use std::ffi::c_void;
use std::fs::File;
use std::io::{Seek, SeekFrom};
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use nix::sys::mman::{mmap, munmap, MapFlags, ProtFlags};

use super::args::StandInArgs;

/// A file mapped read-only (or read and execute) for as long as this lives. Nothing ever reads
/// through the mapping: it exists to be listed in /proc/PID/maps, as a serve's mapped model or
/// device library is.
#[derive(Debug)]
pub(crate) struct Mapped {
    addr: NonNull<c_void>,
    len: NonZeroUsize,
}

impl Drop for Mapped {
    fn drop(&mut self) {
        // SAFETY: addr and len are a mapping this value made and nothing else refers to.
        let _ = unsafe { munmap(self.addr, self.len.get()) };
    }
}

/// Map each `--map-file` whole (PROT_READ, MAP_PRIVATE), or each `--map-exec` with `exec`
/// (PROT_READ | PROT_EXEC: the gate counts only code as a library, issue 30). An empty file
/// cannot be mapped (mmap of length 0 is EINVAL), so it is refused with a message that says
/// so.
pub(crate) fn map_files(paths: &[PathBuf], exec: bool) -> Result<Vec<Mapped>> {
    paths.iter().map(|p| map_file(p, exec)).collect()
}

fn map_file(path: &Path, exec: bool) -> Result<Mapped> {
    let (flag, prot) = match exec {
        false => ("--map-file", ProtFlags::PROT_READ),
        true => ("--map-exec", ProtFlags::PROT_READ | ProtFlags::PROT_EXEC),
    };
    let file =
        File::open(path).with_context(|| format!("failed to open {flag} {}", path.display()))?;
    let size = file
        .metadata()
        .with_context(|| format!("failed to read the size of {flag} {}", path.display()))?
        .len();
    let Some(len) = usize::try_from(size).ok().and_then(NonZeroUsize::new) else {
        bail!(
            "{flag} {} is empty, and an empty file cannot be mapped: give a file of at least 1 byte",
            path.display()
        );
    };
    // SAFETY: a fresh private read-only mapping (executable for --map-exec, never run), placed
    // by the kernel; it aliases no Rust memory and is never read, so a file changed or
    // truncated under it cannot hurt us.
    let addr = unsafe { mmap(None, len, prot, MapFlags::MAP_PRIVATE, &file, 0) }
        .with_context(|| format!("failed to map {flag} {}", path.display()))?;
    // The mapping keeps the file referenced; the descriptor is not needed.
    Ok(Mapped { addr, len })
}

/// What every reply advances: the held files and the busy counter. Shared by all requests.
#[derive(Debug)]
pub(crate) struct Route {
    /// The `--hold-open` files, opened read-only (and close-on-exec, as std always opens).
    held: Vec<File>,
    /// Bytes each held file's position moves on per token streamed (0: it stays put).
    pos_per_token: i64,
    busy: Option<Mutex<Busy>>,
    /// A failed counter update has been reported (once: it would repeat every token).
    reported: AtomicBool,
}

/// The busy counter's state: the microseconds it started from, the time of the replies that
/// ended, and when each reply still under way began.
#[derive(Debug)]
struct Busy {
    path: PathBuf,
    /// The temporary file beside `path` that each new value is written to, then renamed over it.
    tmp: PathBuf,
    start_us: u64,
    ended: Duration,
    /// Replies under way: their id and when their request arrived.
    active: Vec<(u64, Instant)>,
    next_id: u64,
}

impl Busy {
    /// The counter's value at `now`: the start, plus each reply's time so far.
    fn value(&self, now: Instant) -> u64 {
        let under_way: Duration = self
            .active
            .iter()
            .map(|(_, began)| now.saturating_duration_since(*began))
            .sum();
        let us = u64::try_from((self.ended + under_way).as_micros()).unwrap_or(u64::MAX);
        self.start_us.saturating_add(us)
    }

    /// Write the value at `now`, whole: a reader sees the old number or the new, never a part.
    fn write(&self, now: Instant) -> std::io::Result<()> {
        std::fs::write(&self.tmp, format!("{}\n", self.value(now)))?;
        std::fs::rename(&self.tmp, &self.path)
    }
}

impl Route {
    /// Open the `--hold-open` files and the `--busy-counter` (writing its starting value, so a
    /// directory that cannot be written is refused now, not mid-reply).
    pub(crate) fn open(args: &StandInArgs) -> Result<Route> {
        let mut held = Vec::new();
        for path in &args.hold_open {
            let mut file = File::open(path)
                .with_context(|| format!("failed to open --hold-open {}", path.display()))?;
            if args.held_pos_per_token.is_some() {
                file.stream_position().with_context(|| {
                    format!(
                        "--held-pos-per-token needs a seekable file, and --hold-open {} is not",
                        path.display()
                    )
                })?;
            }
            held.push(file);
        }
        let busy = match &args.busy_counter {
            Some(path) => Some(Mutex::new(open_busy(path)?)),
            None => None,
        };
        Ok(Route {
            held,
            pos_per_token: args.held_pos_per_token.map_or(0, i64::from),
            busy,
            reported: AtomicBool::new(false),
        })
    }

    /// A reply whose request arrived `received`; it counts as busy until the value is dropped.
    pub(crate) fn reply(self: &Arc<Self>, received: Instant) -> Reply {
        let id = self.busy.as_ref().map(|b| {
            let mut b = b.lock().unwrap_or_else(|e| e.into_inner());
            let id = b.next_id;
            b.next_id += 1;
            b.active.push((id, received));
            id
        });
        Reply {
            route: Arc::clone(self),
            id,
        }
    }

    fn update(&self, busy: &Busy, now: Instant) {
        if let Err(e) = busy.write(now) {
            if !self.reported.swap(true, Ordering::Relaxed) {
                let _ = crate::console::err_line(&format!(
                    "stand-in: failed to update --busy-counter {}: {e}",
                    busy.path.display()
                ));
            }
        }
    }
}

/// Read the counter's starting value (0 when the file does not exist or is blank) and write it
/// back through the same temporary-file-and-rename path every update takes.
fn open_busy(path: &Path) -> Result<Busy> {
    let start_us = match std::fs::read_to_string(path) {
        Ok(text) if text.trim().is_empty() => 0,
        Ok(text) => text.trim().parse::<u64>().map_err(|_| {
            anyhow::anyhow!(
                "--busy-counter {} holds {:?}, not a number of microseconds",
                path.display(),
                text.trim()
            )
        })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
        Err(e) => {
            return Err(e)
                .with_context(|| format!("failed to read --busy-counter {}", path.display()))
        }
    };
    let name = path
        .file_name()
        .with_context(|| format!("--busy-counter {} names no file", path.display()))?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".stand-in-{}.tmp", std::process::id()));
    let busy = Busy {
        path: path.to_path_buf(),
        tmp: path.with_file_name(tmp_name),
        start_us,
        ended: Duration::ZERO,
        active: Vec::new(),
        next_id: 0,
    };
    busy.write(Instant::now())
        .with_context(|| format!("failed to write --busy-counter {}", path.display()))?;
    Ok(busy)
}

/// One reply under way. Tokens streamed advance the held files' positions and the busy
/// counter; dropping it (the reply ended, or its connection went) adds its time to the
/// counter for good.
#[derive(Debug)]
pub(crate) struct Reply {
    route: Arc<Route>,
    /// Its place in the busy counter's replies under way, when there is a counter.
    id: Option<u64>,
}

impl Reply {
    /// `n` tokens are about to be written. Called before their bytes go, so a reader that has
    /// seen a token already sees the counters moved for it.
    pub(crate) fn tokens(&self, n: usize) {
        let route = &*self.route;
        if route.pos_per_token != 0 && n > 0 {
            let step = i64::try_from(n)
                .unwrap_or(i64::MAX)
                .saturating_mul(route.pos_per_token);
            for mut file in &route.held {
                // A position past i64::MAX is refused by the kernel; the counter then stops,
                // which a scripted serve can live with.
                let _ = file.seek(SeekFrom::Current(step));
            }
        }
        if let Some(busy) = &route.busy {
            let b = busy.lock().unwrap_or_else(|e| e.into_inner());
            route.update(&b, Instant::now());
        }
    }
}

impl Drop for Reply {
    fn drop(&mut self) {
        let (Some(busy), Some(id)) = (&self.route.busy, self.id) else {
            return;
        };
        let mut b = busy.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        if let Some(i) = b.active.iter().position(|(a, _)| *a == id) {
            let (_, began) = b.active.swap_remove(i);
            b.ended += now.saturating_duration_since(began);
        }
        self.route.update(&b, now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::standin::args::parse as args;

    #[test]
    fn a_mapped_file_is_listed_in_this_process_maps_until_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("model.bin");
        std::fs::write(&path, b"x").unwrap();
        let path = path.canonicalize().unwrap();
        let listed = || {
            std::fs::read_to_string("/proc/self/maps")
                .unwrap()
                .lines()
                .any(|l| l.ends_with(path.to_str().unwrap()))
        };
        let mapped = map_files(std::slice::from_ref(&path), false).unwrap();
        assert!(listed());
        drop(mapped);
        assert!(!listed());
    }

    #[test]
    fn an_empty_or_missing_map_file_is_refused_with_the_reason() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty");
        std::fs::write(&empty, b"").unwrap();
        let e = format!("{:#}", map_files(&[empty], false).unwrap_err());
        assert!(
            e.contains("is empty") && e.contains("at least 1 byte"),
            "{e}"
        );
        let e = format!(
            "{:#}",
            map_files(&[dir.path().join("nope")], true).unwrap_err()
        );
        assert!(e.starts_with("failed to open --map-exec"), "{e}");
    }

    #[test]
    fn held_positions_move_by_tokens_times_n() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("accel0");
        std::fs::write(&path, b"").unwrap();
        let p = path.to_str().unwrap();
        let a = args(&[
            "--hold-open",
            p,
            "--hold-open",
            p,
            "--held-pos-per-token",
            "7",
        ]);
        let route = Arc::new(Route::open(&a).unwrap());
        let reply = route.reply(Instant::now());
        reply.tokens(2);
        reply.tokens(3);
        for mut f in &route.held {
            assert_eq!(f.stream_position().unwrap(), 35);
        }
    }

    #[test]
    fn the_busy_counter_starts_from_its_file_and_adds_each_replys_time() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("npu_busy_time_us");
        std::fs::write(&path, "1000\n").unwrap();
        let a = args(&["--busy-counter", path.to_str().unwrap()]);
        let route = Arc::new(Route::open(&a).unwrap());
        let read = || -> u64 {
            let text = std::fs::read_to_string(&path).unwrap();
            assert!(text.ends_with('\n'), "{text:?}");
            text.trim().parse().unwrap()
        };
        assert_eq!(read(), 1000);
        let began = Instant::now() - Duration::from_millis(5);
        let reply = route.reply(began);
        reply.tokens(1);
        let during = read();
        assert!(during >= 1000 + 5000, "{during}");
        drop(reply);
        let after = read();
        assert!(after >= during && after <= 1000 + began.elapsed().as_micros() as u64);
        // The temporary file was renamed away, not left beside the counter.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_busy_counter_is_created_at_zero_and_garbage_in_it_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("busy");
        Route::open(&args(&["--busy-counter", path.to_str().unwrap()])).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "0\n");
        std::fs::write(&path, "lots\n").unwrap();
        let e = Route::open(&args(&["--busy-counter", path.to_str().unwrap()])).unwrap_err();
        assert!(format!("{e:#}").contains("not a number"), "{e:#}");
        let missing = dir.path().join("no-dir").join("busy");
        let e = Route::open(&args(&["--busy-counter", missing.to_str().unwrap()])).unwrap_err();
        assert!(
            format!("{e:#}").starts_with("failed to write --busy-counter"),
            "{e:#}"
        );
    }
}
