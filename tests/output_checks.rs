//! The output line (issue 32) against degenerate stand-ins run as real serves: each rule FAILs
//! the run naming itself, `judge` gives the same line from the archive, result.json (held to
//! its schema) and `--prom` carry the figures, and `--output-checks off` says it as info.

use std::path::Path;

use crate::util::*;

/// A stand-in run with `script`, its exit code, stdout and run directory.
fn degenerate(gate_args: &[&str], script: &[&str]) -> (Option<i32>, String, tempfile::TempDir) {
    let (d, out) = scratch();
    let (code, stdout) = stand_in_run(&out, gate_args, script);
    (code, stdout, d)
}

fn judged(dir: &Path, args: &[&str]) -> String {
    let o = gate().arg("judge").arg(dir).args(args).output().unwrap();
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn the_stand_ins_normal_answers_pass_the_output_line() {
    // 200 tokens each: its filler is long text that neither loops nor stutters.
    let (code, stdout, _d) = degenerate(&["--max-tokens", "256"], &["--tokens", "200"]);
    assert_eq!(code, Some(0), "{stdout}");
    let l = line(&stdout, "output");
    assert!(
        l.contains(" ok ") && l.contains("0 loops, 0 stutters"),
        "{l}"
    );
}

#[test]
fn each_degenerate_serve_fails_naming_its_rule_and_judge_agrees() {
    for (script, rule) in [
        (&["--loop-period", "3", "--tokens", "60"][..], "loop: "),
        (&["--stutter", "5"][..], "stutter: "),
        (&["--not-text", "0.3"][..], "not text: "),
        (
            &["--answer", "Paris 4 cold, the answer to everything."][..],
            "one answer to different questions",
        ),
        // Past max_tokens on every prompt, each marked to stop (the built-in ones are).
        (&["--tokens", "100"][..], "never stops: all 3 replies"),
    ] {
        let (code, stdout, d) = degenerate(&["--max-tokens", "64"], script);
        assert_eq!(code, Some(1), "{script:?}: {stdout}");
        let l = line(&stdout, "output");
        assert!(l.contains("FAIL") && l.contains(rule), "{script:?}: {l}");
        // The content line's regex found its word: the output line is what caught it.
        if script[0] != "--not-text" {
            assert!(
                line(&stdout, "content").contains(" ok "),
                "{script:?}: {stdout}"
            );
        }
        let out = d.path().join("run");
        assert_eq!(line(&judged(&out, &[]), "output"), l, "{script:?}");
        check_result_schema(&out.join("result.json"));
        // Off: the same findings, said as info.
        let off = judged(&out, &["--output-checks", "off"]);
        let l = line(&off, "output");
        assert!(
            l.contains("info  --output-checks off: ") && l.contains(rule),
            "{l}"
        );
    }
}

#[test]
fn the_figures_reach_result_json_and_prom() {
    let (d, out) = scratch();
    let prom = d.path().join("gate.prom");
    let (code, stdout) = stand_in_run(
        &out,
        &["--prom", prom.to_str().unwrap()],
        &["--loop-period", "2", "--tokens", "48"],
    );
    assert_eq!(code, Some(1), "{stdout}");
    let result = json(&out.join("result.json"));
    let f = result["lines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["check"] == "output")
        .map(|l| l["figures"]["output"].clone())
        .unwrap();
    assert_eq!(f["loops"], 3, "{f}");
    assert_eq!(f["replies"], 3, "{f}");
    let text = std::fs::read_to_string(&prom).unwrap();
    assert!(
        text.lines()
            .any(|l| l.starts_with("npu_serve_smoke_output_loops{") && l.ends_with("} 3")),
        "{text}"
    );
}

#[test]
fn bad_output_settings_exit_2_before_anything_starts() {
    for args in [
        ["--loop-share", "1.5"],
        ["--stutter-run", "1"],
        ["--not-text-share", "-0.1"],
        ["--output-checks", "maybe"],
    ] {
        let (_d, out) = scratch();
        let (code, stdout) = stand_in_run(&out, &args, &[]);
        assert_eq!(code, Some(2), "{args:?}: {stdout}");
        assert!(!out.exists(), "{args:?}: a run directory was made");
    }
}
