//! Launching and stopping the serve.
//!
//! The serve is spawned directly (never through a shell), in a process group of its own within
//! the gate's session: `setpgid`, not `setsid`, because a new session would also get its own
//! scheduler autogroup and hide the CPU contention the gate must see. Its stdout and stderr go
//! straight into serve.log, so nothing of the gate sits between the serve and its log.
//!
//! What reaches what: PR_SET_PDEATHSIG (SIGKILL) reaches the direct child when the gate dies,
//! even by SIGKILL; the process group reaches everything the serve started, on an orderly stop
//! (SIGTERM to the group, SIGKILL after the grace).

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use sha2::{Digest, Sha256};

use crate::record::{BinaryInfo, StopRecord};

/// The placeholder in the serve's arguments that becomes the port the gate picked.
pub const PORT_PLACEHOLDER: &str = "{port}";

/// Find the serve binary as exec would: a name with a `/` is a path, any other name is
/// looked up on PATH. It must be a file with an execute bit.
pub fn resolve_binary(argv0: &str) -> Result<PathBuf> {
    let candidates: Vec<PathBuf> = if argv0.contains('/') {
        vec![PathBuf::from(argv0)]
    } else {
        std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).map(|d| d.join(argv0)).collect())
            .unwrap_or_default()
    };
    for c in &candidates {
        if let Ok(meta) = std::fs::metadata(c) {
            if meta.is_file() {
                if meta.permissions().mode() & 0o111 == 0 {
                    bail!("the serve binary {} is not executable", c.display());
                }
                return std::fs::canonicalize(c)
                    .with_context(|| format!("failed to resolve {}", c.display()));
            }
        }
    }
    if argv0.contains('/') {
        bail!("the serve binary {argv0} was not found");
    }
    bail!("the serve binary {argv0} was not found on PATH");
}

/// Size and sha256 of the serve binary, so an archive says exactly what was gated.
pub fn fingerprint(path: &Path) -> Result<BinaryInfo> {
    let mut file =
        File::open(path).with_context(|| format!("failed to open {}", path.display()))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut size = 0u64;
    loop {
        let n = file
            .read(&mut buf)
            .with_context(|| format!("failed to read {}", path.display()))?;
        if n == 0 {
            break;
        }
        size += n as u64;
        hasher.update(&buf[..n]);
    }
    let sha256 = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Ok(BinaryInfo {
        path: path.display().to_string(),
        size,
        sha256,
    })
}

/// A free port on 127.0.0.1, as the kernel picks one. Another process may take it before the
/// serve binds it; the serve then fails to start, and says so in its log.
pub fn pick_port() -> Result<u16> {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0))
        .context("failed to find a free port on 127.0.0.1")?;
    Ok(listener.local_addr()?.port())
}

/// Whether `port` on 127.0.0.1 can be bound now. A launched serve's port must be: a process
/// already listening there would answer the gate's requests in the serve's place.
pub fn port_is_free(port: u16) -> bool {
    std::net::TcpListener::bind(("127.0.0.1", port)).is_ok()
}

/// `argv` with every `{port}` replaced by `port`.
pub fn fill_port(argv: &[String], port: u16) -> Vec<String> {
    argv.iter()
        .map(|a| a.replace(PORT_PLACEHOLDER, &port.to_string()))
        .collect()
}

/// A running serve.
#[derive(Debug)]
pub struct ServeProcess {
    child: Child,
    pgid: Pid,
    exit: Option<ExitStatus>,
}

