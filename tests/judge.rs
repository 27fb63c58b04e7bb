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
    // A run from before digests: with them, a load.json edited is a changed archive.
    forget_digests(&out);
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
    // A whole line (it has its newline) that is not a reply: the archive is damaged.
    std::fs::write(out.join("replies.jsonl"), "{\"index\": 1,\n").unwrap();
    gate()
        .arg("judge")
        .arg(&out)
        .assert()
        .code(2)
        .stderr(predicates::str::contains("replies.jsonl"));
}

/// A gate killed while it appended a reply leaves a part of a line at the end: the whole
/// replies before it are judged, and the part is said, not taken for damage.
#[test]
fn a_last_reply_cut_by_a_crash_is_set_aside_and_said() {
    let (_d, out) = scratch();
    archived_run(&out);
    // A run killed while it wrote a line never made its last run.json, with the digests.
    forget_digests(&out);
    let path = out.join("replies.jsonl");
    let whole = std::fs::read_to_string(&path).unwrap();
    let first_line_end = whole.find('\n').unwrap() + 1;
    let cut = format!(
        "{}{}",
        &whole[..first_line_end],
        &whole[first_line_end..first_line_end + 40]
    );
    std::fs::write(&path, cut).unwrap();
    let o = gate().arg("judge").arg(&out).output().unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stderr.contains("replies.jsonl ends in 40 bytes of a line that was never finished")
            && stderr.contains("judging the 1 whole replies"),
        "{stderr}"
    );
    // One of the two planned replies is kept: content says the other was not made.
    assert!(
        line(&stdout, "content").contains("only 1 of 2 replies were made"),
        "{stdout}"
    );
    assert!(line(&stdout, "rate").contains("over 1 reply"), "{stdout}");
}

use predicates::prelude::*;

/// Output paths inside the judged archive are refused before anything is written, whatever
/// file they would replace and however they are spelled.
#[test]
fn judge_never_writes_into_the_archive_it_judges() {
    let (d, out) = scratch();
    archived_run(&out);
    let before = snapshot(&out);
    let dotted = d.path().join(".").join("run").join("..").join("run");
    let cases: Vec<(Vec<std::ffi::OsString>, &str)> = vec![
        (
            vec!["--svg".into(), out.join("timeline.svg").into()],
            "--svg",
        ),
        (
            vec!["--junit".into(), out.join("result.json").into()],
            "--junit",
        ),
        (
            vec!["--junit".into(), out.join("new.xml").into()],
            "--junit",
        ),
        (
            vec!["--prom".into(), out.join("gate.prom").into()],
            "--prom",
        ),
        (
            vec!["--prom".into(), dotted.join("run.json").into()],
            "--prom",
        ),
        (
            vec!["--svg".into(), dotted.join("timeline.svg").into()],
            "--svg",
        ),
    ];
    for (extra, names) in &cases {
        gate()
            .arg("judge")
            .arg(&out)
            .args(extra)
            .assert()
            .code(2)
            .stdout("")
            .stderr(
                predicates::str::contains(*names).and(predicates::str::contains(
                    "inside the run directory being judged",
                )),
            );
    }
    // The step summary GitHub names, pointed into the archive.
    gate()
        .arg("judge")
        .arg(&out)
        .env("GITHUB_STEP_SUMMARY", out.join("run.json"))
        .assert()
        .code(2)
        .stderr(predicates::str::contains("GITHUB_STEP_SUMMARY"));
    assert_eq!(snapshot(&out), before, "judge changed the archive");
    // Outside the archive, both are written.
    let svg = d.path().join("t.svg");
    gate()
        .arg("judge")
        .arg(&out)
        .arg("--svg")
        .arg(&svg)
        .assert()
        .code(0);
    assert!(svg.exists());
}

