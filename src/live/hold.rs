//! The device hold: an exclusive advisory lock (flock) on a file, taken before the serve starts
//! and kept until the serve and everything it started are gone, so two gates never share a
//! device.
//!
//! The lock belongs to the open file description, not to a process: the gate's supervisor
//! inherits it and keeps it while it stops the serve's tree, even after the gate died, and the
//! lock is free only once every copy is closed. Closing is the only release: nothing here
//! unlocks explicitly, which would free the lock under the supervisor's feet.
//!
//! The holder says who it is inside the locked file itself (its PID, start time, command line,
//! and once it runs, its supervisor's PID), so a waiter can say whom it waits for. A waiter
//! names a holder only while that process still runs: text left by a holder that died (stale,
//! since nobody cleared it) names nobody. A file that is not empty and not a holder's text is
//! only locked, never written. The lock is a regular file: a FIFO, a directory or a device is
//! refused before it is opened (issue 30: opening a FIFO waits for its other end).

use std::fs::{File, OpenOptions, TryLockError};
use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::MetadataExt;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::archive::safe_open;
use crate::clock;
use crate::live::proc_stat::{proc_stat, process_running};

/// What a run records of its hold; the archive owns the type.
pub use crate::archive::record::HoldRecord;
use crate::archive::record::{HoldCheck, HoldCheckAt, HoldFound};

/// Who holds a hold, as written into the locked file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Holder {
    /// The holder's process id.
    pub pid: u32,
    /// Its command line.
    pub argv: Vec<String>,
    /// When it took the hold, UTC, RFC 3339.
    pub since_utc: String,
    /// When the holder started (clock ticks since boot, /proc/PID/stat): a later process that
    /// got the same PID is not taken for it.
    #[serde(default)]
    pub start: Option<u64>,
    /// Its supervisor, which keeps the hold until the serve's tree is gone.
    #[serde(default)]
    pub supervisor: Option<u32>,
    /// When the supervisor started.
    #[serde(default)]
    pub supervisor_start: Option<u64>,
}

/// What the waiter says when the holder said nothing it can use.
pub const UNNAMED: &str = "a process that did not say who it is";

impl Holder {
    /// "PID 4242 (npu-serve-smoke run ...) since 2026-11-29T12:01:33Z"
    ///
    /// The text is the holder's (another lane's serve can write it): what acts on a terminal
    /// is shown as its escape, on one line (issue 30, item 5).
    pub fn describe(&self) -> String {
        format!(
            "PID {} ({}) since {}",
            self.pid,
            crate::inert::one_line(&self.command()),
            crate::inert::one_line(&self.since_utc)
        )
    }

    fn command(&self) -> String {
        let cmd = self.argv.join(" ");
        if cmd.chars().count() > 80 {
            cmd.chars().take(80).collect::<String>() + " ..."
        } else {
            cmd
        }
    }

    /// Whom the hold is held by, while a process this names still runs: the holder itself, or
    /// its supervisor stopping the serve of a holder that is gone. `None` when neither runs:
    /// the text is stale, and the lock is held by someone who did not say.
    pub fn named(&self) -> Option<String> {
        if process_running(self.pid, self.start) {
            return Some(self.describe());
        }
        let supervisor = self.supervisor?;
        process_running(supervisor, self.supervisor_start).then(|| {
            format!(
                "PID {supervisor}, the supervisor of PID {} ({}), which has exited; it is stopping that gate's serve",
                self.pid,
                crate::inert::one_line(&self.command())
            )
        })
    }
}

/// A hold this process has. Dropping it closes this copy of the lock; the lock is free once
/// every copy (the supervisor's too) is closed.
#[derive(Debug)]
pub struct Hold {
    file: File,
    holder: Holder,
    /// Whether the holder text is this gate's to write (and to clear).
    writes: bool,
    /// Where the lock is, to look again whether it is still there ([`Hold::check`]).
    place: Place,
    checks: Vec<HoldCheck>,
}

/// Where a hold's lock is: the path as given and what it was when the lock was taken, and the
/// path the given one led to (symlinks resolved then, once), which is the locked file.
#[derive(Debug)]
struct Place {
    given: PathBuf,
    /// The given path's own device and inode (a symlink's, when `--hold` names a symlink).
    given_id: Option<(u64, u64)>,
    resolved: PathBuf,
}

