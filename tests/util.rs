//! Helpers shared by the integration tests.

use std::io::{BufRead, BufReader};
use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use assert_cmd::Command;
use serde_json::Value;

/// Path of the binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_npu-serve-smoke");

/// Floors no timing can flip: plumbing tests must not fail because the box was slow.
pub const UNFLIPPABLE: [&str; 4] = ["--floor", "0", "--first-token-ms", "600000"];

/// Tests that run gates share this lock; the self-test takes it alone, so its accuracy checks
/// (a 20 ms tolerance) are not measured against this suite's own load on a 2-core box.
static GATES: RwLock<()> = RwLock::new(());

/// The gate binary, ready for arguments, holding a shared claim on the box while it lives.
pub struct Gate {
    cmd: Command,
    _shared: RwLockReadGuard<'static, ()>,
}

impl Deref for Gate {
    type Target = Command;
    fn deref(&self) -> &Command {
        &self.cmd
    }
}

impl DerefMut for Gate {
    fn deref_mut(&mut self) -> &mut Command {
        &mut self.cmd
    }
}

/// The gate binary, ready for arguments.
pub fn gate() -> Gate {
    let mut cmd = Command::new(BIN);
    cmd.timeout(Duration::from_secs(120));
    Gate {
        cmd,
        _shared: GATES.read().unwrap_or_else(|e| e.into_inner()),
    }
}

/// The box to this test alone, until the guard drops.
pub fn exclusive() -> RwLockWriteGuard<'static, ()> {
    GATES.write().unwrap_or_else(|e| e.into_inner())
}

/// A fresh temporary directory and a run directory path inside it (not yet created).
pub fn scratch() -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("run");
    (d, out)
}

/// Read a JSON file.
pub fn json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Read replies.jsonl.
pub fn replies(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("replies.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The verdict line for `check` in the gate's stdout.
pub fn line<'a>(stdout: &'a str, check: &str) -> &'a str {
    stdout
        .lines()
        .find(|l| l.split_whitespace().next() == Some(check))
        .unwrap_or_else(|| panic!("no {check} line in:\n{stdout}"))
}

/// Whether any process's command line contains `marker`.
pub fn process_with(marker: &str) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    entries.flatten().any(|e| {
        std::fs::read(e.path().join("cmdline"))
            .map(|c| {
                String::from_utf8_lossy(&c)
                    .replace('\0', " ")
                    .contains(marker)
            })
            .unwrap_or(false)
    })
}

/// Wait (bounded) until no process's command line contains `marker`.
pub fn gone_within(marker: &str, limit: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if !process_with(marker) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// A stand-in serve started by the test itself (for attaching to a running serve). Killed
/// when dropped.
pub struct StandIn {
    child: Child,
    /// Its base URL.
    pub url: String,
}

impl StandIn {
    /// Start `stand-in --port 0 <args>`, with its stderr going to `log`, and wait for it to
    /// say where it listens.
    pub fn start(args: &[&str], log: &Path) -> StandIn {
        let mut child = std::process::Command::new(BIN)
            .arg("stand-in")
            .args(["--port", "0"])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let mut seen = String::new();
        for line in lines.by_ref().take(10) {
            let line = line.unwrap();
            seen.push_str(&line);
            seen.push('\n');
            if let Some(url) = line.strip_prefix("stand-in: listening on ") {
                std::fs::write(log, &seen).unwrap();
                return StandIn {
                    child,
                    url: url.to_string(),
                };
            }
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("the stand-in did not say where it listens:\n{seen}");
    }

    /// Whether it is still running.
    pub fn running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
