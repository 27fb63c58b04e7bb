//! `--concurrency N --rounds R`: bursts of N streams released together after the single-stream
//! replies, against real stand-in processes over loopback (issue 19).

use std::path::Path;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use serde_json::Value;

use crate::inputs::{refused_before_anything, refused_before_the_run};
use crate::util::*;

const LONG: Duration = Duration::from_secs(60);

/// The replies of a run that are a burst's streams.
fn streams(replies: &[Value]) -> Vec<&Value> {
    replies.iter().filter(|r| r["burst"].is_object()).collect()
}

#[test]
fn four_streams_released_together_overlap_and_each_is_recorded() {
    let (_d, out) = scratch();
    let (code, stdout) = stand_in_run(
        &out,
        &["--replies", "2", "--concurrency", "4", "--rounds", "2"],
        &["--tokens", "20", "--gaps-ms", "20", "--ttft-ms", "50"],
    );
    assert_eq!(code, Some(0), "{stdout}");
    // Plumbing, not timing: the stand-in's streams overlap by hundreds of ms at any load.
    assert!(
        line(&stdout, "overlap").starts_with("overlap      ok    the streams ran together"),
        "{stdout}"
    );
    assert!(line(&stdout, "aggregate").contains("info"), "{stdout}");
    assert!(
        line(&stdout, "content").contains("10 replies, all with content"),
        "{stdout}"
    );
    let run = json(&out.join("run.json"));
    assert_eq!(run["concurrency"]["streams"], 4);
    assert_eq!(run["concurrency"]["rounds"], 2);
    let replies = replies(&out);
    assert_eq!(replies.len(), 10);
    let bursts = streams(&replies);
    assert_eq!(bursts.len(), 8);
    let mut slots: Vec<(u64, u64)> = bursts
        .iter()
        .map(|r| {
            (
                r["burst"]["round"].as_u64().unwrap(),
                r["burst"]["stream"].as_u64().unwrap(),
            )
        })
        .collect();
    slots.sort_unstable();
    let want: Vec<(u64, u64)> = (1..=2).flat_map(|r| (1..=4).map(move |s| (r, s))).collect();
    assert_eq!(slots, want);
    for round in 1..=2u64 {
        let of: Vec<&&Value> = bursts
            .iter()
            .filter(|r| r["burst"]["round"] == round)
            .collect();
        // One release a burst: every stream's sent_ns is it.
        let sent: Vec<u64> = of.iter().map(|r| r["sent_ns"].as_u64().unwrap()).collect();
        assert!(sent.iter().all(|&s| s == sent[0]), "{sent:?}");
        for r in &of {
            let written = r["written_ns"].as_u64().unwrap();
            assert!(written >= sent[0], "written before the release: {r}");
            // The first token is counted from the release, after the request was written.
            let first = r["chunks"][0]["at_ns"].as_u64().unwrap();
            assert!(first > written, "{r}");
        }
    }
    // The single-stream replies carry none of it, as before.
    let single: Vec<&Value> = replies.iter().filter(|r| r["burst"].is_null()).collect();
    assert_eq!(single.len(), 2);
    assert!(single.iter().all(|r| r.get("written_ns").is_none()));
    // The figures: a speedup and the dispatch delay on the aggregate line.
    let result = json(&out.join("result.json"));
    let agg = result["lines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["check"] == "aggregate")
        .unwrap();
    assert_eq!(agg["figures"]["values"], 2);
    assert!(agg["figures"]["speedup"].as_f64().unwrap() > 0.0);
    assert!(agg["figures"]["dispatch_ms"].as_f64().unwrap() >= 0.0);
}

#[test]
fn one_stream_at_a_time_has_no_burst_lines_and_no_burst_fields() {
    let (_d, out) = scratch();
    let (code, stdout) = stand_in_run(&out, &["--replies", "2"], &[]);
    assert_eq!(code, Some(0), "{stdout}");
    for check in ["overlap", "aggregate", "metrics"] {
        assert!(
            !stdout.lines().any(|l| l.starts_with(check)),
            "{check}: {stdout}"
        );
    }
    let run = json(&out.join("run.json"));
    assert!(run.get("concurrency").is_none(), "{run}");
    assert!(!out.join("metrics.json").exists());
    for r in replies(&out) {
        assert!(
            r.get("burst").is_none() && r.get("written_ns").is_none(),
            "{r}"
        );
    }
}

#[test]
fn judge_of_a_concurrent_archive_gives_the_same_lines_and_its_floors_can_be_overridden() {
    let (_d, out) = scratch();
    let (code, stdout) = stand_in_run(
        &out,
        &["--replies", "2", "--concurrency", "3", "--rounds", "2"],
        &["--tokens", "12", "--gaps-ms", "15"],
    );
    assert_eq!(code, Some(0), "{stdout}");
    assert_eq!(gate_judge_lines(&out), verdict_lines(&stdout));
    // Held to a floor no burst can reach, the same archive fails on the aggregate alone.
    let o = gate()
        .arg("judge")
        .arg(&out)
        .args(["--aggregate-floor", "1e9", "--min-speedup", "1024"])
        .output()
        .unwrap();
    let judged = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{judged}");
    assert!(
        line(&judged, "aggregate").contains("FAIL  below the floor and short of the speedup"),
        "{judged}"
    );
    // An archive without bursts has nothing those floors judge.
    let (_d2, single) = scratch();
    let (code, _) = stand_in_run(&single, &["--replies", "1"], &[]);
    assert_eq!(code, Some(0));
    let o = gate()
        .arg("judge")
        .arg(&single)
        .args(["--min-speedup", "2"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("has none"));
}

/// A prompts file: the first prompt's answer is 2 tokens, the second's 400.
fn short_and_long(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("prompts.jsonl");
    std::fs::write(
        &path,
        "{\"prompt\": \"short\", \"max_tokens\": 2}\n{\"prompt\": \"long\", \"max_tokens\": 400}\n",
    )
    .unwrap();
    path
}

#[test]
fn sigterm_mid_burst_keeps_every_finished_stream_and_leaves_no_serve() {
    let (d, out) = scratch();
    let prompts = short_and_long(d.path());
    let hold = d.path().join("npu.hold");
    let mut args: Vec<String> = [
        "run",
        "--stand-in",
        "--floor",
        "0",
        "--first-token-ms",
        "600000",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for a in [
        "--out",
        &out.display().to_string(),
        "--hold",
        &hold.display().to_string(),
        "--prompts",
        &prompts.display().to_string(),
        "--replies",
        "1",
        "--concurrency",
        "4",
        "--rounds",
        "1",
        "--",
        "--tokens",
        "400",
        "--gaps-ms",
        "50",
    ] {
        args.push(a.to_string());
    }
    let mut g = Running::start(&args);
    let pid = wait_for_serve_pid(&out, LONG);
    // The single reply (short), then streams 2 and 4 (short) finish; 1 and 3 (400 tokens, 20 s)
    // are mid-stream.
    let start = Instant::now();
    while std::fs::read_to_string(out.join("replies.jsonl")).map_or(0, |t| t.lines().count()) < 3 {
        assert!(start.elapsed() < LONG, "{}", g.said);
        std::thread::sleep(Duration::from_millis(20));
    }
    g.signal(Signal::SIGTERM);
    assert_eq!(g.wait(LONG), Some(143), "{}", g.said);
    let result = json(&out.join("result.json"));
    assert_eq!(result["result"], "INTERRUPTED", "{result}");
    let replies = replies(&out);
    assert_eq!(replies.len(), 3, "{replies:?}");
    let finished: Vec<u64> = streams(&replies)
        .iter()
        .map(|r| r["burst"]["stream"].as_u64().unwrap())
        .collect();
    let mut finished = finished;
    finished.sort_unstable();
    assert_eq!(finished, [2, 4]);
    assert!(replies.iter().all(|r| r["error"].is_null()), "{replies:?}");
    assert!(
        !stand_in_alive(pid),
        "the serve (pid {pid}) outlived the gate"
    );
    assert!(hold_is_free(&hold));
}

#[test]
fn bad_burst_settings_are_refused_before_anything_starts() {
    let (_d, out) = scratch();
    // Counts out of range are clap's value errors: exit 2, the bounds said, nothing created.
    for (extra, says) in [
        (
            &["--concurrency", "0"][..],
            "concurrency 0 is out of range (1 to 1024",
        ),
        (&["--concurrency", "1025"][..], "1 to 1024"),
        (&["--concurrency", "-3"][..], "out of range"),
        (
            &["--concurrency", "4", "--rounds", "0"][..],
            "0 rounds is out of range",
        ),
    ] {
        refused_before_the_run(&out, &[&["--stand-in"][..], extra].concat(), says);
    }
    for (extra, says) in [
        (
            &["--rounds", "2"][..],
            "--rounds is for the concurrent bursts",
        ),
        (
            &["--min-speedup", "2"][..],
            "--min-speedup is for the concurrent bursts",
        ),
        (
            &["--concurrency", "2", "--min-speedup", "0"][..],
            "--min-speedup is how many times",
        ),
        (
            &["--concurrency", "2", "--aggregate-floor", "-1"][..],
            "--aggregate-floor must be",
        ),
        (
            &[
                "--concurrency",
                "2",
                "--metrics-url",
                "https://127.0.0.1:9/metrics",
            ][..],
            "not https",
        ),
        (
            &[
                "--concurrency",
                "2",
                "--metrics-url",
                "http://10.1.2.3:9090/metrics",
            ][..],
            "on loopback or on the serve's own host",
        ),
        (
            &["--concurrency", "2", "--metrics-url", "not a url"][..],
            "is not a URL",
        ),
    ] {
        refused_before_anything(&out, extra, &[], says);
    }
}

#[test]
fn a_metrics_url_on_loopback_is_accepted_and_what_it_answered_is_kept() {
    // Nothing listens on port 9 of loopback: the scrapes fail, and the run does not.
    let (_d, out) = scratch();
    let (code, stdout) = stand_in_run(
        &out,
        &[
            "--replies",
            "1",
            "--concurrency",
            "2",
            "--rounds",
            "1",
            "--metrics-url",
            "http://127.0.0.1:9/metrics",
        ],
        &[],
    );
    assert_eq!(code, Some(0), "{stdout}");
    let metrics = json(&out.join("metrics.json"));
    assert_eq!(metrics["given"], true);
    let phases: Vec<&str> = metrics["scrapes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["phase"].as_str().unwrap())
        .collect();
    assert_eq!(phases.first(), Some(&"before"));
    assert_eq!(phases.last(), Some(&"after"));
    assert!(metrics["scrapes"][0]["error"].is_string(), "{metrics}");
}

/// The stand-in's trace lines, parsed.
fn trace(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn each_streams_figures_are_pinned_to_what_the_stand_in_sent_on_its_connection() {
    let (d, out) = scratch();
    let path = d.path().join("trace.jsonl");
    let (code, stdout) = stand_in_run(
        &out,
        &["--replies", "1", "--concurrency", "4", "--rounds", "1"],
        &[
            "--tokens",
            "16",
            "--gaps-ms",
            "15",
            "--trace",
            path.to_str().unwrap(),
        ],
    );
    assert_eq!(code, Some(0), "{stdout}");
    let base = json(&out.join("run.json"))["clock"]["base_ns"]
        .as_u64()
        .unwrap();
    let lines = trace(&path);
    let replies = replies(&out);
    let bursts = streams(&replies);
    assert_eq!(bursts.len(), 4);
    let mut conns = Vec::new();
    for r in &bursts {
        let id = format!("npu-serve-smoke-{}", r["index"]);
        // The request the gate sent for this stream, found by the id it carried.
        let request: Vec<&Value> = lines
            .iter()
            .filter(|l| l["kind"] == "request" && l["request_id"] == id.as_str())
            .collect();
        assert_eq!(request.len(), 1, "{id}: {lines:?}");
        let conn = request[0]["conn"].as_u64().unwrap();
        conns.push(conn);
        let sent: Vec<u64> = lines
            .iter()
            .filter(|l| {
                l["kind"] == "event" && l["conn"] == conn && l["content_chars"].as_u64() > Some(0)
            })
            .map(|l| l["sent_ns"].as_u64().unwrap())
            .collect();
        let got: Vec<u64> = r["chunks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["content_chars"].as_u64() > Some(0))
            .map(|c| base + c["at_ns"].as_u64().unwrap())
            .collect();
        // Every text event the serve sent on this stream's connection, and only those.
        assert_eq!(got.len(), sent.len(), "{id}");
        assert_eq!(got.len(), 16, "{id}");
        // Received after sent, give or take the stand-in's stamp, taken once its write has
        // returned (the gate may read the bytes first): a wide 50 ms either way is plumbing,
        // and no load flips it the wrong way by that much.
        const SLACK_NS: u64 = 50_000_000;
        for (g, s) in got.iter().zip(&sent) {
            assert!(g + SLACK_NS >= *s, "{id}: received at {g}, sent at {s}");
        }
        // The first token, from the burst's release, is the serve's first send from it plus
        // however long the bytes took to be read (plumbing margins: 50 ms under, 1 s over).
        let release = base + r["sent_ns"].as_u64().unwrap();
        let reported = r["metrics"]["first_token_ms"].as_f64().unwrap();
        let truth = (sent[0] - release) as f64 / 1e6;
        assert!(
            reported + 50.0 >= truth && reported < truth + 1000.0,
            "{id}: {reported} ms against {truth} ms"
        );
    }
    conns.sort_unstable();
    conns.dedup();
    assert_eq!(conns.len(), 4, "every stream on a connection of its own");
}

#[test]
fn a_serve_that_serves_one_request_at_a_time_is_said_to_run_the_streams_one_after_another() {
    let (_d, out) = scratch();
    let (code, stdout) = stand_in_run(
        &out,
        &["--replies", "1", "--concurrency", "4", "--rounds", "1"],
        &["--serial", "--tokens", "10", "--gaps-ms", "10"],
    );
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        line(&stdout, "overlap").contains(
            "FAIL  the serve ran the streams one after another, not together: in every burst (1), no two of the 4 streams were decoding at once"
        ),
        "{stdout}"
    );
    // Each stream is fine on its own: that is why it takes a burst to see it.
    assert!(line(&stdout, "content").contains("ok"), "{stdout}");
    assert!(
        line(&stdout, "aggregate").contains("no better than one stream"),
        "{stdout}"
    );
}

#[test]
fn one_failing_stream_among_four_fails_content_naming_its_burst_and_stream() {
    let (_d, out) = scratch();
    // The 3rd chat request the stand-in receives (the single reply is the 1st) errors.
    let (code, stdout) = stand_in_run(
        &out,
        &["--replies", "1", "--concurrency", "4", "--rounds", "1"],
        &["--fault-request", "3", "--error-event-after", "2"],
    );
    assert_eq!(code, Some(1), "{stdout}");
    let replies = replies(&out);
    let failed: Vec<&Value> = replies.iter().filter(|r| r["error"].is_string()).collect();
    assert_eq!(failed.len(), 1, "{replies:?}");
    let f = failed[0];
    let name = format!(
        "burst 1 stream {} (reply {}) failed",
        f["burst"]["stream"], f["index"]
    );
    let content = line(&stdout, "content");
    assert!(
        content.contains("FAIL") && content.contains(&name),
        "{name}: {stdout}"
    );
    assert!(content.contains("CUDA out of memory"), "{stdout}");
    // The other streams overlapped and were judged.
    assert!(line(&stdout, "overlap").contains("ok"), "{stdout}");
}

#[test]
fn the_serves_own_metrics_are_matched_to_the_gates_count_and_a_lie_or_garbage_is_said() {
    let gate = ["--replies", "1", "--concurrency", "4", "--rounds", "2"];
    // Counted right: the stand-in's counter moved by the tokens it streamed.
    let (_d, out) = scratch();
    let (code, stdout) = stand_in_run(&out, &gate, &["--metrics", "--tokens", "12"]);
    assert_eq!(code, Some(0), "{stdout}");
    assert!(
        line(&stdout, "metrics").contains(
            "info  the serve counted 96 generated tokens over the bursts, as the gate did (96)"
        ),
        "{stdout}"
    );
    let metrics = json(&out.join("metrics.json"));
    let phases: Vec<&str> = metrics["scrapes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["phase"].as_str().unwrap())
        .collect();
    assert_eq!(phases, ["before", "during", "after"]);
    // A counter that counts 10 more a request: 8 streams, 80 tokens too many.
    let (_d, out) = scratch();
    let (code, stdout) = stand_in_run(
        &out,
        &gate,
        &[
            "--metrics",
            "--metrics-extra-tokens",
            "10",
            "--tokens",
            "12",
        ],
    );
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        line(&stdout, "metrics").contains(
            "FAIL  the serve's metrics say 176 tokens were generated over the bursts, and the gate counted 96"
        ),
        "{stdout}"
    );
    // Garbage at /metrics: said, and the gate's own figures stand.
    let (_d, out) = scratch();
    let (code, stdout) = stand_in_run(&out, &gate, &["--metrics", "--metrics-garbage"]);
    assert_eq!(code, Some(0), "{stdout}");
    assert!(
        line(&stdout, "metrics").contains("info  the serve's metrics could not be read (")
            && line(&stdout, "metrics").contains("the gate's own figures stand"),
        "{stdout}"
    );
    assert!(line(&stdout, "overlap").contains("ok"), "{stdout}");
    // No metrics at all: the serve's /metrics is tried once and not asked again.
    let (_d, out) = scratch();
    let (code, stdout) = stand_in_run(&out, &gate, &[]);
    assert_eq!(code, Some(0), "{stdout}");
    assert!(
        line(&stdout, "metrics").contains("the serve has no metrics at http://127.0.0.1:"),
        "{stdout}"
    );
    let metrics = json(&out.join("metrics.json"));
    assert_eq!(metrics["scrapes"].as_array().unwrap().len(), 1, "{metrics}");
    // The archive judges the same, metrics line and all.
    let o = gate_judge_lines(&out);
    assert_eq!(o, verdict_lines(&stdout));
}
