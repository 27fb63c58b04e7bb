//! Helpers shared by the integration tests.

use std::cell::Cell;
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

/// The bound on a wait for something that must happen (a process gone, a hold free, a file
/// present, a line said): wide enough that only its never happening can pass it, so its expiry
/// is a failure that says what did not happen, never a figure of the box's speed. Longer than
/// the supervisor's 30 s `GONE_WAIT`, so a supervisor that gives up on a process and releases
/// the hold is caught by the order of events (the hold free while the process ran), not by this.
pub const LONG: Duration = Duration::from_secs(60);

/// Floors no timing can flip: plumbing tests must not fail because the box was slow.
pub const UNFLIPPABLE: [&str; 4] = ["--floor", "0", "--first-token-ms", "600000"];

/// Tests that run gates share this lock; timing-sensitive tests (the self-test, llama-server)
/// take it alone, so they are not measured against this suite's own load on a 2-core box.
static GATES: RwLock<()> = RwLock::new(());

thread_local! {
    /// Claims this test's thread holds. A thread takes the lock once: a second read lock on
    /// the same thread would deadlock behind a waiting writer.
    static CLAIMS: Cell<usize> = const { Cell::new(0) };
}

/// This thread's claim on the box: shared or alone. Nested claims hold nothing more.
pub struct Claim {
    _guard: Option<Guard>,
}

enum Guard {
    Shared(#[allow(dead_code)] RwLockReadGuard<'static, ()>),
    Alone(#[allow(dead_code)] RwLockWriteGuard<'static, ()>),
}

impl Claim {
    fn shared() -> Claim {
        let held = CLAIMS.get();
        CLAIMS.set(held + 1);
        Claim {
            _guard: (held == 0)
                .then(|| Guard::Shared(GATES.read().unwrap_or_else(|e| e.into_inner()))),
        }
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        CLAIMS.set(CLAIMS.get() - 1);
    }
}

/// The gate binary, ready for arguments, holding a claim on the box while it lives.
pub struct Gate {
    cmd: Command,
    _claim: Claim,
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
        _claim: Claim::shared(),
    }
}

/// The box to this test alone, until the claim drops. Take it before starting any gate.
pub fn exclusive() -> Claim {
    assert_eq!(CLAIMS.get(), 0, "take the box alone before starting gates");
    CLAIMS.set(1);
    Claim {
        _guard: Some(Guard::Alone(
            GATES.write().unwrap_or_else(|e| e.into_inner()),
        )),
    }
}

/// A fresh temporary directory and a run directory path inside it (not yet created).
pub fn scratch() -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("run");
    (d, out)
}

/// Run the gate on the stand-in with a script; exit code and stdout.
pub fn stand_in_run(
    out: &std::path::Path,
    gate_args: &[&str],
    script: &[&str],
) -> (Option<i32>, String) {
    stand_in_run_held_to(out, &UNFLIPPABLE, gate_args, script)
}

/// Run the gate on the stand-in held to `floors` (instead of [`UNFLIPPABLE`]), with a script;
/// exit code and stdout.
pub fn stand_in_run_held_to(
    out: &std::path::Path,
    floors: &[&str],
    gate_args: &[&str],
    script: &[&str],
) -> (Option<i32>, String) {
    let o = gate()
        .args(["run", "--stand-in", "--out"])
        .arg(out)
        .args(floors)
        .args(gate_args)
        .arg("--")
        .args(script)
        .output()
        .unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
    )
}