/// Device and inode of `path` itself: a symlink is not followed, so one planted there to lead
/// somewhere else (or to /proc/self/fd/N, which leads each process to a file of its own) is
/// seen for what it is.
fn own_id(path: &Path) -> std::io::Result<(u64, u64)> {
    std::fs::symlink_metadata(path).map(|m| (m.dev(), m.ino()))
}

impl Place {
    fn of(given: &Path, locked: &File) -> Place {
        let resolved = std::fs::canonicalize(given).unwrap_or_else(|_| given.to_path_buf());
        let place = Place {
            given: given.to_path_buf(),
            given_id: own_id(given).ok(),
            resolved,
        };
        // Opened through a path that changed between the open and now: look at the file
        // itself, so the first check says it.
        if place.look(locked) != HoldFound::LockedFile {
            return Place {
                resolved: given.to_path_buf(),
                ..place
            };
        }
        place
    }

    /// What the path is now to the lock on `locked`: a second gate opening the given path
    /// reaches the locked file only while the given path is what it was and the file it led to
    /// is still there.
    fn look(&self, locked: &File) -> HoldFound {
        let found = |id: std::io::Result<(u64, u64)>, want: Option<(u64, u64)>| match id {
            Ok(id) if Some(id) == want => HoldFound::LockedFile,
            Ok(_) => HoldFound::AnotherFile,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => HoldFound::Nothing,
            Err(_) => HoldFound::Unreachable,
        };
        let given = found(own_id(&self.given), self.given_id);
        if given != HoldFound::LockedFile {
            return given;
        }
        let locked = locked.metadata().ok().map(|m| (m.dev(), m.ino()));
        found(own_id(&self.resolved), locked)
    }
}

impl Hold {
    /// The locked file, for the supervisor to inherit.
    pub fn as_fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }

    /// Name the supervisor that keeps the hold beside this process, so a waiter can tell whom
    /// it waits for once this process is gone.
    pub fn name_supervisor(&mut self, pid: u32) {
        self.holder.supervisor = Some(pid);
        self.holder.supervisor_start = proc_stat(pid as i32).map(|s| s.start);
        if self.writes {
            write_holder(&self.file, &self.holder);
        }
    }

    /// Look whether the locked file is still the file at the hold's path, and keep what was
    /// found for the run's record. A serve of the gate's own user can remove or replace the
    /// file (its path is in run.json); the lock then no longer keeps a second gate off the
    /// device, and the run must say so rather than share it silently (issue 30).
    pub fn check(&mut self, at: HoldCheckAt) -> HoldCheck {
        let check = HoldCheck {
            at,
            found: self.place.look(&self.file),
        };
        self.checks.push(check);
        check
    }

    /// Release the hold (the serve and its supervisor are gone): look a last time whether it
    /// was still there, clear the holder text, close. Every check made, for the run's record.
    pub fn release(mut self) -> Vec<HoldCheck> {
        self.check(HoldCheckAt::Release);
        if self.writes {
            let _ = self.file.set_len(0);
        }
        self.checks
    }
}

