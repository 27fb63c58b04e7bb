//! Each output read by the tool that reads it in real CI, for runs against a serve that prints
//! control characters, HTML and Markdown in its log and its replies: the JUnit file by xmllint
//! against the Surefire/Jenkins schema and by junitparser and xunitparser, the step summary by
//! cmark-gfm, the completion scripts by zsh and fish, timeline.svg by rsvg-convert. (issue 15,
//! items 1 to 3, 5 and 10)
//!
//! The tools come from `tools/install-report-tools.sh` (Debian and PyPI packages). Without
//! them these tests say they skipped; under CI=true they fail.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use nix::sys::signal::Signal;

use crate::util::*;

/// The consumers, or `None` (skip) outside CI.
struct Consumers {
    xsd: PathBuf,
    python: PathBuf,
}

fn consumers() -> Option<Consumers> {
    match (
        std::env::var("JUNIT_XSD"),
        std::env::var("REPORT_TOOLS_PYTHON"),
    ) {
        (Ok(xsd), Ok(python)) => Some(Consumers {
            xsd: xsd.into(),
            python: python.into(),
        }),
        _ if std::env::var("CI").as_deref() == Ok("true") => panic!(
            "JUNIT_XSD and REPORT_TOOLS_PYTHON must name the report tools in CI: \
             eval \"$(tools/install-report-tools.sh)\""
        ),
        _ => {
            eprintln!("skipped: no report tools (run: eval \"$(tools/install-report-tools.sh)\")");
            None
        }
    }
}

/// What a broken build prints: a colour escape, BEL, \x01, HTML, Markdown.
const GARBAGE: &str =
    "\u{1b}[31m\u{7}\u{1}<script>alert(1)</script> <b>**bold**</b> `code` [x](http://e) &amp;";

/// The JUnit file as each consumer reads it: (testcase name, kind of its result) pairs from
/// junitparser, and xunitparser's counts (run, failures, errors, skipped).
fn read_junit(c: &Consumers, junit: &Path) -> (Vec<(String, String)>, [usize; 4]) {
    let v = Command::new("xmllint")
        .args(["--noout", "--schema"])
        .arg(&c.xsd)
        .arg(junit)
        .output()
        .unwrap();
    assert!(
        v.status.success(),
        "xmllint: {}\n{}",
        String::from_utf8_lossy(&v.stderr),
        std::fs::read_to_string(junit).unwrap_or_default()
    );
    let program = r#"
import sys, junitparser, xunitparser
xml = junitparser.JUnitXml.fromfile(sys.argv[1])
for suite in xml:
    for case in suite:
        kinds = [type(r).__name__ for r in case.result] or ["Passed"]
        print("case", case.name, kinds[0])
with open(sys.argv[1]) as f:
    _, r = xunitparser.parse(f)
print("counts", r.testsRun, len(r.failures), len(r.errors), len(r.skipped))
"#;
    let o = Command::new(&c.python)
        .args(["-c", program])
        .arg(junit)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "the JUnit readers refused it: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let mut cases = Vec::new();
    let mut counts = [0; 4];
    for line in out.lines() {
        let words: Vec<&str> = line.split(' ').collect();
        match words[0] {
            "case" => cases.push((words[1].to_string(), words[2].to_string())),
            "counts" => {
                for (i, n) in words[1..].iter().enumerate() {
                    counts[i] = n.parse().unwrap();
                }
            }
            _ => {}
        }
    }
    (cases, counts)
}

/// The step summary as GitHub renders it (cmark-gfm), checked inert: no tag, control
/// character or Markdown markup of the serve's came through.
fn check_summary(summary: &Path) -> String {
    let o = Command::new("cmark-gfm")
        .args(["-e", "table"])
        .arg(summary)
        .output()
        .unwrap();
    assert!(o.status.success());
    let html = String::from_utf8_lossy(&o.stdout).into_owned();
    for raw in [
        "<script", "<b>", "<strong>", "<code>", "<a ", "\u{1b}", "\u{7}", "\u{1}",
    ] {
        assert!(
            !html.contains(raw),
            "{raw:?} in the rendered summary:\n{html}"
        );
    }
    html
}

