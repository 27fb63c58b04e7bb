//! The footprint lines through real runs (issue 34): the stand-in as a real child process that
//! leaks, settles, fills a cache once, grows its device memory, loads slowly, answers its first
//! reply cold and its reply after an idle gap slowly; each line passes and fails on it, and
//! `judge` gives the same lines from the archive. Timing is held only where the stand-in's
//! delay is many times the limit (a FAIL), or the limit many times the stand-in's normal time
//! (an ok).

use serde_json::Value;

use crate::util::*;

const MIB: f64 = 1024.0 * 1024.0;

/// A stand-in run: exit code, stdout, and the run directory (kept with its temp dir). The
/// drift line cannot flip it either: these runs' exit codes are the footprint's.
fn run(gate_args: &[&str], script: &[&str]) -> (Option<i32>, String, tempfile::TempDir) {
    let (d, out) = scratch();
    let gate_args = [&["--max-drift", "0.99"][..], gate_args].concat();
    let (code, stdout) = stand_in_run(&out, &gate_args, script);
    (code, stdout, d)
}

/// A stand-in run with a first-token limit of `limit` (the other tests' limit cannot flip).
fn run_with_limit(
    limit: &str,
    gate_args: &[&str],
    script: &[&str],
) -> (Option<i32>, String, tempfile::TempDir) {
    let (d, out) = scratch();
    let floors = ["--floor", "0", "--first-token-ms", limit];
    let (code, stdout) = stand_in_run_held_to(&out, &floors, gate_args, script);
    (code, stdout, d)
}

/// The figures of the first line named `check` in a run's result.json.
fn figures(dir: &std::path::Path, check: &str) -> Value {
    let result = json(&dir.join("run/result.json"));
    result["lines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["check"] == check)
        .unwrap_or_else(|| panic!("no {check} line: {result}"))["figures"]
        .clone()
}

/// The status word of `check`'s line in stdout.
fn status<'a>(stdout: &'a str, check: &str) -> &'a str {
    line(stdout, check).split_whitespace().nth(1).unwrap()
}

#[test]
fn a_leaking_serve_fails_memory_and_judge_says_the_same() {
    let (code, stdout, d) = run(&["--replies", "15"], &["--leak", "8MiB"]);
    assert_eq!(code, Some(1), "{stdout}");
    let memory = line(&stdout, "memory");
    assert_eq!(status(&stdout, "memory"), "FAIL", "{stdout}");
    assert!(
        memory.contains("a reply (95% interval")
            && memory.contains("over 12 replies after 3 warm: grows by more than 1.00 MiB a reply"),
        "{memory}"
    );
    let out = d.path().join("run");
    let f = &figures(d.path(), "memory")["footprint"];
    let slope = f["growth_bytes_per_reply"].as_f64().unwrap() / MIB;
    assert!((7.0..9.5).contains(&slope), "8 MiB a reply: {slope}");
    let ends = f["reply_end_bytes"].as_array().unwrap();
    assert_eq!(ends.len(), 15, "every reply's end: {f}");
    // The recorded peak is the serve's, and holds at least the 15 leaks.
    assert!(f["peak_bytes"].as_f64().unwrap() >= 15.0 * 8.0 * MIB, "{f}");
    // Every reply and every sample carries the reading it was judged on.
    for r in replies(&out) {
        assert!(r["memory"]["rss_anon"].as_u64().unwrap() > 0, "{r}");
    }
    let load = json(&out.join("load.json"));
    let samples = load["during"]["samples"].as_array().unwrap();
    // Every sample that looked at the serve's tree while it ran (its threads' CPU read with
    // it), and no other: a sample over the tree's CPU budget reads the box alone, and the
    // last look, once the serve is stopped, reads no memory.
    let (last, running) = samples.split_last().unwrap();
    assert_eq!(last["memory"], serde_json::Value::Null, "{last}");
    let read = running
        .iter()
        .filter(|s| s["memory"]["processes"].as_u64() >= Some(1))
        .count();
    assert!(read >= 2, "{load}");
    for s in running {
        let looked = s["serve_cpu_ns"].is_u64();
        let has_memory = s["memory"].is_object();
        assert!(
            has_memory == looked || !last["serve_cpu_ns"].is_u64(),
            "memory is read at each look at the tree: {s}"
        );
    }
    check_result_schema(&out.join("result.json"));
    // judge gives the same lines from the archive.
    assert_eq!(gate_judge_lines(&out), verdict_lines(&stdout));
    // A looser limit given to judge passes what the run failed.
    let o = gate()
        .args(["judge", "--max-memory-growth", "64MiB"])
        .arg(&out)
        .output()
        .unwrap();
    let judged = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(status(&judged, "memory"), "ok", "{judged}");
}

