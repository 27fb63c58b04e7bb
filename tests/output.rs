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
    assert_eq!(
        checks,
        [
            "route",
            "rate",
            "first-token",
            "latency",
            "content",
            "output",
            "startup",
            "cold-reply",
            "memory",
            "load"
        ]
    );
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
    // Made-up conditions, as a run from before digests holds them: with digests, an edited
    // load.json is a changed archive (tests/digests.rs).
    forget_digests(&out);
    let mut load = json(&out.join("load.json"));
    load["during"]["wait_fraction"] = serde_json::json!(0.5);
    load["during"]["others_cpu_pct"] = serde_json::json!(150.0);
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

/// The rate panel's point of a plain reply, its throttle marker (src/report/timeline/drawn.rs
/// gives each its own colour).
const PANEL_POINT: &str = r##"fill="#1F77B4""##;
const THROTTLE_MARKER: &str = r##"stroke="#FF7F0E""##;

/// xmllint reads `svg` as XML, where xmllint is installed (tools/install-report-tools.sh); under
/// CI=true it must be.
fn xmllint_reads(svg: &std::path::Path) {
    match std::process::Command::new("xmllint")
        .arg("--noout")
        .arg(svg)
        .output()
    {
        Ok(o) => assert!(
            o.status.success(),
            "xmllint: {}",
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(_) if std::env::var("CI").as_deref() == Ok("true") => {
            panic!("xmllint must be installed in CI: eval \"$(tools/install-report-tools.sh)\"")
        }
        Err(_) => eprintln!("skipped: no xmllint"),
    }
}

/// issue 20, item 4: the panel drawn by `run` (gate.rs) and by `judge --svg` (judge.rs), each
/// with the run's floor and its load.json's throttle events.
#[test]
fn eight_replies_get_the_rate_panel_with_the_floor_and_the_throttle_events() {
    let (d, out) = scratch();
    gate()
        .args(["run", "--stand-in", "--replies", "8", "--out"])
        .arg(&out)
        .args(UNFLIPPABLE)
        .args(["--", "--tokens", "6"])
        .assert()
        .code(0);
    let svg = std::fs::read_to_string(out.join("timeline.svg")).unwrap();
    assert_eq!(
        svg.matches(PANEL_POINT).count(),
        8 + 1,
        "a point a reply, and the legend's"
    );
    assert!(svg.contains("rate floor 0.0 tok/s (of the median)"));
    assert_eq!(
        svg.matches(THROTTLE_MARKER).count(),
        0,
        "nothing sampled it"
    );

    // The box throttled once during the replies: a rise of the count between two samples.
    let first_sent = replies(&out)[0]["sent_ns"].as_u64().unwrap();
    // Made-up samples, as a run from before digests holds them: with digests, an edited
    // load.json is a changed archive (tests/digests.rs).
    forget_digests(&out);
    let mut load = json(&out.join("load.json"));
    load["during"]["started_ns"] = serde_json::json!(first_sent);
    load["during"]["samples"] = serde_json::json!([
        {"t_ms": 0.0, "load1": 0.1, "throttle_count": 7},
        {"t_ms": 100.0, "load1": 0.1, "throttle_count": 9},
        {"t_ms": 200.0, "load1": 0.1, "throttle_count": 9},
    ]);
    std::fs::write(out.join("load.json"), serde_json::to_vec(&load).unwrap()).unwrap();
    let elsewhere = d.path().join("judged.svg");
    gate()
        .arg("judge")
        .arg(&out)
        .args(["--floor", "0.5", "--svg"])
        .arg(&elsewhere)
        .assert()
        .code(0);
    let svg = std::fs::read_to_string(&elsewhere).unwrap();
    assert_eq!(
        svg.matches(THROTTLE_MARKER).count(),
        1 + 1,
        "the marker, and the legend's"
    );
    assert!(
        svg.contains("rate floor 0.5 tok/s (of the median)"),
        "judge's own floor"
    );
    xmllint_reads(&elsewhere);
}

/// issue 20, item 4: an archive of a thousand replies draws small, a point each.
#[test]
fn a_thousand_replies_draw_into_less_than_a_megabyte_a_point_each() {
    let (d, out) = scratch();
    gate()
        .args(["run", "--stand-in", "--replies", "1", "--out"])
        .arg(&out)
        .args(UNFLIPPABLE)
        .args(["--", "--tokens", "6"])
        .assert()
        .code(0);
    // The one reply again and again, each 150 ms after the one before.
    let template = &replies(&out)[0];
    let shifted = |v: &serde_json::Value, by: u64| serde_json::json!(v.as_u64().unwrap() + by);
    let mut lines = String::new();
    for i in 0..1000u64 {
        let by = i * 150_000_000;
        let mut r = template.clone();
        r["index"] = serde_json::json!(i + 1);
        for key in ["sent_ns", "end_ns"] {
            r[key] = shifted(&r[key], by);
        }
        for c in r["chunks"].as_array_mut().unwrap() {
            c["at_ns"] = shifted(&c["at_ns"], by);
        }
        r.as_object_mut().unwrap().remove("metrics");
        lines.push_str(&format!("{r}\n"));
    }
    // Made-up replies, as a run from before digests holds them: with digests, an edited
    // replies.jsonl is a changed archive (tests/digests.rs).
    forget_digests(&out);
    std::fs::write(out.join("replies.jsonl"), lines).unwrap();
    let svg_path = d.path().join("long.svg");
    gate()
        .arg("judge")
        .arg(&out)
        .arg("--svg")
        .arg(&svg_path)
        .assert()
        .code(0);
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    assert!(svg.len() < 1_000_000, "{} bytes", svg.len());
    assert_eq!(svg.matches(PANEL_POINT).count(), 1000 + 1);
    assert!(svg.contains("replies 11 to 990 not drawn here"));
    xmllint_reads(&svg_path);
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
    // One host, one serve binary (this one, as the stand-in), no model file: one group.
    assert!(
        rows[1].starts_with("host ") && rows[1].ends_with(" / model not recorded"),
        "{table}"
    );
    let rows: Vec<&str> = rows
        .into_iter()
        .filter(|l| !l.starts_with("host "))
        .collect();
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
    let rows: Vec<&str> = table.lines().filter(|l| !l.starts_with("host ")).collect();
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
    let program = format!(
        "source '{}'\n{}",
        script.display(),
        bash_tab("_npu__serve__smoke", words)
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

/// A serve runs as the gate's user and can swap any path the gate names (issue 30, item 2):
/// here it moves the step summary away and links its name to a stand-in for ~/.bashrc, swaps
/// the JUnit file's directory for a link to another, and links the metrics file's name to the
/// ~/.bashrc stand-in too. The gate opened each before the serve started and writes through
/// that: the summary is appended to the file the user named (wherever it was moved), the JUnit
/// file lands in the directory the user named, the metrics file replaces the link, and
/// nothing reaches the stand-in or the other directory.
#[test]
fn outputs_a_serve_swaps_for_links_write_nothing_where_the_links_point() {
    let (d, out) = scratch();
    let bashrc = d.path().join("bashrc");
    std::fs::write(&bashrc, "# the user's shell\n").unwrap();
    let summary = d.path().join("summary.md");
    std::fs::write(&summary, "earlier step\n").unwrap();
    let reports = d.path().join("reports");
    std::fs::create_dir(&reports).unwrap();
    let junit = reports.join("gate.xml");
    let prom = d.path().join("gate.prom");
    let script = r#"s=$2 o=$3 r=$4 p=$5
mv "$s" "$s.moved" && ln -s "$o" "$s" &&
mv "$r" "$r.moved" && mkdir "$r.elsewhere" && ln -s "$r.elsewhere" "$r" &&
ln -s "$o" "$p" &&
exec "$0" stand-in --port "$1" --tokens 3"#;
    let o = gate()
        .env("GITHUB_STEP_SUMMARY", &summary)
        .args(["run", "--replies", "1", "--junit"])
        .arg(&junit)
        .arg("--prom")
        .arg(&prom)
        .arg("--out")
        .arg(&out)
        .args(UNFLIPPABLE)
        .args(["--", "sh", "-c", script, BIN, "{port}"])
        .args([&summary, &bashrc, &reports, &prom])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(&bashrc).unwrap(),
        "# the user's shell\n",
        "the gate wrote through a link the serve planted"
    );
    let elsewhere: Vec<_> = std::fs::read_dir(d.path().join("reports.elsewhere"))
        .unwrap()
        .collect();
    assert!(elsewhere.is_empty(), "{elsewhere:?}");
    // The serve did swap them: the names are its links now.
    assert!(std::fs::symlink_metadata(&summary).unwrap().is_symlink());
    assert!(std::fs::symlink_metadata(&reports).unwrap().is_symlink());
    let appended = std::fs::read_to_string(d.path().join("summary.md.moved")).unwrap();
    assert!(appended.starts_with("earlier step\n###"), "{appended}");
    assert!(appended.contains("RESULT: PASS"), "{appended}");
    let written = std::fs::read_to_string(d.path().join("reports.moved/gate.xml")).unwrap();
    assert!(written.contains("<testsuites"), "{written}");
    assert!(!std::fs::symlink_metadata(&prom).unwrap().is_symlink());
    assert!(std::fs::read_to_string(&prom)
        .unwrap()
        .contains("npu_serve_smoke_"));
    assert!(!stderr.contains("no "), "{stderr}");
}

/// A step summary that was not there when the run started, and that the serve creates as a
/// link to a stand-in for ~/.bashrc: not written, said in one line; the stand-in untouched.
#[test]
fn outputs_a_step_summary_planted_during_the_run_is_refused_with_a_line() {
    let (d, out) = scratch();
    let bashrc = d.path().join("bashrc");
    std::fs::write(&bashrc, "# the user's shell\n").unwrap();
    let summary = d.path().join("summary.md");
    let script = r#"ln -s "$3" "$2" && exec "$0" stand-in --port "$1" --tokens 3"#;
    let o = gate()
        .env("GITHUB_STEP_SUMMARY", &summary)
        .args(["run", "--replies", "1", "--out"])
        .arg(&out)
        .args(UNFLIPPABLE)
        .args(["--", "sh", "-c", script, BIN, "{port}"])
        .args([&summary, &bashrc])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(&bashrc).unwrap(),
        "# the user's shell\n"
    );
    let said: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("no step summary"))
        .collect();
    assert_eq!(said.len(), 1, "{stderr}");
    assert!(
        said[0].contains("was not there when the run started and something was put there since"),
        "{stderr}"
    );
}
