//! Context depth through real runs (issue 35): the stand-in as a real child process with a
//! context, answering the prompts at depth, forgetting what lies deep, garbling, answering,
//! cutting or crashing past its context; each outcome is the context line's, `judge` gives the
//! same lines from the archive, and bad depths are refused before anything starts. No timing is
//! asserted: the prefill delay is large only where a floor must fail by a wide margin.

use serde_json::Value;

use crate::util::*;

/// A stand-in run with `--depths`: exit code, stdout, the temp dir (the run is `run/` in it).
/// The drift line cannot flip it.
fn run(gate_args: &[&str], script: &[&str]) -> (Option<i32>, String, tempfile::TempDir) {
    let (d, out) = scratch();
    let gate_args = [
        &["--max-drift", "0.99", "--depth-replies", "2"][..],
        gate_args,
    ]
    .concat();
    let (code, stdout) = stand_in_run(&out, &gate_args, script);
    (code, stdout, d)
}

fn context_figures(dir: &std::path::Path) -> Value {
    let result = json(&dir.join("run/result.json"));
    result["lines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["check"] == "context")
        .unwrap_or_else(|| panic!("no context line: {result}"))["figures"]["context"]
        .clone()
}

fn status<'a>(stdout: &'a str, check: &str) -> &'a str {
    line(stdout, check).split_whitespace().nth(1).unwrap()
}

#[test]
fn a_serve_that_finds_every_fact_and_refuses_past_its_context_passes_and_judge_agrees() {
    let (code, stdout, d) = run(
        &["--depths", "64,256,1k"],
        &["--context", "512", "--prefill-us", "100"],
    );
    assert_eq!(code, Some(0), "{stdout}");
    let context = line(&stdout, "context");
    assert!(
        context.contains("ok    64 tokens: prefill ") && context.contains("256 tokens: prefill "),
        "{context}"
    );
    assert!(context.contains("the fact found; 256 tokens"), "{context}");
    // 1,024 is past 512: asked as the probe at 768, refused as llama-server refuses.
    assert!(
        context
            .contains("past the context (512 tokens), a prompt of about 768 was refused: HTTP 400")
            && context.contains("exceeds the available context size (512 tokens)"),
        "{context}"
    );
    let out = d.path().join("run");
    let all = replies(&out);
    let depth: Vec<&Value> = all.iter().filter(|r| !r["depth"].is_null()).collect();
    assert_eq!(
        depth.len(),
        5,
        "two a depth that fits, and the probe: {all:?}"
    );
    for r in &depth[..4] {
        let slot = &r["depth"];
        // The stand-in counts a token a word; the gate's estimate counts marks too.
        let counted = r["usage_prompt_tokens"].as_f64().unwrap();
        let estimate = slot["estimate"].as_f64().unwrap();
        assert!(counted <= estimate && counted > estimate * 0.7, "{r}");
        assert!(
            r["content"]
                .as_str()
                .unwrap()
                .contains(slot["code"].as_str().unwrap()),
            "{r}"
        );
    }
    assert_eq!(depth[4]["depth"]["limit_probe"], true);
    // The prompts at depth are none of the judged replies.
    assert!(line(&stdout, "rate").contains("over 3 replies"), "{stdout}");
    assert!(line(&stdout, "content").contains("3 replies"), "{stdout}");
    let f = context_figures(d.path());
    assert_eq!(f["context"], 512);
    assert_eq!(f["limit"], "refused");
    assert_eq!(f["depths"].as_array().unwrap().len(), 2, "{f}");
    assert_eq!(f["depths"][1]["found"], 2);
    assert_eq!(f["depths"][1]["prompt_tokens_by"], "serve");
    let run = json(&out.join("run.json"));
    assert_eq!(run["context"]["depths"], serde_json::json!([64, 256, 1024]));
    assert_eq!(run["context"]["serve_says"]["tokens"], 512);
    let lines = verdict_lines(&stdout);
    assert_eq!(gate_judge_lines(&out), lines, "judge reads the same lines");
}

