//! The device hold: an exclusive advisory lock (flock) on a file, taken before the serve starts
//! and kept until it is gone, so two gates never share a device.
//!
//! The holder writes who it is beside the lock (`FILE.holder.json`), so a waiter can say whom it
//! waits for. The kernel releases the lock when the holder's process dies, however it dies; a
//! stale holder file is simply overwritten by the next holder.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};

use crate::clock;
use crate::rundir::write_atomic;

/// Who holds a hold, as written beside the lock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Holder {
    /// The holder's process id.
    pub pid: u32,
    /// Its command line.
    pub argv: Vec<String>,
    /// When it took the hold, UTC, RFC 3339.
    pub since_utc: String,
}

impl Holder {
    /// "PID 4242 (npu-serve-smoke run ...) since 2026-11-29T12:01:33Z"
    pub fn describe(&self) -> String {
        let mut cmd = self.argv.join(" ");
        if cmd.chars().count() > 80 {
            cmd = cmd.chars().take(80).collect::<String>() + " ...";
        }
        format!("PID {} ({cmd}) since {}", self.pid, self.since_utc)
    }
}

/// What the run records of its hold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HoldRecord {
    /// The lock file.
    pub file: String,
    /// Whether it was acquired.
    pub acquired: bool,
    /// How long the gate waited, ms.
    pub waited_ms: f64,
    /// Who held it while the gate waited, if anyone said.
    pub waited_for: Option<String>,
    /// The timeout, s.
    pub timeout_s: f64,
    /// CLOCK_MONOTONIC ns when it was acquired.
    pub acquired_ns: Option<u64>,
    /// CLOCK_MONOTONIC ns when it was released.
    pub released_ns: Option<u64>,
}

/// A hold this process has. Dropping it releases the lock.
#[derive(Debug)]
pub struct Hold {
    lock: Flock<File>,
    holder_path: PathBuf,
}

impl Hold {
    /// Release the lock now (the serve is gone) and remove the holder file.
    pub fn release(self) {
        let _ = std::fs::remove_file(&self.holder_path);
        drop(self.lock);
    }
}

/// The holder file beside `lock`.
pub fn holder_path(lock: &Path) -> PathBuf {
    let mut name = lock.as_os_str().to_owned();
    name.push(".holder.json");
    PathBuf::from(name)
}

/// Who holds `lock` now, as its holder file says; `None` when it says nothing readable.
pub fn current_holder(lock: &Path) -> Option<Holder> {
    let bytes = std::fs::read(holder_path(lock)).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// How taking the hold came out.
#[derive(Debug)]
pub enum Taken {
    /// The gate has the hold.
    Acquired(Hold, HoldRecord),
    /// The timeout ran out.
    TimedOut(HoldRecord),
}

/// Take the hold on `path`, waiting up to `timeout`. Polls every 200 ms (the gate stays idle
/// while it waits), saying once on stderr whom it waits for, and again when the holder changes.
/// Cancel-safe: dropping the future while it waits holds nothing.
pub async fn take(path: &Path, timeout: Duration, argv: &[String]) -> Result<Taken> {
    let start = Instant::now();
    let mut said: Option<String> = None;
    loop {
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .with_context(|| format!("failed to open the hold file {}", path.display()))?;
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(lock) => {
                let holder = Holder {
                    pid: std::process::id(),
                    argv: argv.to_vec(),
                    since_utc: humantime::format_rfc3339_seconds(std::time::SystemTime::now())
                        .to_string(),
                };
                let holder_path = holder_path(path);
                write_atomic(&holder_path, &serde_json::to_vec_pretty(&holder)?)?;
                let record = HoldRecord {
                    file: path.display().to_string(),
                    acquired: true,
                    waited_ms: start.elapsed().as_secs_f64() * 1e3,
                    waited_for: said,
                    timeout_s: timeout.as_secs_f64(),
                    acquired_ns: Some(clock::now_ns()),
                    released_ns: None,
                };
                return Ok(Taken::Acquired(Hold { lock, holder_path }, record));
            }
            Err((_, Errno::EWOULDBLOCK)) => {}
            Err((_, e)) => {
                return Err(e).with_context(|| format!("failed to lock {}", path.display()))
            }
        }
        // A holder removes its file just before it unlocks: a missing file while the lock is
        // still held must not replace the holder already named.
        let holder = match (current_holder(path), &said) {
            (Some(h), _) => h.describe(),
            (None, Some(known)) => known.clone(),
            (None, None) => "a process that did not say who it is".to_string(),
        };
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
            }));
        }
        tokio::time::sleep((timeout - waited).min(Duration::from_millis(200))).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn the_holder_named_is_kept_while_its_file_goes_just_before_the_unlock() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("npu.hold");
        let argv = vec!["first".to_string()];
        let rt = rt();
        let Taken::Acquired(first, _) = rt
            .block_on(take(&path, Duration::from_secs(1), &argv))
            .unwrap()
        else {
            panic!("the first taker must get a free hold")
        };
        let holder_file = holder_path(&path);
        let release = async move {
            // The waiter polls every 200 ms: it names the holder, then sees the file gone
            // while the lock is still held, then gets the lock.
            tokio::time::sleep(Duration::from_millis(300)).await;
            std::fs::remove_file(&holder_file).unwrap();
            tokio::time::sleep(Duration::from_millis(500)).await;
            drop(first);
        };
        let second = vec!["second".to_string()];
        let (taken, ()) = rt.block_on(async {
            tokio::join!(take(&path, Duration::from_secs(10), &second), release)
        });
        let Taken::Acquired(_, record) = taken.unwrap() else {
            panic!("the hold was released")
        };
        let waited_for = record.waited_for.unwrap();
        assert!(
            waited_for.starts_with(&format!("PID {} (first) since", std::process::id())),
            "{waited_for}"
        );
    }

    #[test]
    fn a_second_taker_times_out_naming_the_first_then_gets_it_after_release() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("npu.hold");
        let argv = vec!["npu-serve-smoke".to_string(), "run".to_string()];
        let rt = rt();
        let Taken::Acquired(first, rec) = rt
            .block_on(take(&path, Duration::from_secs(1), &argv))
            .unwrap()
        else {
            panic!("the first taker must get a free hold")
        };
        assert!(rec.acquired && rec.waited_for.is_none());
        assert_eq!(current_holder(&path).unwrap().pid, std::process::id());
        // flock locks belong to the open file description, so a second open in this same
        // process contends like another process would.
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
        assert!(current_holder(&path).is_none());
        assert!(matches!(
            rt.block_on(take(&path, Duration::from_secs(1), &argv))
                .unwrap(),
            Taken::Acquired(..)
        ));
    }
}
