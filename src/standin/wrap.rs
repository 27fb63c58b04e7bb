//! `--wrap`: the stand-in as a wrapper process that does not exec, as Lemonade starts
//! llama-server or a Python launcher starts the real binary. The serve the gate launched is
//! then not the process that listens, maps and holds files, so route evidence is only found
//! by walking the whole process tree.
//!
//! The wrapper is small and synchronous: TERM, INT, HUP and CHLD are blocked before the child
//! starts (so one that comes while it starts waits, pending; the child's own mask is emptied
//! before it execs), and one `sigwait` loop forwards the first three to the child and reaps it
//! on the last. There is no handler and no sleep.
//! If the wrapper is SIGKILLed, the child is left in the same process group, which the gate's
//! supervisor kills whole.

use std::ffi::OsString;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, ExitStatus};

use anyhow::{Context, Result};
use nix::sys::signal::{kill, sigprocmask, SigSet, SigmaskHow, Signal};
use nix::unistd::Pid;

/// The signals passed on to the child.
const FORWARDED: [Signal; 3] = [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP];

/// Start this stand-in again without `--wrap` as a child, pass the forwarded signals on to it,
/// and return its exit code once it has exited (and been reaped).
pub(crate) fn run() -> Result<u8> {
    let exe = std::env::current_exe().context("failed to find this program to start its copy")?;
    let mut set = SigSet::empty();
    for s in FORWARDED {
        set.add(s);
    }
    set.add(Signal::SIGCHLD);
    // This runs on the main thread before any other starts, so the mask holds for the whole
    // process.
    set.thread_block()
        .context("failed to block the signals the wrapper forwards")?;
    let mut cmd = Command::new(&exe);
    cmd.args(child_args(std::env::args_os().skip(1)));
    // A child inherits the mask across exec, and std's spawn leaves it as it is: unblocked
    // here, or the child would never see the TERM it is sent.
    // SAFETY: between fork and exec only sigprocmask, which is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None)?;
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .with_context(|| format!("failed to start the wrapped stand-in {}", exe.display()))?;
    let pid = Pid::from_raw(i32::try_from(child.id()).context("the child's pid is out of range")?);
    loop {
        let sig = set.wait().context("failed to wait for a signal")?;
        if sig == Signal::SIGCHLD {
            // Also sent when the child stops or continues: only an exit ends the wrapper.
            if let Some(status) = child.try_wait().context("failed to reap the child")? {
                return Ok(exit_code(status));
            }
        } else {
            // ESRCH: it has just exited, and its SIGCHLD is pending.
            let _ = kill(pid, sig);
        }
    }
}

/// The child's arguments: the wrapper's own, less every `--wrap` (so the child serves).
fn child_args(args: impl Iterator<Item = OsString>) -> Vec<OsString> {
    args.filter(|a| a != "--wrap").collect()
}

/// The wrapper's exit code for the child's status: its code, or 128+N when signal N killed it,
/// as a shell reports it.
fn exit_code(status: ExitStatus) -> u8 {
    let code = match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(sig)) => 128 + sig,
        (None, None) => 1,
    };
    u8::try_from(code).unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_child_gets_every_argument_but_wrap() {
        let given = [
            "stand-in",
            "--wrap",
            "--port",
            "0",
            "--map-file",
            "m",
            "--wrap",
        ];
        let got = child_args(given.iter().map(OsString::from));
        assert_eq!(got, ["stand-in", "--port", "0", "--map-file", "m"]);
    }

    #[test]
    fn exit_codes_follow_the_shell() {
        assert_eq!(exit_code(ExitStatus::from_raw(3 << 8)), 3);
        assert_eq!(exit_code(ExitStatus::from_raw(9)), 128 + 9);
        assert_eq!(exit_code(ExitStatus::from_raw(15)), 128 + 15);
    }
}
