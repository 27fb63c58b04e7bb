//! The supervisor: a small process of the gate's own that starts the serve, outlives the gate
//! just long enough to take the serve's whole tree with it, and keeps the device hold until
//! that tree is gone.
//!
//! Why a process of its own: PR_SET_PDEATHSIG reaches only the direct child, so a gate killed
//! with SIGKILL used to leave behind whatever the serve had started (a child in its group, a
//! daemon in a session of its own, the real server under a wrapper), adopted by PID 1, while
//! the kernel released the gate's flock. The supervisor (`npu-serve-smoke __supervise`,
//! spawned by the gate) is the serve's parent, the child subreaper of everything the serve
//! starts, and a holder of the hold's open file description (flock locks belong to it, so the
//! lock stays until every copy is closed). When the gate goes, however it died, its end of the
//! command pipe closes; the supervisor then SIGKILLs the serve's group and every descendant,
//! reaps them, and only then exits, which releases the hold.
//!
//! It is synchronous and small: no runtime, no threads. While the serve runs it sleeps in
//! poll(2) on the command pipe and a signalfd for SIGCHLD, with no timeout, so it wakes only
//! when something happens. It sits in a process group of its own: a signal to the gate's group
//! (Ctrl-C, a CI runner's `kill -- -PGID`) does not take it, and the gate, which owns the
//! signals, commands the stop. It ignores the interrupting signals itself and restores them for
//! the serve (an ignored disposition survives exec).
//!
//! The protocol is lines on two pipes. Commands, on the supervisor's stdin: `stop <grace_ms>`,
//! `kill`. Events, on its stdout: `spawned <pid>`, `spawn-failed <errno> <message>`,
//! `exited <wait status>`, `escapees <n>`, `stopped <StopRecord as JSON>`.

use std::collections::HashSet;
use std::ffi::CString;
use std::fs::File;
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use nix::errno::Errno;
use nix::libc;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{killpg, SigHandler, SigSet, SigmaskHow, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

use crate::archive::record::StopRecord;
pub(crate) use crate::live::proc_stat::{descendants, scan};
pub use crate::live::proc_stat::{proc_stat, process_running, ProcStat};

/// The hidden subcommand the gate runs its supervisor as.
pub const SUBCOMMAND: &str = "__supervise";

/// How long processes get to die after SIGKILL before the stop gives up on them and says so
/// (`stop.left_running`): SIGKILL cannot be ignored, but a process stuck in the kernel (D state)
/// can hold on.
pub const KILL_WAIT: Duration = Duration::from_secs(5);

/// How long a supervisor whose gate is gone keeps killing and reaping before it exits anyway
/// (releasing the hold): nobody waits for it, so it waits longer than an orderly stop does.
pub const GONE_WAIT: Duration = Duration::from_secs(30);

/// How often a wait looks at /proc when nothing wakes it: only while processes that are not
/// the supervisor's children must die (their exit sends it no SIGCHLD).
const TICK: Duration = Duration::from_millis(50);

/// The signals the gate handles, ignored by the supervisor and restored to their defaults in
/// the serve.
const IGNORED: [Signal; 7] = [
    Signal::SIGINT,
    Signal::SIGHUP,
    Signal::SIGTERM,
    Signal::SIGQUIT,
    Signal::SIGTTIN,
    Signal::SIGTTOU,
    Signal::SIGPIPE,
];

/// `__supervise`: what the gate tells its supervisor on the command line.
#[derive(Debug, Clone, clap::Args)]
pub struct SuperviseArgs {
    /// serve.log, a descriptor inherited from the gate: the serve's stdout and stderr.
    #[arg(long, value_name = "FD")]
    pub log_fd: RawFd,
    /// The hold's locked file, a descriptor inherited from the gate, kept open until the
    /// serve's whole tree is gone.
    #[arg(long, value_name = "FD")]
    pub hold_fd: Option<RawFd>,
    /// The serve command.
    #[arg(last = true, required = true, value_name = "SERVE")]
    pub serve: Vec<String>,
}

/// What the gate tells the supervisor.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Command {
    /// Stop the serve: SIGTERM to its group, SIGKILL after the grace; then the same for what
    /// left the group.
    Stop {
        /// Between SIGTERM and SIGKILL, each phase.
        grace: Duration,
    },
    /// SIGKILL whatever is left, now (a second signal came).
    Kill,
}

