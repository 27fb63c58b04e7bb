//! The stand-in's footprint (issue 34): the memory it leaks at each reply's end, the cache it
//! fills once, the pretend device memory it keeps in a file, and the later first token of its
//! first reply and of a reply after idle. The gate samples a serve's memory and times its
//! start and first replies; these make the stand-in misbehave in each way, so the gate's lines
//! are tested against a real process, not against figures it was handed.
//!
//! The flags are `FootprintArgs` (`args.rs`). The state is one [`Footprint`] for the server's
//! life, in the handlers' shared `Script` (`state.rs`); each chat completion request holds an
//! [`InFlight`] from its arrival to its reply's end, kept in the reply's `Serving` (`body.rs`),
//! so the end is where the body ends, as the other per-reply evidence is.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::args::FootprintArgs;

/// The most `--leak` holds in all: past it the stand-in stops leaking (and says so once), so a
/// leaking stand-in left running cannot take the box's memory.
pub(crate) const MOST_LEAKED: u64 = 8 << 30;

/// The device memory in use before any reply, without `--device-memory-base`.
pub(crate) const DEFAULT_DEVICE_BASE: u64 = 64 << 20;

/// The stride of the writes that make an allocation resident: the smallest page Linux maps.
/// Larger pages are touched by these writes too.
const PAGE: usize = 4096;

/// The footprint's state, one for the server's life.
pub(crate) struct Footprint {
    /// The flags as given.
    args: FootprintArgs,
    /// Replies ended so far (in the order they ended): which ones leak, and the device memory.
    ended: AtomicU64,
    /// Chat completion requests from their arrival to their reply's end (or to their going,
    /// when the client left before a reply began): a request that arrives with none is idle.
    in_flight: AtomicUsize,
    /// When the last request in flight ended; none before the first has.
    last_end: Mutex<Option<Instant>>,
    /// What has been allocated on purpose, held until exit.
    held: Mutex<Held>,
    /// With `--device-memory-file`, the file the device memory is written to.
    device: Option<DeviceFile>,
}

/// Memory allocated on purpose and kept: never read, only held, so it stays resident.
#[derive(Default)]
struct Held {
    /// The blocks, each written to on every page.
    blocks: Vec<Box<[u8]>>,
    /// Bytes `--leak` holds (the `--first-reply-alloc` cache not counted: it is no leak).
    leaked: u64,
    /// `--leak` has reached [`MOST_LEAKED`] and said so.
    full: bool,
}

/// `--device-memory-file`: where the value goes, and the temporary file it is written to first.
struct DeviceFile {
    path: PathBuf,
    /// FILE.tmp, beside FILE: the same filesystem, so the rename over FILE is atomic.
    tmp: PathBuf,
    /// One write at a time: they share the temporary file, and the number must not go back.
    lock: Mutex<()>,
    /// A failed update has been said (once: it would repeat every reply).
    reported: AtomicBool,
}

impl DeviceFile {
    /// Write `bytes` whole: a reader sees the old number or the new one, never a part.
    fn write(&self, bytes: u64) -> std::io::Result<()> {
        std::fs::write(&self.tmp, device_text(bytes))?;
        std::fs::rename(&self.tmp, &self.path)
    }
}

impl Footprint {
    /// The footprint of a stand-in that starts listening now: with `--device-memory-file`, its
    /// first value (the base) is written, so a path that cannot be written is refused now.
    pub(crate) fn start(args: &FootprintArgs) -> Result<Footprint> {
        let device = match &args.device_memory_file {
            Some(path) => {
                let file = DeviceFile {
                    path: path.clone(),
                    tmp: tmp_beside(path),
                    lock: Mutex::new(()),
                    reported: AtomicBool::new(false),
                };
                file.write(device_bytes(args, 0)).with_context(|| {
                    format!("failed to write --device-memory-file {}", path.display())
                })?;
                Some(file)
            }
            None => None,
        };
        Ok(Footprint {
            args: args.clone(),
            ended: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
            last_end: Mutex::new(None),
            held: Mutex::default(),
            device,
        })
    }

    /// The K-th chat completion request (from 1) has arrived: it is in flight until the value
    /// returned is dropped. With it, how much later than --ttft-ms its first token comes:
    /// --cold-first-token-ms for the first, --idle-first-token-ms for one after idle.
    pub(crate) fn arrive(self: &Arc<Self>, nth: u64) -> (InFlight, Duration) {
        let others = self.in_flight.fetch_add(1, Ordering::Relaxed);
        let last_end = *self.last_end.lock().unwrap_or_else(|e| e.into_inner());
        let idle_after = self.args.idle_after_ms.map(Duration::from_millis);
        let idle = after_idle(others, last_end, Instant::now(), idle_after);
        let later = first_token_delay(&self.args, nth, idle);
        (InFlight(Arc::clone(self)), later)
    }