/// An archive whose reply was edited to be sent after its chunks (a first token of 0 ms from
/// a rewritten replies.jsonl; issue 30): judge refuses it in one line naming the line, exit 2,
/// and so does a run given it as its baseline, before anything starts.
#[test]
fn an_archive_with_a_reply_that_cannot_be_true_is_refused() {
    let (d, out) = scratch();
    let (code, stdout) = stand_in_run(&out, &["--replies", "2"], &["--gaps-ms", "2"]);
    assert_eq!(code, Some(0), "{stdout}");
    let path = out.join("replies.jsonl");
    let mut lines: Vec<serde_json::Value> = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let last = lines[1]["end_ns"].as_u64().unwrap();
    lines[1]["sent_ns"] = serde_json::json!(last);
    let text: String = lines.iter().map(|v| format!("{v}\n")).collect();
    std::fs::write(&path, text).unwrap();
    let o = gate().arg("judge").arg(&out).output().unwrap();
    let said = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{said}");
    assert_eq!(said.lines().count(), 1, "{said}");
    assert!(
        said.contains("line 2: reply 2 cannot be a record of a run: its chunk 1 arrived at"),
        "{said}"
    );
    assert!(o.stdout.is_empty());
    let candidate = d.path().join("candidate");
    let o = gate()
        .args(["run", "--stand-in", "--out"])
        .arg(&candidate)
        .arg("--baseline")
        .arg(&out)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{said}");
    assert!(said.contains("cannot be a record of a run"), "{said}");
    assert!(!said.contains("started the serve"), "{said}");
}

// Issue 30: an archive's replies.jsonl linked to /dev/zero once took past 2 GiB in a second,
// and a FIFO hung `judge`. Each is refused from what it is (or its size), one line, exit 2,
// with the heap capped so that reading it would abort the gate rather than pass; and a FIFO
// given as `judge --svg` is refused before judging.
#[test]
fn a_replies_file_that_is_no_file_or_too_large_is_refused_without_reading_it() {
    let (d, out) = scratch();
    archived_run(&out);
    for (dir, says) in archives_with_unreadable_replies(d.path(), &out) {
        let (mut g, _claim) = gate_with_heap_cap();
        let o = g.arg("judge").arg(&dir).output().unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{}: {stderr}", dir.display());
        assert!(stderr.contains(says), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
    }
    let svg = d.path().join("svg-fifo");
    nix::unistd::mkfifo(&svg, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let o = gate()
        .arg("judge")
        .arg(&out)
        .arg("--svg")
        .arg(&svg)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert_eq!(
        stderr.trim_end(),
        format!(
            "npu-serve-smoke: --svg: {} is a FIFO, not a file: give a regular file path",
            svg.display()
        )
    );
}

// Issue 30: a baseline whose replies.jsonl is no file is refused before anything starts, as
// any unreadable baseline is.
#[test]
fn a_baseline_whose_replies_are_no_file_is_refused_before_anything() {
    let (d, out) = scratch();
    archived_run(&out);
    let next = d.path().join("next");
    for (dir, says) in archives_with_unreadable_replies(d.path(), &out) {
        crate::inputs::refused_before_anything(
            &next,
            &["--baseline", dir.to_str().unwrap()],
            &[],
            says,
        );
    }
}

/// The words an archive names by a closed set (issue 33, item 1): a run.json interrupted by a
/// signal judges as INTERRUPTED with 128 + its number, and a signal this build does not know is
/// one line that names it and exit 2, never a silent exit 1.
#[test]
fn an_archived_signal_gives_its_exit_code_and_an_unknown_one_is_refused_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    archived_run(&run);
    let with_signal = |name: &str| {
        let text = std::fs::read_to_string(run.join("run.json")).unwrap();
        let mut manifest: serde_json::Value = serde_json::from_str(&text).unwrap();
        manifest["interrupted"] = serde_json::Value::from(name);
        std::fs::write(
            run.join("run.json"),
            serde_json::to_string(&manifest).unwrap(),
        )
        .unwrap();
        gate().arg("judge").arg(&run).output().unwrap()
    };
    let o = with_signal("SIGINT");
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(130), "{stdout}");
    assert!(
        stdout.contains("RESULT: INTERRUPTED (by SIGINT)"),
        "{stdout}"
    );

    let o = with_signal("SIGFOO");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("unknown signal `SIGFOO`"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}
