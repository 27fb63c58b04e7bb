//! The stand-in's route evidence (issue 17, item 6), read as the gate will read it: from the
//! real /proc of a real stand-in process. `--map-file` must be in /proc/PID/maps,
//! `--hold-open` among the links of /proc/PID/fd, `--held-pos-per-token` must move `pos:` in
//! /proc/PID/fdinfo/FD by tokens x N, and `--busy-counter` must grow, whole, as replies stream.
//! With `--wrap` all of it is in the launched process's child, not in the process itself.
//! No gate flags are used: the gate's readers of this evidence come later.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::util::{gate, stand_in_alive, Running};

/// Bound on every wait here: wide, so a loaded 2-core box cannot flip a test.
const WAIT: Duration = Duration::from_secs(20);

/// Files for the stand-in to map, hold and count in, in a fresh directory.
struct Files {
    _dir: tempfile::TempDir,
    model: PathBuf,
    accel: PathBuf,
    busy: PathBuf,
}

impl Files {
    fn new(busy_start: &str) -> Files {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let model = root.join("model.gguf");
        std::fs::write(&model, b"weights").unwrap();
        let accel = root.join("accel0");
        std::fs::write(&accel, b"").unwrap();
        let busy = root.join("npu_busy_time_us");
        std::fs::write(&busy, busy_start).unwrap();
        Files {
            _dir: dir,
            model,
            accel,
            busy,
        }
    }

    fn args<'a>(&'a self, pos_per_token: &'a str) -> Vec<&'a str> {
        vec![
            "--map-file",
            self.model.to_str().unwrap(),
            "--hold-open",
            self.accel.to_str().unwrap(),
            "--held-pos-per-token",
            pos_per_token,
            "--busy-counter",
            self.busy.to_str().unwrap(),
        ]
    }
}

/// `stand-in --port 0 <args>`, started and listening; it and its loopback address.
fn start(args: &[&str]) -> (Running, String) {
    let mut all = vec!["stand-in", "--port", "0"];
    all.extend_from_slice(args);
    let mut s = Running::start(&all);
    s.wait_to_say("stand-in: listening on http://", WAIT);
    let addr = s
        .said
        .lines()
        .find_map(|l| l.strip_prefix("stand-in: listening on http://"))
        .unwrap()
        .to_string();
    (s, addr)
}

/// Whether /proc/PID/maps lists `path`.
fn maps_file(pid: i32, path: &Path) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .unwrap()
        .lines()
        .any(|l| l.ends_with(path.to_str().unwrap()))
}

/// The fd of process `pid` whose /proc/PID/fd link names `path`.
fn fd_of(pid: i32, path: &Path) -> Option<u32> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .flatten()
        .find(|e| std::fs::read_link(e.path()).is_ok_and(|l| l == path))
        .map(|e| e.file_name().to_str().unwrap().parse().unwrap())
}

/// A field of /proc/PID/fdinfo/FD (`pos`, `flags`), as written there.
fn fdinfo(pid: i32, fd: u32, key: &str) -> String {
    let text = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{fd}")).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}:")))
        .unwrap_or_else(|| panic!("no {key} in fdinfo:\n{text}"))
        .trim()
        .to_string()
}

fn pos(pid: i32, fd: u32) -> u64 {
    fdinfo(pid, fd, "pos").parse().unwrap()
}

/// The children of `pid` (its main thread's: the stand-in's wrapper has one thread).
fn children(pid: i32) -> Vec<i32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap()
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect()
}

/// The busy counter's value; the file must be one number and a newline, as a sysfs attribute.
fn counter(path: &Path) -> u64 {
    let text = std::fs::read_to_string(path).unwrap();
    let number = text
        .strip_suffix('\n')
        .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    number
        .unwrap_or_else(|| panic!("{} holds {text:?}", path.display()))
        .parse()
        .unwrap()
}

/// One streamed chat completion over a plain HTTP/1.1 connection, read to its end: the
/// response as text, and how long the request took from before it was sent to the last byte.
fn stream_reply(addr: &str) -> (String, Duration) {
    let body = r#"{"messages":[{"role":"user","content":"hi"}],"stream":true}"#;
    let start = Instant::now();
    let mut conn = TcpStream::connect(addr).unwrap();
    conn.set_read_timeout(Some(WAIT)).unwrap();
    write!(
        conn,
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut text = String::new();
    conn.read_to_string(&mut text).unwrap();
    let took = start.elapsed();
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains("data: [DONE]"), "{text}");
    (text, took)
}

