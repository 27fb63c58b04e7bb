//! Launching and stopping the serve, and knowing what was launched.
//!
//! The serve is started by the gate's supervisor ([`crate::live::supervise`], the gate's own binary
//! run as `__supervise`), directly (never through a shell), in a process group of its own within
//! the gate's session: `setpgid`, not `setsid`, because a new session would also get its own
//! scheduler autogroup and hide the CPU contention the gate must see. Its stdout and stderr go
//! straight into serve.log, so nothing of the gate sits between the serve and its log.
//!
//! What reaches what: the supervisor is the serve's parent (PR_SET_PDEATHSIG = SIGKILL ties the
//! serve to it) and the child subreaper of everything the serve starts; an orderly stop goes to
//! the serve's group and then to every descendant that left it; when the gate dies, even by
//! SIGKILL, the supervisor kills the serve's whole tree before it exits and lets the hold go.
//! [`ServeProcess`] is the gate's side of it.
//!
//! The gate is the backstop when the supervisor fails it (issue 30: the serve runs as the
//! gate's user and can SIGKILL or SIGSTOP the supervisor): the gate is a child subreaper too,
//! so the supervisor's orphans come to it; it notices the supervisor's death (its event pipe
//! closes without a stop record), its stop (waitid reports it to the parent, even once it was
//! continued) and its silence (no stop record in the time a stop may take), and then kills the
//! supervisor, the serve's group and every process whose ancestry reaches the gate, before the
//! hold goes. The stop record says so; it never guesses what it did not see.

use std::fs::File;
use std::io::Read;
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use nix::fcntl::OFlag;
use nix::libc;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::Signal;
use sha2::{Digest, Sha256};

use crate::archive::record::{BinaryInfo, StopRecord, SupervisorFault, SupervisorLost};
pub(crate) use crate::live::exec_path::on_path;
use crate::live::exec_path::{runnable, Unrunnable};
use crate::live::hold::Hold;
use crate::live::supervise::{self, Event};

pub use crate::archive::record::PORT_PLACEHOLDER;

/// What a program is to the gate, which its errors call it by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The serve (the release candidate).
    Serve,
    /// The `--hold-cmd` program the serve runs under.
    HoldProgram,
}

impl Role {
    fn label(self) -> &'static str {
        match self {
            Role::Serve => "the serve binary",
            Role::HoldProgram => "the hold program",
        }
    }
}

fn canonical(path: &Path) -> Result<PathBuf> {
    std::fs::canonicalize(path).with_context(|| format!("failed to resolve {}", path.display()))
}

/// A program as exec would run it: its resolved path, and for a `#!` script the interpreter.
#[derive(Debug, Clone, PartialEq)]
struct Resolved {
    path: PathBuf,
    interpreter: Option<Box<Resolved>>,
}

/// Linux runs at most this many `#!` scripts in a chain (BINPRM_MAX_RECURSION).
const MAX_SCRIPT_DEPTH: usize = 4;

/// Find `argv0` as exec would (a name with a `/` is a path, any other name is looked up on
/// PATH) and check exec can run it: a file with an execute bit, and for a `#!` script an
/// interpreter that is there and runnable too. `role` says what the errors call it.
pub fn resolve_binary(argv0: &str, role: Role) -> Result<PathBuf> {
    Ok(resolve(argv0, role)?.path)
}

fn resolve(argv0: &str, role: Role) -> Result<Resolved> {
    let label = role.label();
    let path = if argv0.contains('/') {
        match runnable(Path::new(argv0)) {
            Ok(()) => canonical(Path::new(argv0))?,
            Err(why) => bail!("{label} {argv0} {}", why.says()),
        }
    } else {
        let dirs = std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
            .unwrap_or_default();
        let mut found = None;
        for c in dirs.iter().map(|d| d.join(argv0)) {
            match runnable(&c) {
                Ok(()) => {
                    found = Some(canonical(&c)?);
                    break;
                }
                // As execvp: a match without the execute bit is the error, if nothing later runs.
                Err(Unrunnable::NotExecutable) => {
                    bail!(
                        "{label} {} {}",
                        c.display(),
                        Unrunnable::NotExecutable.says()
                    )
                }
                Err(_) => {}
            }
        }
        match found {
            Some(p) => p,
            None => bail!("{label} {argv0} was not found on PATH"),
        }
    };
    let interpreter = interpreter_of(&path, role, 1)?;
    Ok(Resolved { path, interpreter })
}