/// Hold a result.json to docs/result-schema.json with check-jsonschema (from
/// `tools/install-report-tools.sh`), as a CI reading it would; skipped without the tool
/// outside CI.
pub fn check_result_schema(path: &Path) {
    let Some(tool) = std::env::var_os("CHECK_JSONSCHEMA") else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CHECK_JSONSCHEMA must name check-jsonschema in CI: eval \"$(tools/install-report-tools.sh)\""
        );
        return;
    };
    let schema = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/result-schema.json");
    let o = std::process::Command::new(tool)
        .arg("--schemafile")
        .arg(&schema)
        .arg(path)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{} does not follow docs/result-schema.json: {}{}",
        path.display(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Read a JSON file. Every result.json read is also held to its schema.
/// The figures of `check`'s line in a result.json read with [`json`].
pub fn line_figures(result: &Value, check: &str) -> Value {
    result["lines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["check"] == check)
        .unwrap_or_else(|| panic!("no {check} line in {result}"))["figures"]
        .clone()
}

pub fn json(path: &Path) -> Value {
    if path.file_name().is_some_and(|n| n == "result.json") {
        check_result_schema(path);
    }
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

/// A gate started in the background, for tests that signal it mid-run. Killed when dropped.
pub struct Running {
    child: Child,
    stderr: std::sync::mpsc::Receiver<String>,
    /// Everything it wrote to stderr so far.
    pub said: String,
    _claim: Claim,
}

impl Running {
    /// Start `npu-serve-smoke <args>`.
    pub fn start<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Running {
        let claim = Claim::shared();
        let mut child = std::process::Command::new(BIN)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Running {
            child,
            stderr: rx,
            said: String::new(),
            _claim: claim,
        }
    }

    /// Its process id.
    pub fn pid(&self) -> nix::unistd::Pid {
        nix::unistd::Pid::from_raw(self.child.id() as i32)
    }

    /// Wait (bounded) until it says something containing `text` on stderr.
    pub fn wait_to_say(&mut self, text: &str, limit: Duration) {
        let start = Instant::now();
        while !self.said.contains(text) {
            let left = limit.saturating_sub(start.elapsed());
            match self.stderr.recv_timeout(left) {
                Ok(line) => {
                    self.said.push_str(&line);
                    self.said.push('\n');
                }
                Err(_) => panic!(
                    "it did not say {text:?} within {limit:?}; it said:\n{}",
                    self.said
                ),
            }
        }
    }

    /// The URL a stand-in says it listens on, waited for (bounded by `limit`).
    pub fn stand_in_url(&mut self, limit: Duration) -> String {
        const SAYS: &str = "stand-in: listening on ";
        self.wait_to_say(SAYS, limit);
        self.said
            .lines()
            .find_map(|l| l.strip_prefix(SAYS))
            .expect("said just now")
            .to_string()
    }

    /// Send it a signal.
    pub fn signal(&self, sig: nix::sys::signal::Signal) {
        nix::sys::signal::kill(self.pid(), sig).unwrap();
    }

    /// Whether it has exited (without waiting).
    pub fn exited(&mut self) -> bool {
        self.child.try_wait().unwrap().is_some()
    }

    /// Wait (bounded) for it to exit; its exit code (`None` if killed by a signal).
    pub fn wait(&mut self, limit: Duration) -> Option<i32> {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                while let Ok(line) = self.stderr.recv_timeout(Duration::from_millis(200)) {
                    self.said.push_str(&line);
                    self.said.push('\n');
                }
                return status.code();
            }
            assert!(
                start.elapsed() < limit,
                "it did not exit within {limit:?}; it said:\n{}",
                self.said
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Wait (bounded) until `path` exists.
pub fn wait_for_file(path: &Path, limit: Duration) {
    let start = Instant::now();
    while !path.exists() {
        assert!(
            start.elapsed() < limit,
            "{} did not appear within {limit:?}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Wait (bounded) until the run in `out` has archived a reply: replies.jsonl holds a whole
/// line. (The file itself is there from the start: the gate creates it with run.json.)
pub fn wait_for_a_reply(out: &Path, limit: Duration) {
    let path = out.join("replies.jsonl");
    let start = Instant::now();
    while !std::fs::read(&path).is_ok_and(|b| b.contains(&b'\n')) {
        assert!(
            start.elapsed() < limit,
            "no reply in {} within {limit:?}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Wait (bounded) until run.json names the serve's pid; the pid.
pub fn wait_for_serve_pid(out: &Path, limit: Duration) -> i32 {
    let start = Instant::now();
    loop {
        if let Ok(text) = std::fs::read_to_string(out.join("run.json")) {
            if let Ok(v) = serde_json::from_str::<Value>(&text) {
                if let Some(pid) = v["serve_pid"].as_i64() {
                    return pid as i32;
                }
            }
        }
        assert!(
            start.elapsed() < limit,
            "run.json named no serve_pid within {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether process `pid` is alive and running the stand-in (not gone, not a zombie).
pub fn stand_in_alive(pid: i32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|c| String::from_utf8_lossy(&c).contains("stand-in"))
        .unwrap_or(false)
}

/// Whether the hold on `path` is free: this process can take it at once (and lets it go).
pub fn hold_is_free(path: &Path) -> bool {
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .unwrap();
    nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock).is_ok()
}

/// Wait (bounded by [`LONG`]) until a gate holding `hold` has named itself and its supervisor
/// in the hold file; the holder. The text is not rewritten after that until the release, so a
/// waiter started now names this holder, never the empty file between two writes.
pub fn wait_for_supervised_holder(hold: &Path) -> npu_serve_smoke::live::hold::Holder {
    let start = Instant::now();
    loop {
        match npu_serve_smoke::live::hold::current_holder(hold) {
            Some(h) if h.supervisor.is_some() => return h,
            h => assert!(
                start.elapsed() < LONG,
                "no holder named itself and its supervisor in {} within {LONG:?}: {h:?}",
                hold.display()
            ),
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Wait (bounded by [`LONG`]) until the hold on `path` is free, for a test that held it itself:
/// not at once after its own release, since a child another test forks meanwhile holds a copy
/// of every open file, the lock's too, until it execs.
pub fn wait_for_free_hold(path: &Path) {
    let start = Instant::now();
    while !hold_is_free(path) {
        assert!(
            start.elapsed() < LONG,
            "the hold on {} was not free within {LONG:?}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The verdict's lines of `stdout`, without the gate's progress.
pub fn verdict_lines(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter(|l| !l.starts_with("npu-serve-smoke:"))
        .map(str::to_string)
        .collect()
}

/// `judge DIR`'s verdict lines.
pub fn gate_judge_lines(dir: &Path) -> Vec<String> {
    let o = gate().arg("judge").arg(dir).output().unwrap();
    verdict_lines(&String::from_utf8_lossy(&o.stdout))
}

/// The most heap the gate may take in a test of a read without end (issue 30), MiB: its
/// RLIMIT_DATA, so a read of /dev/zero or a 2 GiB file fails the test with an abort rather than
/// passing slowly. A refused input takes a few MiB.
pub const HEAP_CAP_MIB: u64 = 128;

/// The gate binary with its heap capped at [`HEAP_CAP_MIB`] and a 60 s bound, and the claim
/// on the box it needs, kept alive together.
pub fn gate_with_heap_cap() -> (assert_cmd::Command, Gate) {
    use std::os::unix::process::CommandExt;
    let claim = gate();
    let mut cmd = std::process::Command::new(BIN);
    // SAFETY: setrlimit is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let most = HEAP_CAP_MIB << 20;
            nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_DATA, most, most)
                .map_err(std::io::Error::from)
        });
    }
    let mut cmd = assert_cmd::Command::from_std(cmd);
    cmd.timeout(Duration::from_secs(60));
    (cmd, claim)
}

/// Run directories beside `good` (a run directory) under `parent`, each with `good`'s run.json
/// and a replies.jsonl the loader must refuse without reading it (issue 30): a link to
/// /dev/zero, a FIFO, and a sparse file past the 256 MiB cap. Each with what the refusal says.
pub fn archives_with_unreadable_replies(
    parent: &Path,
    good: &Path,
) -> Vec<(PathBuf, &'static str)> {
    let make = |name: &str| {
        let dir = parent.join(name);
        std::fs::create_dir(&dir).unwrap();
        std::fs::copy(good.join("run.json"), dir.join("run.json")).unwrap();
        dir
    };
    let zero = make("replies-dev-zero");
    std::os::unix::fs::symlink("/dev/zero", zero.join("replies.jsonl")).unwrap();
    let fifo = make("replies-fifo");
    nix::unistd::mkfifo(&fifo.join("replies.jsonl"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    let sparse = make("replies-sparse");
    std::fs::File::create(sparse.join("replies.jsonl"))
        .unwrap()
        .set_len(2 << 30)
        .unwrap();
    vec![
        (zero, "replies.jsonl is a character device, not a file"),
        (fifo, "replies.jsonl is a FIFO, not a file"),
        (
            sparse,
            "replies.jsonl is 2147483648 bytes, more than the 268435456",
        ),
    ]
}

/// Make `dir` an archive from before digests: its run.json without `digests`, so its files,
/// edited by a test, are judged as they are (issue 30).
pub fn forget_digests(dir: &Path) {
    let path = dir.join("run.json");
    let mut manifest = json(&path);
    manifest
        .as_object_mut()
        .unwrap()
        .remove("digests")
        .expect("a run.json the gate sealed holds digests");
    std::fs::write(&path, manifest.to_string()).unwrap();
}

/// `file` with every `from` made `to`, as a file of the same name in a fresh temporary
/// directory: a broken copy for a linter to refuse. Panics if `from` is not in it (the copy
/// would not be broken).
pub fn edited_copy(file: &Path, from: &str, to: &str) -> (tempfile::TempDir, PathBuf) {
    let text = std::fs::read_to_string(file).unwrap();
    let edited = text.replace(from, to);
    assert_ne!(edited, text, "{from:?} is not in {}", file.display());
    let d = tempfile::tempdir().unwrap();
    let copy = d.path().join(file.file_name().unwrap());
    std::fs::write(&copy, edited).unwrap();
    (d, copy)
}

/// The lines that make bash complete `npu-serve-smoke WORDS<TAB>` with the completion function
/// `function`, as bash does on TAB (COMP_WORDS, COMP_CWORD, the function called with the
/// command, the word and the one before), then print COMPREPLY a line each.
pub fn bash_tab(function: &str, words: &[&str]) -> String {
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let previous = if words.len() > 1 {
        words[words.len() - 2]
    } else {
        "npu-serve-smoke"
    };
    format!(
        "COMP_WORDS=(npu-serve-smoke {})\nCOMP_CWORD={}\n\
         {function} npu-serve-smoke '{}' '{previous}'\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"\n",
        quoted.join(" "),
        words.len(),
        words[words.len() - 1],
    )
}

/// Every `.rs` file under `dir`, in name order (tests/layers.rs and tests/house.rs read src/).
pub fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("failed to read {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
}

/// The report tools named by the environment variables `vars` (set by
/// `eval "$(tools/install-report-tools.sh)"`), in their order; `None` (the test skips) outside
/// CI, a panic in CI, where a skipped consumer would be a check that cannot fail.
pub fn report_tools(vars: &[&str]) -> Option<Vec<PathBuf>> {
    let found: Vec<Option<PathBuf>> = vars
        .iter()
        .map(|v| std::env::var_os(v).map(PathBuf::from))
        .collect();
    if found.iter().all(Option::is_some) {
        return Some(found.into_iter().flatten().collect());
    }
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!(
            "{} must name the report tools in CI: eval \"$(tools/install-report-tools.sh)\"",
            vars.join(" and ")
        );
    }
    eprintln!("skipped: no report tools (run: eval \"$(tools/install-report-tools.sh)\")");
    None
}
