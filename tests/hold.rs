//! The device hold is never silently shared (issue 30): a serve that removes or replaces the
//! hold file (its path is in run.json) lets a second gate take "the same" hold at once; the
//! first gate finds it pulled away and FAILs the run.

use crate::util::*;

/// How the serve pulls the hold away.
#[derive(Clone, Copy, Debug)]
enum Pull {
    /// `rm` the hold file.
    Remove,
    /// `rm` it and put a symlink to a new file in its place: a second gate follows it.
    Symlink,
}

fn a_serve_that_pulls_the_hold_away(pull: Pull, says: &str, found: &str) {
    use std::os::unix::fs::PermissionsExt;
    let (d, out) = scratch();
    let hold = d.path().join("npu.hold");
    let go = d.path().join("go");
    let pulled = match pull {
        Pull::Remove => format!("rm -f '{}'", hold.display()),
        Pull::Symlink => format!(
            "rm -f '{h}'; : > '{h}.new'; ln -s '{h}.new' '{h}'",
            h = hold.display()
        ),
    };
    // It pulls the hold away, then waits for the test's word before it serves: the second gate
    // takes the hold while the first still runs, however fast or slow the box.
    let serve = d.path().join("serve.sh");
    std::fs::write(
        &serve,
        format!(
            "#!/bin/sh\n{pulled}\n: > '{pulled_mark}'\nwhile [ ! -e '{go}' ]; do sleep 0.05; done\nexec \"{BIN}\" stand-in --port \"$1\" --tokens 3\n",
            pulled_mark = d.path().join("pulled").display(),
            go = go.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&serve, std::fs::Permissions::from_mode(0o755)).unwrap();
    let first = [
        "run",
        "--floor",
        "0",
        "--first-token-ms",
        "600000",
        "--replies",
        "1",
        "--out",
        out.to_str().unwrap(),
        "--hold",
        hold.to_str().unwrap(),
        "--",
        serve.to_str().unwrap(),
        "{port}",
    ];
    let mut g = Running::start(&first);
    wait_for_file(&d.path().join("pulled"), LONG);
    // What the issue saw: a second gate takes "the same" hold at once.
    let out_b = d.path().join("run-b");
    let o = gate()
        .args([
            "run",
            "--stand-in",
            "--replies",
            "1",
            "--hold-timeout",
            "0.5",
            "--out",
        ])
        .arg(&out_b)
        .args(UNFLIPPABLE)
        .arg("--hold")
        .arg(&hold)
        .args(["--", "--tokens", "3"])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{pull:?}: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    std::fs::write(&go, "").unwrap();
    assert_eq!(g.wait(LONG), Some(1), "{pull:?}: {}", g.said);
    let result = json(&out.join("result.json"));
    assert_eq!(result["result"], "FAIL", "{pull:?}: {result}");
    let first_line = &result["lines"][0];
    assert_eq!(first_line["check"], "hold", "{pull:?}: {result}");
    assert_eq!(first_line["status"], "FAIL", "{pull:?}: {result}");
    assert_eq!(
        first_line["text"],
        format!(
            "the hold file {} {says}: the lock no longer kept another gate off the device, which this run may have shared",
            hold.display()
        ),
        "{pull:?}"
    );
    let checks = &json(&out.join("run.json"))["hold"]["checks"];
    assert_eq!(checks[0]["at"], "before_replies", "{pull:?}: {checks}");
    assert_eq!(checks[0]["found"], found, "{pull:?}: {checks}");
}

#[test]
fn a_serve_that_removes_the_hold_file_fails_the_run() {
    // The second gate made a new file at the path: that is what the first finds there.
    a_serve_that_pulls_the_hold_away(
        Pull::Remove,
        "was replaced by another file before the replies",
        "another_file",
    );
}

#[test]
fn a_serve_that_replaces_the_hold_file_with_a_symlink_fails_the_run() {
    a_serve_that_pulls_the_hold_away(
        Pull::Symlink,
        "was replaced by another file before the replies",
        "another_file",
    );
}

#[test]
fn a_hold_left_alone_is_checked_and_found_held_each_time() {
    let (d, out) = scratch();
    let hold = d.path().join("npu.hold");
    let (code, stdout) = stand_in_run(
        &out,
        &["--replies", "1", "--hold", hold.to_str().unwrap()],
        &["--tokens", "3"],
    );
    assert_eq!(code, Some(0), "{stdout}");
    let checks = &json(&out.join("run.json"))["hold"]["checks"];
    let seen: Vec<(&str, &str)> = checks
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["at"].as_str().unwrap(), c["found"].as_str().unwrap()))
        .collect();
    assert_eq!(
        seen,
        [
            ("before_replies", "locked_file"),
            ("after_replies", "locked_file"),
            ("release", "locked_file")
        ]
    );
}