impl Command {
    /// The command as a line (without the newline).
    pub fn to_line(self) -> String {
        match self {
            Command::Stop { grace } => format!("stop {}", grace.as_millis()),
            Command::Kill => "kill".to_string(),
        }
    }

    /// A command line; `None` for anything else.
    pub fn parse(line: &str) -> Option<Command> {
        match line.split_once(' ') {
            Some(("stop", ms)) => ms.parse().ok().map(|ms| Command::Stop {
                grace: Duration::from_millis(ms),
            }),
            None if line == "kill" => Some(Command::Kill),
            _ => None,
        }
    }
}

/// What the supervisor tells the gate.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// The serve runs, with this process id (also its process group id).
    Spawned(u32),
    /// The serve could not be started: the OS error number (0 if none) and the error.
    SpawnFailed {
        /// errno, or 0.
        errno: i32,
        /// The error as text.
        message: String,
    },
    /// The serve exited, with this wait status (as `waitpid` reports it).
    Exited(i32),
    /// The serve's group is gone; this many processes that left it are being stopped.
    Escapees(usize),
    /// The stop is done; everything is reaped and the supervisor exits next.
    Stopped(StopRecord),
}

impl Event {
    /// The event as a line (without the newline).
    pub fn to_line(&self) -> String {
        match self {
            Event::Spawned(pid) => format!("spawned {pid}"),
            Event::SpawnFailed { errno, message } => {
                format!("spawn-failed {errno} {}", message.replace('\n', " "))
            }
            Event::Exited(status) => format!("exited {status}"),
            Event::Escapees(n) => format!("escapees {n}"),
            Event::Stopped(record) => format!(
                "stopped {}",
                serde_json::to_string(record).unwrap_or_default()
            ),
        }
    }

    /// An event line; `None` for anything else.
    pub fn parse(line: &str) -> Option<Event> {
        let (word, rest) = line.split_once(' ')?;
        match word {
            "spawned" => rest.parse().ok().map(Event::Spawned),
            "spawn-failed" => {
                let (errno, message) = rest.split_once(' ').unwrap_or((rest, ""));
                Some(Event::SpawnFailed {
                    errno: errno.parse().ok()?,
                    message: message.to_string(),
                })
            }
            "exited" => rest.parse().ok().map(Event::Exited),
            "escapees" => rest.parse().ok().map(Event::Escapees),
            "stopped" => serde_json::from_str(rest).ok().map(Event::Stopped),
            _ => None,
        }
    }
}

/// Send `sig` to `p` and to no other process: through a pidfd, which pins one process, after
/// checking it is the one seen (a pid that exited and was reused since is left alone).
pub(crate) fn signal_exact(p: &ProcStat, sig: Signal) {
    let same = || proc_stat(p.pid).is_some_and(|s| s.start == p.start);
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, p.pid, 0) };
    if fd >= 0 {
        // SAFETY: the kernel just returned this descriptor; nothing else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
        if same() {
            // SAFETY: a pidfd we own, a valid signal number, no siginfo, no flags.
            unsafe {
                libc::syscall(
                    libc::SYS_pidfd_send_signal,
                    fd.as_raw_fd(),
                    sig as libc::c_int,
                    std::ptr::null::<libc::siginfo_t>(),
                    0,
                );
            }
        }
    } else if Errno::last() == Errno::ENOSYS && same() {
        // Kernels before 5.3 have no pidfd: the start-time check narrows the race to
        // microseconds.
        let _ = nix::sys::signal::kill(Pid::from_raw(p.pid), sig);
    }
}

/// A raw wait status, as `waitpid(2)` reports it, from nix's decoding.
pub(crate) fn raw_status(status: WaitStatus) -> Option<i32> {
    match status {
        WaitStatus::Exited(_, code) => Some((code & 0xff) << 8),
        WaitStatus::Signaled(_, sig, core) => Some(sig as i32 | if core { 0x80 } else { 0 }),
        _ => None,
    }
}

/// The status as std shows it, e.g. `exit status: 3`, `signal: 9 (SIGKILL)`.
pub fn status_text(raw: i32) -> String {
    use std::os::unix::process::ExitStatusExt;
    std::process::ExitStatus::from_raw(raw).to_string()
}