impl ServeProcess {
    /// Start `argv` with its output going to `log`. Must be called from a thread that lives as
    /// long as the serve: PDEATHSIG fires when the spawning *thread* exits.
    pub fn spawn(argv: &[String], log: &File) -> std::io::Result<ServeProcess> {
        let (program, args) = argv
            .split_first()
            .ok_or_else(|| std::io::Error::other("the serve command is empty"))?;
        let parent = nix::unistd::getpid();
        let mut cmd = Command::new(program);
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log.try_clone()?)
            .process_group(0);
        // SAFETY: between fork and exec only async-signal-safe calls: prctl and getppid.
        unsafe {
            cmd.pre_exec(move || {
                nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?;
                // The gate may have died between fork and prctl; then nothing would kill us.
                if nix::unistd::getppid() != parent {
                    return Err(std::io::Error::other(
                        "the gate exited while starting the serve",
                    ));
                }
                Ok(())
            });
        }
        let child = cmd.spawn()?;
        let pgid = Pid::from_raw(child.id() as i32);
        Ok(ServeProcess {
            child,
            pgid,
            exit: None,
        })
    }

    /// The serve's process id (also its process group id).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The exit status, once the serve has exited (reaping it).
    pub fn exited(&mut self) -> Option<ExitStatus> {
        if self.exit.is_none() {
            self.exit = self.child.try_wait().ok().flatten();
        }
        self.exit
    }

    /// Wait up to `limit` for the serve to exit on its own; its exit status if it did.
    pub async fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.exited() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Whether any process of the serve's group is still there (the serve itself once reaped,
    /// or anything it started).
    fn group_alive(&self) -> bool {
        killpg(self.pgid, None).is_ok()
    }

    /// Stop the serve and everything it started: SIGTERM to its group, SIGKILL after `grace`.
    /// Returns when no process of the group remains (or, for a process that cannot be killed,
    /// after a bounded wait).
    pub async fn stop(&mut self, grace: Duration) -> StopRecord {
        let _ = killpg(self.pgid, Signal::SIGTERM);
        if self.wait_gone(grace).await {
            return StopRecord {
                killed: false,
                cut_short: false,
                escaped_killed: 0,
                exit_status: self.exit.map(|s| s.to_string()),
            };
        }
        self.kill_now(false).await
    }

    /// SIGKILL the serve's group now: the grace ran out, or (`cut_short`) a second signal came.
    pub async fn kill_now(&mut self, cut_short: bool) -> StopRecord {
        let _ = killpg(self.pgid, Signal::SIGKILL);
        // SIGKILL cannot be ignored, but a process stuck in the kernel (D state) can hold on
        // for a while: bound this wait too.
        self.wait_gone(Duration::from_secs(5)).await;
        StopRecord {
            killed: true,
            cut_short,
            escaped_killed: 0,
            exit_status: self.exit.map(|s| s.to_string()),
        }
    }

    /// Wait until the serve is reaped and its group is empty, at most `limit`.
    async fn wait_gone(&mut self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        loop {
            self.exited();
            if self.exit.is_some() && !self.group_alive() {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Make this process the reaper of its orphaned descendants: a process the serve started in a
/// session or group of its own (out of reach of the group stop) is re-parented here, not to
/// PID 1, when its parent dies, so [`kill_orphans`] can find it.
pub fn become_subreaper() -> Result<()> {
    nix::sys::prctl::set_child_subreaper(true).context("failed to become a child subreaper")
}

/// This process's children, other than any still-running serve: after the serve's group is
/// gone, these are its descendants that escaped the group.
fn children() -> Vec<Pid> {
    use sysinfo::{ProcessRefreshKind, ProcessesToUpdate, System};
    let me = sysinfo::Pid::from_u32(std::process::id());
    let mut sys = System::new();
    sys.refresh_processes_specifics(ProcessesToUpdate::All, true, ProcessRefreshKind::nothing());
    sys.processes()
        .values()
        .filter(|p| p.parent() == Some(me))
        .map(|p| Pid::from_raw(p.pid().as_u32() as i32))
        .collect()
}

/// Stop every orphaned descendant re-parented here (see [`become_subreaper`]): SIGTERM, then
/// SIGKILL after `grace`, and reap them. Killing one may orphan its own children, so this
/// repeats, a bounded number of times. Returns how many it stopped.
pub async fn kill_orphans(grace: Duration) -> usize {
    use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
    let mut stopped = 0;
    for _ in 0..8 {
        let orphans = children();
        if orphans.is_empty() {
            break;
        }
        stopped += orphans.len();
        for &p in &orphans {
            let _ = nix::sys::signal::kill(p, Signal::SIGTERM);
        }
        let deadline = Instant::now() + grace;
        let mut left = orphans;
        while !left.is_empty() {
            left.retain(|&p| {
                matches!(
                    waitpid(p, Some(WaitPidFlag::WNOHANG)),
                    Ok(WaitStatus::StillAlive)
                )
            });
            if left.is_empty() {
                break;
            }
            if Instant::now() >= deadline {
                for &p in &left {
                    let _ = nix::sys::signal::kill(p, Signal::SIGKILL);
                    let _ = waitpid(p, None);
                }
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    stopped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_placeholders_are_filled_everywhere() {
        let argv: Vec<String> = ["serve", "--port", "{port}", "--url=http://h:{port}/x"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            fill_port(&argv, 8123),
            vec!["serve", "--port", "8123", "--url=http://h:8123/x"]
        );
    }

    #[test]
    fn binaries_are_resolved_on_path_or_refused() {
        assert!(resolve_binary("sh").unwrap().is_absolute());
        let e = resolve_binary("no-such-serve-binary-xyz").unwrap_err();
        assert!(e.to_string().contains("not found on PATH"), "{e}");
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("serve");
        std::fs::write(&f, "x").unwrap();
        let e = resolve_binary(f.to_str().unwrap()).unwrap_err();
        assert!(e.to_string().contains("not executable"), "{e}");
    }

    #[test]
    fn fingerprint_is_sha256_and_size() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("b");
        std::fs::write(&f, "abc").unwrap();
        let info = fingerprint(&f).unwrap();
        assert_eq!(info.size, 3);
        assert_eq!(
            info.sha256,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
