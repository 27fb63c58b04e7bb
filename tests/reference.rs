//! The reference line (issue 31) on recorded archives: one real stand-in run, copied into a
//! reference and candidates whose replies.jsonl carry hand-written logprobs, then judged with
//! `judge DIR --reference REF`. The recording of logprobs is not needed to judge them.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde_json::{json, Value};

use crate::util::*;

/// A real stand-in run, made once for the whole binary.
fn recorded() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = tempfile::tempdir().unwrap().keep();
        let out = d.join("run");
        let (code, stdout) = stand_in_run(&out, &["--replies", "2"], &[]);
        assert_eq!(code, Some(0), "{stdout}");
        out
    })
}

/// A token as a test writes it: its text, its logprob, its alternatives.
type Token = (&'static str, f64, &'static [(&'static str, f64)]);

/// A copy of the recorded run whose every reply answers `tokens` (text, logprob,
/// alternatives), with logprobs when `with_logprobs`. Made up by the test, so without digests.
fn answering(tokens: &[Token], with_logprobs: bool) -> (tempfile::TempDir, PathBuf) {
    let (d, out) = scratch();
    std::fs::create_dir(&out).unwrap();
    let from = recorded();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), out.join(entry.file_name())).unwrap();
        }
    }
    forget_digests(&out);
    let content: String = tokens.iter().map(|t| t.0).collect();
    let logprobs: Vec<Value> = tokens
        .iter()
        .map(|(t, l, top)| {
            let top: Vec<Value> = top
                .iter()
                .map(|(a, b)| json!({"token": a, "logprob": b}))
                .collect();
            json!({"token": t, "logprob": l, "top": top})
        })
        .collect();
    let mut lines = String::new();
    for mut r in replies(from) {
        r["content"] = content.clone().into();
        if with_logprobs {
            r["logprobs"] = logprobs.clone().into();
        }
        lines.push_str(&r.to_string());
        lines.push('\n');
    }
    std::fs::write(out.join("replies.jsonl"), lines).unwrap();
    (d, out)
}

const PARIS: &[Token] = &[
    ("The", -0.125, &[("The", -0.125), ("A", -3.0)]),
    (
        " answer",
        -0.25,
        &[(" answer", -0.25), (" reply", -0.5), (" word", -9.0)],
    ),
];

