//! `compare` across a fleet (issue 21): real stand-in runs, copied into a second "host" by
//! editing run.json (the gate has no flag for its host name: it is gethostname's), with an
//! unreadable directory among them; `--csv` read back by Python's csv module, `--svg` by a
//! real SVG renderer, and report paths that cannot be written refused before any run is read.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::util::{gate, json};

/// A stand-in run of four replies at `floor`, greedy and held to determinism (one prompt of
/// the three asked twice: one trial), into `out`.
fn real_run(out: &Path, floor: &str) {
    let o = gate()
        .args([
            "run",
            "--stand-in",
            "--replies",
            "4",
            "--deterministic",
            "--temperature",
            "0",
            "--first-token-ms",
            "600000",
        ])
        .args(["--floor", floor, "--out"])
        .arg(out)
        .args(["--", "--tokens", "6"])
        .output()
        .unwrap();
    assert!(
        matches!(o.status.code(), Some(0 | 1)),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
}

/// A copy of the run at `from` as if `host` had made it at `started_utc`.
fn copied(from: &Path, to: &Path, host: &str, started_utc: &str) {
    std::fs::create_dir(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
    set_run(to, host, started_utc);
}

/// Rewrite run.json's host and start (its provenance's host too, as that box would record it).
fn set_run(dir: &Path, host: &str, started_utc: &str) {
    let mut manifest = json(&dir.join("run.json"));
    manifest["host"] = host.into();
    manifest["started_utc"] = started_utc.into();
    if let Some(p) = manifest
        .get_mut("provenance")
        .and_then(Value::as_object_mut)
    {
        p.insert("host".into(), host.into());
    }
    std::fs::write(
        dir.join("run.json"),
        serde_json::to_vec_pretty(&manifest).unwrap(),
    )
    .unwrap();
}

/// Six runs on two hosts, a garbage run.json and a file among them: the directories in the
/// order given to compare, the oldest of box-a's first only after sorting.
fn fleet(root: &Path) -> Vec<PathBuf> {
    let pass = root.join("pass");
    let fail = root.join("fail");
    real_run(&pass, "0");
    real_run(&fail, "1000000");
    set_run(&pass, "box-a", "2026-11-01T10:00:00Z");
    set_run(&fail, "box-a", "2026-11-03T10:00:00Z");
    let odd = root.join("a run, \"quoted\"");
    copied(&pass, &odd, "box-a", "2026-11-02T10:00:00Z");
    let b1 = root.join("b1");
    let b2 = root.join("b2");
    copied(&fail, &b1, "box-b", "2026-10-01T10:00:00Z");
    copied(&pass, &b2, "box-b", "2026-10-02T10:00:00Z");
    let garbage = root.join("garbage");
    std::fs::create_dir(&garbage).unwrap();
    std::fs::write(garbage.join("run.json"), b"{\"schema\": ").unwrap();
    let file = root.join("not-a-dir");
    std::fs::write(&file, b"x").unwrap();
    vec![b2, fail, garbage, pass, b1, file, odd]
}

/// Read a CSV file back with Python's csv module: the records, as JSON. `None` (skipped)
/// without python3 outside CI.
fn python_reads_csv(path: &Path) -> Option<Vec<Vec<String>>> {
    let script = "import csv, json, sys\n\
                  with open(sys.argv[1], newline='') as f:\n    \
                  print(json.dumps(list(csv.reader(f, strict=True))))";
    match Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(path)
        .output()
    {
        Ok(o) => {
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            Some(serde_json::from_slice(&o.stdout).unwrap())
        }
        Err(_) if std::env::var("CI").as_deref() == Ok("true") => panic!("python3 is needed in CI"),
        Err(_) => {
            eprintln!("skipped: no python3");
            None
        }
    }
}

/// Render an SVG file as a viewer would (rsvg-convert); skipped without it outside CI.
fn renders(svg: &Path, png: &Path) {
    match Command::new("rsvg-convert")
        .arg(svg)
        .arg("-o")
        .arg(png)
        .output()
    {
        Ok(o) => {
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            assert!(std::fs::metadata(png).unwrap().len() > 1000);
        }
        Err(_) if std::env::var("CI").as_deref() == Ok("true") => {
            panic!(
                "rsvg-convert must be installed in CI: eval \"$(tools/install-report-tools.sh)\""
            )
        }
        Err(_) => eprintln!("skipped: no rsvg-convert"),
    }
}

#[test]
fn compare_groups_a_fleet_and_writes_its_history_as_csv_and_svg() {
    let d = tempfile::tempdir().unwrap();
    let dirs = fleet(d.path());
    let csv = d.path().join("fleet.csv");
    let svg = d.path().join("fleet.svg");
    let o = gate()
        .arg("compare")
        .args(&dirs)
        .arg("--csv")
        .arg(&csv)
        .arg("--svg")
        .arg(&svg)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let table = String::from_utf8_lossy(&o.stdout);
    let lines: Vec<&str> = table.lines().collect();
    // A group a host (one serve binary, no model file): box-a's first, its runs oldest first.
    let at = |needle: &str| {
        lines
            .iter()
            // A run's directory ends its line, an unreadable one starts it, a group's line
            // starts with its host: never a match inside a hash ("b2b22c...").
            .position(|l| {
                l.ends_with(&format!("/{needle}"))
                    || l.contains(&format!("/{needle}: unreadable"))
                    || l.starts_with(needle)
            })
            .unwrap_or_else(|| panic!("{needle} not in:\n{table}"))
    };
    assert!(
        lines[1].starts_with("host box-a / serve ") && lines[1].ends_with("/ model not recorded"),
        "{table}"
    );
    assert!(
        at("pass") < at("a run, \"quoted\"") && at("a run, \"quoted\"") < at("fail"),
        "{table}"
    );
    assert!(
        at("fail") < at("host box-b") && at("host box-b") < at("b1"),
        "{table}"
    );
    assert!(at("b1") < at("b2"), "{table}");
    assert!(lines[at("fail")].contains(" FAIL ") && lines[at("b2")].contains(" PASS "));
    assert!(
        lines[at("garbage")].contains("garbage: unreadable: failed to read"),
        "{table}"
    );
    assert!(
        lines[at("not-a-dir")].contains("not-a-dir: unreadable:"),
        "{table}"
    );

    if let Some(records) = python_reads_csv(&csv) {
        let (header, rows) = records.split_first().unwrap();
        assert_eq!(rows.len(), dirs.len(), "a record a directory: {records:?}");
        assert!(rows.iter().all(|r| r.len() == header.len()), "{records:?}");
        let col = |name: &str| header.iter().position(|h| h == name).unwrap();
        let by_dir = |dir: &Path| {
            rows.iter()
                .find(|r| r[col("dir")] == dir.display().to_string())
                .unwrap_or_else(|| panic!("{} not in {records:?}", dir.display()))
        };
        // The comma and the quotes of a directory's name read back as they are.
        let odd = by_dir(&dirs[6]);
        assert_eq!(odd[col("host")], "box-a");
        assert_eq!(odd[col("result")], "PASS");
        assert!(odd[col("median_rate_tok_s")].parse::<f64>().unwrap() > 0.0);
        assert_eq!(odd[col("serve_sha256")].len(), 64);
        assert_eq!(by_dir(&dirs[4])[col("result")], "FAIL");
        assert_eq!(by_dir(&dirs[4])[col("rate_floor_tok_s")], "1000000");
        let garbage = by_dir(&dirs[2]);
        assert_eq!(garbage[col("result")], "UNREADABLE");
        assert!(
            garbage[col("unreadable")].contains("run.json"),
            "{garbage:?}"
        );
        for figure in ["ttft_ms_p50", "itl_ms_p99", "tpot_ms_mean", "e2el_ms_count"] {
            col(figure);
        }
        // The determinism line's trials and mismatches, as each run judged again has them.
        assert_eq!(odd[col("determinism_trials")], "1");
        assert_eq!(odd[col("determinism_mismatches")], "0");
        assert_eq!(garbage[col("determinism_trials")], "");
    }

    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(
        text.contains("box-a: median decode rate") && text.contains("box-b: median first token")
    );
    assert!(
        text.contains("5 runs on 2 hosts"),
        "{}",
        &text[..400.min(text.len())]
    );
    assert!(text.contains("2 unreadable directories not drawn"));
    renders(&svg, &d.path().join("fleet.png"));

    // --json: the group of each row, in the table's order.
    let o = gate()
        .args(["compare", "--json"])
        .args(&dirs)
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let hosts: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["group"]["host"].as_str().unwrap_or("-"))
        .collect();
    assert_eq!(
        hosts,
        ["box-a", "box-a", "box-a", "box-b", "box-b", "-", "-"]
    );
    assert_eq!(v[0]["group"]["serve_sha256"].as_str().unwrap().len(), 64);
    assert!(v[0]["group"]["model_sha256"].is_null());

    // --csv -: the CSV on stdout in place of the table.
    let o = gate()
        .args(["compare", "--csv", "-"])
        .args(&dirs)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(o.stdout, std::fs::read(&csv).unwrap());
}

#[test]
fn compare_refuses_a_report_it_cannot_write_before_reading_any_run() {
    let d = tempfile::tempdir().unwrap();
    let missing = d.path().join("no-such-dir");
    for (flag, file) in [("--svg", "h.svg"), ("--csv", "h.csv")] {
        let o = gate()
            .arg("compare")
            .arg(d.path().join("no-run"))
            .arg(flag)
            .arg(missing.join(file))
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{o:?}");
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(
            stderr.contains(flag) && stderr.contains("does not exist"),
            "{stderr}"
        );
        // Refused before the runs: nothing said of the run that is not there.
        assert!(!stderr.contains("none of the"), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
    }
    let o = gate()
        .args(["compare", "--json", "--csv", "-"])
        .arg(d.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("both write to stdout"));
}

// Issue 30: a replies.jsonl linked to /dev/zero once took past 2 GiB in a second in `compare`,
// and a FIFO hung it. Each such run is a row saying it is unreadable and why, beside the good
// run, with the heap capped so that reading one would abort the gate rather than pass.
#[test]
fn runs_whose_replies_are_no_file_or_too_large_are_unreadable_rows() {
    let d = tempfile::tempdir().unwrap();
    let good = d.path().join("good");
    real_run(&good, "1");
    let bad = crate::util::archives_with_unreadable_replies(d.path(), &good);
    let (mut g, _claim) = crate::util::gate_with_heap_cap();
    let o = g
        .arg("compare")
        .arg(&good)
        .args(bad.iter().map(|(dir, _)| dir))
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    for (dir, says) in &bad {
        let row = table
            .lines()
            .find(|l| l.starts_with(&format!("{}: unreadable: ", dir.display())))
            .unwrap_or_else(|| panic!("{} not in:\n{table}", dir.display()));
        assert!(row.contains(says), "{row}");
    }
}
