//! `run` against the stand-in: lines, exit codes, and the run directory.

use crate::util::*;
use npu_serve_smoke::archive::rundir::ResultFile;

#[test]
fn a_stand_in_run_passes_and_archives_every_file() {
    let (_d, out) = scratch();
    let o = gate()
        .args(["run", "--stand-in", "--out"])
        .arg(&out)
        .args(UNFLIPPABLE)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(stdout.ends_with("RESULT: PASS\n"), "{stdout}");
    for check in ["route", "rate", "first-token", "content", "load"] {
        line(&stdout, check);
    }
    assert!(
        line(&stdout, "content").contains("3 replies, all with content and the expected answer")
    );

    let run = json(&out.join("run.json"));
    assert_eq!(run["schema"], 1);
    assert_eq!(run["replies_planned"], 3);
    assert_eq!(run["model"], "stand-in");
    assert_eq!(run["serve_binary"]["sha256"].as_str().unwrap().len(), 64);
    assert!(
        run["serve_argv"][3]
            .as_str()
            .unwrap()
            .parse::<u16>()
            .is_ok(),
        "{{port}} filled: {run}"
    );
    assert_eq!(run["startup"]["state"], "ready");
    assert_eq!(run["stop"]["killed"], false);
    assert!(run["ended_utc"].as_str().unwrap().ends_with('Z'));

    let load = json(&out.join("load.json"));
    assert_eq!(load["taken"], "before-serve");
    assert!(load["ncpu"].as_u64().unwrap() >= 1);

    let replies = replies(&out);
    assert_eq!(replies.len(), 3);
    assert!(replies[0]["content"]
        .as_str()
        .unwrap()
        .starts_with("Paris."));
    assert_eq!(replies[0]["metrics"]["token_source"], "usage");
    assert_eq!(replies[0]["metrics"]["tokens"], 32.0);
    assert!(replies[0]["chunks"].as_array().unwrap().len() >= 32);

    let log = std::fs::read_to_string(out.join("serve.log")).unwrap();
    assert!(log.contains("route: stand-in (scripted)"), "{log}");

    let result: ResultFile =
        serde_json::from_slice(&std::fs::read(out.join("result.json")).unwrap()).unwrap();
    assert_eq!(result.summary, "RESULT: PASS");
    let printed: Vec<String> = stdout.lines().map(str::to_string).collect();
    let recorded: Vec<String> = result.verdict.lines.iter().map(|l| l.to_string()).collect();
    assert_eq!(printed[..printed.len() - 1], recorded[..]);
}

#[test]
fn first_token_is_at_least_the_scripted_wait() {
    // The stand-in waits 200 ms after receiving the request; the gate cannot see a token sooner.
    let (_d, out) = scratch();
    gate()
        .args(["run", "--stand-in", "--replies", "1", "--out"])
        .arg(&out)
        .args(UNFLIPPABLE)
        .args(["--", "--ttft-ms", "200", "--tokens", "3"])
        .assert()
        .code(0);
    let ms = replies(&out)[0]["metrics"]["first_token_ms"]
        .as_f64()
        .unwrap();
    assert!((200.0..2000.0).contains(&ms), "first token {ms} ms");
}

#[test]
fn the_slow_route_in_the_log_fails_route() {
    let (_d, out) = scratch();
    let routes = [
        "--replies",
        "1",
        "--fast-route",
        "route: npu-fast",
        "--slow-route",
        "route: cpu-fallback",
    ];
    let (code, stdout) = stand_in_run(
        &out,
        &routes,
        &["--route-line", "route: cpu-fallback", "--tokens", "3"],
    );
    assert_eq!(code, Some(1), "{stdout}");
    let route = line(&stdout, "route");
    assert!(route.contains("FAIL"), "{route}");
    assert!(route.contains("does not name the fast route"), "{route}");
    assert!(route.contains("names the slow route"), "{route}");
    assert!(stdout.ends_with("RESULT: FAIL\n"));
}