/// The `#!` line of `path` (without `#!` and the newline), if it starts with one. A file that
/// cannot be read is left to exec to judge.
fn shebang(path: &Path) -> Option<String> {
    let mut head = Vec::with_capacity(256);
    File::open(path)
        .ok()?
        .take(256)
        .read_to_end(&mut head)
        .ok()?;
    let line = head.strip_prefix(b"#!")?;
    let end = line.iter().position(|&b| b == b'\n').unwrap_or(line.len());
    Some(String::from_utf8_lossy(&line[..end]).into_owned())
}

/// What `#!/usr/bin/env ARG` runs: ARG as the kernel passes it (one argument), or with `-S`
/// the first word that is not an option or an assignment.
fn env_target(arg: &str) -> Option<&str> {
    if let Some(words) = arg.strip_prefix("-S") {
        return words
            .split_whitespace()
            .find(|w| !w.starts_with('-') && !w.contains('='));
    }
    (!arg.is_empty() && !arg.starts_with('-') && !arg.contains('=')).then_some(arg)
}

fn interpreter_of(script: &Path, role: Role, depth: usize) -> Result<Option<Box<Resolved>>> {
    let Some(line) = shebang(script) else {
        return Ok(None);
    };
    let line = line.trim_matches(|c| c == ' ' || c == '\t' || c == '\r');
    let (named, arg) = match line.split_once([' ', '\t']) {
        Some((n, a)) => (n, a.trim_matches(|c| c == ' ' || c == '\t')),
        None => (line, ""),
    };
    if named.is_empty() {
        // The kernel refuses it (ENOEXEC) and execvp hands the file to /bin/sh instead.
        return Ok(None);
    }
    let label = role.label();
    let script_name = script.display();
    if depth > MAX_SCRIPT_DEPTH {
        bail!("{label} {script_name} is a #! script whose interpreters are nested more than {MAX_SCRIPT_DEPTH} deep; exec refuses that");
    }
    // The kernel opens the interpreter as named: a relative name is from the working directory.
    if let Err(why) = runnable(Path::new(named)) {
        bail!(
            "{label} {script_name} names the interpreter {named} on its #! line, which {}",
            why.says()
        );
    }
    let mut program = canonical(Path::new(named))?;
    // `#!/usr/bin/env NAME`: the interpreter that matters is the NAME env finds on PATH.
    if program.file_name().is_some_and(|n| n == "env") {
        if let Some(name) = env_target(arg) {
            let target = if name.contains('/') {
                runnable(Path::new(name)).ok().map(|()| PathBuf::from(name))
            } else {
                on_path(name)
            };
            let Some(target) = target else {
                bail!("{label} {script_name} runs {name} through env on its #! line, and {name} was not found on PATH");
            };
            program = canonical(&target)?;
        }
    }
    let interpreter = interpreter_of(&program, role, depth + 1)?;
    Ok(Some(Box::new(Resolved {
        path: program,
        interpreter,
    })))
}

/// Size and sha256 of a file, so an archive says exactly what was gated.
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
        script: None,
        interpreter: None,
    })
}

fn fingerprint_resolved(r: &Resolved) -> Result<BinaryInfo> {
    let mut info = fingerprint(&r.path)?;
    if let Some(i) = &r.interpreter {
        info.interpreter = Some(Box::new(fingerprint_resolved(i)?));
    }
    Ok(info)
}

/// Interpreters whose first argument after their options is the program they run, with the
/// options that mean there is no script file (code on the command line, a module) and those
/// that take the next argument as their value.
struct Interpreter {
    names: &'static [&'static str],
    inline: &'static [&'static str],
    valued: &'static [&'static str],
}

const INTERPRETERS: &[Interpreter] = &[
    Interpreter {
        names: &["python", "pypy"],
        inline: &["-c", "-m"],
        valued: &["-W", "-X"],
    },
    Interpreter {
        names: &["node", "nodejs"],
        inline: &["-e", "--eval", "-p", "--print"],
        valued: &["-r", "--require", "--import", "--loader"],
    },
    Interpreter {
        names: &["sh", "bash", "dash", "zsh", "ksh", "mksh", "ash"],
        inline: &["-c"],
        valued: &["-o", "+o", "-O", "+O"],
    },
    Interpreter {
        names: &["perl"],
        inline: &["-e", "-E"],
        valued: &[],
    },
    Interpreter {
        names: &["ruby"],
        inline: &["-e"],
        valued: &["-I", "-r"],
    },
    Interpreter {
        names: &["php"],
        inline: &["-r"],
        valued: &["-c", "-d", "-z"],
    },
    Interpreter {
        names: &["lua", "luajit"],
        inline: &["-e"],
        valued: &["-l"],
    },
    Interpreter {
        names: &["tclsh", "Rscript"],
        inline: &["-e"],
        valued: &[],
    },
];

