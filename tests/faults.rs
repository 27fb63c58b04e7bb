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
        content.contains("FAIL  reply 1 failed after saying \"Paris. ok\""),
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
