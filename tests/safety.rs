//! Safe to kill, safe to share a box: PDEATHSIG, signals in each phase, and the device hold.

use std::path::Path;
use std::time::Duration;

use nix::sys::signal::Signal;

use crate::util::*;

const LONG: Duration = Duration::from_secs(30);

fn run_args(out: &Path, hold: &Path, extra: &[&str], script: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = [
        "run",
        "--stand-in",
        "--floor",
        "0",
        "--first-token-ms",
        "600000",
        "--out",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.push(out.display().to_string());
    v.push("--hold".into());
    v.push(hold.display().to_string());
    v.extend(extra.iter().map(|s| s.to_string()));
    v.push("--".into());
    v.extend(script.iter().map(|s| s.to_string()));
    v
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
    let mut g = Running::start(&run_args(
        &out,
        &hold,
        &["--replies", "1"],
        &["--tokens", "100", "--gaps-ms", "100"],
    ));
    let pid = wait_for_serve_pid(&out, LONG);
    assert!(stand_in_alive(pid));
    g.signal(Signal::SIGKILL);
    assert_eq!(g.wait(LONG), None);
    let start = std::time::Instant::now();
    loop {
        // Free first, then alive: a serve seen after the hold was free outlived the hold.
        let free = hold_is_free(&hold);
        let alive = stand_in_alive(pid);
        assert!(!(free && alive), "the hold was free while the serve ran");
        if free && !alive {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "the serve (alive: {alive}) or the hold (free: {free}) outlived a SIGKILLed gate by 2 s"
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
    let mut g = Running::start(&run_args(
        &out,
        &hold,
        &["--replies", "3"],
        &["--tokens", "10", "--gaps-ms", "100"],
    ));
    let pid = wait_for_serve_pid(&out, LONG);
    wait_for_file(&out.join("replies.jsonl"), LONG);
    g.signal(signal);
    check_interrupted(&mut g, &out, &hold, code, name, Some(pid));
    let kept = replies(&out);
    assert!(
        !kept.is_empty() && kept.len() < 3,
        "the finished replies only: {}",
        kept.len()
    );
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
    wait_for_file(&out.join("replies.jsonl"), LONG);
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
    let mut a = Running::start(&run_args(
        &out_a,
        &hold,
        &["--replies", "2"],
        &["--tokens", "10", "--gaps-ms", "100"],
    ));
    wait_for_holder(&hold);
    let mut b = Running::start(&run_args(
        &out_b,
        &hold,
        &["--replies", "1"],
        &["--tokens", "3"],
    ));
    b.wait_to_say("waiting for the hold on", LONG);
    assert!(
        b.said.contains(&format!("held by PID {} (", a.pid())),
        "{}",
        b.said
    );
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
    let mut a = Running::start(&run_args(
        &out_a,
        &hold,
        &["--replies", "1"],
        &["--tokens", "40", "--gaps-ms", "100"],
    ));
    wait_for_holder(&hold);
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
    assert_eq!(a.wait(LONG), Some(0), "{}", a.said);
}

/// Wait (bounded) until a holder has written who it is into the hold file.
fn wait_for_holder(hold: &Path) {
    let start = std::time::Instant::now();
    while npu_serve_smoke::live::hold::current_holder(hold).is_none() {
        assert!(
            start.elapsed() < LONG,
            "no holder named itself in {}",
            hold.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}