/// Run as the supervisor: start the serve, report, and stop it as told or when the gate goes.
/// Exits 0 in every case the gate can act on (it reads what happened from the events).
/// Make this process non-dumpable (PR_SET_DUMPABLE 0): its /proc/PID/fd, mem and environ are
/// then the kernel's, not its user's, so a serve run as the same user (a pull request's build
/// on a self-hosted runner) cannot write `RESULT: PASS` into the gate's stdout through
/// /proc/PID/fd/1, nor read or write its memory. The supervisor does the same (exec makes a
/// process dumpable again). A kernel that refuses leaves the gate as it was: it is a guard, not
/// a condition of the run.
pub fn not_reachable_through_proc() {
    let _ = nix::sys::prctl::set_dumpable(false);
}

pub fn run(args: SuperviseArgs) -> Result<u8> {
    // Before anything can fail: the serve must not inherit the hold or another copy of its log.
    let log = adopt_fd(args.log_fd, "--log-fd")?;
    let _hold = args
        .hold_fd
        .map(|fd| adopt_fd(fd, "--hold-fd"))
        .transpose()?;
    let log = File::from(log);
    for sig in IGNORED {
        // SAFETY: SIG_IGN installs no handler code.
        unsafe { nix::sys::signal::signal(sig, SigHandler::SigIgn) }
            .context("failed to ignore the interrupting signals")?;
    }
    nix::sys::prctl::set_child_subreaper(true).context("failed to become a child subreaper")?;
    // Its stderr is the gate's: not the serve's to write through /proc/PID/fd/2.
    not_reachable_through_proc();
    // SIGCHLD through a descriptor, so one poll waits for the gate and for the serve. A
    // blocked signal stays blocked across fork and exec: the serve's pre_exec unblocks it.
    let mut chld = SigSet::empty();
    chld.add(Signal::SIGCHLD);
    chld.thread_block().context("failed to block SIGCHLD")?;
    let sigchld = SignalFd::with_flags(&chld, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)
        .context("failed to make a signalfd")?;

    let serve = match spawn_serve(&args.serve, &log) {
        Ok(pid) => pid,
        Err(e) => {
            report(&Event::SpawnFailed {
                errno: e.raw_os_error().unwrap_or(0),
                message: e.to_string(),
            });
            return Ok(0);
        }
    };
    drop(log);
    report(&Event::Spawned(serve.as_raw() as u32));
    let mut sup = Supervisor {
        me: std::process::id() as i32,
        serve,
        status: None,
        sigchld,
        input: Vec::new(),
        pending: Vec::new(),
        gate_gone: false,
        cut: false,
    };
    loop {
        sup.wake(None);
        if sup.gate_gone {
            sup.kill_tree(GONE_WAIT);
            return Ok(0);
        }
        if let Some(command) = sup.pending.pop() {
            let grace = match command {
                Command::Stop { grace } => grace,
                Command::Kill => {
                    sup.cut = true;
                    Duration::ZERO
                }
            };
            let record = sup.stop(grace);
            if sup.gate_gone {
                sup.kill_tree(GONE_WAIT);
                return Ok(0);
            }
            report(&Event::Stopped(record));
            return Ok(0);
        }
    }
}

/// Take over an inherited descriptor, marking it close-on-exec so the serve does not get it.
fn adopt_fd(fd: RawFd, flag: &str) -> Result<OwnedFd> {
    if fd < 3 {
        bail!("{flag} {fd} is one of the standard descriptors");
    }
    // SAFETY: F_SETFD on a number only fails (EBADF) when no descriptor has it.
    if unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) } < 0 {
        bail!("{flag} {fd} is not an open descriptor");
    }
    // SAFETY: the descriptor is open (checked above) and the gate handed it to this process
    // alone; nothing else here owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The serve's program and argv as exec takes them, made before fork: the child only reads them.
struct ExecArgs {
    path: CString,
    _args: Vec<CString>,
    ptrs: Vec<*const libc::c_char>,
    /// `/bin/sh PATH ARGS...`, for a file that is not a binary and has no `#!` line: the shell
    /// runs it, as execvp would.
    sh: CString,
    sh_ptrs: Vec<*const libc::c_char>,
    /// The file starts as an ELF binary: ENOEXEC means the kernel cannot run it here (another
    /// architecture, a broken file), and is the error to report.
    elf: bool,
}

