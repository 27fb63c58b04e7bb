//! Every fault a serve can throw: each a clear line and a kept run directory, never a panic or
//! a hang.

use crate::util::*;

#[test]
fn a_serve_binary_that_is_not_executable_is_exit_2() {
    let (d, out) = scratch();
    let serve = d.path().join("serve");
    std::fs::write(&serve, "#!/bin/sh\n").unwrap();
    gate()
        .args(["run", "--out"])
        .arg(&out)
        .arg("--")
        .arg(&serve)
        .assert()
        .code(2)
        .stderr(predicates::str::contains("is not executable"));
    assert!(!out.exists());
}

#[test]
fn a_serve_that_dies_mid_stream_fails_content_and_gets_no_more_requests() {
    let (_d, out) = scratch();
    let (code, stdout) = stand_in_run(
        &out,
        &["--replies", "3"],
        &["--tokens", "6", "--crash-after", "2"],
    );
    assert_eq!(code, Some(1), "{stdout}");
    let content = line(&stdout, "content");
    assert!(
        content.contains("FAIL  reply 1 failed after saying \"Paris. wool\""),
        "{content}"
    );
    assert!(
        content.contains(
            "the serve exited (exit status: 3) during reply 1; only 1 of 3 replies were made"
        ),
        "{content}"
    );
    let replies = replies(&out);
    assert_eq!(replies.len(), 1);
    assert!(replies[0]["error"].as_str().unwrap().len() > 10);
    assert_eq!(
        json(&out.join("run.json"))["serve_died"],
        "the serve exited (exit status: 3) during reply 1"
    );
}

#[test]
fn an_http_error_status_fails_quoting_status_and_body() {
    let (_d, out) = scratch();
    let (code, stdout) = stand_in_run(&out, &["--replies", "1"], &["--http-status", "503"]);
    assert_eq!(code, Some(1), "{stdout}");
    let content = line(&stdout, "content");
    assert!(
        content.contains("reply 1 failed: HTTP 503: \"{\\\"error\\\""),
        "{content}"
    );
    assert!(
        content.contains("scripted error from the stand-in"),
        "{content}"
    );
}

#[test]
fn a_line_that_is_not_sse_fails_quoting_it() {
    let (_d, out) = scratch();
    let (code, stdout) = stand_in_run(
        &out,
        &["--replies", "1"],
        &["--tokens", "5", "--garbage-after", "2"],
    );
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        line(&stdout, "content")
            .contains("a line of the stream is not SSE: \"this line is not SSE {\""),
        "{stdout}"
    );
}

#[test]
fn a_chunk_that_is_not_json_fails_quoting_it() {
    let (_d, out) = scratch();
    let (code, stdout) = stand_in_run(
        &out,
        &["--replies", "1"],
        &["--tokens", "5", "--bad-json-after", "2"],
    );
    assert_eq!(code, Some(1), "{stdout}");
    let content = line(&stdout, "content");
    assert!(content.contains("a chunk is not JSON"), "{content}");
    assert!(content.contains("[not json"), "{content}");
}

#[test]
fn a_stalled_stream_fails_after_the_reply_timeout() {
    let (_d, out) = scratch();
    let (code, stdout) = stand_in_run(
        &out,
        &["--replies", "1", "--reply-timeout", "0.5"],
        &["--tokens", "3", "--gaps-ms", "600000"],
    );
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        line(&stdout, "content").contains("the stream stalled: no bytes for 0.5 s"),
        "{stdout}"
    );
}