/// The interpreter a program name is (`python3.11` is python, `perl5.36` perl), if it is one.
fn interpreter_named(name: &str) -> Option<&'static Interpreter> {
    let bare = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    INTERPRETERS.iter().find(|i| i.names.contains(&bare))
}

/// The script an interpreter is asked to run: the first argument after its options, if that
/// names an existing regular file. None when an option gives the code itself (`-c`, `-e`, `-m`).
fn script_argument<'a>(interpreter: &Interpreter, args: &'a [String]) -> Option<&'a str> {
    let mut args = args.iter();
    while let Some(a) = args.next() {
        let a = a.as_str();
        if a == "--" {
            return args.next().map(String::as_str).filter(|s| is_file(s));
        }
        let option = (a.starts_with('-') || a.starts_with('+')) && a.len() > 1;
        if !option {
            return is_file(a).then_some(a);
        }
        if interpreter.inline.contains(&a) {
            return None;
        }
        // Short options run together (`-uc`, `-xe`): one of them may be code on the command line.
        let short = !a.starts_with("--") && a.len() > 2 && a[1..].chars().all(char::is_alphabetic);
        if short
            && a[1..].chars().any(|c| {
                interpreter
                    .inline
                    .iter()
                    .any(|i| i.len() == 2 && i.ends_with(c))
            })
        {
            return None;
        }
        if interpreter.valued.contains(&a) {
            args.next();
        }
    }
    None
}

fn is_file(path: &str) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file())
}