#[test]
fn a_serve_that_settles_or_fills_a_cache_once_is_not_called_a_leak() {
    // Two replies leak, within the three warm ones; a 96 MiB cache filled at the first reply.
    for script in [
        &["--leak", "16MiB", "--leak-replies", "2"][..],
        &["--first-reply-alloc", "96MiB"][..],
    ] {
        let (code, stdout, _d) = run(&["--replies", "12"], script);
        assert_eq!(code, Some(0), "{script:?}: {stdout}");
        let memory = line(&stdout, "memory");
        assert_eq!(status(&stdout, "memory"), "ok", "{memory}");
        assert!(memory.ends_with("device memory not exposed (no DRM fdinfo memory keys on the serve's /dev/dri or /dev/accel fds, no --device-memory)"), "{memory}");
    }
    // A peak over --max-serve-memory fails whatever the growth.
    let (code, stdout, _d) = run(
        &["--replies", "6", "--max-serve-memory", "32MiB"],
        &["--first-reply-alloc", "96MiB"],
    );
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        line(&stdout, "memory").contains("(over the limit of 32.0 MiB)"),
        "{stdout}"
    );
}

#[test]
fn device_memory_from_a_counter_file_is_judged_like_the_serve_s() {
    let d = tempfile::tempdir().unwrap();
    let counter = d.path().join("npu_memory_utilization");
    // It must read as a number when the run starts; the stand-in rewrites it as it goes.
    std::fs::write(&counter, "0\n").unwrap();
    let c = counter.to_str().unwrap();
    let (code, stdout, _r) = run(
        &["--replies", "12", "--device-memory", c],
        &["--device-memory-file", c, "--device-leak", "4MiB"],
    );
    assert_eq!(code, Some(1), "{stdout}");
    assert_eq!(status(&stdout, "memory"), "ok", "{stdout}");
    assert!(!line(&stdout, "memory").contains("not exposed"), "{stdout}");
    let device = line(&stdout, "device-memory");
    assert_eq!(status(&stdout, "device-memory"), "FAIL", "{device}");
    assert!(device.contains("+4.00 MiB a reply"), "{device}");
    // A device limit where nothing exposes the device's memory: inconclusive, never a pass.
    let (code, stdout, _r) = run(&["--replies", "3", "--max-device-memory", "1GiB"], &[]);
    assert_ne!(code, Some(0), "{stdout}");
    assert_eq!(status(&stdout, "device-memory"), "inconclusive", "{stdout}");
    assert!(stdout.contains("RESULT: INCONCLUSIVE"), "{stdout}");
    // Flat device memory passes.
    std::fs::write(&counter, "0\n").unwrap();
    let (code, stdout, _r) = run(
        &[
            "--replies",
            "12",
            "--device-memory",
            c,
            "--device-memory-unit",
            "KiB",
        ],
        &["--device-memory-file", c],
    );
    assert_eq!(code, Some(0), "{stdout}");
    // 64 MiB written in bytes, read as KiB: 64 GiB.
    assert!(
        line(&stdout, "device-memory")
            .starts_with("device-memory ok    device memory 64.0 GiB peak; "),
        "{stdout}"
    );
}

#[test]
fn a_slow_start_and_a_cold_first_reply_fail_only_where_limits_are_given() {
    let (code, stdout, d) = run(&["--replies", "3"], &["--startup-ms", "1500"]);
    assert_eq!(code, Some(0), "{stdout}");
    assert_eq!(status(&stdout, "startup"), "info", "{stdout}");
    assert!(
        line(&stdout, "startup").contains(" after launch"),
        "{stdout}"
    );
    let ready = figures(d.path(), "startup")["footprint"]["ready_ms"]
        .as_f64()
        .unwrap();
    assert!(ready >= 1500.0, "{ready}");
    let (code, stdout, _d) = run(
        &["--replies", "3", "--ready-limit", "500ms"],
        &["--startup-ms", "2500"],
    );
    assert_eq!(code, Some(1), "{stdout}");
    assert_eq!(status(&stdout, "startup"), "FAIL", "{stdout}");
    // The cold reply: 3 s late against a limit of 1 s; the normal stand-in far within 30 s.
    let (code, stdout, _d) = run(
        &["--replies", "4", "--cold-first-token-ms", "1s"],
        &["--cold-first-token-ms", "3000"],
    );
    assert_eq!(code, Some(1), "{stdout}");
    let cold = line(&stdout, "cold-reply");
    assert_eq!(status(&stdout, "cold-reply"), "FAIL", "{cold}");
    assert!(
        cold.contains("cold first token ") && cold.contains(", a warm median of "),
        "{cold}"
    );
    // Only the cold reply was slow: the first-token median stays the warm ones'.
    assert_eq!(status(&stdout, "first-token"), "ok", "{stdout}");
    let (code, stdout, _d) = run(&["--replies", "4", "--cold-first-token-ms", "30s"], &[]);
    assert_eq!(code, Some(0), "{stdout}");
    assert_eq!(status(&stdout, "cold-reply"), "ok", "{stdout}");
}