#[test]
fn a_serve_that_forgets_what_lies_deep_fails_quoting_what_it_said() {
    // The fact lies some 25 words from the end at 64 tokens, some 630 at 1,024.
    let (code, stdout, _d) = run(&["--depths", "64,1k"], &["--forget-deeper-than", "200"]);
    assert_eq!(code, Some(1), "{stdout}");
    let context = line(&stdout, "context");
    assert_eq!(status(&stdout, "context"), "FAIL", "{context}");
    assert!(
        context.contains("did not give the fact (")
            && context.contains("\"I could not find a secret code in the text."),
        "{context}"
    );
    assert!(context.contains("64 tokens: prefill"), "{context}");
    assert!(
        context.contains("the fact found; 1,024 tokens"),
        "{context}"
    );
    assert!(context.contains("the fact found in 0 of 2"), "{context}");
    // Nothing known of the context: every depth asked, the limit said not probed.
    assert!(context.contains("the limit was not probed"), "{context}");
}

#[test]
fn past_the_context_answering_garbling_or_crashing_fails_and_a_said_cut_passes() {
    for (fault, word, says) in [
        (
            "--answer-past-context",
            "answered",
            "was answered as if it fitted",
        ),
        (
            "--garble-past-context",
            "garbled",
            "was answered with garbled text",
        ),
        ("--crash-past-context", "crashed", "crashed the serve"),
        (
            "--truncate-past-context",
            "cut",
            "with the prompt cut to 300 tokens",
        ),
    ] {
        let (code, stdout, d) = run(&["--depths", "64,2k"], &["--context", "300", fault]);
        let context = line(&stdout, "context");
        assert!(context.contains(says), "{fault}: {context}");
        assert_eq!(context_figures(d.path())["limit"], word, "{fault}");
        if word == "cut" {
            assert_eq!(code, Some(0), "{fault}: {stdout}");
        } else {
            assert_eq!(code, Some(1), "{fault}: {stdout}");
            assert_eq!(status(&stdout, "context"), "FAIL", "{fault}: {context}");
        }
    }
}

#[test]
fn a_count_far_from_the_estimate_is_said_and_the_floors_judge_the_rates() {
    // The serve counts a tenth of the words: said, and the rates use the estimate.
    let (code, stdout, _d) = run(
        &["--depths", "256", "--prefill-floor", "1"],
        &["--prompt-tokens-times", "0.1"],
    );
    assert_eq!(code, Some(0), "{stdout}");
    let context = line(&stdout, "context");
    assert!(
        context.contains("under half: a tokenizer or template problem; the rates use the estimate"),
        "{context}"
    );
    assert!(
        line(&stdout, "context-rate")
            .contains("ok    prefill at every depth over the floor 1.0 tok/s"),
        "{stdout}"
    );
    // 2 ms a word of prefill: about 256 tokens take half a second, some 500 tok/s, hundreds
    // of times under a floor of 100,000.
    let (code, stdout, _d) = run(
        &["--depths", "256", "--prefill-floor", "100000"],
        &["--prefill-us", "2000"],
    );
    assert_eq!(code, Some(1), "{stdout}");
    let rate = line(&stdout, "context-rate");
    assert!(
        rate.contains("FAIL  prefill under the floor 100,000 tok/s"),
        "{rate}"
    );
}

#[test]
fn bad_depths_are_refused_before_anything_starts() {
    for (args, says) in [
        (vec!["--depths", "0"], "asks no prompt at all"),
        (vec!["--depths", "1000001"], "over the 1,000,000"),
        (vec!["--depths", "many"], "is not a depth"),
        (
            vec!["--depths", "1k", "--depth-replies", "0"],
            "from 1 to 100",
        ),
        (
            vec!["--depth-replies", "2"],
            "--depth-replies is for the prompts at depth: give --depths",
        ),
        (
            vec!["--prefill-floor", "10"],
            "--prefill-floor is for the prompts at depth",
        ),
    ] {
        let (d, out) = scratch();
        let o = gate()
            .args(["run", "--stand-in", "--out"])
            .arg(&out)
            .args(&args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert_eq!(
            stderr
                .lines()
                .filter(|l| !l.trim().is_empty()
                    && !l.starts_with("Usage")
                    && !l.starts_with("For more"))
                .count(),
            1,
            "{args:?}: one line: {stderr}"
        );
        assert!(!out.exists(), "{args:?}: nothing created");
        drop(d);
    }
}
