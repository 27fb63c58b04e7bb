//! Each output read by the tool that reads it in real CI, for runs against a serve that prints
//! control characters, HTML and Markdown in its log and its replies: the JUnit file by xmllint
//! against the Surefire/Jenkins schema and by junitparser and xunitparser, the step summary by
//! cmark-gfm, the completion scripts by zsh and fish, timeline.svg by rsvg-convert (issue 15,
//! items 1 to 3, 5 and 10); the `--prom` file by promtool and prometheus_client's parser (issue
//! 21, item 3).
//!
//! The tools come from `tools/install-report-tools.sh` (Debian and PyPI packages). Without
//! them these tests say they skipped; under CI=true they fail.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use nix::sys::signal::Signal;

use serde_json::Value;

use crate::util::*;

/// The consumers, or `None` (skip) outside CI.
struct Consumers {
    xsd: PathBuf,
    python: PathBuf,
}

fn consumers() -> Option<Consumers> {
    let [xsd, python] =
        <[PathBuf; 2]>::try_from(report_tools(&["JUNIT_XSD", "REPORT_TOOLS_PYTHON"])?).ok()?;
    Some(Consumers { xsd, python })
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
                assert_eq!(counts, [6, 0, 0, 0]);
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

/// promtool (Debian's prometheus package, unpacked by `tools/install-report-tools.sh`), or
/// `None` (skip) outside CI.
fn promtool() -> Option<PathBuf> {
    match std::env::var_os("PROMTOOL") {
        Some(p) => Some(p.into()),
        None if std::env::var("CI").as_deref() == Ok("true") => {
            panic!("PROMTOOL must name promtool in CI: eval \"$(tools/install-report-tools.sh)\"")
        }
        None => {
            eprintln!("skipped: no promtool (run: eval \"$(tools/install-report-tools.sh)\")");
            None
        }
    }
}

/// One sample as prometheus_client's parser read it: its name, labels and value.
#[derive(Debug, serde::Deserialize)]
struct Sample {
    family: String,
    kind: String,
    name: String,
    labels: std::collections::BTreeMap<String, String>,
    value: f64,
}

/// The metrics file checked by `promtool check metrics` (its lint included) and read back by
/// prometheus_client's text parser, as Prometheus and Python tooling read it.
fn read_prom(c: &Consumers, promtool: &Path, file: &Path) -> Vec<Sample> {
    let text = std::fs::read(file).unwrap();
    let mut check = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    check.stdin.take().unwrap().write_all(&text).unwrap();
    let checked = check.wait_with_output().unwrap();
    assert!(
        checked.status.success(),
        "promtool check metrics: {}{}\n{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr),
        String::from_utf8_lossy(&text)
    );
    let program = r#"
import json, sys
from prometheus_client.parser import text_string_to_metric_families
with open(sys.argv[1]) as f:
    text = f.read()
for family in text_string_to_metric_families(text):
    for s in family.samples:
        print(json.dumps({"family": family.name, "kind": family.type, "name": s.name,
                          "labels": s.labels, "value": s.value}))
"#;
    let o = Command::new(&c.python)
        .args(["-c", program])
        .arg(file)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "prometheus_client refused it: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// The value of the sample `name` whose labels include `labels`; panics unless exactly one.
fn sample(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
    let found: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.name == name)
        .filter(|s| {
            labels
                .iter()
                .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .collect();
    assert_eq!(found.len(), 1, "{name} {labels:?}: {found:?}");
    found[0].value
}

/// `got` (as prometheus_client read it) is `want` (as the test's serde_json read result.json):
/// within 1e-12 of each other, as serde_json's default float parser may be an ulp off the
/// correctly rounded value that Python and the gate's own writer agree on.
fn assert_same(got: f64, want: f64) {
    assert!(
        (got - want).abs() <= 1e-12 * want.abs().max(1.0),
        "{got} is not {want}"
    );
}

/// What a model's name may hold that the format must escape: a double quote, a backslash, a
/// line feed.
const ODD_MODEL: &str = "Qwen3 \"0.6B\"\\q4\nnext";

/// Every figure result.json has, as the metrics file says it: a run of six replies (so the
/// medians have their 95% intervals), with a model name the labels must escape, and the same
/// archive re-judged to a FAIL.
#[test]
fn prom_metrics_pass_promtool_and_read_back_as_result_json_says() {
    let Some(c) = consumers() else { return };
    let Some(promtool) = promtool() else { return };
    let (d, out) = scratch();
    let run_prom = d.path().join("run.prom");
    let o = gate()
        .args([
            "run",
            "--stand-in",
            "--replies",
            "6",
            "--model",
            ODD_MODEL,
            "--deterministic",
            "--temperature",
            "0",
            "--out",
        ])
        .arg(&out)
        .args(UNFLIPPABLE)
        .arg("--prom")
        .arg(&run_prom)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let judged_prom = d.path().join("judged.prom");
    let o = gate()
        .arg("judge")
        .arg(&out)
        .args(["--floor", "1000000000", "--prom"])
        .arg(&judged_prom)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "a floor no serve reaches");
    let manifest = json(&out.join("run.json"));
    let archived = json(&out.join("result.json"));
    let host = manifest["host"].as_str().unwrap();
    let sha = manifest["serve_binary"]["sha256"].as_str().unwrap();
    let ended = humantime::parse_rfc3339(manifest["ended_utc"].as_str().unwrap()).unwrap();
    let ended = ended
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    for (file, result, rate_floor) in [
        (&run_prom, "PASS", 0.0),
        (&judged_prom, "FAIL", 1_000_000_000.0),
    ] {
        let samples = read_prom(&c, &promtool, file);
        let p = |name: &str| format!("npu_serve_smoke_{name}");
        const SUMMARIES: [&str; 4] = ["ttft", "itl", "tpot", "e2el"];
        for s in &samples {
            let summary = SUMMARIES
                .iter()
                .any(|m| s.family == format!("npu_serve_smoke_{m}_seconds"));
            let kind = if summary { "summary" } else { "gauge" };
            assert_eq!(s.kind, kind, "{s:?}");
            assert!(s.family.starts_with("npu_serve_smoke_"), "{s:?}");
            assert_eq!(
                s.labels.get("host").map(String::as_str),
                Some(host),
                "{s:?}"
            );
            assert_eq!(
                s.labels.get("serve_sha256").map(String::as_str),
                Some(sha),
                "{s:?}"
            );
        }
        assert_eq!(manifest["model"], ODD_MODEL);
        let info = [
            ("version", manifest["tool_version"].as_str().unwrap()),
            ("model", ODD_MODEL),
        ];
        assert_eq!(sample(&samples, &p("info"), &info), 1.0);
        for r in ["PASS", "FAIL", "SKIP", "INTERRUPTED", "INCONCLUSIVE"] {
            let want = if r == result { 1.0 } else { 0.0 };
            assert_eq!(
                sample(&samples, &p("result"), &[("result", r)]),
                want,
                "{r} in {}",
                file.display()
            );
        }
        // Each line as that verdict has it: the run's own, or the re-judged one.
        let verdict = if result == "PASS" {
            archived.clone()
        } else {
            let o = gate()
                .arg("judge")
                .arg(&out)
                .args(["--floor", "1000000000", "--json"])
                .output()
                .unwrap();
            serde_json::from_slice(&o.stdout).unwrap()
        };
        let lines = verdict["lines"].as_array().unwrap();
        for l in lines {
            let check = l["check"].as_str().unwrap();
            let status = l["status"].as_str().unwrap();
            assert_eq!(
                sample(
                    &samples,
                    &p("check_status"),
                    &[("check", check), ("status", status)]
                ),
                1.0,
                "{check} {status}"
            );
        }
        let figures = |check: &str| {
            lines
                .iter()
                .find(|l| l["check"] == check)
                .unwrap_or_else(|| panic!("no {check} line"))["figures"]
                .clone()
        };
        let rate = figures("rate");
        let q = |name: &str, quantity: &str| sample(&samples, &p(name), &[("quantity", quantity)]);
        assert_same(
            q("rate_tokens_per_second", "median"),
            rate["median"].as_f64().unwrap(),
        );
        assert_same(
            q("rate_tokens_per_second", "interval_95_low"),
            rate["interval_95"][0].as_f64().unwrap(),
        );
        assert_same(
            q("rate_tokens_per_second", "interval_95_high"),
            rate["interval_95"][1].as_f64().unwrap(),
        );
        assert_same(q("rate_tokens_per_second", "floor"), rate_floor);
        let first = figures("first-token");
        let s = |ms: &Value| ms.as_f64().unwrap() / 1e3;
        assert_same(q("first_token_seconds", "median"), s(&first["median"]));
        assert_same(
            q("first_token_seconds", "interval_95_low"),
            s(&first["interval_95"][0]),
        );
        assert_same(
            q("first_token_seconds", "interval_95_high"),
            s(&first["interval_95"][1]),
        );
        // UNFLIPPABLE's --first-token-ms 600000, in seconds.
        assert_same(q("first_token_seconds", "limit"), 600.0);
        assert_same(
            sample(&samples, &p("median_replies"), &[("check", "rate")]),
            6.0,
        );
        let det = figures("determinism");
        assert_same(
            sample(&samples, &p("determinism_trials"), &[]),
            det["trials"].as_f64().unwrap(),
        );
        assert_same(
            sample(&samples, &p("determinism_mismatches"), &[]),
            det["mismatches"].as_f64().unwrap(),
        );
        for (quantity, figure) in [
            ("rate", &det["mismatch_rate"]),
            ("interval_95_low", &det["interval_95"][0]),
            ("interval_95_high", &det["interval_95"][1]),
        ] {
            assert_same(
                sample(
                    &samples,
                    &p("determinism_mismatch_ratio"),
                    &[("quantity", quantity)],
                ),
                figure.as_f64().unwrap(),
            );
        }
        assert_same(
            sample(&samples, &p("determinism_detectable_ratio"), &[]),
            det["detectable_rate"].as_f64().unwrap(),
        );
        let load = figures("load");
        assert_same(
            sample(&samples, &p("load1"), &[]),
            load["load1"].as_f64().unwrap(),
        );
        assert_same(
            sample(&samples, &p("cpus"), &[]),
            load["ncpu"].as_f64().unwrap(),
        );
        match load["serve_cpu_wait"].as_f64() {
            Some(wait) => assert_same(sample(&samples, &p("serve_cpu_wait_ratio"), &[]), wait),
            None => assert!(
                !samples.iter().any(|s| s.name == p("serve_cpu_wait_ratio")),
                "a CPU wait the run lacks"
            ),
        }
        assert_eq!(
            sample(&samples, &p("run_end_timestamp_seconds"), &[]),
            ended
        );
        // The latency line's percentiles (ms) as summaries in seconds, with _count and _sum.
        let latency = figures("latency");
        for m in SUMMARIES {
            let want = &latency[format!("{m}_ms")];
            let name = p(&format!("{m}_seconds"));
            for (quantile, key) in [("0.5", "p50"), ("0.9", "p90"), ("0.99", "p99")] {
                assert_same(
                    sample(&samples, &name, &[("quantile", quantile)]),
                    s(&want[key]),
                );
            }
            let count = want["count"].as_f64().unwrap();
            assert_same(sample(&samples, &format!("{name}_count"), &[]), count);
            assert_same(
                sample(&samples, &format!("{name}_sum"), &[]),
                s(&want["mean"]) * count,
            );
        }
    }
}

/// The context lines' figures (`--depths`, issue 35) as the metrics file says them: a run with a
/// depth within `--max-context` and one past it (so the limit is probed), then the same archive
/// judged against itself as its baseline, for context-rate's ratios. promtool passes both files,
/// both results follow docs/result-schema.json, every series is result.json's figure, and the
/// run's timeline.svg, with its depth rows, renders.
#[test]
fn prom_context_metrics_pass_promtool_and_read_back_as_result_json_says() {
    let Some(c) = consumers() else { return };
    let Some(promtool) = promtool() else { return };
    let (d, out) = scratch();
    let run_prom = d.path().join("run.prom");
    let o = gate()
        .args(["run", "--stand-in", "--replies", "1", "--out"])
        .arg(&out)
        .args(UNFLIPPABLE)
        .args(["--depths", "64,4096", "--max-context", "2048"])
        .args(["--depth-replies", "1", "--prom"])
        .arg(&run_prom)
        .output()
        .unwrap();
    // Whether the stand-in gives the fact and how it meets the limit is the context line's to
    // judge, not this test's: either result is read back.
    assert!(
        matches!(o.status.code(), Some(0 | 1)),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let judged_prom = d.path().join("judged.prom");
    let o = gate()
        .arg("judge")
        .arg(&out)
        .arg("--baseline")
        .arg(&out)
        .arg("--json")
        .arg("--prom")
        .arg(&judged_prom)
        .output()
        .unwrap();
    // Thin, one reply a side: context-rate can only be inconclusive.
    assert!(
        matches!(o.status.code(), Some(1 | 4)),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let judged = d.path().join("judged").join("result.json");
    std::fs::create_dir(d.path().join("judged")).unwrap();
    std::fs::write(&judged, &o.stdout).unwrap();
    let p = |name: &str| format!("npu_serve_smoke_{name}");
    for (file, result, against_baseline) in [
        (&run_prom, out.join("result.json"), false),
        (&judged_prom, judged, true),
    ] {
        let verdict = json(&result);
        let samples = read_prom(&c, &promtool, file);
        let lines = verdict["lines"].as_array().unwrap();
        let figures = |check: &str| {
            lines
                .iter()
                .find(|l| l["check"] == check)
                .unwrap_or_else(|| panic!("no {check} line in {verdict}"))["figures"]["context"]
                .clone()
        };
        let context = figures("context");
        assert_same(sample(&samples, &p("context_tokens"), &[]), 2048.0);
        let rows = context["depths"].as_array().unwrap();
        assert_eq!(rows.len(), 1, "4,096 is past the context: {context}");
        for (i, row) in rows.iter().enumerate() {
            let depth = row["depth"].to_string();
            let at = |name: &str| {
                let found: Vec<&Sample> = samples
                    .iter()
                    .filter(|s| s.name == p(name) && s.labels.get("depth") == Some(&depth))
                    .collect();
                assert!(found.len() <= 1, "{name}: {found:?}");
                found.first().map(|s| s.value)
            };
            let replies = row["replies"].as_f64().unwrap();
            assert_same(at("context_replies").unwrap(), replies);
            let by = row["prompt_tokens_by"].as_str().unwrap();
            assert_same(
                sample(
                    &samples,
                    &p("context_prompt_tokens"),
                    &[("depth", &depth), ("by", by)],
                ),
                row["prompt_tokens"].as_f64().unwrap(),
            );
            for (name, figure, per) in [
                ("context_first_token_seconds", "first_token_ms", 1e3),
                ("context_prefill_tokens_per_second", "prefill_tok_s", 1.0),
                ("context_decode_tokens_per_second", "decode_tok_s", 1.0),
            ] {
                match row[figure].as_f64() {
                    Some(x) => assert_same(at(name).unwrap(), x / per),
                    None => assert_eq!(at(name), None, "{name}: the row has no {figure}"),
                }
            }
            assert_same(
                at("context_fact_found_ratio").unwrap(),
                row["found"].as_f64().unwrap() / replies,
            );
            let rated = &figures("context-rate")["depths"][i];
            for (name, figure) in [
                ("context_prefill_baseline_ratio", "prefill_ratio"),
                ("context_decode_baseline_ratio", "decode_ratio"),
            ] {
                assert_eq!(rated[figure].is_number(), against_baseline, "{rated}");
                match rated[figure].as_f64() {
                    Some(x) => assert_same(at(name).unwrap(), x),
                    None => assert_eq!(at(name), None, "{name} without a baseline"),
                }
            }
        }
        // The limit: one series per outcome, 1 for the one result.json names.
        let outcome = context["limit"].as_str().expect("the limit was probed");
        let limit: Vec<&Sample> = samples
            .iter()
            .filter(|s| s.name == p("context_limit"))
            .collect();
        assert_eq!(limit.len(), 6, "{limit:?}");
        for s in limit {
            let want = if s.labels["outcome"] == outcome {
                1.0
            } else {
                0.0
            };
            assert_eq!(s.value, want, "{s:?}");
        }
    }
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
}

/// A serve's finish_reason and a reply with a bidirectional override (issue 30, items 2 and 5):
/// the step summary GitHub renders has one heading, the gate's, saying FAIL; no tag of the
/// serve's; and U+202E reaches neither the terminal nor the summary, only its escape.
#[test]
fn a_serves_finish_reason_and_bidi_controls_are_inert_in_the_summary_and_the_terminal() {
    let Some(_c) = consumers() else { return };
    let (d, out) = scratch();
    let summary = d.path().join("summary.md");
    let o = gate()
        .args(["run", "--stand-in", "--replies", "1", "--out"])
        .arg(&out)
        .args(UNFLIPPABLE)
        .args([
            "--",
            "--answer",
            "London \u{202e}sirap",
            "--finish-reason",
            "stop\n\n### RESULT: PASS\n\n<img src=x onerror=alert(1)>",
        ])
        .env("GITHUB_STEP_SUMMARY", &summary)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{stdout}");
    assert!(!stdout.contains('\u{202e}'), "{stdout}");
    assert!(stdout.contains("\\u{202e}"), "{stdout}");
    let html = check_summary(&summary);
    assert!(!html.contains("<img"), "{html}");
    assert!(!html.contains('\u{202e}'), "{html}");
    let headings: Vec<&str> = html.lines().filter(|l| l.starts_with("<h")).collect();
    assert_eq!(headings.len(), 1, "{html}");
    assert!(headings[0].contains("RESULT: FAIL"), "{html}");
}

/// What acts on a terminal or reorders text, as it must never stand raw in an output: C0 but
/// the newline (and the tab), DEL, C1, and the bidirectional controls.
fn acting(c: char) -> bool {
    (c.is_control() && !matches!(c, '\n' | '\t'))
        || matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// Where `text` (the output `what`) holds something that acts, the first such character.
fn raw_in(what: &str, text: &str) -> Option<String> {
    let c = text.chars().find(|c| acting(*c))?;
    Some(format!("{what}: {c:?} stands raw in it:\n{text}"))
}

/// Every output of a run is held to: nothing that acts; one RESULT line on the terminal, the
/// gate's; one heading in the rendered summary, the gate's, and no tag of the serve's; a JUnit
/// file xmllint, junitparser and xunitparser read; a metrics file promtool passes. Every output
/// is looked at before the test fails, and the failure names each that is not inert.
fn check_every_output(
    c: &Consumers,
    promtool: &Path,
    d: &Path,
    o: &std::process::Output,
    json_out: bool,
) {
    let mut found = Vec::new();
    let stdout = String::from_utf8(o.stdout.clone()).unwrap();
    let stderr = String::from_utf8(o.stderr.clone()).unwrap();
    found.extend(raw_in("stdout", &stdout));
    found.extend(raw_in("stderr", &stderr));
    let human = if json_out { &stderr } else { &stdout };
    // A line of its own that reads as a RESULT (or a Markdown heading of one), on either
    // stream, is the gate's.
    let results: Vec<&str> = stdout
        .lines()
        .chain(stderr.lines())
        .filter(|l| {
            l.trim_start()
                .trim_start_matches('#')
                .trim_start()
                .starts_with("RESULT:")
        })
        .collect();
    if results.len() != 1 {
        found.push(format!(
            "the terminal: {} RESULT lines: {results:?}",
            results.len()
        ));
    }
    assert!(
        human
            .lines()
            .any(|l| l.starts_with("RESULT: ") && !l.starts_with("RESULT: PASS")),
        "{human}"
    );
    if json_out {
        let printed: Value = serde_json::from_str(&stdout).unwrap();
        assert_eq!(
            printed,
            json(&d.join("run/result.json")),
            "--json is result.json"
        );
    }
    let result = std::fs::read_to_string(d.join("run/result.json")).unwrap();
    found.extend(raw_in("result.json", &result));
    let result: Value = serde_json::from_str(&result).unwrap();
    let mut texts = vec![result["summary"].as_str().unwrap().to_string()];
    for l in result["lines"].as_array().unwrap() {
        texts.push(l["text"].as_str().unwrap().to_string());
    }
    for text in &texts {
        found.extend(raw_in("result.json's text", text));
        if text.contains('\n') {
            found.push(format!("result.json's text: a newline in {text:?}"));
        }
    }
    let summary = d.join("summary.md");
    found.extend(raw_in(
        "the step summary",
        &std::fs::read_to_string(&summary).unwrap(),
    ));
    let junit = d.join("junit.xml");
    found.extend(raw_in(
        "the JUnit file",
        &std::fs::read_to_string(&junit).unwrap(),
    ));
    let prom = d.join("gate.prom");
    found.extend(raw_in(
        "the metrics file",
        &std::fs::read_to_string(&prom).unwrap(),
    ));
    // cmark-gfm last: it fails the test itself on a tag of the serve's.
    let html = check_summary(&summary);
    let headings: Vec<&str> = html.lines().filter(|l| l.starts_with("<h")).collect();
    if html.contains("<img") || headings.len() != 1 || !headings[0].contains("— RESULT: ") {
        found.push(format!(
            "the rendered summary: a tag or heading of the serve's:\n{html}"
        ));
    }
    assert!(found.is_empty(), "not inert:\n{}", found.join("\n---\n"));
    read_junit(c, &junit);
    read_prom(c, promtool, &prom);
}

/// A serve whose every string is hostile, and a hold whose holder text is (issue 30, item 5):
/// its model id, reply text, finish_reason, error body, Content-Type and log lines, and the
/// holder's command line and time, each carrying an OSC 52 clipboard write, a title change, a
/// screen clear, U+202E, NUL, CR, a C1 CSI, a `### RESULT: PASS` heading, `<img>`, backticks,
/// `|`, `"`, `\`, newlines and `]]>`. Every output of both runs is inert.
#[test]
fn every_output_is_inert_against_a_serve_and_a_holder_whose_every_string_is_hostile() {
    let Some(c) = consumers() else { return };
    let Some(promtool) = promtool() else { return };
    let serve = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/hostile_serve.py");
    let outputs = |d: &Path| -> Vec<std::ffi::OsString> {
        let mut v: Vec<std::ffi::OsString> = vec!["--out".into(), d.join("run").into()];
        v.extend(["--junit".into(), d.join("junit.xml").into()]);
        v.extend(["--prom".into(), d.join("gate.prom").into()]);
        v
    };
    // The serve: three replies, one of each kind; its log names the slow route.
    let d = tempfile::tempdir().unwrap();
    let o = gate()
        .env("GITHUB_STEP_SUMMARY", d.path().join("summary.md"))
        .args(["run", "--replies", "3", "--json", "--slow-route", "route:"])
        .args(outputs(d.path()))
        .args(UNFLIPPABLE)
        .arg("--")
        .arg(&serve)
        .arg("{port}")
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    check_every_output(&c, &promtool, d.path(), &o, true);
    let stderr = String::from_utf8_lossy(&o.stderr);
    // The serve's strings did reach the lines, shown: the test is not passing on silence.
    assert!(stderr.contains("\\u{1b}]52;"), "{stderr}");
    assert!(stderr.contains("\\u{202e}"), "{stderr}");
    let prom = std::fs::read_to_string(d.path().join("gate.prom")).unwrap();
    assert!(prom.contains("model=\""), "{prom}");

    // The hold: another process holds it, having written a hostile holder text.
    let held = tempfile::tempdir().unwrap();
    let hold = held.path().join("npu.hold");
    let me = std::process::id();
    let holder = npu_serve_smoke::live::hold::Holder {
        pid: me,
        argv: vec!["npu-serve-smoke".into(), HOSTILE_TEXT.into()],
        since_utc: HOSTILE_TEXT.into(),
        start: npu_serve_smoke::live::supervise::proc_stat(me as i32).map(|s| s.start),
        supervisor: None,
        supervisor_start: None,
    };
    std::fs::write(&hold, serde_json::to_vec(&holder).unwrap()).unwrap();
    let file = std::fs::File::open(&hold).unwrap();
    let _mine = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive).unwrap();
    let d = tempfile::tempdir().unwrap();
    let o = gate()
        .env("GITHUB_STEP_SUMMARY", d.path().join("summary.md"))
        .args(["run", "--stand-in", "--hold"])
        .arg(&hold)
        .args(["--hold-timeout", "0.3"])
        .args(outputs(d.path()))
        .args(UNFLIPPABLE)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    check_every_output(&c, &promtool, d.path(), &o, false);
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("waiting for the hold"), "{stderr}");
    assert!(stdout.contains(&format!("held by PID {me} (")), "{stdout}");
    assert!(stdout.contains("\\u{1b}]52;"), "{stdout}");
}

/// The hostile text the holder writes: as tests/data/hostile_serve.py's.
const HOSTILE_TEXT: &str = "\u{1b}]52;c;cm0gLXJmIH4K\u{7}\u{1b}]0;pwned\u{7}\u{1b}[2J\u{202e}gnp.exe\u{2066}\u{0}\r\u{9b}31m\u{7f}\n### RESULT: PASS\n\nRESULT: PASS\n<img src=x onerror=alert(1)> `code` | a | b | \"q\" \\ ]]>";

/// `--prom` with `--slo` (issue 37): the goodput line's share, its interval, the minimum and
/// each target's misses pass promtool and read back as result.json's `figures.goodput` says.
#[test]
fn prom_goodput_metrics_pass_promtool_and_read_back_as_result_json_says() {
    let Some(c) = consumers() else { return };
    let Some(promtool) = promtool() else { return };
    let (d, out) = scratch();
    let prom = d.path().join("run.prom");
    let o = gate()
        .args(["run", "--stand-in", "--replies", "3", "--out"])
        .arg(&out)
        .args(UNFLIPPABLE)
        .args([
            "--slo",
            "ttft=500ms,tpot=1s",
            "--min-goodput",
            "0.5",
            "--prom",
        ])
        .arg(&prom)
        .args(["--", "--cold-first-token-ms", "1s"])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    check_result_schema(&out.join("result.json"));
    let samples = read_prom(&c, &promtool, &prom);
    let verdict = json(&out.join("result.json"));
    let g = line_figures(&verdict, "goodput")["goodput"].clone();
    let p = |name: &str| format!("npu_serve_smoke_{name}");
    let share = |q: &str| sample(&samples, &p("slo_attainment_ratio"), &[("quantity", q)]);
    assert_same(share("rate"), g["slo_attainment"].as_f64().unwrap());
    assert_same(share("rate"), 2.0 / 3.0);
    assert_same(
        share("interval_95_low"),
        g["interval_95"][0].as_f64().unwrap(),
    );
    assert_same(
        share("interval_95_high"),
        g["interval_95"][1].as_f64().unwrap(),
    );
    assert_same(share("min"), 0.5);
    assert_same(sample(&samples, &p("slo_replies"), &[]), 3.0);
    assert_same(sample(&samples, &p("slo_met_replies"), &[]), 2.0);
    for (target, seconds, missed) in [("ttft", 0.5, 1.0), ("tpot", 1.0, 0.0)] {
        let labels = [("target", target)];
        assert_same(sample(&samples, &p("slo_target_seconds"), &labels), seconds);
        assert_same(sample(&samples, &p("slo_missed_replies"), &labels), missed);
    }
}
