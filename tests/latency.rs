//! `--warmup` and the latency line against the stand-in (issue 21, item 5): warm-ups are
//! recorded and flagged, never judged; the peers' figures are in result.json.

use crate::util::*;

#[test]
fn issue_21_warm_ups_are_recorded_first_and_flagged_and_the_latency_figures_are_in_result_json() {
    let (_d, out) = scratch();
    let (code, stdout) = stand_in_run(&out, &["--warmup", "1", "--replies", "3"], &[]);
    assert_eq!(code, Some(0), "{stdout}");
    let replies = replies(&out);
    assert_eq!(replies.len(), 4, "one warm-up and three judged replies");
    let indices: Vec<u64> = replies
        .iter()
        .map(|r| r["index"].as_u64().unwrap())
        .collect();
    assert_eq!(indices, [1, 2, 3, 4]);
    assert_eq!(replies[0]["warmup"], true);
    for r in &replies[1..] {
        assert!(r.get("warmup").is_none(), "a judged reply has no flag: {r}");
    }
    let manifest = json(&out.join("run.json"));
    assert_eq!(manifest["warmup"], 1);
    assert_eq!(manifest["replies_planned"], 3);

    let result = json(&out.join("result.json"));
    let lines = result["lines"].as_array().unwrap();
    let figures = |check: &str| {
        lines
            .iter()
            .find(|l| l["check"] == check)
            .unwrap_or_else(|| panic!("no {check} line in {result}"))["figures"]
            .clone()
    };
    assert_eq!(figures("rate")["values"], 3, "the warm-up is not judged");
    assert_eq!(figures("first-token")["values"], 3);
    let latency = figures("latency");
    for name in ["ttft_ms", "itl_ms", "tpot_ms", "e2el_ms"] {
        let p = &latency[name];
        let (p50, p99) = (p["p50"].as_f64().unwrap(), p["p99"].as_f64().unwrap());
        assert!(p50 >= 0.0 && p99 >= p50, "{name}: {p}");
    }
    assert_eq!(latency["ttft_ms"]["count"], 3);
    assert_eq!(latency["e2el_ms"]["count"], 3);
    // ITL pools every gap between text events of the judged replies, the warm-up's not.
    let gaps: u64 = replies[1..]
        .iter()
        .map(|r| r["metrics"]["text_chunks"].as_u64().unwrap() - 1)
        .sum();
    assert_eq!(latency["itl_ms"]["count"], gaps);
    let order: Vec<&str> = lines.iter().map(|l| l["check"].as_str().unwrap()).collect();
    let at = |c: &str| order.iter().position(|x| *x == c).unwrap();
    assert!(
        at("first-token") < at("latency") && at("latency") < at("content"),
        "{order:?}"
    );
    assert!(
        line(&stdout, "latency").contains("info  TTFT p50"),
        "{stdout}"
    );
}