// SAFETY: the pointers point into `_args`, owned alongside and never changed; the child reads
// them between fork and exec, and nothing else does.
unsafe impl Send for ExecArgs {}
// SAFETY: as above: read-only.
unsafe impl Sync for ExecArgs {}

impl ExecArgs {
    fn new(argv: &[String]) -> std::io::Result<ExecArgs> {
        let program = argv
            .first()
            .ok_or_else(|| std::io::Error::other("the serve command is empty"))?;
        // As execvp finds it, but run by execv below: execvp hands a file the kernel cannot
        // run (ENOEXEC: another architecture's binary) to /bin/sh, which hides the error.
        let path = if program.contains('/') {
            std::path::PathBuf::from(program)
        } else {
            crate::live::exec_path::on_path(program)
                .ok_or_else(|| std::io::Error::from_raw_os_error(libc::ENOENT))?
        };
        let nul = |_| std::io::Error::other("the serve command has a NUL byte");
        let path = CString::new(path.into_os_string().into_vec()).map_err(nul)?;
        let args = argv
            .iter()
            .map(|a| CString::new(a.as_bytes()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(nul)?;
        let mut head = [0u8; 4];
        let elf = File::open(std::ffi::OsStr::from_bytes(path.as_bytes()))
            .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head))
            .is_ok()
            && head == *b"\x7fELF";
        let mut ptrs: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
        ptrs.push(std::ptr::null());
        let sh = CString::new("/bin/sh").map_err(nul)?;
        let mut sh_ptrs = vec![sh.as_ptr(), path.as_ptr()];
        sh_ptrs.extend(args.iter().skip(1).map(|a| a.as_ptr()));
        sh_ptrs.push(std::ptr::null());
        Ok(ExecArgs {
            path,
            _args: args,
            ptrs,
            sh,
            sh_ptrs,
            elf,
        })
    }

    /// execv(2): returns only when it failed, with why. Async-signal-safe.
    fn exec(&self) -> std::io::Error {
        // SAFETY: NUL-terminated paths and null-terminated arrays of NUL-terminated strings,
        // all owned by `self`.
        unsafe {
            libc::execv(self.path.as_ptr(), self.ptrs.as_ptr());
            let error = std::io::Error::last_os_error();
            if error.raw_os_error() != Some(libc::ENOEXEC) || self.elf {
                return error;
            }
            libc::execv(self.sh.as_ptr(), self.sh_ptrs.as_ptr());
        }
        std::io::Error::last_os_error()
    }
}

/// Start the serve in a process group of its own, its output in `log`, stdin empty, the
/// interrupting signals at their defaults and none blocked, killed (PDEATHSIG) if this process
/// dies. An exec that fails comes back as its OS error (ENOENT, EACCES, ENOEXEC).
fn spawn_serve(argv: &[String], log: &File) -> std::io::Result<Pid> {
    let exec = ExecArgs::new(argv)?;
    let supervisor = nix::unistd::getpid();
    let mut cmd = std::process::Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log.try_clone()?)
        .process_group(0);
    // SAFETY: between fork and exec only async-signal-safe calls: sigaction, sigprocmask,
    // prctl, getppid, execv.
    unsafe {
        cmd.pre_exec(move || {
            for sig in IGNORED {
                nix::sys::signal::signal(sig, SigHandler::SigDfl)?;
            }
            nix::sys::signal::sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None)?;
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?;
            // The supervisor may have died between fork and prctl; then nothing would kill us.
            if nix::unistd::getppid() != supervisor {
                return Err(std::io::Error::other(
                    "the supervisor exited while starting the serve",
                ));
            }
            // Returns only on failure; std then reports the error from spawn().
            Err(exec.exec())
        });
    }
    // The child is reaped with waitpid(-1) beside everything adopted; std's handle is not
    // needed past its pid (dropping it neither kills nor waits).
    let child = cmd.spawn()?;
    Ok(Pid::from_raw(child.id() as i32))
}

/// Write an event to the gate. A gate that is gone cannot read it; its closed command pipe
/// says so next.
fn report(event: &Event) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", event.to_line());
    let _ = out.flush();
}

struct Supervisor {
    me: i32,
    /// The serve's pid, also its process group id.
    serve: Pid,
    /// The serve's raw wait status, once reaped.
    status: Option<i32>,
    sigchld: SignalFd,
    /// Bytes of the command pipe not yet a whole line.
    input: Vec<u8>,
    pending: Vec<Command>,
    /// The command pipe reached EOF: the gate is gone, however it died.
    gate_gone: bool,
    /// A `kill` came or the gate went: every wait still running ends now.
    cut: bool,
}