#[test]
fn a_stream_longer_than_the_reply_timeout_is_not_a_stall_while_bytes_keep_coming() {
    // The timeout bounds the wait for the next bytes, not the reply: 20 tokens 50 ms apart
    // (a tenth of the timeout) take about twice the timeout in all.
    let (_d, out) = scratch();
    let (code, stdout) = stand_in_run(
        &out,
        &["--replies", "1", "--reply-timeout", "0.5"],
        &["--tokens", "20", "--gaps-ms", "50"],
    );
    assert_eq!(code, Some(0), "{stdout}");
    let reply = &replies(&out)[0];
    assert!(reply["error"].is_null(), "{reply}");
    let streamed_ns = reply["end_ns"].as_u64().unwrap() - reply["sent_ns"].as_u64().unwrap();
    assert!(streamed_ns > 500_000_000, "the reply took {streamed_ns} ns");
}

#[test]
fn a_port_already_taken_fails_before_launching() {
    let (_d, out) = scratch();
    let taken = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
    let port = taken.local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{port}");
    let o = gate()
        .args(["run", "--url", &url, "--out"])
        .arg(&out)
        .args(["--", BIN, "stand-in", "--port", "{port}"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{stdout}");
    assert!(
        line(&stdout, "serve")
            .contains(&format!("port {port} is already taken by another process")),
        "{stdout}"
    );
    assert!(
        json(&out.join("run.json"))["serve_pid"].is_null(),
        "nothing was launched"
    );
}

#[test]
fn a_serve_that_ignores_sigterm_is_killed_after_the_grace_and_the_result_says_so() {
    let (_d, out) = scratch();
    let (code, stdout) = stand_in_run(
        &out,
        &["--replies", "1", "--grace", "0.5"],
        &["--ignore-term", "--tokens", "3"],
    );
    assert_eq!(code, Some(0), "{stdout}");
    assert!(
        line(&stdout, "stop").contains("info  the serve did not exit within the 0.5 s grace after SIGTERM and was killed (SIGKILL)"),
        "{stdout}"
    );
    let stop = &json(&out.join("run.json"))["stop"];
    assert_eq!(stop["killed"], true);
    assert_eq!(stop["exit_status"], "signal: 9 (SIGKILL)");
}

#[test]
fn a_wrapper_that_does_not_forward_signals_leaves_nothing_behind() {
    // The wrapper ignores TERM (as the llama-cpp-server Python launcher in effect does), runs
    // the real serve in its group, and starts a grandchild in a session of its own, out of the
    // group's reach.
    let (_d, out) = scratch();
    let marker = "41.4213562";
    let script = format!(
        "\"$0\" stand-in --port \"$1\" --tokens 3 & (setsid sleep {marker} &); trap '' TERM; wait"
    );
    let o = gate()
        .args(["run", "--replies", "1", "--grace", "1", "--out"])
        .arg(&out)
        .args(UNFLIPPABLE)
        .args(["--", "sh", "-c", &script, BIN, "{port}"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{stdout}");
    assert!(
        !process_with(marker),
        "the escaped grandchild survived the gate"
    );
    assert!(
        line(&stdout, "stop")
            .contains("1 process(es) had left the serve's process group and were killed"),
        "{stdout}"
    );
}

#[test]
fn a_hold_program_prefix_runs_the_serve() {
    let (_d, out) = scratch();
    let hold_cmd = "sh -c 'echo npu-hold: ticket granted >&2; exec \"$@\"' npu-hold";
    let (code, stdout) = stand_in_run(
        &out,
        &["--replies", "1", "--hold-cmd", hold_cmd],
        &["--tokens", "3"],
    );
    assert_eq!(code, Some(0), "{stdout}");
    let run = json(&out.join("run.json"));
    assert_eq!(run["serve_argv"][0], "sh");
    assert_eq!(run["serve_argv"][4], BIN, "{run}");
    assert_eq!(
        run["serve_binary"]["path"],
        std::fs::canonicalize(BIN).unwrap().display().to_string()
    );
    let log = std::fs::read_to_string(out.join("serve.log")).unwrap();
    assert!(log.contains("npu-hold: ticket granted"), "{log}");

    gate()
        .args([
            "run",
            "--stand-in",
            "--hold-cmd",
            "no-such-hold-program-xyz --",
        ])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("--hold-cmd"));
}

#[test]
fn never_ready_means_fail_after_the_ready_timeout() {
    let (_d, out) = scratch();
    let (code, stdout) = stand_in_run(&out, &["--ready-timeout", "0.5"], &["--never-ready"]);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        line(&stdout, "serve").contains("not ready after 0.5 s"),
        "{stdout}"
    );
}

// What the serve says, sends, or never stops sending (issue 14): each fault is a FAIL in the
// serve's words or the gate's bound, with result.json agreeing with the exit code, within a
// bounded time, and the gate's own peak RSS (run.json `gate_max_rss_kib`, its VmHWM) under
// 64 MiB.

/// The gate's peak RSS every fault must stay under, KiB.
const RSS_CAP_KIB: u64 = 64 * 1024;

/// A gate run against the stand-in with a scripted fault.
struct Fault {
    code: Option<i32>,
    stdout: String,
    took: std::time::Duration,
    out: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Fault {
    /// Run the gate on the stand-in with `script`, with floors no timing can flip.
    fn run(gate_args: &[&str], script: &[&str]) -> Fault {
        let (dir, out) = scratch();
        let start = std::time::Instant::now();
        let (code, stdout) = stand_in_run(&out, gate_args, script);
        let fault = Fault {
            code,
            stdout,
            took: start.elapsed(),
            out,
            _dir: dir,
        };
        fault.check_bounds();
        fault
    }

    /// What every fault must keep to: an end within `limit`, result.json agreeing with the
    /// exit code, and the gate's peak RSS under the cap.
    fn check_bounds(&self) {
        assert!(
            self.took < std::time::Duration::from_secs(60),
            "the gate took {:?}:\n{}",
            self.took,
            self.stdout
        );
        let result = json(&self.out.join("result.json"));
        let want = match self.code {
            Some(0) => "PASS",
            Some(1) => "FAIL",
            other => panic!("exit {other:?}:\n{}", self.stdout),
        };
        assert_eq!(result["result"], want, "{}", self.stdout);
        let rss = json(&self.out.join("run.json"))["gate_max_rss_kib"]
            .as_u64()
            .expect("run.json records the gate's peak RSS");
        assert!(rss < RSS_CAP_KIB, "the gate's peak RSS was {rss} KiB");
    }

    fn line(&self, check: &str) -> &str {
        line(&self.stdout, check)
    }

    /// The content line must FAIL and say `text`.
    fn fails_saying(&self, text: &str) {
        assert_eq!(self.code, Some(1), "{}", self.stdout);
        let content = self.line("content");
        assert!(
            content.starts_with("content      FAIL") && content.contains(text),
            "content should FAIL saying {text:?}:\n{}",
            self.stdout
        );
    }

    fn reply(&self, i: usize) -> serde_json::Value {
        replies(&self.out)[i].clone()
    }
}

#[test]
fn an_error_frame_after_content_fails_the_reply_quoting_the_serves_message() {
    let f = Fault::run(
        &["--replies", "1"],
        &["--tokens", "6", "--error-event-after", "2"],
    );
    f.fails_saying(
        "reply 1 failed after saying \"Paris. wool\": the serve reported an error: \"CUDA out of memory\"",
    );
    let reply = f.reply(0);
    assert_eq!(reply["content"], "Paris. wool", "what came before is kept");
    assert_eq!(
        reply["error"],
        "the serve reported an error: \"CUDA out of memory\""
    );
}

#[test]
fn error_frames_of_other_shapes_fail_in_the_serves_words() {
    for (data, says) in [
        (
            r#"{"error":"string"}"#,
            "the serve reported an error: \"string\"",
        ),
        (
            r#"{"message":"boom under event: error"}"#,
            "the serve reported an error: \"boom under event: error\"",
        ),
        (
            r#"{"error":{"code":500}}"#,
            "the serve reported an error: \"{\\\"code\\\":500}\"",
        ),
        (
            "out of memory (not JSON)",
            "the serve reported an error: \"out of memory (not JSON)\"",
        ),
    ] {
        let f = Fault::run(
            &["--replies", "1"],
            &[
                "--tokens",
                "6",
                "--error-event-after",
                "2",
                "--error-data",
                data,
            ],
        );
        f.fails_saying(says);
    }
    // A frame of the test's own: `event: error` with no data at all.
    let f = Fault::run(
        &["--replies", "1"],
        &[
            "--tokens",
            "6",
            "--inject-after",
            "3",
            "--inject",
            "event: error\n\n",
        ],
    );
    f.fails_saying(
        "reply 1 failed after saying \"Paris. wool ocean\": the serve reported an error (an `event: error` with no data)",
    );
}

#[test]
fn an_error_chunk_fails_the_reply_and_alone_says_the_serves_message_not_no_content() {
    let f = Fault::run(
        &["--replies", "1"],
        &["--tokens", "6", "--error-chunk-after", "2"],
    );
    f.fails_saying(
        "after saying \"Paris. wool\": the serve reported an error: \"CUDA out of memory\"",
    );
    let f = Fault::run(
        &["--replies", "1"],
        &[
            "--tokens",
            "6",
            "--error-chunk-after",
            "0",
            "--error-data",
            r#"{"error":{"message":"model not loaded","type":"server_error"}}"#,
        ],
    );
    f.fails_saying("reply 1 failed: the serve reported an error: \"model not loaded\"");
    assert!(
        !f.line("content").contains("has no content"),
        "{}",
        f.stdout
    );
    // A chunk of the test's own: text and an error in one.
    let f = Fault::run(
        &["--replies", "1"],
        &[
            "--tokens",
            "6",
            "--inject-after",
            "2",
            "--inject",
            "data: {\"choices\":[{\"delta\":{\"content\":\" more\"}}],\"error\":{\"message\":\"late\"}}\n\n",
        ],
    );
    f.fails_saying("the serve reported an error: \"late\"");
}

#[test]
fn a_finish_reason_of_error_fails_the_reply() {
    let f = Fault::run(
        &["--replies", "1"],
        &["--tokens", "4", "--finish-reason", "error"],
    );
    f.fails_saying(
        "reply 1 failed after saying \"Paris. wool ocean star\": the serve ended the reply with finish_reason \"error\"",
    );
    assert_eq!(f.reply(0)["finish_reason"], "error");
}

#[test]
fn a_usage_count_the_streamed_text_cannot_hold_is_not_believed() {
    // 5 one-word chunks 100 ms apart, claimed as a million tokens: on the claim, well over
    // any floor; on the chunks, 10 tok/s, under 60.
    let (_d, out) = scratch();
    let o = gate()
        .args(["run", "--stand-in", "--replies", "2", "--floor", "60"])
        .args(["--first-token-ms", "600000", "--out"])
        .arg(&out)
        .args([
            "--",
            "--tokens",
            "5",
            "--gaps-ms",
            "100",
            "--usage-claims",
            "1000000",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{stdout}");
    assert_eq!(json(&out.join("result.json"))["result"], "FAIL");
    let rate = line(&stdout, "rate");
    assert!(rate.starts_with("rate         FAIL"), "{stdout}");
    assert!(
        rate.contains("; usage not believed for reply 1: it claimed 1000000 tokens for 5 chunks of 28 bytes of text; the rate is from the chunks; usage not believed for reply 2"),
        "{stdout}"
    );
    let m = &replies(&out)[0]["metrics"];
    assert_eq!(m["token_source"], "chunks-usage-not-believed", "{m}");
    assert_eq!(m["tokens"], 5.0);
    assert!(m["rate_tok_s"].as_f64().unwrap() < 60.0, "{m}");

    // A lie of a made-up size, at the edge: 5 chunks of 13 bytes ("Paris", " a", ... " d")
    // hold at most 18 tokens. 18 is believed, 19 is not.
    for (claim, source) in [("18", "usage"), ("19", "chunks-usage-not-believed")] {
        let f = Fault::run(
            &["--replies", "1"],
            &[
                "--tokens",
                "5",
                "--answer",
                "Paris a b c d",
                "--usage-claims",
                claim,
            ],
        );
        assert_eq!(f.code, Some(0), "{}", f.stdout);
        assert_eq!(f.reply(0)["metrics"]["token_source"], source, "{claim}");
        assert_eq!(
            f.line("rate").contains(
                "usage not believed for reply 1: it claimed 19 tokens for 5 chunks of 13 bytes of text"
            ),
            claim == "19",
            "{}",
            f.stdout
        );
    }
}

#[test]
fn a_trickling_serve_fails_at_the_reply_limit_saying_how_much_it_sent() {
    let f = Fault::run(
        &["--replies", "1", "--reply-limit", "1.5"],
        &["--tokens", "5", "--trickle-ms", "20"],
    );
    f.fails_saying("reply 1 failed: the reply did not end within 1.5 s (--reply-limit); by then the serve had sent ");
    assert!(
        f.line("content").contains(" bytes, 0 events (0 with text)"),
        "{}",
        f.stdout
    );
    // A trickle of a huge chunk, under the limit derived from max_tokens: --reply-timeout (1 s)
    // plus 1 s for each of 2 tokens.
    let f = Fault::run(
        &[
            "--replies",
            "2",
            "--max-tokens",
            "2",
            "--reply-timeout",
            "1",
        ],
        &[
            "--tokens",
            "2",
            "--big-chunk",
            "1000000",
            "--trickle-ms",
            "1",
        ],
    );
    f.fails_saying("reply 1 failed: the reply did not end within 3 s (--reply-limit)");
    assert!(
        f.line("content")
            .contains("reply 2 failed: the reply did not end within 3 s"),
        "{}",
        f.stdout
    );
}

#[test]
fn tokens_without_end_fail_when_they_pass_what_max_tokens_allows() {
    let f = Fault::run(&["--replies", "1"], &["--endless", "--gaps-ms", "0"]);
    f.fails_saying("the serve sent more than 320 events (320 with text) for max_tokens 64: it does not stop at max_tokens");
    assert_eq!(f.reply(0)["chunks"].as_array().unwrap().len(), 320);
    // Slower than the cap can catch in time: the limit derived from max_tokens ends it
    // (1 s + 3 x 1 s), not the 76-event cap (300 ms apart, 23 s).
    let f = Fault::run(
        &[
            "--replies",
            "1",
            "--max-tokens",
            "3",
            "--reply-timeout",
            "1",
        ],
        &["--endless", "--gaps-ms", "300"],
    );
    f.fails_saying("the reply did not end within 4 s (--reply-limit); by then the serve had sent ");
}

#[test]
fn a_reply_ends_at_done_though_the_serve_keeps_the_connection_open() {
    // At the default --reply-timeout (60 s) a reply read past [DONE] would stall and FAIL.
    for after in ["silent", "comments"] {
        let f = Fault::run(
            &["--replies", "2"],
            &["--tokens", "5", "--after-done", after],
        );
        assert_eq!(f.code, Some(0), "{after}: {}", f.stdout);
        assert!(f.reply(1)["error"].is_null(), "{after}");
    }
}

#[test]
fn a_finish_reason_then_neither_done_nor_an_end_fails_within_the_bounds() {
    let f = Fault::run(
        &["--replies", "1", "--reply-timeout", "1"],
        &["--tokens", "5", "--no-done", "--after-done", "silent"],
    );
    f.fails_saying("the serve sent its finish_reason (\"stop\") but then neither [DONE] nor the end of the stream: no bytes for 1 s");
    let f = Fault::run(
        &["--replies", "1", "--reply-limit", "1.5"],
        &["--tokens", "5", "--no-done", "--after-done", "comments"],
    );
    f.fails_saying("the reply did not end within 1.5 s (--reply-limit)");
    assert!(
        f.line("content")
            .contains("; it had sent its finish_reason (\"stop\") but no [DONE]"),
        "{}",
        f.stdout
    );
    // A finish_reason and then the end of the stream is a complete reply, as before.
    let f = Fault::run(&["--replies", "1"], &["--tokens", "5", "--no-done"]);
    assert_eq!(f.code, Some(0), "{}", f.stdout);
}

#[test]
fn an_error_body_without_end_is_cut_and_quoted() {
    let f = Fault::run(
        &["--replies", "2"],
        &["--http-status", "500", "--endless-body"],
    );
    f.fails_saying("reply 1 failed: HTTP 500: \"{\\\"error\\\":{\\\"code\\\":500,\\\"message\\\":\\\"scripted error from the stand-in\\\"}}");
    assert!(
        f.line("content").contains("reply 2 failed: HTTP 500"),
        "{}",
        f.stdout
    );
    // Trickled: what came within --reply-timeout is quoted.
    let f = Fault::run(
        &["--replies", "1", "--reply-timeout", "1"],
        &[
            "--http-status",
            "503",
            "--endless-body",
            "--trickle-ms",
            "10",
        ],
    );
    f.fails_saying("reply 1 failed: HTTP 503: \"{\\\"error");
}

#[test]
fn an_sse_line_without_end_fails_at_the_line_cap() {
    let f = Fault::run(
        &["--replies", "2"],
        &["--tokens", "5", "--endless-line-after", "2"],
    );
    f.fails_saying("reply 1 failed after saying \"Paris. wool\": a line of the stream passed 16 MiB without ending (the gate's cap on one SSE line)");
    // One chunk of 20 MB is refused the same way.
    let f = Fault::run(
        &["--replies", "1"],
        &["--tokens", "5", "--big-chunk", "20000000"],
    );
    f.fails_saying("reply 1 failed: a line of the stream passed 16 MiB without ending");
}

#[test]
fn a_real_10_mb_chunk_passes_and_its_content_is_judged() {
    let f = Fault::run(
        &["--replies", "1"],
        &[
            "--tokens",
            "5",
            "--big-chunk",
            "10000000",
            "--gaps-ms",
            "200",
        ],
    );
    // Plumbing, not timing: on a busy box the gate can still be reading the 10 MB chunk when
    // the last tokens come, so they land in one read and the reply has no rate (rate FAIL, a
    // timing verdict). Nothing else may fail.
    let failed: Vec<&str> = f
        .stdout
        .lines()
        .filter(|l| l.split_whitespace().nth(1) == Some("FAIL"))
        .filter(|l| !l.starts_with("rate "))
        .collect();
    assert!(failed.is_empty(), "{}", f.stdout);
    assert!(
        f.line("content")
            .contains("with content and the expected answer"),
        "{}",
        f.stdout
    );
    let reply = f.reply(0);
    assert!(reply["content"].as_str().unwrap().len() > 10_000_000);
    assert!(reply["content"]
        .as_str()
        .unwrap()
        .starts_with("Paris. rock maple"));
}

/// Replies are archived whole and judged by their heads: eight replies of 10 MB each keep the
/// gate under its memory cap (they once all stayed in memory: 80 MB), and `judge` reads the
/// archive to the same verdict. The answer to "2 + 2" comes after the 10 MB chunk, past the
/// judged head, and the content line says so.
#[test]
fn many_large_replies_are_archived_whole_and_judged_by_their_heads() {
    // check_bounds holds the gate's peak RSS under RSS_CAP_KIB.
    let f = Fault::run(
        &["--replies", "8"],
        &["--tokens", "3", "--big-chunk", "10000000"],
    );
    for i in 0..8 {
        assert!(f.reply(i)["content"].as_str().unwrap().len() > 10_000_000);
    }
    let content = f.line("content").to_string();
    assert!(
        content.contains("reply 2 said \"2 farm road")
            && content.contains(
                "which does not match /\\b4\\b/ in its first 256 KiB (the most of a reply's text the gate judges; it sent 1000"
            )
            && !content.contains("reply 1 "),
        "{content}"
    );
    let judged = gate_judge_lines(&f.out);
    assert!(
        judged.iter().any(|l| l == &content),
        "judge: {judged:?}\nrun: {content}"
    );
}

#[test]
fn text_past_the_cap_on_one_reply_fails_and_a_failed_reply_keeps_its_head() {
    // Three chunks of 7 MB: 21 MB of text, over the 16 MiB cap, in every reply of three.
    let f = Fault::run(
        &["--replies", "3"],
        &[
            "--tokens",
            "5",
            "--big-chunk",
            "7000000",
            "--big-chunks",
            "3",
        ],
    );
    f.fails_saying("reply 1 failed after saying \"Paris. rock maple");
    assert!(
        f.line("content").contains(
            "the reply's text passed 16 MiB (the gate's cap on one reply's text); reply 2 failed"
        ),
        "{}",
        f.stdout
    );
    let reply = f.reply(2);
    assert_eq!(reply["content"].as_str().unwrap().len(), 64 << 10);
    let received = reply["text_cut"]["content_bytes"].as_u64().unwrap();
    assert!(
        (14_000_000..14_000_100).contains(&received),
        "two 7 MB chunks before the third passed the cap: {received}"
    );
}

#[test]
fn a_200_that_is_not_an_event_stream_says_so() {
    let f = Fault::run(&["--replies", "1"], &["--not-sse"]);
    f.fails_saying("reply 1 failed: the serve's answer is not an event stream but JSON (Content-Type \"application/json\"), as a serve that ignores \"stream\": true sends: \"{");
    assert!(!f.line("content").contains("mid-event"), "{}", f.stdout);
    // Labelled an event stream, but starting with JSON of its own.
    let f = Fault::run(
        &["--replies", "1"],
        &[
            "--tokens",
            "3",
            "--inject-after",
            "0",
            "--inject",
            "{\"choices\":[]}\n",
        ],
    );
    f.fails_saying("reply 1 failed: the serve's answer is labelled an event stream (Content-Type \"text/event-stream\") but is not one: \"{\\\"choices\\\":[]}\"");
}

#[test]
fn json_of_the_wrong_shape_is_not_called_not_json() {
    let f = Fault::run(
        &["--replies", "1"],
        &["--tokens", "5", "--wrong-shape-after", "2"],
    );
    f.fails_saying(
        "a chunk is JSON but not a chat completion chunk (invalid type: map, expected a sequence",
    );
    for data in [
        "[1,2]",
        "\"just text\"",
        "{\"choices\":[{\"delta\":{\"content\":5}}]}",
    ] {
        let f = Fault::run(
            &["--replies", "1"],
            &[
                "--tokens",
                "5",
                "--inject-after",
                "2",
                "--inject",
                &format!("data: {data}\n\n"),
            ],
        );
        f.fails_saying("a chunk is JSON but not a chat completion chunk (invalid type");
    }
    let f = Fault::run(
        &["--replies", "1"],
        &["--tokens", "5", "--bad-json-after", "2"],
    );
    f.fails_saying("a chunk is not JSON (");
}

/// An attached serve that never answers: the serve line says what the probe got (connection
/// refused), not that some log is empty. (issue 15, item 9)
#[test]
fn an_attached_serve_that_never_answers_says_connection_refused() {
    let (_d, out) = scratch();
    // A port nothing listens on: bound and let go.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let o = gate()
        .args(["run", "--ready-timeout", "1", "--out"])
        .arg(&out)
        .args(["--url", &format!("http://127.0.0.1:{port}")])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{stdout}");
    let serve = line(&stdout, "serve");
    assert!(
        serve.contains(&format!("neither http://127.0.0.1:{port}/health nor"))
            && serve.contains("it gave no HTTP answer")
            && serve.contains("Connection refused"),
        "{serve}"
    );
    assert!(!serve.contains("log"), "{serve}");
    assert_eq!(json(&out.join("result.json"))["result"], "FAIL");
}

/// The gate asks for one choice: only choice 0, found by its index, is the reply. A serve whose
/// choice 0 said "London." and whose choice 1 said "Paris." once passed on choice 1's words,
/// whether they came in chunks of their own or first in choice 0's. (issue 30)
#[test]
fn issue_30_a_wrong_choice_0_beside_a_right_choice_1_fails_naming_the_index() {
    for shape in ["own-chunk", "before"] {
        let f = Fault::run(
            &["--replies", "1"],
            &[
                "--tokens",
                "4",
                "--answer",
                "London.",
                "--other-choice",
                "Paris.",
                "--other-choice-in",
                shape,
            ],
        );
        f.fails_saying(
            "reply 1 streamed choice index 1, which the gate did not ask for (it asks for one choice, n=1)",
        );
        assert!(f.stdout.contains("RESULT: FAIL"), "{shape}: {}", f.stdout);
        let reply = f.reply(0);
        assert_eq!(reply["content"], "London. shoe sand ship", "{shape}");
        assert_eq!(reply["unrequested_choice"], 1, "{shape}");
        assert_eq!(reply["finish_reason"], "stop", "{shape}");
        // Re-judged from the archive alone, line for line.
        assert_eq!(
            gate_judge_lines(&f.out),
            verdict_lines(&f.stdout),
            "{shape}"
        );
    }
}

/// Choices the gate did not ask for are a fault even when choice 0 is right: which choice a
/// client shows is not the gate's to guess. Only the reply that streamed one is named.
/// (issue 30)
#[test]
fn issue_30_another_choice_fails_content_even_when_choice_0_is_right() {
    let f = Fault::run(
        &["--replies", "3"],
        &[
            "--tokens",
            "6",
            "--other-choice",
            "and some more",
            "--other-choice-in",
            "after",
            "--fault-request",
            "2",
        ],
    );
    f.fails_saying(
        "FAIL  reply 2 streamed choice index 1, which the gate did not ask for (it asks for one choice, n=1)",
    );
    let content = f.line("content");
    assert!(
        !content.contains("reply 1") && !content.contains("reply 3"),
        "{content}"
    );
    assert_eq!(f.reply(1)["content"], "2 + 2 = 4. salt");
    assert!(f.reply(0).get("unrequested_choice").is_none());
    assert_eq!(gate_judge_lines(&f.out), verdict_lines(&f.stdout));
}

/// The stand-in's own chunks say index 0 and pass; a chunk whose choices come as [index 1,
/// index 0] adds index 0's text to the reply, not index 1's. (issue 30)
#[test]
fn issue_30_the_reply_is_choice_0s_text_in_whatever_order_the_choices_come() {
    let f = Fault::run(&["--replies", "1"], &["--tokens", "4"]);
    assert_eq!(f.code, Some(0), "{}", f.stdout);
    assert!(f.line("content").contains("ok"), "{}", f.stdout);
    let reply = f.reply(0);
    assert_eq!(reply["content"], "Paris. wool ocean star");
    assert!(reply.get("unrequested_choice").is_none(), "{reply}");
    let f = Fault::run(
        &["--replies", "1"],
        &[
            "--tokens",
            "4",
            "--inject-after",
            "2",
            "--inject",
            "data: {\"choices\":[{\"index\":1,\"delta\":{\"content\":\" Lyon\"}},{\"index\":0,\"delta\":{\"content\":\" Nice\"}}]}\n\n",
        ],
    );
    f.fails_saying("reply 1 streamed choice index 1");
    assert_eq!(f.reply(0)["content"], "Paris. wool Nice ocean star");
}