#[test]
fn a_serve_maps_holds_and_counts_in_its_own_proc() {
    let files = Files::new("0\n");
    let mut args = files.args("7");
    // 5 tokens in chunks of 2, 2 and 1: the position moves by tokens, not by chunks.
    args.extend(["--tokens", "5", "--chunk-tokens", "2", "--ttft-ms", "50"]);
    let (s, addr) = start(&args);
    let pid = s.pid().as_raw();
    assert!(
        maps_file(pid, &files.model),
        "{} not in /proc/{pid}/maps",
        files.model.display()
    );
    let fd = fd_of(pid, &files.accel).expect("the --hold-open file is among /proc/PID/fd");
    let flags = u32::from_str_radix(&fdinfo(pid, fd, "flags"), 8).unwrap();
    assert_eq!(flags & 0o3, 0, "opened read-only: {flags:o}");
    assert_ne!(flags & 0o2000000, 0, "opened close-on-exec: {flags:o}");
    assert_eq!(pos(pid, fd), 0);
    assert_eq!(counter(&files.busy), 0);

    let (text, took) = stream_reply(&addr);
    assert_eq!(text.matches(r#""content""#).count(), 3, "{text}");
    assert_eq!(pos(pid, fd), 5 * 7);
    // The reply's span lies inside the client's: at least the scripted first-token wait,
    // at most the whole request as the client saw it.
    let busy = counter(&files.busy);
    assert!(
        (50_000..=took.as_micros() as u64).contains(&busy),
        "{busy} us busy for a reply of {took:?}"
    );

    let (_, took) = stream_reply(&addr);
    assert_eq!(pos(pid, fd), 2 * 5 * 7);
    let again = counter(&files.busy);
    assert!(
        again >= busy + 50_000 && again <= busy + took.as_micros() as u64,
        "{busy} then {again} us after a reply of {took:?}"
    );
}

#[test]
fn the_busy_counter_counts_on_from_its_file_and_is_never_seen_half_written() {
    let files = Files::new("1000000\n");
    let mut args = files.args("1");
    args.extend(["--tokens", "40", "--ttft-ms", "20", "--gaps-ms", "2"]);
    let (_s, addr) = start(&args);
    assert_eq!(counter(&files.busy), 1_000_000);
    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let (done, busy) = (done.clone(), files.busy.clone());
        std::thread::spawn(move || {
            // Every read is a whole number (counter() panics on anything else), never smaller
            // than the one before.
            let mut seen = vec![counter(&busy)];
            let start = Instant::now();
            while !done.load(Ordering::Relaxed) && start.elapsed() < WAIT {
                let now = counter(&busy);
                assert!(
                    now >= *seen.last().unwrap(),
                    "went back: {seen:?} then {now}"
                );
                if now != *seen.last().unwrap() {
                    seen.push(now);
                }
            }
            seen
        })
    };
    let (_, took) = stream_reply(&addr);
    done.store(true, Ordering::Relaxed);
    let seen = reader.join().unwrap();
    let end = counter(&files.busy);
    assert!(end >= *seen.last().unwrap(), "{seen:?} then {end}");
    assert!(
        end >= 1_000_000 + 20_000 && end <= 1_000_000 + took.as_micros() as u64,
        "{end} us after a reply of {took:?} from 1000000"
    );
    // Only the counter is left: every temporary file was renamed over it.
    let left: Vec<_> = std::fs::read_dir(files.busy.parent().unwrap())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(left.len(), 3, "{left:?}");
}

#[test]
fn a_map_exec_file_is_mapped_as_code_and_a_map_file_as_data() {
    // Issue 30: the gate counts only an executable mapping as a library, so the stand-in must
    // be able to make both kinds.
    let files = Files::new("0\n");
    let code = files.model.with_file_name("libcode.so");
    std::fs::write(&code, b"\x7fELF").unwrap();
    let (s, _addr) = start(&[
        "--map-file",
        files.model.to_str().unwrap(),
        "--map-exec",
        code.to_str().unwrap(),
    ]);
    let maps = std::fs::read_to_string(format!("/proc/{}/maps", s.pid().as_raw())).unwrap();
    let perms = |path: &Path| -> Vec<&str> {
        maps.lines()
            .filter(|l| l.ends_with(path.to_str().unwrap()))
            .filter_map(|l| l.split_whitespace().nth(1))
            .collect()
    };
    assert_eq!(perms(&code), ["r-xp"], "{maps}");
    assert_eq!(perms(&files.model), ["r--p"], "{maps}");
}

/// Kills stand-ins a test started indirectly if it fails before they are gone.
struct Reap(Vec<i32>);

impl Drop for Reap {
    fn drop(&mut self) {
        for &pid in &self.0 {
            if stand_in_alive(pid) {
                let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), Signal::SIGKILL);
            }
        }
    }
}

