//! `judge DIR`: re-judging an archive gives the live run's lines, uses the run's own load, and
//! writes nothing into DIR.

use std::collections::BTreeMap;
use std::path::Path;

use crate::util::*;

fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

fn archived_run(out: &Path) -> String {
    let o = gate()
        .args([
            "run",
            "--stand-in",
            "--replies",
            "2",
            "--fast-route",
            "route: stand-in",
            "--out",
        ])
        .arg(out)
        .args(UNFLIPPABLE)
        .args(["--", "--tokens", "6"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    String::from_utf8(o.stdout).unwrap()
}

#[test]
fn judging_an_archive_with_its_own_floors_gives_the_live_lines() {
    let (_d, out) = scratch();
    let live = archived_run(&out);
    let before = snapshot(&out);
    let o = gate().arg("judge").arg(&out).output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(String::from_utf8(o.stdout).unwrap(), live);
    let o = gate().arg("--judge").arg(&out).output().unwrap();
    assert_eq!(String::from_utf8(o.stdout).unwrap(), live);
    assert_eq!(snapshot(&out), before, "judge writes nothing into DIR");
}

#[test]
fn overrides_change_the_verdict() {
    let (_d, out) = scratch();
    archived_run(&out);
    let o = gate()
        .arg("judge")
        .arg(&out)
        .args(["--floor", "1000000000", "--slow-route", "stand-in"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{stdout}");
    assert!(line(&stdout, "rate").contains("FAIL"), "{stdout}");
    assert!(
        line(&stdout, "route").contains("names the slow route"),
        "{stdout}"
    );
}

#[test]
fn the_load_line_is_the_runs_not_todays() {
    let (_d, out) = scratch();
    archived_run(&out);
    std::fs::write(
        out.join("load.json"),
        r#"{"load1": 77.7, "load5": 1, "load15": 1, "ncpu": 5, "taken": "before-serve"}"#,
    )
    .unwrap();
    let o = gate().arg("judge").arg(&out).output().unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        line(&stdout, "load").contains("1-minute load average 77.7 on 5 CPUs"),
        "{stdout}"
    );
}

#[test]
fn no_or_unreadable_load_json_means_no_load_line_and_no_crash() {
    let (_d, out) = scratch();
    archived_run(&out);
    std::fs::write(out.join("load.json"), "{garbled").unwrap();
    let o = gate().arg("judge").arg(&out).output().unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{stdout}");
    assert!(!stdout.contains("load "), "{stdout}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("load.json is unreadable"));
    std::fs::remove_file(out.join("load.json")).unwrap();
    let o = gate().arg("judge").arg(&out).output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert!(!String::from_utf8_lossy(&o.stdout).contains("load "));
}

#[test]
fn a_directory_that_is_not_a_run_is_exit_2() {
    let d = tempfile::tempdir().unwrap();
    gate()
        .arg("judge")
        .arg(d.path())
        .assert()
        .code(2)
        .stderr(predicates::str::contains("is").and(predicates::str::contains("a run directory?")));
    std::fs::write(d.path().join("run.json"), "{\"schema\": 1}").unwrap();
    gate().arg("judge").arg(d.path()).assert().code(2);
}

#[test]
fn garbled_replies_are_exit_2_naming_the_file() {
    let (_d, out) = scratch();
    archived_run(&out);
    std::fs::write(out.join("replies.jsonl"), "{\"index\": 1,").unwrap();
    gate()
        .arg("judge")
        .arg(&out)
        .assert()
        .code(2)
        .stderr(predicates::str::contains("replies.jsonl"));
}

use predicates::prelude::*;