fn run_args(out: &Path, d: &Path, extra: &[&str], script: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = ["run", "--stand-in", "--replies", "1", "--out"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    v.push(out.display().to_string());
    v.push("--junit".into());
    v.push(d.join("junit.xml").display().to_string());
    v.extend(extra.iter().map(|s| s.to_string()));
    v.push("--".into());
    v.extend(["--route-line", &format!("route: {GARBAGE}")].map(String::from));
    v.extend(script.iter().map(|s| s.to_string()));
    v
}

#[test]
fn junit_and_the_step_summary_survive_a_serve_that_prints_garbage() {
    let Some(c) = consumers() else { return };
    // PASS: the garbage is in the log, matched as the fast route.
    // FAIL: the reply is garbage (content FAIL, quoted) and the log names the slow route.
    // SKIP: the hold is not acquired.
    let held = tempfile::tempdir().unwrap();
    let hold = held.path().join("npu.hold");
    let file = std::fs::File::create(&hold).unwrap();
    let _mine = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive).unwrap();
    let hold_arg = hold.display().to_string();
    let runs: Vec<(&str, Vec<&str>, Vec<&str>, i32)> = vec![
        ("PASS", vec!["--fast-route", "route:"], vec![], 0),
        (
            "FAIL",
            vec!["--slow-route", "route:"],
            vec!["--answer", GARBAGE],
            1,
        ),
        (
            "SKIP",
            vec!["--hold", &hold_arg, "--hold-timeout", "0.3"],
            vec![],
            3,
        ),
    ];
    for (result, extra, script, code) in runs {
        let (d, out) = scratch();
        let summary = d.path().join("summary.md");
        let mut extra = extra;
        extra.extend(UNFLIPPABLE);
        let o = gate()
            .args(run_args(&out, d.path(), &extra, &script))
            .env("GITHUB_STEP_SUMMARY", &summary)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&o.stdout);
        assert_eq!(o.status.code(), Some(code), "{result}: {stdout}");
        assert_eq!(json(&out.join("result.json"))["result"], result);
        for raw in ['\u{1b}', '\u{7}', '\u{1}'] {
            assert!(
                !stdout.contains(raw),
                "{result}: {raw:?} reached the terminal: {stdout}"
            );
        }
        let (cases, counts) = read_junit(&c, &d.path().join("junit.xml"));
        let html = check_summary(&summary);
        match result {
            "PASS" => {
                assert!(cases.iter().all(|(_, k)| k == "Passed"), "{cases:?}");
                assert_eq!(counts, [5, 0, 0, 0]);
            }
            "FAIL" => {
                let kind = |name: &str| cases.iter().find(|(n, _)| n == name).unwrap().1.clone();
                assert_eq!(kind("content"), "Failure", "{cases:?}");
                assert_eq!(kind("route"), "Failure", "{cases:?}");
                assert_eq!(kind("rate"), "Passed", "{cases:?}");
                assert!(
                    stdout.contains("\\u{1b}[31m\\u{7}\\u{1}<script>"),
                    "the reply is quoted visibly: {stdout}"
                );
                assert!(
                    html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
                    "{html}"
                );
            }
            _ => {
                // Nothing was judged: no check failed.
                assert!(cases.iter().all(|(_, k)| k != "Failure"), "{cases:?}");
                assert_eq!(counts[1], 0, "{counts:?}");
            }
        }
    }
}