#[test]
fn the_fast_route_in_the_log_passes_route() {
    let (_d, out) = scratch();
    let routes = [
        "--replies",
        "1",
        "--fast-route",
        "route: npu-fast",
        "--slow-route",
        "route: cpu-fallback",
    ];
    let (code, stdout) = stand_in_run(
        &out,
        &routes,
        &["--route-line", "route: npu-fast", "--tokens", "3"],
    );
    assert_eq!(code, Some(0), "{stdout}");
    assert!(line(&stdout, "route")
        .contains("ok    the serve log names the fast route, not the slow one"));
}

#[test]
fn a_wrong_answer_fails_content_quoting_it() {
    let (_d, out) = scratch();
    let o = gate()
        .args(["run", "--stand-in", "--replies", "1", "--out"])
        .arg(&out)
        .args(UNFLIPPABLE)
        .args(["--", "--answer", "London, of course.", "--tokens", "4"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{stdout}");
    let content = line(&stdout, "content");
    assert!(
        content
            .contains("reply 1 said \"London, of course. moon\", which does not match /(?i)paris/"),
        "{content}"
    );
}

#[test]
fn a_slow_stand_in_fails_rate() {
    // 50 ms gaps: at most 20 tok/s, against a floor of 200: a 10x margin.
    let (_d, out) = scratch();
    let o = gate()
        .args([
            "run",
            "--stand-in",
            "--replies",
            "1",
            "--floor",
            "200",
            "--first-token-ms",
            "600000",
            "--out",
        ])
        .arg(&out)
        .args(["--", "--gaps-ms", "50", "--tokens", "5"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{stdout}");
    assert!(line(&stdout, "rate").contains("FAIL"), "{stdout}");
    assert!(line(&stdout, "first-token").contains("ok"), "{stdout}");
}

#[test]
fn a_late_first_token_fails_first_token() {
    // 300 ms to the first token against a limit of 30 ms: a 10x margin.
    let (_d, out) = scratch();
    let o = gate()
        .args([
            "run",
            "--stand-in",
            "--replies",
            "1",
            "--floor",
            "0",
            "--first-token-ms",
            "30",
            "--out",
        ])
        .arg(&out)
        .args(["--", "--ttft-ms", "300", "--tokens", "3"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{stdout}");
    assert!(line(&stdout, "first-token").contains("FAIL"), "{stdout}");
}

#[test]
fn a_prompts_file_replaces_the_built_in_prompts() {
    let (d, out) = scratch();
    let prompts = d.path().join("prompts.jsonl");
    std::fs::write(
        &prompts,
        "{\"prompt\": \"Say something.\", \"expect\": \"stand-in\", \"max_tokens\": 6}\n",
    )
    .unwrap();
    let o = gate()
        .args(["run", "--stand-in", "--replies", "2", "--prompts"])
        .arg(&prompts)
        .arg("--out")
        .arg(&out)
        .args(UNFLIPPABLE)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{stdout}");
    let replies = replies(&out);
    assert_eq!(replies.len(), 2);
    assert_eq!(replies[1]["prompt"], "Say something.");
    assert_eq!(
        replies[1]["metrics"]["tokens"], 6.0,
        "max_tokens from the prompt"
    );
    assert_eq!(replies[1]["finish_reason"], "length");
}

#[test]
fn a_bad_prompts_file_is_exit_2_naming_the_line() {
    let (d, out) = scratch();
    let prompts = d.path().join("prompts.jsonl");
    std::fs::write(
        &prompts,
        "{\"prompt\": \"a\"}\n{\"prompt\": \"b\", \"expect\": \"(\"}\n",
    )
    .unwrap();
    gate()
        .args(["run", "--stand-in", "--prompts"])
        .arg(&prompts)
        .arg("--out")
        .arg(&out)
        .assert()
        .code(2)
        .stderr(predicates::str::contains(
            "line 2: the expect pattern \"(\" is not a valid regex: unclosed group\n",
        ))
        // One line, not the regex crate's drawing of the pattern.
        .stderr(predicates::function::function(|s: &str| {
            s.lines().count() == 1
        }));
    assert!(
        !out.exists(),
        "nothing is created for a run that cannot start"
    );
}

#[test]
fn attached_to_a_running_serve_nothing_is_launched_or_stopped() {
    let (d, out) = scratch();
    let log = d.path().join("serve.log");
    let mut serve = StandIn::start(&["--route-line", "route: npu-fast", "--tokens", "4"], &log);
    let o = gate()
        .args([
            "run",
            "--replies",
            "1",
            "--fast-route",
            "route: npu-fast",
            "--url",
            &serve.url,
            "--serve-log",
        ])
        .arg(&log)
        .arg("--out")
        .arg(&out)
        .args(UNFLIPPABLE)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{stdout}");
    assert!(line(&stdout, "route").contains("ok"), "{stdout}");
    assert!(
        serve.running(),
        "the gate must not stop a serve it did not launch"
    );
    let run = json(&out.join("run.json"));
    assert!(run["serve_argv"].is_null());
    assert!(run["stop"].is_null());
    assert!(std::fs::read_to_string(out.join("serve.log"))
        .unwrap()
        .contains("route: npu-fast"));

    // Without --serve-log the route cannot be judged: an info line, not an ok.
    let out2 = d.path().join("run2");
    let o = gate()
        .args([
            "run",
            "--replies",
            "1",
            "--fast-route",
            "route: npu-fast",
            "--url",
            &serve.url,
            "--out",
        ])
        .arg(&out2)
        .args(UNFLIPPABLE)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{stdout}");
    assert!(line(&stdout, "route").contains("info"), "{stdout}");
}

#[test]
fn help_lists_the_exit_codes_and_an_example() {
    gate()
        .arg("--help")
        .assert()
        .code(0)
        .stdout(predicates::str::contains("Exit codes:"))
        .stdout(predicates::str::contains("npu-serve-smoke run --stand-in"));
}

/// A serve that makes its tokens at its pace and sends them bunched at the end (a serve or a
/// proxy that does not flush; issue 30): read from the client that is 40 tokens in 4 ms,
/// thousands of tok/s. The rate line FAILs, saying the text was held back and no rate can be
/// read, however low the floor; `judge` says the same.
#[test]
fn text_held_back_and_sent_bunched_fails_the_rate_line_saying_why() {
    let (_d, out) = scratch();
    let (code, stdout) = stand_in_run(
        &out,
        &["--replies", "3"],
        &["--held-back", "--tokens", "40", "--gaps-ms", "20"],
    );
    assert_eq!(code, Some(1), "{stdout}");
    let rate = line(&stdout, "rate");
    assert!(
        rate.starts_with("rate         FAIL  no reply has a rate"),
        "{rate}"
    );
    // Held back, a reply reaches the gate in a few reads (bunched) or in one, as the box
    // schedules the reads; either way it has no rate, and the line names every reply.
    let named: Vec<&str> = rate
        .split("; no rate for reply ")
        .skip(1)
        .flat_map(|part| part.split(':').next().unwrap().split(", "))
        .collect();
    let mut named = named;
    named.sort_unstable();
    assert_eq!(named, ["1", "2", "3"], "{rate}");
    assert!(
        rate.contains("held back and sent at once")
            || rate.contains("its text did not arrive in at least two reads"),
        "{rate}"
    );
    assert!(line(&stdout, "content").contains("ok"), "{stdout}");
    assert_eq!(gate_judge_lines(&out), verdict_lines(&stdout));
    // The same serve flushing each token has its rate.
    let (_d, out) = scratch();
    let (code, stdout) = stand_in_run(
        &out,
        &["--replies", "3"],
        &["--tokens", "40", "--gaps-ms", "20"],
    );
    assert_eq!(code, Some(0), "{stdout}");
    assert!(!line(&stdout, "rate").contains("held back"), "{stdout}");
}
