//! Same question, same answer (issue 22): `--temperature` and `--seed` in every request,
//! `--deterministic`'s determinism line against the stand-in's scripted faults, the answers
//! against a baseline's, and the bad input refused before anything starts.

use std::path::Path;

use crate::inputs::{refused_before_anything, refused_before_the_run};
use crate::util::*;

/// The determinism line's figures in a run's result.json.
fn determinism_figures(out: &Path) -> serde_json::Value {
    let result = json(&out.join("result.json"));
    result["lines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["check"] == "determinism")
        .unwrap_or_else(|| panic!("no determinism line: {result}"))["figures"]
        .clone()
}

#[test]
fn a_greedy_stand_in_is_deterministic_records_its_sampling_and_judge_says_the_same() {
    let (_d, out) = scratch();
    let (code, stdout) = stand_in_run(
        &out,
        &[
            "--replies",
            "9",
            "--deterministic",
            "--temperature",
            "0",
            "--seed",
            "42",
            // Plumbing: a 1 ms gap's rate may drift on a busy box, and the exit code must
            // not follow it.
            "--max-drift",
            "0.99",
        ],
        &["--tokens", "6", "--gaps-ms", "1"],
    );
    assert_eq!(code, Some(0), "{stdout}");
    let det = line(&stdout, "determinism");
    // 9 replies to the 3 built-in prompts: 6 trials against the first reply to each.
    assert!(det.contains("ok"), "{det}");
    assert!(det.contains("6 trials (6 repeats of 3 prompts)"), "{det}");
    assert!(
        det.contains("0 differed, q = 0, 95% interval 0.000 to 0.459"),
        "{det}"
    );
    // 1 - 0.05^(1/6) = 0.393.
    assert!(
        det.contains("a fault that shows in 39% of trials or more"),
        "{det}"
    );
    let f = determinism_figures(&out);
    assert_eq!(f["trials"], 6);
    assert_eq!(f["mismatches"], 0);
    check_result_schema(&out.join("result.json"));
    let run = json(&out.join("run.json"));
    assert_eq!(run["sampling"]["temperature"], 0.0);
    assert_eq!(run["sampling"]["seed"], 42);
    assert_eq!(run["floors"]["deterministic"], true);
    assert_eq!(run["settings"]["seed"], 42);
    // Re-judged from the archive alone, line for line.
    assert_eq!(gate_judge_lines(&out), verdict_lines(&stdout));
}

#[test]
fn a_run_that_did_not_ask_is_judged_for_determinism_when_judge_asks_and_it_sent_temperature_0() {
    // The gate has always sent temperature 0: an archive from before --temperature is greedy.
    let (_d, out) = scratch();
    let (code, stdout) = stand_in_run(&out, &["--replies", "4"], &["--tokens", "6"]);
    assert_eq!(code, Some(0), "{stdout}");
    assert!(!stdout.contains("determinism"), "{stdout}");
    let o = gate()
        .args(["judge", "--deterministic"])
        .arg(&out)
        .output()
        .unwrap();
    let judged = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{judged}");
    assert!(
        line(&judged, "determinism").contains("1 trial (1 repeat of 1 prompt; 2 answered once)"),
        "{judged}"
    );
}

#[test]
fn sampled_answers_are_not_held_to_each_other() {
    let (_d, out) = scratch();
    let (code, stdout) = stand_in_run(
        &out,
        &["--replies", "3", "--temperature", "0.7"],
        &["--tokens", "6"],
    );
    assert_eq!(code, Some(0), "{stdout}");
    assert_eq!(json(&out.join("run.json"))["sampling"]["temperature"], 0.7);
    let o = gate()
        .args(["judge", "--deterministic"])
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("sent temperature 0.7"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

#[test]
fn determinism_settings_that_cannot_hold_are_refused_before_anything() {
    let (d, out) = scratch();
    for (args, says) in [
        (
            &["--deterministic"][..],
            "--deterministic needs --temperature 0",
        ),
        (
            &["--deterministic", "--temperature", "0.5"],
            "--temperature 0.5 samples them: give --temperature 0",
        ),
        (
            &[
                "--deterministic",
                "--temperature",
                "0",
                "--replies",
                "6",
                "--extra-body",
                r#"{"temperature": 0.9}"#,
            ],
            "both set the requests' temperature",
        ),
        // With the defaults, 3 replies to the 3 built-in prompts: none asked twice.
        (
            &["--deterministic", "--temperature", "0"],
            "with 3 prompts, --replies 3 asks none twice; give --replies above 3",
        ),
        (
            &[
                "--deterministic",
                "--temperature",
                "0",
                "--replies",
                "2",
                "--concurrency",
                "4",
            ],
            "with 3 prompts, --replies 2 leaves some with none",
        ),
        (
            &["--seed", "7", "--extra-body", r#"{"seed": 7}"#],
            "both set the requests' seed",
        ),
        (
            &["--baseline-answers", "exact"],
            "give it with --deterministic and --baseline DIR",
        ),
        (
            &[
                "--deterministic",
                "--temperature",
                "0",
                "--baseline-answers",
                "exact",
            ],
            "give it with --deterministic and --baseline DIR",
        ),
    ] {
        refused_before_anything(&out, args, &[], says);
    }
    for (args, says) in [
        (
            &["--stand-in", "--temperature", "2.5"][..],
            "out of range (0 to 2",
        ),
        (
            &["--stand-in", "--temperature", "-0.1"],
            "out of range (0 to 2",
        ),
        (
            &["--stand-in", "--temperature", "NaN"],
            "out of range (0 to 2",
        ),
        (
            &["--stand-in", "--temperature", "hot"],
            "is not a temperature",
        ),
        (&["--stand-in", "--seed", "-1"], "seed -1 is out of range"),
        (&["--stand-in", "--seed", "4294967295"], "random seed"),
        (
            &["--stand-in", "--baseline-answers", "fuzzy"],
            "give info (an answer that differs is said) or exact",
        ),
    ] {
        refused_before_the_run(&out, args, says);
    }
    // A profile is held to the same bounds.
    for (key, says) in [
        (
            "temperature = 3.0",
            "temperature in the profile: temperature 3 is out of range",
        ),
        ("seed = -5", "seed in the profile: seed -5 is out of range"),
        (
            "baseline_answers = \"loose\"",
            "baseline_answers in the profile",
        ),
        (
            "deterministic = true",
            "--deterministic needs --temperature 0",
        ),
    ] {
        let profile = d.path().join("gate.toml");
        std::fs::write(&profile, format!("stand_in = true\n{key}\n")).unwrap();
        refused_before_the_run(&out, &["--profile", profile.to_str().unwrap()], says);
    }
}

#[test]
fn a_profile_asks_for_greedy_deterministic_answers() {
    let (d, out) = scratch();
    let profile = d.path().join("gate.toml");
    std::fs::write(
        &profile,
        "stand_in = true\nreplies = 4\nfloor = 0\nfirst_token_ms = 600000\ntemperature = 0.0\nseed = 9\ndeterministic = true\n",
    )
    .unwrap();
    let o = gate()
        .args(["run", "--out"])
        .arg(&out)
        .args(["--profile", profile.to_str().unwrap()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{stdout}");
    assert!(line(&stdout, "determinism").contains("ok"), "{stdout}");
    assert_eq!(json(&out.join("run.json"))["sampling"]["seed"], 9);
}

/// Two stand-in runs, the second judged against the first's answers.
fn against_baseline(
    baseline_script: &[&str],
    candidate_script: &[&str],
    policy: &str,
) -> (Option<i32>, String) {
    let (_d, base) = scratch();
    let (_d2, cand) = scratch();
    let greedy = ["--replies", "6", "--deterministic", "--temperature", "0"];
    let (code, stdout) = stand_in_run(&base, &greedy, baseline_script);
    assert_eq!(code, Some(0), "{stdout}");
    let gate_args = [
        &greedy[..],
        &[
            "--baseline",
            base.to_str().unwrap(),
            "--baseline-answers",
            policy,
        ],
    ]
    .concat();
    let result = stand_in_run(&cand, &gate_args, candidate_script);
    // Re-judged, the archive says the same.
    assert_eq!(gate_judge_lines(&cand), verdict_lines(&result.1));
    result
}

#[test]
fn the_same_answers_as_the_baseline_are_identical() {
    let (_code, stdout) = against_baseline(&["--tokens", "6"], &["--tokens", "6"], "exact");
    let answers = line(&stdout, "baseline-answers");
    assert_eq!(answers.split_whitespace().nth(1), Some("ok"), "{stdout}");
    assert!(
        answers.contains("3 prompts answered exactly as the baseline"),
        "{answers}"
    );
}

#[test]
fn an_answer_that_changed_since_the_baseline_is_said_and_fails_when_exact() {
    let changed = ["--tokens", "6", "--answer", "Lyon is the answer"];
    let (code, stdout) = against_baseline(&["--tokens", "6"], &changed, "info");
    let answers = line(&stdout, "baseline-answers");
    assert_eq!(answers.split_whitespace().nth(1), Some("info"), "{stdout}");
    assert!(
        answers.contains("diverges from the baseline at character 1 of the content: \"Lyon is the answer corn …\" here, \"Paris. wool ocean star p…\" at the baseline"),
        "{answers}"
    );
    // Content fails on its own (Lyon is no Paris); the answers line does not add a FAIL.
    assert_eq!(code, Some(1), "{stdout}");
    let (code, stdout) = against_baseline(&["--tokens", "6"], &changed, "exact");
    assert_eq!(code, Some(1), "{stdout}");
    let answers = line(&stdout, "baseline-answers");
    assert_eq!(answers.split_whitespace().nth(1), Some("FAIL"), "{stdout}");

    // An answer the prompt still accepts, changed since the baseline: said, not failed, by
    // default.
    let accepted = ["--tokens", "6", "--answer", "Paris, of course."];
    let (_code, stdout) = against_baseline(&["--tokens", "6"], &accepted, "info");
    let answers = line(&stdout, "baseline-answers");
    assert_eq!(answers.split_whitespace().nth(1), Some("info"), "{stdout}");
    assert!(
        answers.contains("diverges from the baseline at character 6"),
        "{answers}"
    );
    // The prompt accepts it: content names no reply 1. (The answer is wrong for the other two
    // prompts, so the line is a FAIL; it once looked " ok " only for the " ok" filler it
    // quoted.)
    assert!(!line(&stdout, "content").contains("reply 1 "), "{stdout}");
}

/// The stand-in's trace, line by line.
fn trace_lines(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The trace's `altered` lines: what the stand-in changed, and in which request.
fn altered(trace: &[serde_json::Value]) -> Vec<&serde_json::Value> {
    trace.iter().filter(|l| l["kind"] == "altered").collect()
}

#[test]
fn every_request_carries_the_temperature_and_seed_asked_for() {
    // What the serve received, from its own trace, not what the gate meant to send.
    for (gate_args, temperature, seed) in [
        (&[][..], Some(0.0), None),
        (
            &["--temperature", "0", "--seed", "42"][..],
            Some(0.0),
            Some(42),
        ),
        (&["--temperature", "0.7"][..], Some(0.7), None),
    ] {
        let (d, out) = scratch();
        let trace = d.path().join("trace.jsonl");
        let gate_args = [
            &["--replies", "3", "--concurrency", "2", "--rounds", "1"][..],
            gate_args,
        ]
        .concat();
        let (code, stdout) = stand_in_run(
            &out,
            &gate_args,
            &["--tokens", "6", "--trace", trace.to_str().unwrap()],
        );
        assert_eq!(code, Some(0), "{gate_args:?}: {stdout}");
        let requests: Vec<serde_json::Value> = trace_lines(&trace)
            .into_iter()
            .filter(|l| l["kind"] == "request")
            .collect();
        // Three single-stream replies and a burst of two.
        assert_eq!(requests.len(), 5, "{gate_args:?}");
        for r in &requests {
            assert_eq!(r["temperature"].as_f64(), temperature, "{gate_args:?}: {r}");
            assert_eq!(r["seed"].as_u64(), seed, "{gate_args:?}: {r}");
        }
        let sampling = &json(&out.join("run.json"))["sampling"];
        assert_eq!(
            sampling["temperature"].as_f64(),
            temperature,
            "{gate_args:?}"
        );
        assert_eq!(sampling["seed"].as_u64(), seed, "{gate_args:?}");
    }
}

/// One prompt, `--replies 21` (the first to it and 20 trials), greedy and deterministic, the
/// stand-in given `script` and a trace; the run's exit code, stdout and the trace.
fn twenty_trials(out: &Path, script: &[&str]) -> (Option<i32>, String, Vec<serde_json::Value>) {
    let dir = out.parent().unwrap();
    let prompts = dir.join("prompts.jsonl");
    std::fs::write(
        &prompts,
        "{\"prompt\": \"What is the capital of France? Answer in one word.\"}\n",
    )
    .unwrap();
    let trace = dir.join("trace.jsonl");
    let script = [
        &["--trace", trace.to_str().unwrap(), "--tokens", "6"][..],
        script,
    ]
    .concat();
    let (code, stdout) = stand_in_run(
        out,
        &[
            "--prompts",
            prompts.to_str().unwrap(),
            "--replies",
            "21",
            "--deterministic",
            "--temperature",
            "0",
        ],
        &script,
    );
    (code, stdout, trace_lines(&trace))
}

#[test]
fn a_word_changed_in_a_tenth_of_trials_fails_naming_the_first_and_the_interval_holds_a_tenth() {
    let (_d, out) = scratch();
    // Seed 1 changes a word in requests 13, 16 and 20 of 21 (the stand-in's own trace says
    // which, and the test reads it from there): the first reply, every trial's reference, is
    // clean. Another draw that changed the first would make every trial differ.
    let (code, stdout, trace) =
        twenty_trials(&out, &["--change-word", "0.1", "--jitter-seed", "1"]);
    assert_eq!(code, Some(1), "{stdout}");
    let changed = altered(&trace);
    assert!(
        !changed.is_empty() && changed.iter().all(|a| a["nth"] != 1),
        "{changed:?}"
    );
    // Only determinism fails: the changed word is never the answer's (no expect pattern), the
    // timing cannot flip.
    let fails: Vec<&str> = stdout.lines().filter(|l| l.contains(" FAIL ")).collect();
    assert_eq!(fails.len(), 1, "{stdout}");
    let det = line(&stdout, "determinism");
    let k = changed.len();
    assert!(
        det.starts_with(&format!("determinism  FAIL  {k} of 20 trials")),
        "{det}"
    );
    // The first differing trial is the first the stand-in changed, quoted with its new word.
    let first = changed[0];
    let n = first["nth"].as_u64().unwrap();
    assert!(
        det.contains(&format!("first reply {n} (trial {} of", n - 1)),
        "{det}"
    );
    assert!(det.contains(first["to"].as_str().unwrap()), "{det} {first}");
    assert!(det.contains("differs from reply 1 at character"), "{det}");
    let f = determinism_figures(&out);
    assert_eq!(f["trials"], 20);
    assert_eq!(f["mismatches"], k);
    let (lo, hi) = (
        f["interval_95"][0].as_f64().unwrap(),
        f["interval_95"][1].as_f64().unwrap(),
    );
    assert!(lo <= 0.1 && 0.1 <= hi, "{lo} to {hi}");
    check_result_schema(&out.join("result.json"));
    assert_eq!(gate_judge_lines(&out), verdict_lines(&stdout));
}

#[test]
fn no_word_changed_is_ok_and_says_what_twenty_trials_could_have_caught() {
    let (_d, out) = scratch();
    let (code, stdout, trace) = twenty_trials(&out, &["--change-word", "0", "--jitter-seed", "1"]);
    assert_eq!(code, Some(0), "{stdout}");
    assert!(altered(&trace).is_empty());
    let det = line(&stdout, "determinism");
    assert!(
        det.contains("determinism  ok    20 trials (20 repeats of 1 prompt)"),
        "{det}"
    );
    // 1 - 0.05^(1/20) = 0.139; the exact interval of 0 in 20 is 0 to 0.168.
    assert!(det.contains("95% interval 0.000 to 0.168"), "{det}");
    assert!(
        det.contains("a fault that shows in 14% of trials or more"),
        "{det}"
    );
    let f = determinism_figures(&out);
    assert!(
        (f["detectable_rate"].as_f64().unwrap() - 0.1391).abs() < 1e-4,
        "{f}"
    );
}

/// Three single-stream replies, one to each built-in prompt, then one burst of three streams,
/// greedy and held to determinism.
const ONE_BURST_OF_THREE: [&str; 9] = [
    "--replies",
    "3",
    "--concurrency",
    "3",
    "--rounds",
    "1",
    "--deterministic",
    "--temperature",
    "0",
];

#[test]
fn a_serve_that_answers_otherwise_inside_a_batch_fails_batch_invariance() {
    let (_d, out) = scratch();
    let dir = out.parent().unwrap();
    let trace = dir.join("trace.jsonl");
    let (code, stdout) = stand_in_run(
        &out,
        &ONE_BURST_OF_THREE,
        &[
            "--batch-variant",
            "--tokens",
            "8",
            "--gaps-ms",
            "60",
            "--trace",
            trace.to_str().unwrap(),
        ],
    );
    assert_eq!(code, Some(1), "{stdout}");
    let trace = trace_lines(&trace);
    let changed = altered(&trace);
    // The single-stream replies are alone: only the burst's streams that started beside
    // another are changed (the first may have started alone).
    assert!(
        !changed.is_empty() && changed.iter().all(|a| a["nth"].as_u64().unwrap() > 3),
        "{changed:?}"
    );
    let det = line(&stdout, "determinism");
    let k = changed.len();
    assert!(
        det.contains(&format!(
            "{k} of 3 trials (0 repeats and 3 streams in bursts, over 3 prompts) differed"
        )),
        "{det}"
    );
    assert!(det.contains(&format!("({k} of the 3 in bursts)")), "{det}");
    assert!(det.contains(", in a batch) differs from reply"), "{det}");
    assert_eq!(gate_judge_lines(&out), verdict_lines(&stdout));

    // The same fault on a serve that takes one request at a time: never in a batch, so
    // batch-invariant.
    let (_d2, out2) = scratch();
    let (code, stdout) = stand_in_run(
        &out2,
        &ONE_BURST_OF_THREE,
        &["--batch-variant", "--serial", "--tokens", "8"],
    );
    let det = line(&stdout, "determinism");
    assert!(
        det.starts_with("determinism  ok    3 trials (0 repeats and 3 streams in bursts"),
        "{stdout}"
    );
    assert_eq!(determinism_figures(&out2)["mismatches"], 0);
    // A serial serve fails overlap (it ran the burst one stream after another), and nothing
    // else.
    assert_eq!(code, Some(1), "{stdout}");
    let fails: Vec<&str> = stdout.lines().filter(|l| l.contains(" FAIL ")).collect();
    assert!(
        fails.len() == 1 && fails[0].starts_with("overlap "),
        "{stdout}"
    );
}