#[test]
fn warm_up_progress_lines_say_warm_up() {
    let (_d, out) = scratch();
    let o = gate()
        .args([
            "run",
            "--stand-in",
            "--warmup",
            "2",
            "--replies",
            "1",
            "--out",
        ])
        .arg(&out)
        .args(UNFLIPPABLE)
        .args(["--", "--tokens", "3"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("warm-up 1/2: "), "{stderr}");
    assert!(stderr.contains("warm-up 2/2: "), "{stderr}");
    assert!(stderr.contains("reply 3/3: "), "{stderr}");
}

#[test]
fn a_failed_warm_up_fails_content_saying_so() {
    let (_d, out) = scratch();
    // The stand-in answers every completion with 503: the warm-up fails, and so do the rest.
    let (code, stdout) = stand_in_run(
        &out,
        &["--warmup", "1", "--replies", "1"],
        &["--http-status", "503"],
    );
    assert_eq!(code, Some(1), "{stdout}");
    let content = line(&stdout, "content");
    assert!(
        content.contains("FAIL  the warm-up reply 1 failed: "),
        "{content}"
    );
}

/// Per reply, from the stand-in's own trace: the request's arrival, and the stamps of the first
/// reasoning event, of the last event before the first content event, and of the first content
/// event (each stamped once its write had returned). Replies made one after another.
fn reasoning_then_content(trace: &std::path::Path) -> Vec<[u64; 4]> {
    use npu_serve_smoke::standin::TraceLine;
    let text = std::fs::read_to_string(trace).unwrap();
    let mut per_reply: Vec<(u64, Vec<(u64, bool)>)> = Vec::new();
    for l in text.lines() {
        match serde_json::from_str(l).unwrap() {
            TraceLine::Request { received_ns, .. } => per_reply.push((received_ns, Vec::new())),
            TraceLine::Event {
                sent_ns,
                content_chars,
                reasoning_chars,
                ..
            } if content_chars > 0 || reasoning_chars > 0 => {
                let (_, events) = per_reply.last_mut().expect("an event after its request");
                events.push((sent_ns, content_chars > 0));
            }
            _ => {}
        }
    }
    per_reply
        .into_iter()
        .map(|(received, events)| {
            let answer = events.iter().position(|e| e.1).expect("an answer");
            assert!(answer > 0 && !events[0].1, "reasoning first: {events:?}");
            [
                received,
                events[0].0,
                events[answer - 1].0,
                events[answer].0,
            ]
        })
        .collect()
}

/// A reasoning-first reply (issue 37, item 5): the stand-in reasons 4 tokens, each followed by
/// 150 ms, before its answer, so its first content token is sent at least 600 ms after its first
/// token. The gate's figures are pinned to what the stand-in sent (a lower bound from its
/// trace, never an upper bound on the clock), the latency line and result.json carry TTFO,
/// and `--first-token-of content` makes the first-token line judge it: a limit between the two
/// medians FAILs with content and passes with any, on `judge DIR` as on the run.
#[test]
fn issue_37_a_reasoning_first_replys_first_content_token_is_timed_and_judged_apart() {
    let (d, out) = scratch();
    let trace = d.path().join("trace.jsonl");
    // 150 ms after each reasoning token, 10 ms after each answer token (a gap a chunk).
    let gaps = format!("150,150,150,150{}", ",10".repeat(11));
    let script = [
        "--reasoning-tokens",
        "4",
        "--tokens",
        "16",
        "--gaps-ms",
        &gaps,
        "--trace",
        trace.to_str().unwrap(),
    ];
    let (code, stdout) = stand_in_run(
        &out,
        &["--replies", "3", "--first-token-of", "content"],
        &script,
    );
    assert_eq!(code, Some(0), "{stdout}");
    let manifest = json(&out.join("run.json"));
    assert_eq!(manifest["floors"]["first_token_of"], "content");

    // The stand-in's own sends: 4 gaps of 150 ms from the first reasoning event to the answer.
    let sent = reasoning_then_content(&trace);
    assert_eq!(sent.len(), 3, "{sent:?}");
    let replies = replies(&out);
    for (r, [received, first_reasoning, before_answer, answer]) in replies.iter().zip(&sent) {
        assert!(answer - first_reasoning >= 600_000_000, "{sent:?}");
        let m = &r["metrics"];
        let sent_ns = m["sent_ns"].as_u64().unwrap();
        let ms = |k: &str| m[k].as_f64().unwrap_or_else(|| panic!("{k}: {m}"));
        let (ttft, ttfo) = (ms("first_token_ms"), ms("first_content_token_ms"));
        // The gate sent before the stand-in received, and read the answer after the event
        // before it had been written: its TTFO is at least the stand-in's wait to that event.
        assert!(sent_ns <= *received, "{sent_ns} {received}");
        let floor_ms = (before_answer - received) as f64 / 1e6;
        assert!(ttfo >= floor_ms, "TTFO {ttfo} ms < {floor_ms} ms sent: {m}");
        assert!(ttft <= ttfo, "{m}");
        // The reply's first content event is the one the gate timed.
        let first_content = r["chunks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["content_chars"].as_u64() > Some(0))
            .unwrap();
        let at = first_content["at_ns"].as_u64().unwrap();
        assert_eq!(ttfo, (at - sent_ns) as f64 / 1e6);
    }

    let result = json(&out.join("result.json"));
    let figures = |check: &str| line_figures(&result, check);
    let latency = figures("latency");
    let (ttft_p50, ttfo_p50) = (
        latency["ttft_ms"]["p50"].as_f64().unwrap(),
        latency["ttfo_ms"]["p50"].as_f64().unwrap(),
    );
    assert_eq!(latency["ttfo_ms"]["count"], 3);
    assert!(ttfo_p50 > ttft_p50, "{latency}");
    // The first-token line judged the first content token: its median is TTFO's.
    assert_eq!(figures("first-token")["median"].as_f64(), Some(ttfo_p50));
    let first = line(&stdout, "first-token");
    assert!(
        first.contains("ok    first content token median "),
        "{first}"
    );
    let latency_line = line(&stdout, "latency");
    assert!(
        latency_line.contains("; TTFO p50 ")
            && latency_line.contains("; TTFO is to the first content token: "),
        "{latency_line}"
    );
    assert_eq!(
        gate_judge_lines(&out),
        verdict_lines(&stdout),
        "judge DIR reads the same"
    );

    // A limit between the two medians: FAIL held to the first content token (the recorded
    // choice), ok held to the first token of any channel (the override).
    let limit = format!("{}", (ttft_p50 + ttfo_p50) / 2.0);
    let judged = |extra: &[&str]| {
        let o = gate()
            .arg("judge")
            .arg(&out)
            .args(["--first-token-ms", &limit])
            .args(extra)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
        (o.status.code(), line(&stdout, "first-token").to_string())
    };
    let (code, content) = judged(&[]);
    assert_eq!(code, Some(1), "{content}");
    assert!(
        content.contains("FAIL  first content token median "),
        "{content}"
    );
    let (code, any) = judged(&["--first-token-of", "any"]);
    assert_eq!(code, Some(0), "{any}");
    assert!(any.contains("ok    median "), "{any}");
}
