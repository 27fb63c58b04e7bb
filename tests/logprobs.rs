//! `--logprobs K` end to end (issue 31, items 1 and 3): the gate asks every request for
//! logprobs, records them bounded in replies.jsonl and says a serve that sends none; the
//! stand-in answers with scripted scores and flips.

use std::path::Path;

use serde_json::Value;

use crate::util::{gate, json, replies, scratch, stand_in_run, UNFLIPPABLE};

fn said(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn records(reply: &Value) -> &Vec<Value> {
    reply["logprobs"]
        .as_array()
        .unwrap_or_else(|| panic!("no logprobs in {reply}"))
}

fn lp(v: &Value) -> f64 {
    v["logprob"].as_f64().unwrap()
}

/// K alternatives a token, one record a token, and their texts put together are the answer:
/// the record a judge can align by text. run.json says K, typed and in the settings.
#[test]
fn a_stand_in_run_records_k_alternatives_for_every_token_of_the_answer() {
    let (_d, out) = scratch();
    let (code, stdout) = stand_in_run(
        &out,
        &["--logprobs", "5", "--replies", "2"],
        &["--tokens", "8", "--chunk-tokens", "3"],
    );
    assert_eq!(code, Some(0), "{stdout}");
    for r in replies(&out) {
        let lps = records(&r);
        assert_eq!(lps.len(), 8, "{r}");
        let text: String = lps.iter().map(|t| t["token"].as_str().unwrap()).collect();
        assert_eq!(text, r["content"].as_str().unwrap());
        for t in lps {
            let top = t["top"].as_array().unwrap();
            assert_eq!(top.len(), 5, "{t}");
            assert_eq!(
                top[0]["token"], t["token"],
                "the stand-in's usual token leads"
            );
            assert!(lp(t) < 0.0);
        }
    }
    let run = json(&out.join("run.json"));
    assert_eq!(run["logprobs"]["top"], 5);
    assert_eq!(run["logprobs"]["replies_without"], 0);
    assert_eq!(run["settings"]["logprobs"], 5);
}

/// Without --logprobs nothing is asked and nothing recorded: the stand-in's stream and the
/// run are as they were.
#[test]
fn without_logprobs_none_are_asked_or_recorded() {
    let (_d, out) = scratch();
    let (code, stdout) = stand_in_run(&out, &["--replies", "1"], &["--tokens", "4"]);
    assert_eq!(code, Some(0), "{stdout}");
    assert!(replies(&out)[0].get("logprobs").is_none());
    let run = json(&out.join("run.json"));
    assert!(run.get("logprobs").is_none(), "{}", run["logprobs"]);
}

/// A serve that ignores `"logprobs": true`: said once for the run, every reply's logprobs
/// absent (never guessed), and run.json says how many came without them.
#[test]
fn a_serve_that_sends_no_logprobs_is_said_once_and_none_are_guessed() {
    let (_d, out) = scratch();
    let o = gate()
        .args([
            "run",
            "--stand-in",
            "--replies",
            "3",
            "--logprobs",
            "3",
            "--out",
        ])
        .arg(&out)
        .args(UNFLIPPABLE)
        .args(["--", "--tokens", "8", "--no-logprobs"])
        .output()
        .unwrap();
    let text = said(&o);
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert_eq!(
        text.matches("the serve sent no logprobs").count(),
        1,
        "{text}"
    );
    for r in replies(&out) {
        assert!(r.get("logprobs").is_none(), "{r}");
    }
    assert_eq!(
        json(&out.join("run.json"))["logprobs"]["replies_without"],
        3
    );
}

/// --logprob-flip: at the position, the runner-up is sent and recorded, and its list ranks the
/// usual token the margin higher; every other position is the usual token.
#[test]
fn a_flip_is_recorded_at_its_position_with_its_margin() {
    for margin in [0.2, 9.6] {
        let (_d, out) = scratch();
        let m = margin.to_string();
        let (code, stdout) = stand_in_run(
            &out,
            &["--logprobs", "4", "--replies", "1"],
            &[
                "--tokens",
                "6",
                "--answer",
                "one two three four",
                "--logprob-flip",
                "2",
                "--flip-margin",
                &m,
            ],
        );
        assert!(code.is_some(), "{stdout}");
        let r = &replies(&out)[0];
        assert!(r["content"]
            .as_str()
            .unwrap()
            .starts_with("one two eerht four"));
        let lps = records(r);
        for (i, t) in lps.iter().enumerate() {
            let top = t["top"].as_array().unwrap();
            if i == 2 {
                assert_eq!(t["token"], " eerht");
                assert_eq!(top[0]["token"], " three");
                assert_eq!(top[1]["token"], " eerht");
                assert!((lp(&top[0]) - lp(t) - margin).abs() < 1e-9, "{t}");
            } else {
                assert_eq!(top[0]["token"], t["token"], "{t}");
                assert!((lp(&top[0]) - lp(&top[1]) - margin).abs() < 1e-9, "{t}");
            }
        }
    }
}

/// `--logprobs` out of 1 to 20, on the command line or in a profile: exit 2, one line, before
/// anything starts (no run directory).
#[test]
fn logprobs_out_of_range_is_refused_in_one_line() {
    let (d, out) = scratch();
    for k in ["0", "21", "-1", "five"] {
        let o = gate()
            .args(["run", "--stand-in", "--logprobs", k, "--out"])
            .arg(&out)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{k}: {stderr}");
        // clap's value error, as every bounded flag's: one line, and its pointer to --help.
        let lines: Vec<&str> = stderr
            .lines()
            .filter(|l| !l.is_empty() && !l.starts_with("For more information"))
            .collect();
        assert_eq!(lines.len(), 1, "{k}: {stderr}");
        assert!(lines[0].contains("--logprobs"), "{k}: {stderr}");
        assert!(!out.exists());
    }
    let profile = d.path().join("p.toml");
    for k in ["0", "21"] {
        std::fs::write(&profile, format!("logprobs = {k}\nstand_in = true\n")).unwrap();
        let o = gate()
            .args(["run", "--profile"])
            .arg(&profile)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
        assert!(stderr.contains("logprobs"), "{stderr}");
        assert!(!out.exists());
    }
    // Asked twice, by --logprobs and the extra body: refused too.
    let o = gate()
        .args(["run", "--stand-in", "--logprobs", "2", "--extra-body"])
        .arg(r#"{"top_logprobs": 5}"#)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", said(&o));
    assert!(!out.exists());
}

fn hostile(mode: &str, out: &Path) -> std::process::Output {
    let serve = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/logprobs_serve.py");
    gate()
        .args(["run", "--replies", "2", "--logprobs", "20", "--out"])
        .arg(out)
        .args(UNFLIPPABLE)
        .arg("--")
        .arg(&serve)
        .args(["{port}", mode])
        .output()
        .unwrap()
}

/// A serve sending 10,000 alternatives a token, 1 MB token texts, or 5,000 records in a chunk:
/// what is kept is bounded (K alternatives, 256 bytes a text, the reply's event cap), the
/// record stays small, and so does the gate's memory.
#[test]
fn hostile_logprobs_are_kept_within_bounds() {
    for mode in ["wide", "long", "many"] {
        let (_d, out) = scratch();
        let o = hostile(mode, &out);
        let text = said(&o);
        // The serve's answers are not the built-in prompts' (content may FAIL): the run ends.
        assert!(matches!(o.status.code(), Some(0 | 1)), "{mode}: {text}");
        let size = std::fs::metadata(out.join("replies.jsonl")).unwrap().len();
        assert!(size < 2 << 20, "{mode}: replies.jsonl is {size} bytes");
        for r in replies(&out) {
            assert_eq!(r["content"], "abcdefgh", "{mode}");
            let lps = records(&r);
            // 8 events a reply; `many` sends 5,000 records a chunk, kept to the event cap.
            assert!(lps.len() <= 4 * 64 + 64, "{mode}: {}", lps.len());
            for t in lps {
                assert!(t["token"].as_str().unwrap().len() <= 256, "{mode}");
                let top = t["top"].as_array().map_or(0, Vec::len);
                assert!(top <= 20, "{mode}: {top}");
            }
        }
        let run = json(&out.join("run.json"));
        if mode != "long" {
            assert!(run["logprobs"]["dropped"].as_u64().unwrap() > 0, "{mode}");
        }
        let rss = run["gate_max_rss_kib"].as_u64().unwrap();
        assert!(rss < 64 << 10, "{mode}: the gate's peak RSS was {rss} KiB");
    }
}

/// A token record the gate cannot read (a logprob as a string): the reply's text is read
/// whole, its logprobs are dropped (a gap would misplace every later token), and the run says
/// why, once; never a panic.
#[test]
fn malformed_logprobs_are_said_and_the_reply_keeps_none() {
    let (_d, out) = scratch();
    let o = hostile("broken", &out);
    let text = said(&o);
    assert!(matches!(o.status.code(), Some(0 | 1)), "{text}");
    assert!(!text.contains("panicked"), "{text}");
    assert_eq!(
        text.matches("logprobs could not be read in 2 replies")
            .count(),
        1,
        "{text}"
    );
    for r in replies(&out) {
        assert_eq!(r["content"], "abcdefgh");
        assert!(r.get("logprobs").is_none(), "{r}");
    }
    let run = json(&out.join("run.json"));
    assert_eq!(run["logprobs"]["replies_unreadable"], 2);
    let why = run["logprobs"]["first_unreadable"].as_str().unwrap();
    assert!(why.contains("token record 1"), "{why}");
}