/// Start `stand-in --wrap <args>`; the wrapper, its address, and its one child's pid.
fn start_wrapped(args: &[&str]) -> (Running, String, Reap) {
    let mut all = vec!["--wrap"];
    all.extend_from_slice(args);
    let (s, addr) = start(&all);
    let kids = children(s.pid().as_raw());
    assert_eq!(kids.len(), 1, "the wrapper has one child: {kids:?}");
    (s, addr, Reap(kids))
}

#[test]
fn a_wrapped_serve_leaves_the_evidence_in_its_child_and_term_ends_both() {
    let files = Files::new("0\n");
    let mut args = files.args("3");
    args.extend(["--tokens", "4"]);
    let (mut s, addr, reap) = start_wrapped(&args);
    let (wrapper, child) = (s.pid().as_raw(), reap.0[0]);
    let cmdline = |pid: i32| std::fs::read_to_string(format!("/proc/{pid}/cmdline")).unwrap();
    assert!(cmdline(wrapper).contains("\0--wrap\0"));
    assert!(!cmdline(child).contains("--wrap"), "{:?}", cmdline(child));

    assert!(
        !maps_file(wrapper, &files.model),
        "the wrapper maps nothing"
    );
    assert_eq!(
        fd_of(wrapper, &files.accel),
        None,
        "the wrapper holds nothing"
    );
    assert!(maps_file(child, &files.model));
    let fd = fd_of(child, &files.accel).expect("the child holds the --hold-open file");

    stream_reply(&addr);
    assert_eq!(pos(child, fd), 4 * 3);
    assert!(counter(&files.busy) > 0);

    s.signal(Signal::SIGTERM);
    // The child stops on TERM with status 0, and the wrapper exits as its child did.
    assert_eq!(s.wait(WAIT), Some(0), "{}", s.said);
    assert!(s.said.contains("stand-in: SIGTERM, exiting"), "{}", s.said);
    // The wrapper reaped its child before it exited: no zombie, no orphan.
    assert!(!Path::new(&format!("/proc/{child}")).exists(), "{}", s.said);
}

#[test]
fn a_wrapper_exits_with_its_childs_code_or_128_plus_its_signal() {
    let (mut s, _addr, reap) = start_wrapped(&[]);
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(reap.0[0]), Signal::SIGKILL).unwrap();
    assert_eq!(s.wait(WAIT), Some(128 + 9), "{}", s.said);

    // A serve that crashes mid-stream (status 3).
    let (mut s, addr, _reap) = start_wrapped(&["--crash-after", "1"]);
    let mut conn = TcpStream::connect(&addr).unwrap();
    conn.set_read_timeout(Some(WAIT)).unwrap();
    let body = r#"{"messages":[{"role":"user","content":"hi"}],"stream":true}"#;
    write!(
        conn,
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let _ = conn.read_to_end(&mut Vec::new());
    assert_eq!(s.wait(WAIT), Some(3), "{}", s.said);
}

#[test]
fn bad_route_evidence_is_refused_in_one_line_before_listening() {
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    std::fs::write(p("empty"), b"").unwrap();
    std::fs::write(p("garbage"), b"lots\n").unwrap();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec!["--map-file".into(), p("missing")],
            "failed to open --map-file",
        ),
        (
            vec!["--map-file".into(), p("empty")],
            "is empty, and an empty file cannot be mapped",
        ),
        (
            vec!["--map-exec".into(), p("missing")],
            "failed to open --map-exec",
        ),
        (
            vec!["--hold-open".into(), p("missing")],
            "failed to open --hold-open",
        ),
        (
            vec!["--held-pos-per-token".into(), "4".into()],
            "give at least one --hold-open FILE",
        ),
        (
            vec!["--busy-counter".into(), p("no-dir/busy")],
            "failed to write --busy-counter",
        ),
        (
            vec!["--busy-counter".into(), p("garbage")],
            "not a number of microseconds",
        ),
    ];
    for wrap in [false, true] {
        for (args, says) in &cases {
            let o = gate()
                .args(["stand-in", "--port", "0"])
                .args(wrap.then_some("--wrap"))
                .args(args)
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&o.stderr);
            let what = format!("{args:?} (wrap: {wrap}): {err}");
            assert_eq!(o.status.code(), Some(2), "{what}");
            assert_eq!(err.lines().count(), 1, "{what}");
            assert!(err.contains(says), "{what}");
        }
    }
}
