//! Results CI systems read: --json (its schema pinned by a strict mirror), --junit, and
//! GitHub's step summary.

use serde::Deserialize;

use crate::util::*;

/// result.json as docs/result-schema.md documents it; any field added or renamed fails here
/// (and docs/result-schema.json holds every result.json the tests read: `util::json`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ResultJson {
    schema: u32,
    lines: Vec<LineJson>,
    result: String,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    advice: Option<String>,
    #[serde(default)]
    signal: Option<String>,
    summary: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LineJson {
    check: String,
    status: String,
    text: String,
    #[serde(default)]
    figures: Option<serde_json::Value>,
}

#[test]
fn json_junit_and_the_step_summary_from_one_run() {
    let (d, out) = scratch();
    let junit = d.path().join("gate.xml");
    let summary = d.path().join("summary.md");
    std::fs::write(&summary, "earlier step\n").unwrap();
    let o = gate()
        .env("GITHUB_STEP_SUMMARY", &summary)
        .args(["run", "--stand-in", "--replies", "2", "--json", "--junit"])
        .arg(&junit)
        .arg("--out")
        .arg(&out)
        .args(UNFLIPPABLE)
        .args(["--", "--tokens", "6"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    let printed: ResultJson = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(printed.schema, 1);
    assert_eq!(printed.result, "PASS");
    assert_eq!(printed.summary, "RESULT: PASS");
    assert!(printed.reason.is_none() && printed.advice.is_none() && printed.signal.is_none());
    let checks: Vec<&str> = printed.lines.iter().map(|l| l.check.as_str()).collect();
    assert_eq!(checks, ["route", "rate", "first-token", "content", "load"]);
    // The figures as numbers beside the text: CI reads these, not the prose.
    let figures = |check: &str| {
        printed
            .lines
            .iter()
            .find(|l| l.check == check)
            .and_then(|l| l.figures.clone())
            .unwrap_or_else(|| panic!("no figures on {check}"))
    };
    let rate = figures("rate");
    assert_eq!(rate["unit"], "tok/s");
    assert_eq!(
        (rate["values"].as_u64(), rate["replies"].as_u64()),
        (Some(2), Some(2))
    );
    assert_eq!(rate["floor"].as_f64(), Some(0.0));
    assert!(rate["median"].as_f64().unwrap() > 0.0, "{rate}");
    assert!(
        rate.get("interval_95").is_none(),
        "no interval under 6 replies: {rate}"
    );
    let first = figures("first-token");
    assert_eq!(
        (first["unit"].as_str(), first["limit"].as_f64()),
        (Some("ms"), Some(600000.0))
    );
    assert!(first["median"].as_f64().unwrap() > 0.0, "{first}");
    let load = figures("load");
    assert!(
        load["load1"].is_number() && load["ncpu"].as_u64().unwrap() >= 1,
        "{load}"
    );
    assert!(printed
        .lines
        .iter()
        .all(|l| ["ok", "FAIL", "info"].contains(&l.status.as_str()) && !l.text.is_empty()));
    // The same document as result.json; the human lines went to stderr.
    let archived: serde_json::Value = json(&out.join("result.json"));
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap(),
        archived
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("RESULT: PASS"));

    let xml = std::fs::read_to_string(&junit).unwrap();
    // A passed check with its figure beside it, as CI shows it.
    assert!(
        xml.contains("<testcase classname=\"npu-serve-smoke\" name=\"content\" time=\"0\">\n      <system-out>content      ok    2 replies"),
        "{xml}"
    );
    let md = std::fs::read_to_string(&summary).unwrap();
    assert!(
        md.starts_with("earlier step\n### "),
        "appended, not replaced: {md}"
    );
    assert!(md.contains("| content | ok |"), "{md}");
    assert!(md.contains("| 2 | 6 |"), "a row per reply: {md}");
}

#[test]
fn judge_json_of_a_skip_has_its_reason_and_advice() {
    let (_d, out) = scratch();
    gate()
        .args(["run", "--stand-in", "--replies", "1", "--out"])
        .arg(&out)
        .args(UNFLIPPABLE)
        .args(["--", "--tokens", "4"])
        .assert()
        .code(0);
    let mut load = json(&out.join("load.json"));
    load["during"]["wait_fraction"] = serde_json::json!(0.5);
    std::fs::write(out.join("load.json"), serde_json::to_vec(&load).unwrap()).unwrap();
    let o = gate()
        .arg("judge")
        .arg(&out)
        .args(["--floor", "1000000", "--busy-skip", "0.2", "--json"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3));
    let r: ResultJson = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r.result, "SKIP");
    assert_eq!(
        r.reason.as_deref(),
        Some("busy box: the serve waited for a CPU 50% of the time it was ready to run")
    );
    assert_eq!(r.advice.as_deref(), Some("re-run on a quiet box"));
}

#[test]
fn a_timeline_is_drawn_for_each_run_and_for_an_archive_elsewhere() {
    let (d, out) = scratch();
    gate()
        .args(["run", "--stand-in", "--replies", "2", "--out"])
        .arg(&out)
        .args(UNFLIPPABLE)
        .args(["--", "--tokens", "6"])
        .assert()
        .code(0);
    let svg = std::fs::read_to_string(out.join("timeline.svg")).unwrap();
    assert!(
        svg.starts_with("<svg") && svg.contains("reply 2"),
        "{}",
        &svg[..200.min(svg.len())]
    );
    assert_eq!(
        svg.matches("<circle").count(),
        12 + 1,
        "a dot per token, and the legend's"
    );

    let before: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    let elsewhere = d.path().join("judged.svg");
    gate()
        .arg("judge")
        .arg(&out)
        .arg("--svg")
        .arg(&elsewhere)
        .args(["--first-token-ms", "1"])
        .assert()
        .code(1);
    assert!(std::fs::read_to_string(&elsewhere)
        .unwrap()
        .contains("RESULT: FAIL"));
    let after: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(before, after, "judge writes nothing into the archive");
}