/// The holder text in `file`, if it holds one.
fn read_holder(file: &File) -> Option<Holder> {
    let mut bytes = Vec::new();
    // Bounded: the lock file may be anything a user named.
    file.take(1 << 20).read_to_end(&mut bytes).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Write `holder` into `file`. Emptied first: a holder killed between the two steps leaves an
/// empty file, never a mix of two texts.
fn write_holder(file: &File, holder: &Holder) {
    let Ok(text) = serde_json::to_vec(holder) else {
        return;
    };
    if file.set_len(0).is_ok() {
        let _ = file.write_all_at(&text, 0);
    }
}

/// Who holds `lock` now, as the text in it says (whether or not that process still runs);
/// `None` when it holds no holder text.
pub fn current_holder(lock: &Path) -> Option<Holder> {
    read_holder(&safe_open::open_read(lock).ok()?)
}

/// Open (creating when absent) the hold's lock file: a regular file only, and never a wait on
/// a FIFO put at its path (issue 30): `--hold` was checked before the run, this is the open.
fn open_lock(path: &Path) -> Result<File> {
    let mut options = OpenOptions::new();
    options.read(true).write(true);
    match safe_open::open(path, &options, safe_open::Want::Regular) {
        Err(e) if e.is_not_found() => {
            let file = options
                .create(true)
                .truncate(false)
                .custom_flags((nix::fcntl::OFlag::O_NONBLOCK | nix::fcntl::OFlag::O_NOCTTY).bits())
                .open(path)?;
            if !file.metadata()?.is_file() {
                bail!("{} is not a regular file", path.display());
            }
            Ok(file)
        }
        r => Ok(r?),
    }
}

/// How taking the hold came out.
#[derive(Debug)]
pub enum Taken {
    /// The gate has the hold.
    Acquired(Hold, HoldRecord),
    /// The timeout ran out.
    TimedOut(HoldRecord),
}

/// How often [`take`] tries the lock again while it waits.
const POLL: Duration = Duration::from_millis(200);

/// Take the hold on `path`, waiting up to `timeout`. Polls every 200 ms (the gate stays idle
/// while it waits), saying once on stderr whom it waits for, and again when the holder changes.
/// Cancel-safe: dropping the future while it waits holds nothing.
pub async fn take(path: &Path, timeout: Duration, argv: &[String]) -> Result<Taken> {
    let start = Instant::now();
    let mut said: Option<String> = None;
    loop {
        let file = open_lock(path)
            .with_context(|| format!("failed to open the hold file {}", path.display()))?;
        match file.try_lock() {
            Ok(()) => {
                let me = std::process::id();
                let holder = Holder {
                    pid: me,
                    argv: argv.to_vec(),
                    since_utc: humantime::format_rfc3339_seconds(std::time::SystemTime::now())
                        .to_string(),
                    start: proc_stat(me as i32).map(|s| s.start),
                    supervisor: None,
                    supervisor_start: None,
                };
                let meta = file
                    .metadata()
                    .with_context(|| format!("failed to read {}", path.display()))?;
                // Someone else's file used as the lock is never written into.
                let writes = meta.is_file() && (meta.len() == 0 || read_holder(&file).is_some());
                if writes {
                    write_holder(&file, &holder);
                }
                let record = HoldRecord {
                    file: path.display().to_string(),
                    acquired: true,
                    waited_ms: start.elapsed().as_secs_f64() * 1e3,
                    waited_for: said,
                    timeout_s: timeout.as_secs_f64(),
                    acquired_ns: Some(clock::now_ns()),
                    released_ns: None,
                    checks: Vec::new(),
                };
                let hold = Hold {
                    place: Place::of(path, &file),
                    file,
                    holder,
                    writes,
                    checks: Vec::new(),
                };
                return Ok(Taken::Acquired(hold, record));
            }
            Err(TryLockError::WouldBlock) => {}
            Err(TryLockError::Error(e)) => {
                return Err(e).with_context(|| format!("failed to lock {}", path.display()))
            }
        }
        let holder = match read_holder(&file) {
            Some(h) => h.named().unwrap_or_else(|| UNNAMED.to_string()),
            // No text: a holder that wrote none, or one between emptying the file and writing
            // it, or clearing it just before it closes. The one already named still holds.
            None => said.clone().unwrap_or_else(|| UNNAMED.to_string()),
        };
        drop(file);
        if said.as_deref() != Some(holder.as_str()) {
            crate::say!(
                "waiting for the hold on {}, held by {holder}",
                path.display()
            );
            said = Some(holder);
        }
        let waited = start.elapsed();
        if waited >= timeout {
            return Ok(Taken::TimedOut(HoldRecord {
                file: path.display().to_string(),
                acquired: false,
                waited_ms: waited.as_secs_f64() * 1e3,
                waited_for: said,
                timeout_s: timeout.as_secs_f64(),
                acquired_ns: None,
                released_ns: None,
                checks: Vec::new(),
            }));
        }
        tokio::time::sleep((timeout - waited).min(POLL)).await;
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::Pin;
    use std::task::Poll;

    use std::os::fd::AsRawFd;

    use super::*;

    /// The timeout of a take that must get the hold: a bound only a hold that never comes
    /// free can reach. A take that must time out is given a short one, and only while the
    /// lock is held throughout, so nothing can release it in time.
    const LONG: Duration = Duration::from_secs(60);

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    /// A pid that ran and is gone (reaped).
    fn dead_pid() -> u32 {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        pid
    }

    fn holder(pid: u32) -> Holder {
        Holder {
            pid,
            argv: vec!["npu-serve-smoke".into(), "run".into()],
            since_utc: "2026-11-29T12:01:33Z".into(),
            start: None,
            supervisor: None,
            supervisor_start: None,
        }
    }

    #[test]
    fn a_holder_is_named_only_while_it_or_its_supervisor_runs() {
        let me = std::process::id();
        let live = holder(me);
        assert_eq!(
            live.named().unwrap(),
            format!("PID {me} (npu-serve-smoke run) since 2026-11-29T12:01:33Z")
        );
        let dead = dead_pid();
        assert_eq!(holder(dead).named(), None, "a dead holder names nobody");
        // The same pid, started at another time, is another process.
        let mut reused = holder(me);
        reused.start = Some(proc_stat(me as i32).unwrap().start + 1);
        assert_eq!(reused.named(), None);
        let mut stopping = holder(dead);
        stopping.supervisor = Some(me);
        let named = stopping.named().unwrap();
        assert!(
            named.starts_with(&format!("PID {me}, the supervisor of PID {dead} (")),
            "{named}"
        );
        assert!(named.contains("which has exited; it is stopping that gate's serve"));
        stopping.supervisor = Some(dead_pid());
        assert_eq!(stopping.named(), None);
    }

    #[test]
    fn a_stale_holder_text_names_no_dead_pid_while_someone_else_holds_the_lock() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("npu.hold");
        let dead = dead_pid();
        std::fs::write(&path, serde_json::to_vec(&holder(dead)).unwrap()).unwrap();
        let other = File::open(&path).unwrap();
        other.lock().unwrap();
        // Held throughout: the short timeout can only run out.
        let argv = vec!["second".to_string()];
        let Taken::TimedOut(rec) = rt()
            .block_on(take(&path, Duration::from_millis(300), &argv))
            .unwrap()
        else {
            panic!("the hold is taken")
        };
        assert_eq!(rec.waited_for.as_deref(), Some(UNNAMED));
    }

    /// Poll `fut` once: its output if it is done.
    async fn poll_once<F: Future + Unpin>(fut: &mut F) -> Option<F::Output> {
        let polled = std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut *fut).poll(cx))).await;
        match polled {
            Poll::Ready(output) => Some(output),
            Poll::Pending => None,
        }
    }

    /// Until the waiter's poll timer has run out: it was set before this sleep began, so it
    /// has fired by the time this one has (one clock, one timer wheel). The next poll of the
    /// waiter then makes exactly one more try of the lock.
    async fn past_the_waiters_poll() {
        tokio::time::sleep(POLL).await;
    }

    #[test]
    fn the_holder_named_is_kept_while_its_text_is_cleared_just_before_the_close() {
        // The waiter is stepped by hand, one try of the lock a step, so each step sees the
        // hold as this test left it: named, then cleared but locked, then released. No sleep
        // races its poll; the timeout is a bound only a waiter stuck for a minute could reach.
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("npu.hold");
        let argv = vec!["first".to_string()];
        let rt = rt();
        let Taken::Acquired(first, _) = rt.block_on(take(&path, LONG, &argv)).unwrap() else {
            panic!("the first taker must get a free hold")
        };
        let second = vec!["second".to_string()];
        let taken = rt.block_on(async {
            let mut waiter = std::pin::pin!(take(&path, LONG, &second));
            assert!(
                poll_once(&mut waiter).await.is_none(),
                "the hold is taken: the waiter waits (and names the holder)"
            );
            first.file.set_len(0).unwrap();
            past_the_waiters_poll().await;
            assert!(
                poll_once(&mut waiter).await.is_none(),
                "the text is cleared but the lock still held: the waiter waits"
            );
            drop(first);
            // Free now, but maybe not at once: a child another test forks meanwhile holds a
            // copy of the lock until it execs. The waiter's own timeout bounds this.
            loop {
                past_the_waiters_poll().await;
                if let Some(taken) = poll_once(&mut waiter).await {
                    break taken;
                }
            }
        });
        let Taken::Acquired(_, record) = taken.unwrap() else {
            panic!("the hold was released")
        };
        let waited_for = record.waited_for.unwrap();
        assert!(
            waited_for.starts_with(&format!("PID {} (first) since", std::process::id())),
            "the holder named before its text was cleared is kept: {waited_for}"
        );
    }

    #[test]
    fn a_second_taker_times_out_naming_the_first_then_gets_it_after_release() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("npu.hold");
        let argv = vec!["npu-serve-smoke".to_string(), "run".to_string()];
        let rt = rt();
        let Taken::Acquired(first, rec) = rt.block_on(take(&path, LONG, &argv)).unwrap() else {
            panic!("the first taker must get a free hold")
        };
        assert!(rec.acquired && rec.waited_for.is_none());
        assert_eq!(current_holder(&path).unwrap().pid, std::process::id());
        // flock locks belong to the open file description, so a second open in this same
        // process contends like another process would. `first` holds it throughout, so the
        // short timeout can only run out.
        let Taken::TimedOut(rec) = rt
            .block_on(take(&path, Duration::from_millis(300), &argv))
            .unwrap()
        else {
            panic!("the hold is taken")
        };
        assert!(!rec.acquired);
        let waited_for = rec.waited_for.unwrap();
        assert!(
            waited_for.starts_with(&format!(
                "PID {} (npu-serve-smoke run) since ",
                std::process::id()
            )),
            "{waited_for}"
        );
        first.release();
        assert!(
            current_holder(&path).is_none(),
            "released, the text is cleared"
        );
        assert!(matches!(
            rt.block_on(take(&path, LONG, &argv)).unwrap(),
            Taken::Acquired(..)
        ));
    }

    #[test]
    fn a_file_that_is_not_a_holders_is_locked_but_never_written() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("firmware.bin");
        std::fs::write(&path, b"\x7fELF not a holder").unwrap();
        let argv = vec!["gate".to_string()];
        let rt = rt();
        let Taken::Acquired(hold, _) = rt.block_on(take(&path, LONG, &argv)).unwrap() else {
            panic!("a free hold")
        };
        let mut hold = hold;
        hold.name_supervisor(std::process::id());
        assert!(!hold_is_free(&path));
        hold.release();
        assert_eq!(std::fs::read(&path).unwrap(), b"\x7fELF not a holder");
        wait_until_free(&path);
    }

    #[test]
    fn a_hold_file_removed_or_replaced_is_seen_and_a_symlink_given_as_the_hold_is_not() {
        let d = tempfile::tempdir().unwrap();
        let rt = rt();
        let argv = vec!["gate".to_string()];
        let take_at = |path: &Path| match rt.block_on(take(path, LONG, &argv)).unwrap() {
            Taken::Acquired(h, _) => h,
            Taken::TimedOut(_) => panic!("a free hold"),
        };
        let path = d.path().join("npu.hold");
        let mut hold = take_at(&path);
        let found = |h: &mut Hold| h.check(HoldCheckAt::BeforeReplies).found;
        assert_eq!(found(&mut hold), HoldFound::LockedFile);
        std::fs::remove_file(&path).unwrap();
        assert_eq!(found(&mut hold), HoldFound::Nothing);
        std::fs::write(&path, "").unwrap();
        assert_eq!(found(&mut hold), HoldFound::AnotherFile);
        // A symlink planted where the file was is not followed, even one that leads back to
        // the locked file through this process's own descriptor.
        std::fs::remove_file(&path).unwrap();
        let fd = format!("/proc/self/fd/{}", hold.as_fd().as_raw_fd());
        std::os::unix::fs::symlink(&fd, &path).unwrap();
        assert_eq!(found(&mut hold), HoldFound::AnotherFile);
        let checks = hold.release();
        assert_eq!(checks.len(), 5);
        assert_eq!(checks[4].at, HoldCheckAt::Release);

        // --hold naming a symlink: the file it leads to is locked, and stays so.
        let target = d.path().join("real.hold");
        let link = d.path().join("link.hold");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let mut hold = take_at(&link);
        assert_eq!(found(&mut hold), HoldFound::LockedFile);
        std::fs::remove_file(&target).unwrap();
        assert_eq!(found(&mut hold), HoldFound::Nothing);
        std::fs::write(&target, "").unwrap();
        assert_eq!(found(&mut hold), HoldFound::AnotherFile);
    }

    fn hold_is_free(path: &Path) -> bool {
        File::open(path).unwrap().try_lock().is_ok()
    }

    /// Wait (bounded by [`LONG`]) until the hold on `path` is free. Not at once: a child that
    /// another test of this binary forks holds a copy of every open file, the lock's too, until
    /// it execs.
    fn wait_until_free(path: &Path) {
        let start = Instant::now();
        while !hold_is_free(path) {
            assert!(
                start.elapsed() < LONG,
                "{} was not free {LONG:?} after its release",
                path.display()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}
