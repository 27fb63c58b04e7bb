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