    /// Allocate `size` on every page and keep it as leaked, unless that would hold more than
    /// [`MOST_LEAKED`] (then leaking stops, said once).
    fn leak(&self, size: u64) {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if !may_leak(held.leaked, size) {
            if !held.full {
                held.full = true;
                let _ = crate::console::err_line(&format!(
                    "stand-in: --leak stops here: {} leaked is the most it holds",
                    crate::archive::byte_size::said(held.leaked as f64)
                ));
            }
            return;
        }
        held.leaked += size;
        held.blocks.push(resident(size as usize));
    }

    /// Write the device memory after `replies` replies, saying a failure once.
    fn write_device(&self, replies: u64) {
        let Some(file) = &self.device else { return };
        let _one = file.lock.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(e) = file.write(device_bytes(&self.args, replies)) {
            if !file.reported.swap(true, Ordering::Relaxed) {
                let _ = crate::console::err_line(&format!(
                    "stand-in: failed to update --device-memory-file {}: {e}",
                    file.path.display()
                ));
            }
        }
    }
}

/// A chat completion request in flight, from its arrival; dropping it ends it. The reply it
/// belongs to calls [`InFlight::reply_ended`] first, when its body has ended.
pub(crate) struct InFlight(Arc<Footprint>);

impl InFlight {
    /// This request's reply has ended (its last event sent, or its connection gone): count it,
    /// leak what the script says this reply leaks, fill the cache after the first and write
    /// the device memory. Done before the body's end reaches the client (hyper ends a chunked
    /// body only once the body says it has ended), so a client that has read a reply whole
    /// sees the memory it left.
    pub(crate) fn reply_ended(&self) {
        let fp = &*self.0;
        let nth = fp.ended.fetch_add(1, Ordering::Relaxed) + 1;
        if let (1, Some(size)) = (nth, fp.args.first_reply_alloc) {
            let mut held = fp.held.lock().unwrap_or_else(|e| e.into_inner());
            held.blocks.push(resident(size as usize));
        }
        if let Some(size) = fp.args.leak.filter(|_| leaks(nth, fp.args.leak_replies)) {
            fp.leak(size);
        }
        fp.write_device(nth);
    }
}