/// The serve command's program, resolved and fingerprinted, with what it runs: for a `#!`
/// script its interpreter (`interpreter`), for an interpreter started on a script
/// (`python3 serve.py`) the script (`script`). Errors as [`resolve_binary`]'s, before anything
/// starts.
pub fn fingerprint_serve(argv: &[String]) -> Result<BinaryInfo> {
    let argv0 = argv
        .first()
        .ok_or_else(|| anyhow!("the serve command is empty"))?;
    let resolved = resolve(argv0, Role::Serve)?;
    let mut info = fingerprint_resolved(&resolved)?;
    let name_of = |p: &Path| {
        p.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    // The name as typed, then as resolved (`python3` may be a link to `python3.11`).
    let interpreter = interpreter_named(&name_of(Path::new(argv0)))
        .or_else(|| interpreter_named(&name_of(&resolved.path)));
    if let Some(i) = interpreter {
        if let Some(script) = script_argument(i, &argv[1..]) {
            info.script = Some(Box::new(fingerprint(&canonical(Path::new(script))?)?));
        }
    }
    Ok(info)
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

/// How long the supervisor may take to report that the serve started (or could not): exec of
/// the serve is all it does first.
const SPAWN_WAIT: Duration = Duration::from_secs(30);

/// How long the supervisor may take past the stop it was given, before the gate kills it.
const STOP_MARGIN: Duration = Duration::from_secs(20);

/// A running serve, through its supervisor.
#[derive(Debug)]
pub struct ServeProcess {
    supervisor: Child,
    pid: u32,
    /// The command pipe; closing it tells the supervisor the gate is gone.
    commands: Option<File>,
    /// The event pipe, non-blocking, and what was read of it that is not yet a line.
    events: File,
    pending: Vec<u8>,
    exit: Option<ExitStatus>,
    stopped: Option<StopRecord>,
    /// The event pipe reached EOF: the supervisor has exited.
    supervisor_gone: bool,
    /// The grace of the stop, once asked for.
    stopping: Option<Duration>,
    /// When the serve started (clock ticks since boot): its pid names it and no later process.
    serve_start: Option<u64>,
    /// What became of the supervisor, once it failed the gate.
    lost: Option<SupervisorLost>,
    /// A second signal came: whatever is left is killed at once.
    cut: bool,
}

/// What the gate itself killed once its supervisor was gone.
#[derive(Debug, Default)]
struct Sweep {
    /// Processes it sent SIGKILL (the supervisor not counted).
    killed: usize,
    /// Whether the serve itself was one of them.
    serve_killed: bool,
    /// Still running when the sweep gave up.
    left: usize,
}

/// Whether the gate's child `pid` was stopped since last asked (and maybe continued since): the
/// kernel reports a child's stop and continuation to its parent, once each, so a stop that was
/// undone before the gate looked is seen too. Nothing else waits for these reports.
fn was_stopped(pid: u32) -> bool {
    use nix::sys::wait::{waitid, Id, WaitPidFlag, WaitStatus};
    let flags = WaitPidFlag::WSTOPPED | WaitPidFlag::WCONTINUED | WaitPidFlag::WNOHANG;
    matches!(
        waitid(Id::Pid(nix::unistd::Pid::from_raw(pid as i32)), flags),
        Ok(WaitStatus::Stopped(..) | WaitStatus::Continued(..))
    )
}
impl ServeProcess {
    /// Start `argv` under a supervisor, with its output going to `log`; the supervisor keeps
    /// `hold` until the serve's whole tree is gone, and `hold` names it. Returns once the serve
    /// runs (its pid is the serve's own) or could not be started (the OS error, as exec gave
    /// it).
    pub fn spawn(
        argv: &[String],
        log: &File,
        mut hold: Option<&mut Hold>,
    ) -> std::io::Result<ServeProcess> {
        // The supervisor's orphans (the serve, its helpers) come to the gate if the supervisor
        // dies, not to PID 1, where nothing would stop them. A kernel that refuses leaves the
        // gate with what it can still find: the serve's group.
        let _ = nix::sys::prctl::set_child_subreaper(true);
        let (cmd_read, cmd_write) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
        let (event_read, event_write) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
        let log_fd = log.as_raw_fd();
        let hold_fd = hold.as_ref().map(|h| h.as_fd().as_raw_fd());
        // /proc/self/exe runs this very binary, even if its file was replaced since it started.
        let mut cmd = Command::new("/proc/self/exe");
        cmd.arg0("npu-serve-smoke")
            .arg(supervise::SUBCOMMAND)
            .args(["--log-fd", &log_fd.to_string()]);
        if let Some(fd) = hold_fd {
            cmd.args(["--hold-fd", &fd.to_string()]);
        }
        cmd.arg("--")
            .args(argv)
            .stdin(Stdio::from(cmd_read))
            .stdout(Stdio::from(event_write))
            .stderr(Stdio::inherit())
            // Out of the gate's group: a signal to that group (Ctrl-C, `kill -- -PGID`) must
            // not take the supervisor before it has stopped the serve.
            .process_group(0);
        // SAFETY: between fork and exec only fcntl, which is async-signal-safe.
        unsafe {
            cmd.pre_exec(move || {
                for fd in std::iter::once(log_fd).chain(hold_fd) {
                    if libc::fcntl(fd, libc::F_SETFD, 0) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
        let supervisor = cmd.spawn()?;
        // The gate's copies of the supervisor's pipe ends go with the command: the event pipe
        // must reach EOF when the supervisor exits.
        drop(cmd);
        let events = File::from(event_read);
        nix::fcntl::fcntl(&events, nix::fcntl::FcntlArg::F_SETFL(OFlag::O_NONBLOCK))?;
        let mut p = ServeProcess {
            supervisor,
            pid: 0,
            commands: Some(File::from(cmd_write)),
            events,
            pending: Vec::new(),
            exit: None,
            stopped: None,
            supervisor_gone: false,
            stopping: None,
            serve_start: None,
            lost: None,
            cut: false,
        };
        let deadline = Instant::now() + SPAWN_WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                let _ = p.supervisor.kill();
                let _ = p.supervisor.wait();
                return Err(std::io::Error::other(format!(
                    "the serve was not started within {} s",
                    SPAWN_WAIT.as_secs()
                )));
            }
            let mut fds = [PollFd::new(p.events.as_fd(), PollFlags::POLLIN)];
            let _ = poll(
                &mut fds,
                PollTimeout::try_from(left).unwrap_or(PollTimeout::MAX),
            );
            for event in p.read_events() {
                match event {
                    Event::Spawned(pid) => {
                        p.pid = pid;
                        p.serve_start = supervise::proc_stat(pid as i32).map(|s| s.start);
                        if let Some(h) = hold.take() {
                            h.name_supervisor(p.supervisor.id());
                        }
                        return Ok(p);
                    }
                    Event::SpawnFailed { errno, message } => {
                        let _ = p.supervisor.wait();
                        return Err(match errno {
                            0 => std::io::Error::other(message),
                            n => std::io::Error::from_raw_os_error(n),
                        });
                    }
                    _ => {}
                }
            }
            if p.supervisor_gone {
                let status = p.supervisor.wait()?;
                return Err(std::io::Error::other(format!(
                    "the gate's supervisor exited ({status}) before it started the serve"
                )));
            }
        }
    }

    /// The serve's process id (also its process group id).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The supervisor's process id: the subreaper every orphaned descendant of the serve is
    /// reparented to (a daemon that forked twice).
    pub fn supervisor_pid(&self) -> u32 {
        self.supervisor.id()
    }

    /// Read what the supervisor said since last time (never blocks), keeping what it learns.
    fn read_events(&mut self) -> Vec<Event> {
        let mut buf = [0u8; 4096];
        loop {
            match (&self.events).read(&mut buf) {
                Ok(0) => {
                    self.supervisor_gone = true;
                    break;
                }
                Ok(n) => self.pending.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
            // A stop record is a few hundred bytes; anything far longer is not the supervisor.
            if self.pending.len() > 1 << 16 {
                self.pending.clear();
            }
        }
        let mut events = Vec::new();
        while let Some(end) = self.pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=end).collect();
            if let Some(e) = Event::parse(String::from_utf8_lossy(&line).trim_end()) {
                match &e {
                    Event::Exited(raw) => self.exit = Some(ExitStatus::from_raw(*raw)),
                    Event::Stopped(r) => self.stopped = Some(r.clone()),
                    Event::Escapees(n) => eprintln!(
                        "npu-serve-smoke: the serve's process group is gone; stopping {n} process(es) that left it (SIGTERM, SIGKILL after the {} s grace)",
                        self.stopping.unwrap_or_default().as_secs_f64()
                    ),
                    _ => {}
                }
                events.push(e);
            }
        }
        self.watch_supervisor();
        if self.supervisor_gone && self.exit.is_none() && self.pid != 0 {
            // The supervisor is gone without saying the serve ended: the serve, living or dead,
            // is the gate's child now (the gate is a subreaper), and its end is the gate's to read.
            self.reap_serve();
        }
        events
    }

    /// Note the supervisor's loss: dead without its stop record, or stopped.
    fn watch_supervisor(&mut self) {
        if self.lost.is_some() || self.stopped.is_some() || self.pid == 0 {
            return;
        }
        if self.supervisor_gone {
            self.lose(SupervisorFault::Died);
        } else if was_stopped(self.supervisor.id()) {
            self.lose(SupervisorFault::Stopped);
        }
    }

    fn lose(&mut self, what: SupervisorFault) {
        if self.lost.is_none() {
            self.lost = Some(SupervisorLost {
                what,
                before_stop: self.stopping.is_none(),
                status: None,
            });
        }
    }

    /// Reap the serve if it has ended, keeping its status.
    fn reap_serve(&mut self) {
        use nix::sys::wait::{waitpid, WaitPidFlag};
        let pid = nix::unistd::Pid::from_raw(self.pid as i32);
        if let Ok(status) = waitpid(pid, Some(WaitPidFlag::WNOHANG)) {
            if let Some(raw) = supervise::raw_status(status) {
                self.exit = Some(ExitStatus::from_raw(raw));
            }
        }
    }

    /// The exit status, once the serve has exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        if self.exit.is_none() {
            self.read_events();
        }
        self.exit
    }

    /// After a failed reply: whether the serve (where the gate launched one) has exited, its
    /// exit status if so. A dying serve closes its sockets just before the kernel reports its
    /// exit, so this waits half a second for the report.
    pub async fn exit_after_failure(serve: &mut Option<ServeProcess>) -> Option<ExitStatus> {
        match serve.as_mut() {
            Some(p) => p.wait_exit(Duration::from_millis(500)).await,
            None => None,
        }
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

    fn send(&mut self, command: supervise::Command) {
        use std::io::Write;
        if let Some(pipe) = self.commands.as_mut() {
            // A supervisor that is gone cannot hear it; its closed event pipe says so.
            let _ = writeln!(pipe, "{}", command.to_line());
        }
    }

    /// Stop the serve and everything it started: SIGTERM to its group, SIGKILL after `grace`;
    /// then SIGTERM to what left the group and still runs, SIGKILL after `grace`. Returns once
    /// the supervisor has reaped them all and exited. Cancel-safe: dropped midway, the stop
    /// goes on, and [`kill_now`](Self::kill_now) cuts it short.
    pub async fn stop(&mut self, grace: Duration) -> StopRecord {
        if self.stopping.is_none() {
            // A supervisor lost before the stop is not asked for it: it is not trusted with it.
            self.read_events();
            self.stopping = Some(grace);
            if self.lost.is_none() {
                self.send(supervise::Command::Stop { grace });
            }
        }
        self.wait_stopped(grace * 2 + STOP_MARGIN).await
    }

    /// SIGKILL whatever of the serve is left, now: a second signal came.
    pub async fn kill_now(&mut self) -> StopRecord {
        self.cut = true;
        if self.stopped.is_none() && self.lost.is_none() {
            self.send(supervise::Command::Kill);
        }
        self.wait_stopped(STOP_MARGIN).await
    }

    /// Wait for the supervisor's stop record and its exit, at most `limit`. A supervisor that
    /// dies, is stopped or stays silent meanwhile is killed, and the gate kills the serve's tree
    /// itself. Either way, returns once nothing of the tree that the gate can find runs (or the
    /// last SIGKILL's wait is over).
    async fn wait_stopped(&mut self, limit: Duration) -> StopRecord {
        let deadline = Instant::now() + limit;
        loop {
            self.read_events();
            if self.stopped.is_some() || self.lost.is_some() {
                break;
            }
            if Instant::now() >= deadline {
                self.lose(SupervisorFault::Silent);
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if self.lost.is_none() {
            // The supervisor exits right after its record; the hold is free only once it has.
            let until = Instant::now() + supervise::KILL_WAIT;
            while matches!(self.supervisor.try_wait(), Ok(None)) && Instant::now() < until {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            if matches!(self.supervisor.try_wait(), Ok(None)) {
                self.lose(SupervisorFault::Silent);
            }
        }
        self.commands = None;
        let Some(mut record) = self.stopped.clone().filter(|_| self.lost.is_none()) else {
            return self.take_over().await;
        };
        // What the supervisor could not stop (stuck in the kernel) was re-parented to the gate
        // when it exited: one look at /proc, and nothing to do when it stopped everything.
        let sweep = self.sweep().await;
        if sweep.killed > 0 {
            record.gate_killed = sweep.killed;
            record.left_running = sweep.left;
        }
        record
    }

    /// The supervisor failed the gate: kill it (stopped or silent, it cannot be trusted to
    /// act; its orphans come to the gate), then the serve's tree. The record says what the gate
    /// saw and did, and nothing it did not.
    async fn take_over(&mut self) -> StopRecord {
        let mut lost = self.lost.clone().unwrap_or(SupervisorLost {
            what: SupervisorFault::Silent,
            before_stop: self.stopping.is_none(),
            status: None,
        });
        crate::say!(
            "the gate's supervisor of the serve {}: killing the serve's tree itself",
            match lost.what {
                SupervisorFault::Died => "died",
                SupervisorFault::Stopped => "was stopped",
                SupervisorFault::Silent => "did not report the stop in time",
            }
        );
        if matches!(self.supervisor.try_wait(), Ok(None)) {
            // SIGKILL ends a stopped process too.
            let _ = self.supervisor.kill();
        }
        let until = Instant::now() + supervise::KILL_WAIT;
        let mut status = self.supervisor.try_wait();
        while matches!(status, Ok(None)) && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(10)).await;
            status = self.supervisor.try_wait();
        }
        if let (SupervisorFault::Died, Ok(Some(status))) = (lost.what, status) {
            lost.status = Some(status.to_string());
        }
        let sweep = self.sweep().await;
        StopRecord {
            killed: sweep.serve_killed,
            cut_short: self.cut,
            exit_status: self.exit.map(|s| s.to_string()),
            left_running: sweep.left,
            gate_killed: sweep.killed,
            supervisor_lost: Some(lost),
            ..StopRecord::default()
        }
    }

    /// SIGKILL every running process of the serve's group and every process whose ancestry
    /// reaches the gate (the supervisor's tree, and what was re-parented to the gate), reap
    /// what was re-parented here, and repeat (a kill may orphan children here) until none runs
    /// or [`supervise::KILL_WAIT`] passes.
    async fn sweep(&mut self) -> Sweep {
        let me = std::process::id() as i32;
        let supervisor = self.supervisor.id() as i32;
        let serve = self.pid as i32;
        let deadline = Instant::now() + supervise::KILL_WAIT;
        let mut killed = std::collections::HashSet::new();
        let mut sweep = Sweep::default();
        loop {
            let all = supervise::scan();
            // The serve's group id is its pid: trusted while that pid is the serve or nobody
            // (a group id is not reused while the group has members).
            let group_is_serves = serve != 0
                && all
                    .iter()
                    .find(|p| p.pid == serve)
                    .is_none_or(|p| Some(p.start) == self.serve_start);
            let mut targets = supervise::descendants(&all, me);
            for p in &all {
                if group_is_serves && p.pgrp == serve && !targets.iter().any(|t| t.pid == p.pid) {
                    targets.push(*p);
                }
            }
            targets.retain(|p| p.running() && p.pid != me);
            for p in &targets {
                supervise::signal_exact(p, Signal::SIGKILL);
                if p.pid != supervisor && killed.insert((p.pid, p.start)) {
                    sweep.killed += 1;
                    sweep.serve_killed |= p.pid == serve && Some(p.start) == self.serve_start;
                }
            }
            self.reap_adopted(&all, me, supervisor);
            if targets.is_empty() || Instant::now() >= deadline {
                sweep.left = targets.len();
                return sweep;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Reap the zombies re-parented to the gate (the supervisor aside: std reaps it), the
    /// serve's status kept when it is one of them.
    fn reap_adopted(&mut self, all: &[supervise::ProcStat], me: i32, supervisor: i32) {
        use nix::sys::wait::{waitpid, WaitPidFlag};
        for p in all {
            if p.ppid != me || p.pid == supervisor || p.running() {
                continue;
            }
            if let Ok(status) = waitpid(
                nix::unistd::Pid::from_raw(p.pid),
                Some(WaitPidFlag::WNOHANG),
            ) {
                let raw = supervise::raw_status(status);
                if p.pid == self.pid as i32 && self.exit.is_none() {
                    self.exit = raw.map(ExitStatus::from_raw);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

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

    fn executable(path: &Path, text: &str) {
        std::fs::write(path, text).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn binaries_are_resolved_on_path_or_refused() {
        assert!(resolve_binary("sh", Role::Serve).unwrap().is_absolute());
        let e = resolve_binary("no-such-serve-binary-xyz", Role::Serve).unwrap_err();
        assert!(e.to_string().contains("not found on PATH"), "{e}");
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("serve");
        std::fs::write(&f, "x").unwrap();
        let e = resolve_binary(f.to_str().unwrap(), Role::Serve).unwrap_err();
        assert!(e.to_string().contains("not executable"), "{e}");
        let e = resolve_binary(d.path().to_str().unwrap(), Role::Serve).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "the serve binary {} is a directory, not a program",
                d.path().display()
            )
        );
        let e = resolve_binary("/nonexistent/npu-hold", Role::HoldProgram).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the hold program /nonexistent/npu-hold was not found"
        );
        let e = resolve_binary("/dev/null", Role::Serve).unwrap_err();
        assert!(e.to_string().contains("is not a regular file"), "{e}");
    }

    #[test]
    fn a_script_whose_interpreter_cannot_run_is_refused_naming_the_interpreter() {
        let d = tempfile::tempdir().unwrap();
        let script = d.path().join("serve.sh");
        executable(&script, "#!/nonexistent/bin/python9 -u\nprint()\n");
        let e = resolve_binary(script.to_str().unwrap(), Role::Serve).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "the serve binary {} names the interpreter /nonexistent/bin/python9 on its #! line, which was not found",
                script.display()
            )
        );
        let plain = d.path().join("interp");
        std::fs::write(&plain, "").unwrap();
        executable(&script, &format!("#! {}\n", plain.display()));
        std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = resolve_binary(script.to_str().unwrap(), Role::HoldProgram).unwrap_err();
        assert!(
            e.to_string().starts_with("the hold program ")
                && e.to_string().ends_with("which is not executable"),
            "{e}"
        );
        executable(&script, &format!("#!{}\n", d.path().display()));
        let e = resolve_binary(script.to_str().unwrap(), Role::Serve).unwrap_err();
        assert!(
            e.to_string()
                .ends_with("which is a directory, not a program"),
            "{e}"
        );
        executable(&script, "#!/usr/bin/env no-such-interpreter-xyz\n");
        let e = resolve_binary(script.to_str().unwrap(), Role::Serve).unwrap_err();
        assert!(
            e.to_string().ends_with("runs no-such-interpreter-xyz through env on its #! line, and no-such-interpreter-xyz was not found on PATH"),
            "{e}"
        );
        // An interpreter that is a script itself, whose own interpreter is missing.
        executable(&plain, "#!/nonexistent/sh\n");
        executable(&script, &format!("#!{}\n", plain.display()));
        let e = resolve_binary(script.to_str().unwrap(), Role::Serve).unwrap_err();
        assert!(
            e.to_string().contains(&format!(
                "{} names the interpreter /nonexistent/sh",
                plain.display()
            )),
            "{e}"
        );
        // A script that names itself loops: exec refuses it, and so does the gate.
        executable(&script, &format!("#!{}\n", script.display()));
        let e = resolve_binary(script.to_str().unwrap(), Role::Serve).unwrap_err();
        assert!(e.to_string().contains("nested more than 4 deep"), "{e}");
    }

    #[test]
    fn env_runs_its_first_argument_or_with_s_its_first_word() {
        assert_eq!(env_target("python3"), Some("python3"));
        assert_eq!(env_target("-S python3 -u"), Some("python3"));
        assert_eq!(env_target("-S -i PYTHONPATH=x python3"), Some("python3"));
        // Without -S the kernel passes the rest as one argument: env looks for that name.
        assert_eq!(env_target("python3 -u"), Some("python3 -u"));
        assert_eq!(env_target(""), None);
        assert_eq!(env_target("-i"), None);
    }

    #[test]
    fn the_script_of_an_interpreter_is_its_first_argument_after_its_options() {
        let d = tempfile::tempdir().unwrap();
        let script = d.path().join("serve.py");
        std::fs::write(&script, "print()").unwrap();
        let s = script.to_str().unwrap();
        let python = interpreter_named("python3.11").unwrap();
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(script_argument(python, &args(&[s, "--port", "1"])), Some(s));
        assert_eq!(
            script_argument(python, &args(&["-u", "-X", "dev", s])),
            Some(s)
        );
        assert_eq!(script_argument(python, &args(&["-m", "http.server"])), None);
        assert_eq!(script_argument(python, &args(&["-uc", "code", s])), None);
        assert_eq!(script_argument(python, &args(&["--", s])), Some(s));
        assert_eq!(script_argument(python, &args(&["missing.py"])), None);
        let sh = interpreter_named("sh").unwrap();
        assert_eq!(script_argument(sh, &args(&["-c", "exec x", s])), None);
        assert_eq!(
            script_argument(sh, &args(&["-e", "-o", "pipefail", s])),
            Some(s)
        );
        assert!(interpreter_named("perl5.36").is_some());
        assert!(interpreter_named("llama-server").is_none());
    }

    #[test]
    fn a_serve_run_by_an_interpreter_records_the_script_and_a_script_its_interpreter() {
        let d = tempfile::tempdir().unwrap();
        let script = d.path().join("serve.sh");
        executable(&script, "#!/bin/sh\nexit 0\n");
        let argv = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let info = fingerprint_serve(&argv(&["sh", script.to_str().unwrap(), "x"])).unwrap();
        let recorded = info.script.expect("the script is fingerprinted");
        assert_eq!(recorded.sha256, fingerprint(&script).unwrap().sha256);
        assert!(info.interpreter.is_none());
        let info = fingerprint_serve(&argv(&[script.to_str().unwrap()])).unwrap();
        assert_eq!(
            info.path,
            script.canonicalize().unwrap().display().to_string()
        );
        let interpreter = info.interpreter.expect("the interpreter is fingerprinted");
        assert_eq!(
            interpreter.path,
            Path::new("/bin/sh")
                .canonicalize()
                .unwrap()
                .display()
                .to_string()
        );
        assert!(info.script.is_none());
        let info =
            fingerprint_serve(&argv(&["sh", "-c", "exit 0", script.to_str().unwrap()])).unwrap();
        assert!(
            info.script.is_none(),
            "code on the command line is no script"
        );
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