/// After SIGTERM mid-request the checks are skipped with the reason, not failed.
#[test]
fn an_interrupted_run_is_skipped_checks_in_junit_not_failures() {
    let Some(c) = consumers() else { return };
    let (d, out) = scratch();
    let args = run_args(
        &out,
        d.path(),
        &UNFLIPPABLE,
        &["--tokens", "200", "--gaps-ms", "50"],
    );
    let mut g = Running::start(&args);
    g.wait_to_say("the serve is ready", Duration::from_secs(60));
    g.signal(Signal::SIGTERM);
    assert_eq!(g.wait(Duration::from_secs(60)), Some(143), "{}", g.said);
    let (cases, counts) = read_junit(&c, &d.path().join("junit.xml"));
    let kinds: Vec<&str> = cases.iter().map(|(_, k)| k.as_str()).collect();
    assert!(!kinds.contains(&"Failure"), "{cases:?}");
    assert_eq!(cases.last().unwrap().1, "Error", "{cases:?}");
    assert!(
        kinds.iter().filter(|k| **k == "Skipped").count() >= 3,
        "{cases:?}"
    );
    assert_eq!(counts[1], 0, "{counts:?}");
}

#[test]
fn zsh_and_fish_parse_their_completion_scripts() {
    if consumers().is_none() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    for (shell, check) in [("zsh", "zsh"), ("fish", "fish")] {
        let script = d.path().join(format!("completion.{shell}"));
        let o = gate().args(["completions", shell]).output().unwrap();
        std::fs::write(&script, &o.stdout).unwrap();
        let parsed = Command::new(check).arg("-n").arg(&script).output().unwrap();
        assert!(
            parsed.status.success(),
            "{shell} -n: {}",
            String::from_utf8_lossy(&parsed.stderr)
        );
    }
}

/// timeline.svg renders as a viewer renders it (rsvg-convert), for a run that passed and for
/// one whose serve printed garbage and failed.
#[test]
fn the_timeline_renders_in_a_real_svg_renderer() {
    if consumers().is_none() {
        return;
    }
    for script in [vec![], vec!["--answer", GARBAGE]] {
        let (d, out) = scratch();
        let mut args = run_args(&out, d.path(), &UNFLIPPABLE, &script);
        args.retain(|a| a != "--junit" && !a.ends_with("junit.xml"));
        gate().args(&args).output().unwrap();
        let png = d.path().join("timeline.png");
        let o = Command::new("rsvg-convert")
            .arg(out.join("timeline.svg"))
            .arg("-o")
            .arg(&png)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "rsvg-convert: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(std::fs::metadata(&png).unwrap().len() > 1000);
    }
}

#[test]
fn an_inconclusive_comparison_is_skipped_in_junit_and_named_in_the_summary() {
    let Some(c) = consumers() else { return };
    // Three replies a side: thin, so the comparison can only be inconclusive, whatever the
    // timing.
    let (d, baseline) = scratch();
    let (code, stdout) = stand_in_run(&baseline, &["--replies", "3"], &[]);
    assert_eq!(code, Some(0), "{stdout}");
    let out = d.path().join("candidate");
    let junit = d.path().join("junit.xml");
    let summary = d.path().join("summary.md");
    let o = gate()
        .args(["run", "--stand-in", "--replies", "3", "--out"])
        .arg(&out)
        .args(UNFLIPPABLE)
        .arg("--baseline")
        .arg(&baseline)
        .arg("--junit")
        .arg(&junit)
        .env("GITHUB_STEP_SUMMARY", &summary)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(4), "{stdout}");
    let (cases, counts) = read_junit(&c, &junit);
    let kind = |name: &str| {
        cases
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, k)| k.as_str())
            .unwrap_or_else(|| panic!("no {name} in {cases:?}"))
    };
    assert_eq!(kind("baseline-rate"), "Skipped", "{cases:?}");
    assert_eq!(kind("baseline-first-token"), "Skipped", "{cases:?}");
    assert_eq!(kind("result"), "Skipped", "{cases:?}");
    assert_eq!(kind("content"), "Passed", "{cases:?}");
    assert_eq!(
        (counts[1], counts[2]),
        (0, 0),
        "no failure, no error: {counts:?}"
    );
    let html = check_summary(&summary);
    assert!(html.contains("RESULT: INCONCLUSIVE"), "{html}");
    assert!(html.contains("inconclusive"), "{html}");
    check_result_schema(&out.join("result.json"));
}