impl Drop for InFlight {
    /// Idle is measured from here: the end of the last request in flight.
    fn drop(&mut self) {
        let fp = &*self.0;
        *fp.last_end.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
        fp.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// FILE.tmp, beside FILE.
fn tmp_beside(path: &Path) -> PathBuf {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    PathBuf::from(tmp)
}

/// `size` bytes, resident: each page written with a byte that is not 0. A zeroed allocation of
/// this size is fresh pages from mmap, which the kernel maps to its one zero page until they
/// are written, so RssAnon would not grow; reading them would not make them resident either.
fn resident(size: usize) -> Box<[u8]> {
    let mut block = vec![0u8; size].into_boxed_slice();
    for i in (0..size).step_by(PAGE) {
        block[i] = 1;
    }
    // The last page, when the block does not start on a page's boundary.
    if let Some(last) = block.last_mut() {
        *last = 1;
    }
    // Never read again: kept from an optimiser that could call the writes dead.
    std::hint::black_box(&mut block[..]);
    block
}

/// Whether the `ended`-th reply to end (from 1) leaks: all do, or with --leak-replies N the
/// first N.
fn leaks(ended: u64, leak_replies: Option<u64>) -> bool {
    leak_replies.is_none_or(|n| ended <= n)
}

/// Whether `size` more may be leaked with `leaked` held already.
fn may_leak(leaked: u64, size: u64) -> bool {
    leaked.saturating_add(size) <= MOST_LEAKED
}

/// Whether a request arriving at `now`, with `others` in flight, is after idle: none in flight
/// and the last ended at least `idle_after` ago. The first request (none has ended yet) is not.
fn after_idle(
    others: usize,
    last_end: Option<Instant>,
    now: Instant,
    idle_after: Option<Duration>,
) -> bool {
    match (idle_after, last_end) {
        (Some(idle), Some(end)) => others == 0 && now.saturating_duration_since(end) >= idle,
        _ => false,
    }
}

/// How much later than --ttft-ms the K-th request's (from 1) first token comes: the cold
/// start's delay for the first, the idle one's for a request after idle.
fn first_token_delay(args: &FootprintArgs, nth: u64, idle: bool) -> Duration {
    let cold = if nth == 1 {
        args.cold_first_token_ms
    } else {
        0
    };
    let idle = if idle {
        args.idle_first_token_ms.unwrap_or(0)
    } else {
        0
    };
    Duration::from_millis(cold.saturating_add(idle))
}

/// The device memory in use after `replies` replies, in bytes.
fn device_bytes(args: &FootprintArgs, replies: u64) -> u64 {
    let base = args.device_memory_base.unwrap_or(DEFAULT_DEVICE_BASE);
    let each = args.device_leak.unwrap_or(0);
    base.saturating_add(each.saturating_mul(replies))
}

/// The device memory file's text: the bytes as a decimal number, and a newline.
fn device_text(bytes: u64) -> String {
    format!("{bytes}\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::standin::args::parse as args;

    #[test]
    fn every_reply_leaks_or_the_first_n() {
        assert!((1..=1000).all(|k| leaks(k, None)));
        let settled: Vec<u64> = (1..=10).filter(|k| leaks(*k, Some(2))).collect();
        assert_eq!(settled, [1, 2]);
        assert!(!leaks(1, Some(0)), "--leak-replies 0: none leaks");
    }

    #[test]
    fn leaking_stops_at_8_gib_held() {
        assert!(may_leak(0, 1 << 30));
        assert!(may_leak(7 << 30, 1 << 30), "exactly 8 GiB may be held");
        assert!(!may_leak((7 << 30) + 1, 1 << 30));
        assert!(!may_leak(u64::MAX, 1), "no overflow");
    }

    #[test]
    fn a_request_is_after_idle_when_none_was_in_flight_for_long_enough() {
        let end = Instant::now();
        let idle = Some(Duration::from_millis(500));
        let at = |ms| end + Duration::from_millis(ms);
        assert!(after_idle(0, Some(end), at(500), idle));
        assert!(after_idle(0, Some(end), at(9000), idle));
        assert!(
            !after_idle(0, Some(end), at(499), idle),
            "not idle long enough"
        );
        assert!(
            !after_idle(1, Some(end), at(9000), idle),
            "another in flight"
        );
        assert!(!after_idle(0, None, at(9000), idle), "the first is never");
        assert!(
            !after_idle(0, Some(end), at(9000), None),
            "no --idle-after-ms"
        );
        // A clock read before the end (another thread's) is no idle time, and no panic.
        assert!(!after_idle(0, Some(at(10)), end, idle));
    }

    #[test]
    fn the_first_reply_is_cold_and_one_after_idle_is_late() {
        let a = args(&[
            "--cold-first-token-ms",
            "800",
            "--idle-after-ms",
            "300",
            "--idle-first-token-ms",
            "900",
        ])
        .footprint;
        let ms = |nth, idle| first_token_delay(&a, nth, idle).as_millis();
        assert_eq!(ms(1, false), 800);
        assert_eq!(ms(2, false), 0);
        assert_eq!(ms(7, true), 900);
        assert_eq!(ms(1, true), 1700, "both add, should the two meet");
        let plain = args(&[]).footprint;
        assert_eq!(first_token_delay(&plain, 1, true), Duration::ZERO);
    }

    #[test]
    fn the_device_memory_is_the_base_and_a_leak_a_reply_as_a_line() {
        let a = args(&[
            "--device-memory-file",
            "f",
            "--device-memory-base",
            "1MiB",
            "--device-leak",
            "2KiB",
        ])
        .footprint;
        assert_eq!(device_bytes(&a, 0), 1 << 20);
        assert_eq!(device_bytes(&a, 3), (1 << 20) + 3 * 2048);
        assert_eq!(device_text(device_bytes(&a, 3)), "1054720\n");
        let plain = args(&["--device-memory-file", "f"]).footprint;
        assert_eq!(device_bytes(&plain, 9), 64 << 20, "64MiB, and no leak");
        let huge = args(&["--device-memory-file", "f", "--device-leak", "1TiB"]).footprint;
        assert_eq!(device_bytes(&huge, u64::MAX), u64::MAX, "no overflow");
        assert_eq!(tmp_beside(Path::new("/a/mem")), Path::new("/a/mem.tmp"));
    }

    #[test]
    fn the_device_memory_file_is_written_whole_at_start_and_after_each_reply() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("device");
        let given = ["--device-memory-file", path.to_str().unwrap()];
        let mut a = args(&given).footprint;
        a.device_leak = Some(10);
        let fp = Arc::new(Footprint::start(&a).unwrap());
        let read = || std::fs::read_to_string(&path).unwrap();
        assert_eq!(read(), format!("{DEFAULT_DEVICE_BASE}\n"));
        for n in 1..=3 {
            let (req, _) = fp.arrive(n);
            req.reply_ended();
        }
        assert_eq!(read(), format!("{}\n", DEFAULT_DEVICE_BASE + 30));
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "FILE.tmp was renamed away: {names:?}");
        let nowhere = args(&["--device-memory-file", "/nonexistent/dir/device"]).footprint;
        let e = format!("{:#}", Footprint::start(&nowhere).err().unwrap());
        assert!(e.starts_with("failed to write --device-memory-file"), "{e}");
        assert!(!e.contains('\n'), "{e}");
    }

    #[test]
    fn a_reply_s_end_leaks_and_the_first_fills_the_cache() {
        let a = args(&[
            "--leak",
            "8KiB",
            "--leak-replies",
            "2",
            "--first-reply-alloc",
            "1MiB",
        ]);
        let fp = Arc::new(Footprint::start(&a.footprint).unwrap());
        for n in 1..=4 {
            let (req, _) = fp.arrive(n);
            req.reply_ended();
        }
        let held = fp.held.lock().unwrap();
        let sizes: Vec<usize> = held.blocks.iter().map(|b| b.len()).collect();
        assert_eq!(sizes, [1 << 20, 8 << 10, 8 << 10]);
        assert_eq!(held.leaked, 16 << 10, "the cache is no leak");
        assert!(held.blocks.iter().all(|b| b[0] == 1 && b[b.len() - 1] == 1));
        assert!(held.blocks[0].iter().step_by(PAGE).all(|x| *x == 1));
    }

    #[test]
    fn requests_in_flight_are_counted_until_they_go() {
        let a = args(&["--idle-after-ms", "0", "--idle-first-token-ms", "50"]);
        let fp = Arc::new(Footprint::start(&a.footprint).unwrap());
        let (first, later) = fp.arrive(1);
        assert_eq!(later, Duration::ZERO, "the first is never after idle");
        let (beside, later) = fp.arrive(2);
        assert_eq!(later, Duration::ZERO, "another was in flight");
        drop(first);
        drop(beside);
        let (_third, later) = fp.arrive(3);
        assert_eq!(
            later,
            Duration::from_millis(50),
            "none in flight for 0 ms or more"
        );
        assert_eq!(fp.in_flight.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn footprint_settings_that_would_do_nothing_or_too_much_are_refused_in_one_line() {
        for (bad, says) in [
            (&["--leak-replies", "2"][..], "--leak-replies"),
            (&["--device-leak", "1MiB"], "--device-memory-file"),
            (&["--device-memory-base", "1MiB"], "--device-memory-file"),
            (&["--idle-first-token-ms", "5"], "--idle-after-ms"),
            (&["--idle-after-ms", "5"], "--idle-first-token-ms"),
            (&["--cold-first-token-ms", "86400001"], "at most a day"),
        ] {
            let e = args(bad).check().unwrap_err().to_string();
            assert!(e.contains(says), "{bad:?}: {e}");
            assert!(!e.contains('\n'), "{bad:?}: {e}");
        }
        let fine = [
            "--leak",
            "1GiB",
            "--leak-replies",
            "2",
            "--first-reply-alloc",
            "0",
            "--device-memory-file",
            "f",
            "--device-leak",
            "1MiB",
            "--idle-after-ms",
            "2s",
            "--idle-first-token-ms",
            "1s",
            "--cold-first-token-ms",
            "800",
        ];
        let a = args(&fine);
        assert!(a.check().is_ok());
        assert_eq!(a.footprint.leak, Some(1 << 30));
        assert_eq!(a.footprint.idle_after_ms, Some(2000));
        use clap::Parser;
        #[derive(Parser)]
        struct T {
            #[command(flatten)]
            a: crate::standin::StandInArgs,
        }
        for bad in ["5", "-1MiB", "2GiB", "1.5GiB", "4M", "x"] {
            for flag in ["--leak", "--first-reply-alloc"] {
                let given = ["t", flag, bad];
                let e = T::try_parse_from(given).err().unwrap().to_string();
                assert!(e.contains(flag), "{flag} {bad}: {e}");
            }
        }
    }
}
