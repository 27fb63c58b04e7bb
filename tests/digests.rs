//! The archive says if it was changed after the run (issue 30, item 2): run.json, written last,
//! holds the sha256 of every other file as the gate wrote it, and `judge` and `compare` hold
//! the files to them. And the gate writes through the descriptors it opened, so a serve that
//! relinks a file of the run cannot turn the gate's writes outside it.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::util::*;

/// A file's sha256, hex, as sha256sum prints it.
fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A passing run of 3 replies in `out`; its stdout.
fn passing_run(out: &Path) -> String {
    let (code, stdout) = stand_in_run(out, &["--replies", "3"], &["--tokens", "6"]);
    assert_eq!(code, Some(0), "{stdout}");
    stdout
}

/// A copy of the run directory `from` at `to`.
fn copy_run(from: &Path, to: &Path) {
    std::fs::create_dir(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

/// `judge DIR`: exit code, stdout, stderr.
fn judged(dir: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let o = gate().arg("judge").arg(dir).args(args).output().unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

const CHANGED: &str = "archive      FAIL  the archive was changed after the run: ";

/// A change made to a run directory.
type Edit = Box<dyn Fn(&Path)>;

/// Each way a file of a passing run can be changed after it: what, what judge says, how.
fn edits() -> Vec<(&'static str, &'static str, Edit)> {
    let replies = |dir: &Path| std::fs::read_to_string(dir.join("replies.jsonl")).unwrap();
    vec![
        (
            "one byte of a reply's text",
            "replies.jsonl is not what the gate wrote",
            Box::new(move |dir: &Path| {
                let text = replies(dir);
                let at = text.find("\"content\":\"").unwrap() + "\"content\":\"".len();
                let mut bytes = text.into_bytes();
                bytes[at] = if bytes[at] == b'X' { b'Y' } else { b'X' };
                std::fs::write(dir.join("replies.jsonl"), bytes).unwrap();
            }),
        ),
        (
            "a line removed",
            "replies.jsonl is not what the gate wrote",
            Box::new(move |dir: &Path| {
                let text = replies(dir);
                let kept: Vec<&str> = text.lines().skip(1).collect();
                std::fs::write(dir.join("replies.jsonl"), kept.join("\n") + "\n").unwrap();
            }),
        ),
        (
            "a line added",
            "replies.jsonl is not what the gate wrote",
            Box::new(move |dir: &Path| {
                let text = replies(dir);
                let last = text.lines().last().unwrap().to_string();
                std::fs::write(dir.join("replies.jsonl"), text + &last + "\n").unwrap();
            }),
        ),
        (
            "the file deleted",
            "replies.jsonl is gone",
            Box::new(|dir: &Path| std::fs::remove_file(dir.join("replies.jsonl")).unwrap()),
        ),
        (
            "result.json edited",
            "result.json is not what the gate wrote",
            Box::new(|dir: &Path| {
                let path = dir.join("result.json");
                let text = std::fs::read_to_string(&path).unwrap();
                std::fs::write(&path, text.replace("RESULT: PASS", "RESULT: PASS ")).unwrap();
            }),
        ),
        (
            "a file planted",
            "metrics.json was not written by the gate",
            Box::new(|dir: &Path| std::fs::write(dir.join("metrics.json"), "{}").unwrap()),
        ),
    ]
}

#[test]
fn an_archive_changed_after_the_run_is_a_fail_in_judge_and_compare_never_a_pass() {
    let (d, out) = scratch();
    passing_run(&out);
    let mut dirs: Vec<PathBuf> = Vec::new();
    for (i, (what, says, edit)) in edits().into_iter().enumerate() {
        let dir = d.path().join(format!("edited-{i}"));
        copy_run(&out, &dir);
        edit(&dir);
        let (code, stdout, _) = judged(&dir, &[]);
        assert_eq!(code, Some(1), "{what}: {stdout}");
        let first = stdout.lines().next().unwrap_or_default();
        assert!(
            first.starts_with(CHANGED) && first.contains(says),
            "{what}: {stdout}"
        );
        assert_eq!(stdout.lines().last(), Some("RESULT: FAIL"), "{what}");
        dirs.push(dir);
    }
    let o = gate()
        .arg("compare")
        .arg(&out)
        .args(&dirs)
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{table}");
    for dir in &dirs {
        let name = dir.display().to_string();
        let row = table
            .lines()
            .find(|l| l.ends_with(&name) && l.starts_with("20"))
            .unwrap_or_else(|| panic!("no row for {name}:\n{table}"));
        assert!(row.contains("  FAIL  "), "{row}");
        assert!(
            table.contains(&format!("{name}: the archive was changed after the run: ")),
            "{table}"
        );
    }
    // The line is in result.json's schema, as `judge --json` writes it.
    let o = gate()
        .args(["judge", "--json"])
        .arg(&dirs[0])
        .output()
        .unwrap();
    let as_json = d.path().join("result.json");
    std::fs::write(&as_json, &o.stdout).unwrap();
    let judged = json(&as_json);
    assert_eq!(judged["lines"][0]["check"], "archive");
    assert_eq!(judged["result"], "FAIL");
    let untouched = out.display().to_string();
    let row = table.lines().find(|l| l.ends_with(&untouched)).unwrap();
    assert!(row.contains("  PASS  "), "{row}");
    let o = gate()
        .args(["compare", "--json"])
        .arg(&dirs[0])
        .output()
        .unwrap();
    let rows: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(rows[0]["result"], "FAIL");
    assert!(rows[0]["changed"]
        .as_str()
        .unwrap()
        .starts_with("the archive was changed after the run: replies.jsonl"));
}

#[test]
fn an_untouched_archive_holds_the_digest_of_each_file_and_judges_as_the_run_did() {
    let (_d, out) = scratch();
    let live = passing_run(&out);
    let manifest = json(&out.join("run.json"));
    let digests = manifest["digests"]
        .as_object()
        .expect("run.json has digests");
    let mut names: Vec<&str> = digests.keys().map(String::as_str).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "load.json",
            "replies.jsonl",
            "report.html",
            "result.json",
            "route.json",
            "serve.log",
            "timeline.svg"
        ]
    );
    for (name, sha) in digests {
        assert_eq!(
            sha.as_str().unwrap(),
            sha256(&std::fs::read(out.join(name)).unwrap()),
            "{name}"
        );
    }
    let (code, stdout, stderr) = judged(&out, &[]);
    assert_eq!(code, Some(0), "{stdout}");
    assert_eq!(stdout, live);
    assert!(!stderr.contains("digest"), "{stderr}");
}

#[test]
fn an_archive_from_before_digests_judges_as_before_with_a_note() {
    let (_d, out) = scratch();
    let live = passing_run(&out);
    forget_digests(&out);
    // Edited as a test of an old archive may edit it: judged as it is.
    std::fs::write(out.join("metrics.json"), "{}").unwrap();
    let (code, stdout, stderr) = judged(&out, &[]);
    assert_eq!(code, Some(0), "{stdout}");
    assert_eq!(stdout, live);
    assert!(
        stderr.contains("carries no digest of its files"),
        "{stderr}"
    );
}

#[test]
fn a_baseline_changed_after_its_run_is_refused_in_one_line() {
    let (d, out) = scratch();
    passing_run(&out);
    let baseline = d.path().join("baseline");
    copy_run(&out, &baseline);
    std::fs::write(baseline.join("load.json"), "{}").unwrap();
    let (code, stdout, stderr) = judged(&out, &["--baseline", baseline.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{stdout}{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains(&format!(
            "--baseline {} is not a readable run: {}: the archive was changed after the run: load.json",
            baseline.display(),
            baseline.display()
        )),
        "{stderr}"
    );
}

/// A serve that learns where the run directory is (here from the environment; a real one from
/// its own stdout or the gate's command line), links replies.jsonl to a file outside before
/// the first reply, and on SIGTERM writes replies of its own choosing (a passing run's) in
/// its place: the gate appends nothing outside, its live FAIL stands, and `judge` says the
/// archive was changed rather than PASS (issue 30).
#[test]
fn a_serve_that_relinks_and_rewrites_replies_gets_nothing_from_the_gate_and_no_pass() {
    let (d, good) = scratch();
    passing_run(&good);
    let out = d.path().join("hostile");
    let outside = d.path().join("outside.jsonl");
    std::fs::write(&outside, "").unwrap();
    let script = r#"
        ln -sf "$HOSTILE_OUTSIDE" "$HOSTILE_OUT/replies.jsonl" || exit 9
        "$0" stand-in --port "$1" --tokens 6 --answer "Lyon, surely." &
        serve=$!
        trap 'rm -f "$HOSTILE_OUT/replies.jsonl"; cp "$HOSTILE_FORGED" "$HOSTILE_OUT/replies.jsonl"; kill $serve; wait $serve; exit 0' TERM
        wait $serve
    "#;
    let o = gate()
        .env("HOSTILE_OUT", &out)
        .env("HOSTILE_OUTSIDE", &outside)
        .env("HOSTILE_FORGED", good.join("replies.jsonl"))
        .args(["run", "--replies", "3", "--out"])
        .arg(&out)
        .args(UNFLIPPABLE)
        .args(["--", "sh", "-c", script, BIN, "{port}"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{stdout}");
    assert!(line(&stdout, "content").contains("FAIL"), "{stdout}");
    let leaked = std::fs::read(&outside).unwrap().len();
    assert_eq!(
        leaked, 0,
        "the gate appended {leaked} bytes of its replies outside the run directory"
    );
    // The forged replies are in place, and pass when judged as they are.
    assert_eq!(
        std::fs::read(out.join("replies.jsonl")).unwrap(),
        std::fs::read(good.join("replies.jsonl")).unwrap()
    );
    let (code, stdout, _) = judged(&out, &[]);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        stdout.starts_with(&format!(
            "{CHANGED}replies.jsonl is not what the gate wrote"
        )),
        "{stdout}"
    );
    let o = gate().arg("compare").arg(&out).output().unwrap();
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(
        table.contains("the archive was changed after the run: replies.jsonl"),
        "{table}"
    );
    // What the digests stand between: judged as they are, the forged replies pass.
    forget_digests(&out);
    let (code, stdout, _) = judged(&out, &[]);
    assert_eq!(code, Some(0), "{stdout}");
}

/// run.json holds every other file's digest but cannot hold its own: the gate says it with the
/// line that says where the run is archived, for the CI log to keep.
#[test]
fn the_gate_says_the_sealed_run_jsons_own_digest() {
    let (_d, out) = scratch();
    let o = gate()
        .args(["run", "--stand-in", "--replies", "1", "--out"])
        .arg(&out)
        .args(UNFLIPPABLE)
        .args(["--", "--tokens", "3"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    let sha = sha256(&std::fs::read(out.join("run.json")).unwrap());
    assert!(
        stderr.contains(&format!(
            "archived in {} (run.json sha256 {sha})",
            out.display()
        )),
        "{stderr}"
    );
}
