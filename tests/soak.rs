//! Soak and drift (issue 20): a serve that slows over a run is a drift FAIL, a steady one is
//! not; a soak keeps replying for its duration, says how it goes, and a SIGTERM in the middle
//! keeps every finished reply; `judge` of the archive says the same lines.
//!
//! The drift tests' gaps are long (60 ms) so that the box's own scheduling noise stays small
//! beside the slowing they script: at 20 ms gaps, on a box at load 9, the same 20% slowing read
//! as a fall of 5.8%; at 60 ms, 21.8%.

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::util::*;

/// Long enough for any run here on a loaded 2-core box.
const LONG: Duration = Duration::from_secs(90);

/// 30 replies of 12 tokens 60 ms apart from the stand-in, with `pacing` (its --slow-by or
/// --jitter); exit code and stdout.
fn thirty_replies(out: &std::path::Path, pacing: &[&str]) -> (Option<i32>, String) {
    let script = [&["--tokens", "12", "--gaps-ms", "60"][..], pacing].concat();
    stand_in_run(out, &["--replies", "30"], &script)
}

#[test]
fn a_serve_that_slows_by_a_fifth_over_thirty_replies_fails_drift() {
    // A timing verdict on live replies: the box to this test alone, so the suite's other
    // gates starting and stopping cannot put a trend of their own into the rates.
    let _alone = exclusive();
    let (_d, out) = scratch();
    // Gaps a quarter longer by the 30th request: the rate falls to 1 / 1.25 = 80%.
    let (code, stdout) = thirty_replies(&out, &["--slow-by", "0.25", "--slow-over", "30"]);
    let drift = line(&stdout, "drift");
    assert_eq!(code, Some(1), "{stdout}");
    assert!(drift.contains("FAIL  the decode rate fell"), "{drift}");
    assert!(drift.contains("beyond the 10% --max-drift"), "{drift}");
    // The only failure: the rate itself is over its floor, the content is right.
    let fails: Vec<&str> = stdout.lines().filter(|l| l.contains(" FAIL ")).collect();
    assert_eq!(fails, [drift], "{stdout}");
    let result = json(&out.join("result.json"));
    let figures = result["lines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["check"] == "drift")
        .map(|l| l["figures"].clone())
        .unwrap();
    let change = figures["drift"].as_f64().unwrap();
    // Sen's slope over the run reads the scripted fall, within what the box adds.
    assert!((-0.30..=-0.12).contains(&change), "{figures}");
    assert!(figures["drift_p"].as_f64().unwrap() < 0.01, "{figures}");
    assert_eq!(figures["values"], 30, "{figures}");
    assert_eq!(figures["max_drift"], 0.1, "{figures}");
    check_result_schema(&out.join("result.json"));
    // Held to a larger --max-drift, the same archive passes: the limit is the run's setting.
    let o = gate()
        .arg("judge")
        .arg(&out)
        .args(["--max-drift", "0.5"])
        .output()
        .unwrap();
    let judged = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{judged}");
    assert!(
        line(&judged, "drift").contains("info  the decode rate fell"),
        "{judged}"
    );
}

#[test]
fn a_steady_serve_with_seeded_jitter_does_not_drift() {
    // A timing verdict on live replies: the box to this test alone, so the suite's other
    // gates starting and stopping cannot put a trend of their own into the rates.
    let _alone = exclusive();
    let (_d, out) = scratch();
    // Each request's gaps are 0.9 to 1.1 times 60 ms, drawn from the seed: noise, no trend.
    let (code, stdout) = thirty_replies(&out, &["--jitter", "0.1", "--jitter-seed", "20"]);
    assert_eq!(code, Some(0), "{stdout}");
    let drift = line(&stdout, "drift");
    assert!(drift.starts_with("drift        info"), "{drift}");
    assert!(
        !drift.contains("beyond the"),
        "a steady serve is not said to fall past the limit: {drift}"
    );
    let replies = replies(&out);
    let rates: Vec<f64> = replies
        .iter()
        .map(|r| r["metrics"]["rate_tok_s"].as_f64().unwrap())
        .collect();
    let (lo, hi) = rates
        .iter()
        .fold((f64::MAX, 0.0f64), |(l, h), r| (l.min(*r), h.max(*r)));
    // The jitter is there: the rates spread (1.1 / 0.9 = 1.22 at the extremes).
    assert!(hi / lo > 1.05, "{rates:?}");
}

#[test]
fn a_soak_keeps_replying_for_its_time_says_how_it_goes_and_judges_the_same() {
    let (_d, out) = scratch();
    let o = gate()
        .args(["run", "--stand-in", "--out"])
        .arg(&out)
        .args(UNFLIPPABLE)
        .args(["--replies", "2", "--soak", "11s", "--", "--tokens", "8"])
        .args(["--gaps-ms", "20"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stdout}{stderr}");
    // One progress line at 10 s at least: replies, the running median, done and left.
    let progress: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("soak: ") && l.contains(" replies, median "))
        .collect();
    assert!(!progress.is_empty(), "{stderr}");
    assert!(
        progress[0].contains(" done, ") && progress[0].ends_with(" left"),
        "{stderr}"
    );
    let replies = replies(&out);
    // Each reply takes about 0.2 s: 11 s of them are dozens, far more than the 2 planned.
    assert!(replies.len() > 10, "{} replies", replies.len());
    let indices: Vec<u64> = replies
        .iter()
        .map(|r| r["index"].as_u64().unwrap())
        .collect();
    assert_eq!(indices, (1..=replies.len() as u64).collect::<Vec<_>>());
    // The soak's time is counted from the first reply's send; the last one started within it.
    let first = replies[0]["sent_ns"].as_u64().unwrap();
    let last = replies.last().unwrap()["sent_ns"].as_u64().unwrap();
    assert!(last - first < 11_000_000_000, "{}", last - first);
    let manifest = json(&out.join("run.json"));
    assert_eq!(manifest["soak"]["seconds"], 11.0, "{}", manifest["soak"]);
    assert_eq!(
        manifest["soak"]["ended"], "duration",
        "{}",
        manifest["soak"]
    );
    assert_eq!(
        manifest["soak"]["replies"],
        replies.len(),
        "{}",
        manifest["soak"]
    );
    let n = replies.len().to_string();
    assert!(
        line(&stdout, "rate").contains(&format!("over {n} replies")),
        "rate is judged over all of them: {stdout}"
    );
    assert!(
        line(&stdout, "drift").contains(&format!("over {n} replies")),
        "{stdout}"
    );
    assert_eq!(gate_judge_lines(&out), verdict_lines(&stdout));
}

#[test]
fn sigterm_mid_soak_is_interrupted_and_keeps_every_finished_reply() {
    let (_d, out) = scratch();
    let mut args: Vec<String> = ["run", "--stand-in", "--out"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.push(out.display().to_string());
    args.extend(UNFLIPPABLE.iter().map(|s| s.to_string()));
    for a in [
        "--replies",
        "1",
        "--soak",
        "10m",
        "--",
        "--tokens",
        "8",
        "--gaps-ms",
        "20",
    ] {
        args.push(a.to_string());
    }
    let mut g = Running::start(&args);
    g.wait_to_say("soak: replies until 10m", LONG);
    let start = Instant::now();
    while std::fs::read_to_string(out.join("replies.jsonl")).map_or(0, |t| t.lines().count()) < 4 {
        assert!(start.elapsed() < LONG, "{}", g.said);
        std::thread::sleep(Duration::from_millis(20));
    }
    g.signal(Signal::SIGTERM);
    assert_eq!(g.wait(LONG), Some(143), "{}", g.said);
    let result = json(&out.join("result.json"));
    assert_eq!(result["result"], "INTERRUPTED", "{result}");
    let replies = replies(&out);
    assert!(replies.len() >= 4, "{replies:?}");
    assert!(replies.iter().all(|r| r["error"].is_null()), "{replies:?}");
    // Every finished reply is judged: the rate line rests on each of them.
    let rate = result["lines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["check"] == "rate")
        .unwrap();
    assert_eq!(rate["figures"]["values"], replies.len(), "{rate}");
    let manifest = json(&out.join("run.json"));
    assert_eq!(manifest["soak"]["seconds"], 600.0, "{}", manifest["soak"]);
    assert!(
        manifest["soak"]["ended"].is_null(),
        "an interrupted soak did not end on its own: {}",
        manifest["soak"]
    );
    assert_eq!(
        gate_judge_lines(&out).last().unwrap(),
        "RESULT: INTERRUPTED (by SIGTERM)"
    );
}

#[test]
fn a_soak_ends_at_its_first_failed_reply() {
    let (_d, out) = scratch();
    // The 4th request is answered 500: content fails, and a serve that fails is not asked
    // again for the rest of the soak.
    let (code, stdout) = stand_in_run(
        &out,
        &["--replies", "2", "--soak", "10m"],
        &[
            "--tokens",
            "8",
            "--fault-request",
            "4",
            "--http-status",
            "500",
        ],
    );
    assert_eq!(code, Some(1), "{stdout}");
    assert!(line(&stdout, "content").contains("FAIL"), "{stdout}");
    assert_eq!(replies(&out).len(), 4);
    let manifest = json(&out.join("run.json"));
    assert_eq!(
        manifest["soak"]["ended"], "reply failed",
        "{}",
        manifest["soak"]
    );
}

#[test]
fn soak_and_drift_settings_out_of_range_are_refused_before_anything() {
    let (_d, out) = scratch();
    // A duration is clap's value error: exit 2, the reason said, nothing created.
    for (extra, says) in [
        (&["--soak", "ten minutes"][..], "is not a duration"),
        (&["--soak", "600"][..], "is not a duration"),
        (&["--soak", "25h"][..], "at most 24h"),
        (&["--soak", "0s"][..], "above 0"),
    ] {
        crate::inputs::refused_before_the_run(&out, &[&["--stand-in"][..], extra].concat(), says);
    }
    for (extra, says) in [
        (
            &["--max-drift", "0"][..],
            "--max-drift is a share above 0 and below 1",
        ),
        (&["--max-drift", "1"][..], "--max-drift is a share"),
        (&["--max-drift", "-0.1"][..], "--max-drift is a share"),
        (&["--max-drift", "NaN"][..], "--max-drift is a share"),
    ] {
        crate::inputs::refused_before_anything(&out, extra, &[], says);
    }
    let (d, _) = scratch();
    for (profile, says) in [
        ("soak = \"forever\"\n", "soak in the profile"),
        ("soak = \"48h\"\n", "at most 24h"),
        ("max_drift = 2.0\n", "--max-drift is a share"),
    ] {
        let path = d.path().join("gate.toml");
        std::fs::write(&path, profile).unwrap();
        let p = path.display().to_string();
        crate::inputs::refused_before_anything(&out, &["--profile", &p], &[], says);
    }
}
