//! The gate's own version (issue 38, item 5): `--version` names the version, the commit and
//! the build date; run.json records the version and commit; `judge` says when another build
//! made the archive it judges.

use std::path::Path;
use std::process::{Command, Output};

use crate::util::*;

const REPO: &str = env!("CARGO_MANIFEST_DIR");

// build.rs's date arithmetic, tested where it can be: build.rs is compiled into this module.
#[allow(dead_code)]
#[path = "../build.rs"]
mod build_script;

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The commit of the checkout the tests were built in, where git can tell.
fn head() -> Option<String> {
    let o = Command::new("git")
        .args(["-C", REPO, "rev-parse", "HEAD"])
        .output()
        .ok()?;
    o.status
        .success()
        .then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
}

/// `npu-serve-smoke 0.1.0 (commit <40 hex>, built YYYY-MM-DD)`: (commit, date).
fn version_line(stdout: &str) -> (String, String) {
    let want = format!("npu-serve-smoke {} (commit ", env!("CARGO_PKG_VERSION"));
    let rest = stdout
        .trim_end()
        .strip_prefix(&want)
        .unwrap_or_else(|| panic!("{stdout:?} does not start with {want:?}"));
    let (commit, rest) = rest.split_once(", built ").unwrap();
    let date = rest.strip_suffix(')').unwrap();
    (commit.to_string(), date.to_string())
}

#[test]
fn version_names_the_commit_it_was_built_from_and_the_build_date() {
    let o = gate().arg("--version").output().unwrap();
    assert!(o.status.success());
    let (commit, date) = version_line(&String::from_utf8_lossy(&o.stdout));
    match head() {
        // Built in this checkout: its HEAD, which build.rs watches.
        Some(head) => assert_eq!(commit, head),
        None => assert_eq!(commit, "unknown"),
    }
    // A date, not after today (UTC) and not before the project began.
    let days = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        / 86_400;
    let (y, m, d) = build_script::civil_from_days(days as i64);
    let today = format!("{y:04}-{m:02}-{d:02}");
    assert_eq!(date.len(), 10, "{date}");
    assert!(
        date.as_str() <= today.as_str() && date.as_str() >= "2026-01-01",
        "{date} vs {today}"
    );
    // Each command says the same.
    let o = gate().args(["judge", "--version"]).output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.starts_with("npu-serve-smoke-judge "), "{text}");
    assert!(text.contains(&commit) && text.contains(&date), "{text}");
}

#[test]
fn build_dates_are_the_proleptic_gregorian_calendar() {
    // Day counts from 1970-01-01, from Python's datetime.date arithmetic.
    for (days, date) in [
        (0, (1970, 1, 1)),
        (-1, (1969, 12, 31)),
        (11_016, (2000, 2, 29)),
        (11_017, (2000, 3, 1)),
        (20_791, (2026, 12, 4)),
        (47_541, (2100, 3, 1)),
    ] {
        assert_eq!(build_script::civil_from_days(days), date, "{days}");
    }
}

#[test]
fn run_json_records_the_gate_and_judge_says_when_another_build_made_the_archive() {
    let (_d, out) = scratch();
    let (code, _) = stand_in_run(&out, &["--replies", "2"], &[]);
    assert_eq!(code, Some(0));
    let manifest = json(&out.join("run.json"));
    assert_eq!(manifest["tool_version"], env!("CARGO_PKG_VERSION"));
    let o = gate().arg("--version").output().unwrap();
    let (commit, _) = version_line(&String::from_utf8_lossy(&o.stdout));
    assert_eq!(manifest["tool_commit"], commit.as_str());

    // Judged by the build that made it: nothing said.
    let o = gate().arg("judge").arg(&out).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!stderr(&o).contains("made by"), "{}", stderr(&o));
    let lines = verdict_lines(&String::from_utf8_lossy(&o.stdout));

    // Another version's archive (edited, so judged without its digests): said, and judged the same.
    forget_digests(&out);
    let path = out.join("run.json");
    let mut manifest = json(&path);
    manifest["tool_version"] = "0.0.9".into();
    manifest["tool_commit"] = "abcdefabcdef0123456789abcdef0123456789ab".into();
    std::fs::write(&path, manifest.to_string()).unwrap();
    let o = gate().arg("judge").arg(&out).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let want = format!(
        "npu-serve-smoke: {}: made by npu-serve-smoke 0.0.9 (commit abcdefabcdef), judged by {} (commit {}): ",
        out.display(),
        env!("CARGO_PKG_VERSION"),
        &commit[..commit.len().min(12)]
    );
    assert!(
        stderr(&o).lines().any(|l| l.starts_with(&want)),
        "{want}\n{}",
        stderr(&o)
    );
    assert_eq!(verdict_lines(&String::from_utf8_lossy(&o.stdout)), lines);

    // An archive from before the commit was recorded, of this version: nothing to tell.
    manifest["tool_version"] = env!("CARGO_PKG_VERSION").into();
    manifest.as_object_mut().unwrap().remove("tool_commit");
    std::fs::write(&path, manifest.to_string()).unwrap();
    let o = gate().arg("judge").arg(&out).output().unwrap();
    assert!(!stderr(&o).contains("made by"), "{}", stderr(&o));
    assert!(Path::new(&path).exists());
}