#[test]
fn the_idle_probe_is_one_more_reply_held_to_the_first_token_limit() {
    // After 1.5 s idle, the stand-in's first token is 4 s late against a limit of 1 s.
    let (code, stdout, d) = run_with_limit(
        "1s",
        &["--replies", "3", "--idle-probe", "1500ms"],
        &["--idle-after-ms", "1000", "--idle-first-token-ms", "4000"],
    );
    assert_eq!(code, Some(1), "{stdout}");
    let idle = line(&stdout, "idle");
    assert_eq!(status(&stdout, "idle"), "FAIL", "{idle}");
    assert!(
        idle.contains(" idle, a warm median of ") && idle.ends_with("(limit 1 s)"),
        "{idle}"
    );
    // The probe is recorded, flagged, and left out of the first-token median.
    let out = d.path().join("run");
    let recorded = replies(&out);
    assert_eq!(recorded.len(), 4);
    assert_eq!(recorded[3]["idle_probe"], true);
    assert_eq!(status(&stdout, "first-token"), "ok", "{stdout}");
    assert_eq!(figures(d.path(), "first-token")["values"], 3);
    let wait = figures(d.path(), "idle")["footprint"]["idle_wait_ms"]
        .as_f64()
        .unwrap();
    assert!(wait >= 1500.0, "{wait}");
    assert_eq!(gate_judge_lines(&out), verdict_lines(&stdout));
    // Without the slow wake, the probe passes.
    let (code, stdout, _d) = run_with_limit("2s", &["--replies", "3", "--idle-probe", "1s"], &[]);
    assert_eq!(code, Some(0), "{stdout}");
    assert_eq!(status(&stdout, "idle"), "ok", "{stdout}");
}

#[test]
fn bursts_and_a_soak_read_memory_at_every_reply_s_end() {
    let (code, stdout, d) = run(
        &["--replies", "4", "--concurrency", "2", "--rounds", "3"],
        &["--leak", "8MiB"],
    );
    assert!(code.is_some(), "{stdout}");
    let out = d.path().join("run");
    let recorded = replies(&out);
    assert_eq!(recorded.len(), 10);
    assert!(
        recorded.iter().all(|r| r["memory"].is_object()),
        "every burst stream too"
    );
    assert_eq!(status(&stdout, "memory"), "FAIL", "{stdout}");
    let (code, stdout, d) = run(&["--replies", "2", "--soak", "6s"], &["--leak", "2MiB"]);
    assert_eq!(code, Some(1), "{stdout}");
    assert_eq!(status(&stdout, "memory"), "FAIL", "{stdout}");
    let n = replies(&d.path().join("run")).len();
    assert!(
        line(&stdout, "memory").contains(&format!("over {} replies after 3 warm", n - 3)),
        "{stdout}"
    );
}

#[test]
fn bad_footprint_settings_are_one_line_and_exit_2_before_anything_starts() {
    let d = tempfile::tempdir().unwrap();
    let not_a_number = d.path().join("npu_memory_utilization");
    std::fs::write(&not_a_number, "N/A\n").unwrap();
    let missing = d.path().join("missing");
    let cases: [(&[&str], &str); 7] = [
        (&["--max-memory-growth", "1"], "give its unit"),
        (&["--max-memory-growth", "-1MiB"], "0 or more"),
        (&["--max-memory-growth", "NaN"], "not a size"),
        (&["--idle-probe", "25h"], "over a day"),
        (
            &["--device-memory", not_a_number.to_str().unwrap()],
            "does not read as a number",
        ),
        (&["--device-memory", missing.to_str().unwrap()], "missing"),
        (&["--memory-warm", "-2"], "not a count"),
    ];
    for (args, says) in cases {
        let (_s, out) = scratch();
        let o = gate()
            .args(["run", "--stand-in", "--out"])
            .arg(&out)
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        let first = err.lines().next().unwrap_or("");
        assert!(
            first.contains(says),
            "the first line says it: {args:?}: {err}"
        );
        assert!(!out.exists(), "{args:?}: nothing created");
    }
}

#[test]
fn a_serve_that_leaks_in_a_daemon_it_forked_away_is_still_measured() {
    // The serve forks the leaking stand-in out of its own tree (a subshell that exits), so the
    // stand-in is an orphan the gate's supervisor adopted; the serve itself only sleeps.
    let (d, out) = scratch();
    let daemon = format!("( {BIN} stand-in --port {{port}} --leak 8MiB & ); exec sleep 300");
    let o = gate()
        .args(["run", "--out"])
        .arg(&out)
        .args(UNFLIPPABLE)
        .args([
            "--replies",
            "12",
            "--max-drift",
            "0.99",
            "--",
            "sh",
            "-c",
            &daemon,
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(1), "{stdout}");
    assert_eq!(status(&stdout, "memory"), "FAIL", "{stdout}");
    let recorded = replies(&d.path().join("run"));
    assert!(
        recorded
            .iter()
            .all(|r| r["memory"]["processes"].as_u64() >= Some(2)),
        "the sleeping serve and its adopted daemon: {recorded:?}"
    );
}
