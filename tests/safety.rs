//! Safe to kill, safe to share a box: PDEATHSIG, signals in each phase, and the device hold.

use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::sys::signal::Signal;

use crate::util::*;

/// `run --stand-in` with the stand-in's `script`.
fn run_args(out: &Path, hold: &Path, extra: &[&str], script: &[&str]) -> Vec<String> {
    gate_args(out, hold, true, extra, script)
}

/// `run` with the gate's `extra` arguments and, after `--`, the stand-in's script
/// (`stand_in`) or the serve command.
fn gate_args(
    out: &Path,
    hold: &Path,
    stand_in: bool,
    extra: &[&str],
    after: &[&str],
) -> Vec<String> {
    let mut v = vec!["run".to_string()];
    if stand_in {
        v.push("--stand-in".into());
    }
    v.extend(UNFLIPPABLE.iter().map(|s| s.to_string()));
    v.push("--out".into());
    v.push(out.display().to_string());
    v.push("--hold".into());
    v.push(hold.display().to_string());
    v.extend(extra.iter().map(|s| s.to_string()));
    v.push("--".into());
    v.extend(after.iter().map(|s| s.to_string()));
    v
}

/// A serve that starts the stand-in (with its arguments) only once the returned file exists:
/// a gate running it holds the hold until the test creates that file, however fast or slow
/// the box, so a second gate is sure to find the hold taken.
fn serve_held_until_go(dir: &Path) -> (PathBuf, PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let go = dir.join("go");
    let serve = dir.join("serve-after-go.sh");
    std::fs::write(
        &serve,
        format!(
            "#!/bin/sh\nwhile [ ! -e \"{}\" ]; do sleep 0.05; done\nexec \"{BIN}\" stand-in \"$@\"\n",
            go.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&serve, std::fs::Permissions::from_mode(0o755)).unwrap();
    (serve, go)
}

/// After an interrupted run: the exit code, the files, the serve gone, the hold free.
fn check_interrupted(
    g: &mut Running,
    out: &Path,
    hold: &Path,
    code: i32,
    signal: &str,
    serve_pid: Option<i32>,
) {
    assert_eq!(g.wait(LONG), Some(code), "{}", g.said);
    let result = json(&out.join("result.json"));
    assert_eq!(result["result"], "INTERRUPTED", "{result}");
    assert_eq!(
        result["summary"],
        format!("RESULT: INTERRUPTED (by {signal})")
    );
    let run = json(&out.join("run.json"));
    assert_eq!(run["interrupted"], signal);
    assert!(run["ended_utc"].is_string());
    if let Some(pid) = serve_pid {
        assert!(
            !stand_in_alive(pid),
            "the serve (pid {pid}) outlived the gate"
        );
    }
    assert!(hold_is_free(hold), "the hold was not released");
}

#[test]
fn sigkill_of_the_gate_takes_the_serve_with_it() {
    let (d, out) = scratch();
    let hold = d.path().join("npu.hold");
    // A reply of 64 tokens 1 s apart: the serve is mid-request when the SIGKILL comes.
    let mut g = Running::start(&run_args(
        &out,
        &hold,
        &["--replies", "1"],
        &["--tokens", "64", "--gaps-ms", "1000"],
    ));
    let pid = wait_for_serve_pid(&out, LONG);
    assert!(stand_in_alive(pid));
    g.signal(Signal::SIGKILL);
    assert_eq!(g.wait(LONG), None, "the gate outlived its SIGKILL");
    // The order of events, not how soon: the hold is never free while the serve runs, and it
    // comes free (after the serve is gone) within the wide bound.
    let start = std::time::Instant::now();
    loop {
        // Free first, then alive: a serve seen after the hold was free outlived the hold.
        let free = hold_is_free(&hold);
        let alive = stand_in_alive(pid);
        assert!(!(free && alive), "the hold was free while the serve ran");
        if free {
            break;
        }
        assert!(
            start.elapsed() < LONG,
            "the hold never came free after the gate's SIGKILL (the serve alive: {alive})"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn sigterm_while_waiting_for_the_hold() {
    let (d, out) = scratch();
    let hold = d.path().join("npu.hold");
    let file = std::fs::File::create(&hold).unwrap();
    let mine = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive).unwrap();
    let mut g = Running::start(&run_args(&out, &hold, &[], &[]));
    g.wait_to_say("waiting for the hold on", LONG);
    assert!(
        g.said
            .contains("held by a process that did not say who it is"),
        "{}",
        g.said
    );
    g.signal(Signal::SIGTERM);
    assert_eq!(g.wait(LONG), Some(143), "{}", g.said);
    drop(mine);
    wait_for_free_hold(&hold);
    check_interrupted(&mut g, &out, &hold, 143, "SIGTERM", None);
    let run = json(&out.join("run.json"));
    assert!(run["serve_pid"].is_null(), "no serve was started");
    assert_eq!(run["startup"]["state"], "interrupted");
}

#[test]
fn sigint_while_waiting_for_ready() {
    let (d, out) = scratch();
    let hold = d.path().join("npu.hold");
    let mut g = Running::start(&run_args(&out, &hold, &[], &["--never-ready"]));
    let pid = wait_for_serve_pid(&out, LONG);
    g.signal(Signal::SIGINT);
    check_interrupted(&mut g, &out, &hold, 130, "SIGINT", Some(pid));
    assert_eq!(
        json(&out.join("run.json"))["startup"]["state"],
        "interrupted"
    );
}

#[test]
fn sigterm_while_waiting_for_ready() {
    let (d, out) = scratch();
    let hold = d.path().join("npu.hold");
    let mut g = Running::start(&run_args(&out, &hold, &[], &["--never-ready"]));
    let pid = wait_for_serve_pid(&out, LONG);
    g.signal(Signal::SIGTERM);
    check_interrupted(&mut g, &out, &hold, 143, "SIGTERM", Some(pid));
}

/// A signal while the second of three replies streams: the gate exits 128+N, keeps the
/// finished reply, and leaves no serve and a free hold.
fn signal_mid_request(signal: Signal, code: i32, name: &str) {
    let (d, out) = scratch();
    let hold = d.path().join("npu.hold");
    // The first reply takes 1 s; the second's gaps are 11 times as long (--slow-by 10), so
    // it is still streaming when the signal follows the first into replies.jsonl, on any box
    // that is not stalled for its 10 s.
    let mut g = Running::start(&run_args(
        &out,
        &hold,
        &["--replies", "3"],
        &[
            "--tokens",
            "10",
            "--gaps-ms",
            "100",
            "--slow-by",
            "10",
            "--slow-over",
            "2",
        ],
    ));
    let pid = wait_for_serve_pid(&out, LONG);
    wait_for_a_reply(&out, LONG);
    g.signal(signal);
    check_interrupted(&mut g, &out, &hold, code, name, Some(pid));
    let kept = replies(&out);
    assert_eq!(kept.len(), 1, "the finished reply only: {kept:?}");
}

#[test]
fn sighup_mid_request() {
    signal_mid_request(Signal::SIGHUP, 129, "SIGHUP");
}

#[test]
fn sigterm_mid_request() {
    signal_mid_request(Signal::SIGTERM, 143, "SIGTERM");
}

#[test]
fn a_second_signal_during_cleanup_kills_the_serve_at_once() {
    // The serve ignores TERM and the grace is 10 minutes: only the second signal can end it.
    let (d, out) = scratch();
    let hold = d.path().join("npu.hold");
    let script = ["--ignore-term", "--tokens", "10", "--gaps-ms", "100"];
    let mut g = Running::start(&run_args(
        &out,
        &hold,
        &["--replies", "3", "--grace", "600"],
        &script,
    ));
    let pid = wait_for_serve_pid(&out, LONG);
    wait_for_a_reply(&out, LONG);
    g.signal(Signal::SIGTERM);
    g.wait_to_say("a second signal kills the serve at once", LONG);
    g.signal(Signal::SIGTERM);
    check_interrupted(&mut g, &out, &hold, 143, "SIGTERM", Some(pid));
    let stop = &json(&out.join("run.json"))["stop"];
    assert_eq!(stop["killed"], true);
    assert_eq!(stop["cut_short"], true);
}

#[test]
fn two_gates_on_one_hold_take_turns_and_the_second_names_the_first() {
    let (d, out_a) = scratch();
    let out_b = d.path().join("run-b");
    let hold = d.path().join("npu.hold");
    let (serve, go) = serve_held_until_go(d.path());
    let mut a = Running::start(&gate_args(
        &out_a,
        &hold,
        false,
        &["--replies", "2"],
        &[
            serve.to_str().unwrap(),
            "--port",
            "{port}",
            "--tokens",
            "10",
            "--gaps-ms",
            "100",
        ],
    ));
    wait_for_supervised_holder(&hold);
    let mut b = Running::start(&run_args(
        &out_b,
        &hold,
        &["--replies", "1"],
        &["--tokens", "3"],
    ));
    // a cannot finish (and let go) before `go`: b is sure to find the hold taken.
    b.wait_to_say("waiting for the hold on", LONG);
    assert!(
        b.said.contains(&format!("held by PID {} (", a.pid())),
        "{}",
        b.said
    );
    std::fs::write(&go, "").unwrap();
    assert_eq!(a.wait(LONG), Some(0), "{}", a.said);
    assert_eq!(b.wait(LONG), Some(0), "{}", b.said);
    let held_a = &json(&out_a.join("run.json"))["hold"];
    let held_b = &json(&out_b.join("run.json"))["hold"];
    assert!(
        held_b["acquired_ns"].as_u64().unwrap() >= held_a["released_ns"].as_u64().unwrap(),
        "b ran while a held the device: {held_a} {held_b}"
    );
    assert!(held_b["waited_for"]
        .as_str()
        .unwrap()
        .starts_with(&format!("PID {} (", a.pid())));
    assert!(
        npu_serve_smoke::live::hold::current_holder(&hold).is_none(),
        "the last holder clears its holder text"
    );
}

#[test]
fn a_hold_not_acquired_in_time_is_skip_naming_the_holder() {
    let (d, out_a) = scratch();
    let out_b = d.path().join("run-b");
    let hold = d.path().join("npu.hold");
    // a holds the hold until `go`, made only after b has given up: b's 0.5 s cannot race a's
    // release.
    let (serve, go) = serve_held_until_go(d.path());
    let mut a = Running::start(&gate_args(
        &out_a,
        &hold,
        false,
        &["--replies", "1"],
        &[serve.to_str().unwrap(), "--port", "{port}", "--tokens", "3"],
    ));
    wait_for_supervised_holder(&hold);
    let o = gate()
        .args(run_args(&out_b, &hold, &["--hold-timeout", "0.5"], &[]))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(3), "{stdout}");
    let expected = format!(
        "RESULT: SKIP (hold not acquired in 0.5 s; held by PID {} (",
        a.pid()
    );
    assert!(stdout.contains(&expected), "{stdout}");
    assert!(
        json(&out_b.join("run.json"))["serve_pid"].is_null(),
        "nothing was launched"
    );
    assert_eq!(json(&out_b.join("result.json"))["result"], "SKIP");
    std::fs::write(&go, "").unwrap();
    assert_eq!(a.wait(LONG), Some(0), "{}", a.said);
}
