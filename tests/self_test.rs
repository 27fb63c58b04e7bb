//! `self-test` as a whole, as CI runs it: every judging case, the runs against the stand-in
//! and the accuracy checks against its trace.

use crate::util::*;

#[test]
fn the_self_test_passes_and_says_what_it_ran() {
    let _alone = exclusive();
    let o = assert_cmd::Command::new(BIN)
        .arg("self-test")
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let summary = stdout.lines().next().unwrap_or("");
    let cases: usize = summary
        .strip_prefix("self-test: ")
        .and_then(|s| s.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(cases >= 20, "{stdout}");
    assert!(
        summary.ends_with(" judging cases, 10 runs against a stand-in serve, 5 metric checks against its send trace and a TERM mid-request ok"),
        "{stdout}"
    );
}

#[test]
fn the_flag_spelling_runs_it_too() {
    // --help of the flag spelling proves it parses without running the whole self-test twice.
    gate()
        .args(["--self-test", "--help"])
        .assert()
        .code(0)
        .stdout(predicates::str::contains("without hardware"));
}