impl Supervisor {
    /// Sleep until a command, a child's exit or `timeout` (`None`: no timeout); then reap
    /// every exited child and read the commands.
    fn wake(&mut self, timeout: Option<Duration>) {
        let timeout = match timeout {
            None => PollTimeout::NONE,
            Some(t) => PollTimeout::try_from(t).unwrap_or(PollTimeout::MAX),
        };
        let stdin = std::io::stdin();
        let mut ready = false;
        {
            let mut fds = vec![PollFd::new(self.sigchld.as_fd(), PollFlags::POLLIN)];
            // Once at EOF the pipe is always readable: polling it again would spin.
            if !self.gate_gone {
                fds.push(PollFd::new(stdin.as_fd(), PollFlags::POLLIN));
            }
            if poll(&mut fds, timeout).is_ok() {
                ready = fds
                    .get(1)
                    .and_then(PollFd::revents)
                    .is_some_and(|r| !r.is_empty());
            }
        }
        while let Ok(Some(_)) = self.sigchld.read_signal() {}
        self.reap();
        if ready {
            self.read_commands();
        }
    }

    fn read_commands(&mut self) {
        let mut buf = [0u8; 512];
        match nix::unistd::read(std::io::stdin().as_fd(), &mut buf) {
            Ok(0) | Err(Errno::EBADF) => {
                self.gate_gone = true;
                self.cut = true;
            }
            Ok(n) => self.input.extend_from_slice(&buf[..n]),
            Err(_) => {}
        }
        while let Some(end) = self.input.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.input.drain(..=end).collect();
            match Command::parse(String::from_utf8_lossy(&line).trim_end()) {
                Some(Command::Kill) => {
                    self.cut = true;
                    self.pending.insert(0, Command::Kill);
                }
                Some(c) => self.pending.insert(0, c),
                None => {}
            }
        }
        // Only the gate writes here, in short lines; a run-on line is dropped, not buffered.
        if self.input.len() > 4096 {
            self.input.clear();
        }
    }

    /// Reap every child that has exited: the serve, and anything re-parented here. A zombie
    /// left unreaped would still count as a process of the group.
    fn reap(&mut self) {
        loop {
            match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) | Err(Errno::ECHILD) => break,
                Ok(status) => {
                    if status.pid() == Some(self.serve) {
                        if let Some(raw) = raw_status(status) {
                            self.status = Some(raw);
                            report(&Event::Exited(raw));
                        }
                    }
                }
                Err(Errno::EINTR) => {}
                Err(_) => break,
            }
        }
    }

    /// The serve's descendants that still run (zombies are gone already).
    fn tree(&self) -> Vec<ProcStat> {
        descendants(&scan(), self.me)
            .into_iter()
            .filter(ProcStat::running)
            .collect()
    }

    /// The processes of the serve's group that still run.
    fn group(&self) -> Vec<ProcStat> {
        let pgid = self.serve.as_raw();
        self.tree().into_iter().filter(|p| p.pgrp == pgid).collect()
    }

    fn group_alive(&self) -> bool {
        // While the serve is not reaped, it is in its group: no need to read /proc.
        self.status.is_none() || !self.group().is_empty()
    }

    /// Signal the serve's group. While the serve is unreaped its pid, the group's id, cannot
    /// be reused, so killpg is safe; after that, each member is signalled by itself.
    fn signal_group(&self, sig: Signal) {
        if self.status.is_none() {
            let _ = killpg(self.serve, sig);
        } else {
            for p in self.group() {
                signal_exact(&p, sig);
            }
        }
    }

    /// Wait until `done` holds, `deadline` passes or the stop is cut short. True if `done`.
    fn wait_until(&mut self, deadline: Instant, mut done: impl FnMut(&Self) -> bool) -> bool {
        loop {
            if done(self) {
                return true;
            }
            let now = Instant::now();
            if self.cut || now >= deadline {
                return false;
            }
            // While the serve runs its exit wakes us (SIGCHLD); anything else must be looked for.
            let left = deadline - now;
            let nap = if self.status.is_none() {
                left
            } else {
                left.min(TICK)
            };
            self.wake(Some(nap));
        }
    }

    /// Stop the serve: its group (SIGTERM, SIGKILL after `grace`), then what left the group
    /// and still runs (likewise). A `kill` at any point cuts the waits short.
    fn stop(&mut self, grace: Duration) -> StopRecord {
        let mut record = StopRecord::default();
        if !self.cut {
            self.signal_group(Signal::SIGTERM);
            let deadline = Instant::now() + grace;
            self.wait_until(deadline, |s| !s.group_alive());
        }
        if self.group_alive() {
            let serve = self.serve.as_raw();
            record.killed = self.status.is_none();
            record.group_killed = self.group().iter().filter(|p| p.pid != serve).count();
            self.signal_group(Signal::SIGKILL);
            // After SIGKILL the wait runs to its end even when cut: nothing can be faster.
            let deadline = Instant::now() + KILL_WAIT;
            let cut = std::mem::replace(&mut self.cut, false);
            self.wait_until(deadline, |s| !s.group_alive());
            self.cut |= cut;
        }
        let mut escaped: HashSet<(i32, u64)> = HashSet::new();
        let first = self.tree();
        if !first.is_empty() {
            report(&Event::Escapees(first.len()));
            escaped.extend(first.iter().map(|p| (p.pid, p.start)));
            if !self.cut {
                for p in &first {
                    signal_exact(p, Signal::SIGTERM);
                }
                let deadline = Instant::now() + grace;
                self.wait_until(deadline, |s| {
                    let live = s.tree();
                    escaped.extend(live.iter().map(|p| (p.pid, p.start)));
                    live.is_empty()
                });
            }
        }
        record.cut_short = self.cut;
        record.left_running = if self.tree().is_empty() {
            0
        } else {
            self.kill_tree(KILL_WAIT)
        };
        self.reap();
        record.escaped_killed = escaped.len();
        record.exit_status = self.status.map(status_text);
        record
    }

    /// SIGKILL the serve's group and every descendant, reap them, and repeat (killing one may
    /// orphan its children here) until none runs or `limit` passes. How many still run.
    fn kill_tree(&mut self, limit: Duration) -> usize {
        let deadline = Instant::now() + limit;
        loop {
            if self.status.is_none() {
                let _ = killpg(self.serve, Signal::SIGKILL);
            }
            let live = self.tree();
            for p in &live {
                signal_exact(p, Signal::SIGKILL);
            }
            self.reap();
            if live.is_empty() {
                return 0;
            }
            let now = Instant::now();
            if now >= deadline {
                return live.len();
            }
            self.wake(Some((deadline - now).min(TICK)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_and_events_read_back_as_written() {
        for c in [
            Command::Stop {
                grace: Duration::from_millis(10_500),
            },
            Command::Kill,
        ] {
            assert_eq!(Command::parse(&c.to_line()), Some(c));
        }
        assert_eq!(Command::parse("stop soon"), None);
        assert_eq!(Command::parse("killall"), None);
        let record = StopRecord {
            killed: true,
            escaped_killed: 2,
            exit_status: Some("signal: 9 (SIGKILL)".into()),
            ..StopRecord::default()
        };
        for e in [
            Event::Spawned(4242),
            Event::SpawnFailed {
                errno: 2,
                message: "No such file or directory (os error 2)".into(),
            },
            Event::Exited(0x0300),
            Event::Escapees(3),
            Event::Stopped(record),
        ] {
            assert_eq!(Event::parse(&e.to_line()), Some(e));
        }
        // A message on several lines stays one event.
        let e = Event::SpawnFailed {
            errno: 0,
            message: "a\nb".into(),
        };
        assert_eq!(
            Event::parse(&e.to_line()),
            Some(Event::SpawnFailed {
                errno: 0,
                message: "a b".into()
            })
        );
        assert_eq!(Event::parse("exited"), None);
        assert_eq!(Event::parse("stopped {not json"), None);
    }

    #[test]
    fn wait_statuses_read_as_std_shows_them() {
        let pid = Pid::from_raw(1);
        let exited = raw_status(WaitStatus::Exited(pid, 3)).unwrap();
        assert_eq!(status_text(exited), "exit status: 3");
        let killed = raw_status(WaitStatus::Signaled(pid, Signal::SIGKILL, false)).unwrap();
        assert_eq!(status_text(killed), "signal: 9 (SIGKILL)");
    }
}