#[test]
fn compare_lists_runs_oldest_first_with_their_conditions() {
    let (d, first) = scratch();
    let second = d.path().join("second");
    for (out, floor) in [(&first, "0"), (&second, "1000000")] {
        gate()
            .args([
                "run",
                "--stand-in",
                "--replies",
                "1",
                "--first-token-ms",
                "600000",
                "--floor",
                floor,
                "--out",
            ])
            .arg(out)
            .args(["--", "--tokens", "6"])
            .output()
            .unwrap();
        // Start times are recorded to the second: keep the two runs in distinct seconds.
        std::thread::sleep(std::time::Duration::from_millis(1100));
    }
    let o = gate()
        .arg("compare")
        .arg(&second)
        .arg(&first)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    let table = String::from_utf8_lossy(&o.stdout);
    let rows: Vec<&str> = table.lines().collect();
    assert!(
        rows[0].starts_with("started (UTC)") && rows[0].contains("serve CPU wait"),
        "{table}"
    );
    assert!(
        rows[1].contains(" PASS ") && rows[2].contains(" FAIL "),
        "oldest first: {table}"
    );
    assert!(
        rows[1].contains(" on ") && rows[1].contains("tok/s"),
        "{table}"
    );

    let o = gate()
        .args(["compare", "--json"])
        .arg(&first)
        .arg(&second)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 2);
    assert_eq!(v[1]["result"], "FAIL");
    // result.json's own word, the full hash, and where the run is.
    assert_eq!(v[1]["result"], json(&second.join("result.json"))["result"]);
    assert_eq!(v[0]["serve_sha256"].as_str().unwrap().len(), 64);
    assert_eq!(v[0]["dir"], first.display().to_string());
    assert!(rows[1].ends_with(&first.display().to_string()), "{table}");
    gate()
        .args(["compare"])
        .arg(d.path().join("nope"))
        .assert()
        .code(2);

    // An empty directory and a missing one among the runs: listed as unreadable, with the
    // reason, after the runs that could be read.
    let empty = d.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let o = gate()
        .arg("compare")
        .arg(&empty)
        .arg(&first)
        .arg(d.path().join("nope"))
        .arg(&second)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    let table = String::from_utf8_lossy(&o.stdout);
    let rows: Vec<&str> = table.lines().collect();
    assert_eq!(rows.len(), 5, "{table}");
    assert!(
        rows[1].contains("PASS") && rows[2].contains("FAIL"),
        "{table}"
    );
    assert!(
        rows[3].starts_with(&format!("{}: unreadable: failed to read", empty.display()))
            && rows[3].contains("run.json"),
        "{table}"
    );
    assert!(rows[4].contains("nope: unreadable"), "{table}");
    let o = gate()
        .args(["compare", "--json"])
        .arg(&empty)
        .arg(&first)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v[1]["result"], "UNREADABLE");
    assert!(
        v[1]["unreadable"].as_str().unwrap().contains("run.json"),
        "{v}"
    );
}

#[test]
fn completions_for_each_shell() {
    for shell in ["bash", "zsh", "fish"] {
        gate()
            .args(["completions", shell])
            .assert()
            .code(0)
            .stdout(predicates::str::contains("npu-serve-smoke"));
    }
}

/// What a real bash offers at `npu-serve-smoke WORDS<TAB>`: the completion script is sourced
/// and its function called with COMP_WORDS set, as bash does on TAB.
fn bash_completes(script: &std::path::Path, words: &[&str]) -> Vec<String> {
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let program = format!(
        "source '{}'\nCOMP_WORDS=(npu-serve-smoke {})\nCOMP_CWORD={}\n\
         _npu__serve__smoke npu-serve-smoke '{}' '{}'\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"\n",
        script.display(),
        quoted.join(" "),
        words.len(),
        words[words.len() - 1],
        if words.len() > 1 {
            words[words.len() - 2]
        } else {
            "npu-serve-smoke"
        },
    );
    let o = std::process::Command::new("bash")
        .args(["--norc", "--noprofile", "-c", &program])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn bash_completes_flags_after_a_subcommand() {
    let d = tempfile::tempdir().unwrap();
    let script = d.path().join("npu-serve-smoke.bash");
    let o = gate().args(["completions", "bash"]).output().unwrap();
    std::fs::write(&script, &o.stdout).unwrap();
    assert_eq!(bash_completes(&script, &["run", "--fl"]), ["--floor"]);
    let judge = bash_completes(&script, &["judge", "--s"]);
    assert!(
        judge.contains(&"--svg".to_string()) && judge.contains(&"--slow-route".to_string()),
        "{judge:?}"
    );
    let shells = bash_completes(&script, &["completions", ""]);
    for shell in ["bash", "zsh", "fish"] {
        assert!(shells.contains(&shell.to_string()), "{shells:?}");
    }
    assert!(bash_completes(&script, &["se"]).contains(&"self-test".to_string()));
}