fn judged(dir: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let o = gate().arg("judge").arg(dir).args(args).output().unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn the_same_answers_are_ok_and_say_what_they_rest_on() {
    let (_r, reference) = answering(PARIS, true);
    let (_c, candidate) = answering(PARIS, true);
    let (_, stdout, stderr) = judged(&candidate, &["--reference", reference.to_str().unwrap()]);
    let l = line(&stdout, "reference");
    assert!(l.contains(" ok "), "{stdout}{stderr}");
    assert!(l.contains("positions judged, 0 re-anchors"), "{l}");
    assert!(l.contains("top-1 agreement 100.0%"), "{l}");
}

#[test]
fn a_near_tie_is_ok_and_a_hard_divergence_fails_naming_it() {
    let (_r, reference) = answering(PARIS, true);
    // " reply": 0.25 nats behind " answer" at the reference, within the 0.5 tie.
    let (_c, near) = answering(&[PARIS[0], (" reply", -0.3, &[])], false);
    let (_, stdout, _) = judged(&near, &["--reference", reference.to_str().unwrap()]);
    let l = line(&stdout, "reference");
    assert!(
        l.contains(" ok ") && l.contains("2 near-ties (margins 0.25, 0.25 nats)"),
        "{stdout}"
    );
    // " word": 8.75 nats behind: hard.
    let (_c, hard) = answering(&[PARIS[0], (" word", -0.3, &[])], false);
    let (code, stdout, _) = judged(&hard, &["--reference", reference.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{stdout}");
    let l = line(&stdout, "reference");
    assert!(l.contains("FAIL"), "{l}");
    assert!(
        l.contains("at token 1 (byte 4)") && l.contains("the reference's margin 8.75 nats"),
        "{l}"
    );
    // A tie of 9 nats makes it a near-tie.
    let (_, stdout, _) = judged(
        &hard,
        &[
            "--reference",
            reference.to_str().unwrap(),
            "--reference-tie",
            "9",
        ],
    );
    assert!(line(&stdout, "reference").contains(" ok "), "{stdout}");
}

#[test]
fn a_reference_without_logprobs_is_not_comparable() {
    let (_r, reference) = answering(PARIS, false);
    let (_c, candidate) = answering(PARIS, false);
    let (code, stdout, _) = judged(&candidate, &["--reference", reference.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        line(&stdout, "reference").contains("not comparable")
            && stdout.contains("recorded no logprobs"),
        "{stdout}"
    );
}

#[test]
fn bad_reference_input_exits_2_on_one_line() {
    let (_c, candidate) = answering(PARIS, true);
    let (d, _) = scratch();
    let empty = d.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let missing = d.path().join("missing");
    for args in [
        vec!["--reference".to_string(), missing.display().to_string()],
        vec!["--reference".to_string(), empty.display().to_string()],
        vec!["--reference-tie".to_string(), "-0.1".to_string()],
        vec!["--reference-tie".to_string(), "NaN".to_string()],
        vec!["--min-agreement".to_string(), "1.5".to_string()],
        vec!["--reference-reanchor".to_string(), "65".to_string()],
        vec!["--reference-reanchor".to_string(), "-1".to_string()],
    ] {
        let o = gate()
            .arg("judge")
            .arg(&candidate)
            .args(&args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {stderr}");
        // The candidate, made by hand, is said to carry no digests, and clap adds its --help
        // hint after a blank line, as for every flag; the error itself is one line.
        let said: Vec<&str> = stderr
            .lines()
            .filter(|l| {
                !(l.contains("carries no digest")
                    || l.trim().is_empty()
                    || l.starts_with("For more information"))
            })
            .collect();
        assert_eq!(said.len(), 1, "{args:?}: {stderr}");
        assert!(o.stdout.is_empty(), "{args:?}");
    }
}

/// The stand-in's answers, 12 tokens each, scored with a runner-up 3 nats behind at every
/// position: the reference.
const SCORED: &[&str] = &["--flip-margin", "3", "--tokens", "12"];

/// A live reference run of the stand-in, made once for the binary.
fn live_reference() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = tempfile::tempdir().unwrap().keep();
        let out = d.join("reference");
        let (code, stdout) = stand_in_run(&out, &["--replies", "3", "--logprobs", "5"], SCORED);
        assert_eq!(code, Some(0), "{stdout}");
        out
    })
}

/// The re-anchors a run recorded (reanchors.json).
fn reanchors_of(run: &Path) -> Vec<Value> {
    serde_json::from_slice(&std::fs::read(run.join("reanchors.json")).unwrap()).unwrap()
}

/// The reference line of a live candidate run against [`live_reference`], its exit code and
/// its run directory.
fn live_candidate(gate_args: &[&str], script: &[&str]) -> (Option<i32>, String, tempfile::TempDir) {
    let (d, out) = scratch();
    let reference = live_reference().to_str().unwrap().to_string();
    let mut args = vec![
        "--replies",
        "3",
        "--logprobs",
        "5",
        "--reference",
        &reference,
    ];
    args.extend_from_slice(gate_args);
    let script: Vec<&str> = SCORED.iter().chain(script).copied().collect();
    let (code, stdout) = stand_in_run(&out, &args, &script);
    (code, stdout, d)
}

#[test]
fn a_live_run_re_anchors_past_each_divergence_and_judge_gives_the_same_line() {
    // Flipped at tokens 2 and 6 of every answer: the second is met only past the first.
    let (code, stdout, d) = live_candidate(&[], &["--logprob-flip", "2", "--logprob-flip", "6"]);
    assert_eq!(code, Some(1), "{stdout}");
    let l = line(&stdout, "reference");
    assert!(l.contains("FAIL"), "{l}");
    // Every position of the three 12-token answers, two re-anchors each, six divergences.
    assert!(
        l.contains("3 prompts, 36 positions judged, 6 re-anchors"),
        "{l}"
    );
    assert!(l.contains("6 hard divergences"), "{l}");
    assert!(l.contains("at token 6 (byte 34, after 1 re-anchor)"), "{l}");
    let out = d.path().join("run");
    let reanchors = reanchors_of(&out);
    assert_eq!(reanchors.len(), 6);
    assert_eq!(reanchors[0]["at_token"], 2);
    assert_eq!(reanchors[0]["prefix"], "Paris. wool ocean");
    // Not replies: replies.jsonl holds the three timed ones alone.
    assert_eq!(replies(&out).len(), 3);
    // `judge` walks the same records to the same line; result.json carries its figures.
    let (_, judged_out, _) = judged(&out, &[]);
    assert_eq!(line(&judged_out, "reference"), l);
    let result: Value =
        serde_json::from_slice(&std::fs::read(out.join("result.json")).unwrap()).unwrap();
    let figures = result["lines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["check"] == "reference")
        .map(|l| l["figures"]["reference"].clone())
        .unwrap();
    assert_eq!(figures["reanchored"], 6, "{figures}");
    assert_eq!(figures["positions"], 36, "{figures}");
    // Judged with fewer re-anchors than were made, the rest is said, not judged.
    let (_, fewer, _) = judged(&out, &["--reference-reanchor", "1"]);
    let l = line(&fewer, "reference");
    assert!(
        l.contains("3 re-anchors")
            && l.contains("3 prompts left with a divergence past --reference-reanchor 1"),
        "{l}"
    );
}

#[test]
fn a_serve_that_sends_the_prefix_back_is_read_past_it() {
    // As llama-server does: the continued message's text, then the continuation.
    let (code, stdout, d) = live_candidate(
        &[],
        &[
            "--logprob-flip",
            "2",
            "--logprob-flip",
            "6",
            "--echo-prefix",
        ],
    );
    assert_eq!(code, Some(1), "{stdout}");
    let l = line(&stdout, "reference");
    assert!(l.contains("36 positions judged, 6 re-anchors"), "{l}");
    let reanchors = reanchors_of(&d.path().join("run"));
    // Recorded as sent: the prefix, then the continuation.
    assert!(
        reanchors[0]["content"]
            .as_str()
            .unwrap()
            .starts_with("Paris. wool ocean star paper rock elpam"),
        "{reanchors:?}"
    );
}

#[test]
fn a_near_tie_only_candidate_is_ok_over_every_position() {
    // The same flips, held to a tie of 4 nats: near-ties, every position still judged.
    let (code, stdout, _d) = live_candidate(
        &["--reference-tie", "4"],
        &["--logprob-flip", "2", "--logprob-flip", "6"],
    );
    assert_eq!(code, Some(0), "{stdout}");
    let l = line(&stdout, "reference");
    assert!(
        l.contains(" ok ") && l.contains("36 positions judged, 6 re-anchors"),
        "{l}"
    );
    assert!(l.contains("6 near-ties (margins 3.00"), "{l}");
}

#[test]
fn a_serve_that_cannot_continue_is_judged_up_to_its_first_divergence_and_said() {
    let (code, stdout, d) = live_candidate(
        &[],
        &[
            "--logprob-flip",
            "2",
            "--logprob-flip",
            "6",
            "--no-continue",
        ],
    );
    assert_eq!(code, Some(1), "{stdout}");
    let l = line(&stdout, "reference");
    // One request a prompt showed it: re-anchoring stopped there, nothing judged past it.
    assert!(
        l.contains("9 positions judged, 0 re-anchors") && l.contains("3 hard divergences"),
        "{l}"
    );
    assert!(
        l.contains("began its answer anew") && l.contains("--continue-body"),
        "{l}"
    );
    let reanchors = reanchors_of(&d.path().join("run"));
    assert_eq!(reanchors.len(), 3, "{reanchors:?}");
}

#[test]
fn an_identical_candidate_makes_no_re_anchor() {
    let (code, stdout, d) = live_candidate(&[], &[]);
    assert_eq!(code, Some(0), "{stdout}");
    let l = line(&stdout, "reference");
    assert!(
        l.contains(" ok ") && l.contains("36 positions judged, 0 re-anchors"),
        "{l}"
    );
    assert!(l.contains("top-1 agreement 100.0%"), "{l}");
    assert!(!d.path().join("run").join("reanchors.json").exists());
}

#[test]
fn bad_re_anchor_settings_exit_2_before_anything_starts() {
    let reference = live_reference().to_str().unwrap().to_string();
    for args in [
        vec![
            "--reference",
            reference.as_str(),
            "--reference-reanchor",
            "65",
        ],
        vec!["--continue-body", "{\"continue_final_message\": true}"],
        vec!["--reference", reference.as_str(), "--continue-body", "[1]"],
        vec![
            "--reference",
            reference.as_str(),
            "--continue-body",
            "{\"max_tokens\": 3}",
        ],
    ] {
        let (d, out) = scratch();
        let (code, stdout) = stand_in_run(&out, &args, &[]);
        assert_eq!(code, Some(2), "{args:?}: {stdout}");
        assert!(!out.exists(), "{args:?}: a run directory was made");
        drop(d);
    }
}

/// A live known-good build against [`live_reference`] (issue 52): the stand-in's answers with
/// their runners-up `margin` nats behind (the reference's are 3): the same text, other
/// numerics. Its run directory, kept for the test.
fn live_noise(margin: &str, gate_args: &[&str]) -> (tempfile::TempDir, PathBuf) {
    let (d, out) = scratch();
    let reference = live_reference().to_str().unwrap().to_string();
    let mut args = vec!["--replies", "3", "--reference", &reference];
    if !gate_args.contains(&"--logprobs") {
        args.extend(["--logprobs", "5"]);
    }
    args.extend_from_slice(gate_args);
    let (code, stdout) = stand_in_run(&out, &args, &["--flip-margin", margin, "--tokens", "12"]);
    // Made with other settings than the reference's, its own line may fail: the run is made
    // all the same.
    if gate_args.is_empty() {
        assert_eq!(code, Some(0), "{stdout}");
    }
    assert!(out.join("result.json").exists(), "{stdout}");
    (d, out)
}

/// A live candidate against [`live_reference`] and `noise`: its runners-up `margin` nats
/// behind, with `script` added.
fn against_noise(
    noise: &[&Path],
    margin: &str,
    script: &[&str],
) -> (Option<i32>, String, tempfile::TempDir) {
    let (d, out) = scratch();
    let reference = live_reference().to_str().unwrap().to_string();
    let mut args = vec![
        "--replies".to_string(),
        "3".into(),
        "--logprobs".into(),
        "5".into(),
        "--reference".into(),
        reference,
    ];
    for n in noise {
        args.extend(["--reference-noise".to_string(), n.display().to_string()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut full = vec!["--flip-margin", margin, "--tokens", "12"];
    full.extend_from_slice(script);
    let (code, stdout) = stand_in_run(&out, &args, &full);
    (code, stdout, d)
}

#[test]
fn a_live_candidate_is_held_to_the_noise_of_known_good_builds_and_judge_says_the_same() {
    let (_n, noise) = live_noise("2.9", &[]);
    // Inside the noise: its runners-up nearer the reference's than the known-good build's.
    let (code, stdout, d) = against_noise(&[&noise], "2.95", &[]);
    assert_eq!(code, Some(0), "{stdout}");
    let l = line(&stdout, "reference");
    assert!(
        l.contains(" ok ")
            && l.contains("held to 2x the worst of 1 known-good build (--reference-noise)")
            && l.contains("over every position: same top token 100.0%"),
        "{l}"
    );
    let out = d.path().join("run");
    let (_, judged_out, _) = judged(&out, &[]);
    assert_eq!(
        line(&judged_out, "reference"),
        l,
        "judge reads the recorded noise"
    );
    let result: Value =
        serde_json::from_slice(&std::fs::read(out.join("result.json")).unwrap()).unwrap();
    let f = result["lines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["check"] == "reference")
        .map(|l| l["figures"]["reference"].clone())
        .unwrap();
    assert_eq!(f["noise_factor"], 2.0, "{f}");
    assert_eq!(f["noise"][0]["figures"]["positions"], 36, "{f}");
    let (kl_here, kl_noise) = (
        f["every_position"]["kl_mean"].as_f64().unwrap(),
        f["noise"][0]["figures"]["kl_mean"].as_f64().unwrap(),
    );
    assert!(kl_here > 0.0 && kl_here < kl_noise, "{f}");
    // A factor under the candidate's own ratio is refused only as a bound: 1 still holds it.
    let (code, stdout, _) = judged(&out, &["--noise-factor", "1"]);
    assert_eq!(code, Some(0), "{stdout}");

    // Far outside: its runners-up 1 nat behind, a KL many times the noise's.
    let (code, stdout, _d) = against_noise(&[&noise], "1", &[]);
    assert_eq!(code, Some(1), "{stdout}");
    let l = line(&stdout, "reference");
    assert!(
        l.contains("FAIL  KL mean")
            && l.contains("x the noise's")
            && l.contains(&noise.display().to_string()),
        "{l}"
    );

    // A noise build wider than the candidate, which never goes hard, still fails a candidate
    // that does.
    let (_w, wide) = live_noise("2", &[]);
    let (code, stdout, _d) = against_noise(&[&wide], "2.95", &["--logprob-flip", "2"]);
    assert_eq!(code, Some(1), "{stdout}");
    let l = line(&stdout, "reference");
    assert!(
        l.contains("hard divergences per 100 positions 8.33 beyond the limit 0.00")
            && l.contains("the reference's margin 3.00 nats"),
        "{l}"
    );
}

#[test]
fn a_noise_build_that_cannot_be_used_is_said_and_the_line_is_never_a_pass() {
    // The reference's own numerics: it measures no noise.
    let (_s, same) = live_noise("3", &[]);
    // No logprobs though asked for.
    let (_n, none) = {
        let (d, out) = scratch();
        let reference = live_reference().to_str().unwrap().to_string();
        let (code, stdout) = stand_in_run(
            &out,
            &[
                "--replies",
                "3",
                "--logprobs",
                "5",
                "--reference",
                &reference,
            ],
            &["--flip-margin", "2.9", "--tokens", "12", "--no-logprobs"],
        );
        // Checked one way, from the reference's top-K, its line is ok: the run is made.
        assert_eq!(code, Some(0), "{stdout}");
        (d, out)
    };
    let (code, stdout, _d) = against_noise(&[&same, &none], "2.95", &[]);
    assert_eq!(code, Some(4), "INCONCLUSIVE: {stdout}");
    assert!(stdout.contains("RESULT: INCONCLUSIVE"), "{stdout}");
    let l = line(&stdout, "reference");
    assert!(
        l.contains("inconclusive")
            && l.contains("the noise cannot be used")
            && l.contains("bit for bit")
            && l.contains("recorded no logprobs"),
        "{l}"
    );
}

#[test]
fn bad_noise_input_exits_2_on_one_line_before_anything_starts() {
    let reference = live_reference().to_str().unwrap().to_string();
    let (_k, other_k) = live_noise("2.9", &["--logprobs", "3"]);
    let (_m, other_max) = live_noise("2.9", &["--max-tokens", "16"]);
    let (_g, good) = live_noise("2.9", &[]);
    let (d, _) = scratch();
    let missing = d.path().join("missing");
    let (other_k, other_max, good, missing) = (
        other_k.display().to_string(),
        other_max.display().to_string(),
        good.display().to_string(),
        missing.display().to_string(),
    );
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["--reference-noise", &good],
            "give --reference DIR with it",
        ),
        (
            vec!["--reference", &reference, "--reference-noise", &missing],
            "is not a readable run",
        ),
        (
            vec!["--reference", &reference, "--reference-noise", &other_k],
            "logprobs at top-3 in the noise build, top-5 at the reference",
        ),
        (
            vec!["--reference", &reference, "--reference-noise", &other_max],
            "max_tokens",
        ),
        (
            vec![
                "--reference",
                &reference,
                "--reference-noise",
                &good,
                "--noise-factor",
                "0.5",
            ],
            "--noise-factor",
        ),
        (
            vec!["--reference", &reference, "--noise-factor", "2"],
            "give --reference-noise DIR with it",
        ),
    ];
    for (args, says) in &cases {
        let (d, out) = scratch();
        let mut all = vec!["--replies", "3", "--logprobs", "5"];
        all.extend_from_slice(args);
        let (code, stdout) = stand_in_run(&out, &all, &[]);
        assert_eq!(code, Some(2), "{args:?}: {stdout}");
        assert!(!out.exists(), "{args:?}: a run directory was made");
        drop(d);
        // judge refuses the same, on one line.
        let o = gate()
            .arg("judge")
            .arg(live_reference())
            .args(args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "judge {args:?}: {stderr}");
        let said: Vec<&str> = stderr
            .lines()
            .filter(|l| !(l.trim().is_empty() || l.starts_with("For more information")))
            .collect();
        assert_eq!(said.len(), 1, "judge {args:?}: {stderr}");
        assert!(said[0].contains(says), "judge {args:?}: {stderr}");
    }
}

#[test]
fn a_changed_noise_archive_fails_its_digest() {
    let (_g, good) = live_noise("2.9", &[]);
    let replies_file = good.join("replies.jsonl");
    let mut text = std::fs::read_to_string(&replies_file).unwrap();
    text = text.replacen("\"logprob\":", "\"logprob\": ", 1);
    std::fs::write(&replies_file, text).unwrap();
    let o = gate()
        .arg("judge")
        .arg(live_reference())
        .args(["--reference"])
        .arg(live_reference())
        .arg("--reference-noise")
        .arg(&good)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--reference-noise") && stderr.contains("changed"),
        "{stderr}"
    );
}
