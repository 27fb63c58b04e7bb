//! Launching and stopping the serve: faults before ready, a missing binary, the process group.

use std::time::Duration;

use crate::util::*;

#[test]
fn a_serve_that_exits_before_ready_fails_quoting_its_log() {
    let (_d, out) = scratch();
    let o = gate()
        .args(["run", "--out"])
        .arg(&out)
        .args([
            "--",
            "sh",
            "-c",
            "echo loading model; echo 'error: no device' >&2; exit 3",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{stdout}");
    let serve = line(&stdout, "serve");
    assert!(
        serve.contains("FAIL  the serve exited (exit status: 3) before it was ready"),
        "{serve}"
    );
    assert!(serve.contains("\"error: no device\""), "{serve}");
    assert!(out.join("result.json").exists());
    assert_eq!(json(&out.join("run.json"))["startup"]["state"], "exited");
}

#[test]
fn a_serve_never_ready_fails_after_the_ready_timeout_and_is_stopped() {
    let (_d, out) = scratch();
    let marker = "31.4159265";
    let o = gate()
        .args(["run", "--ready-timeout", "0.5", "--out"])
        .arg(&out)
        .args(["--", "sleep", marker])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{stdout}");
    assert!(
        line(&stdout, "serve").contains("not ready after 0.5 s"),
        "{stdout}"
    );
    assert!(!process_with(marker), "the serve was left running");
}

#[test]
fn no_process_of_the_serve_outlives_the_gate() {
    // The serve starts a grandchild in the background; the group stop must take it too.
    let (_d, out) = scratch();
    let marker = "27.1828182";
    let script = format!("sleep {marker} & exec \"$0\" stand-in --port \"$1\" --tokens 3");
    gate()
        .args(["run", "--replies", "1", "--out"])
        .arg(&out)
        .args(UNFLIPPABLE)
        .args(["--", "sh", "-c", &script, BIN, "{port}"])
        .assert()
        .code(0);
    assert!(
        gone_within(marker, Duration::from_secs(5)),
        "a grandchild of the serve survived"
    );
}

#[test]
fn a_missing_serve_binary_is_exit_2_before_anything_starts() {
    let (_d, out) = scratch();
    gate()
        .args(["run", "--out"])
        .arg(&out)
        .args(["--", "/nonexistent/serve", "--port", "{port}"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains(
            "the serve binary /nonexistent/serve was not found",
        ));
    assert!(!out.exists());
    gate()
        .args(["run", "--", "no-such-serve-xyz"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("not found on PATH"));
}

#[test]
fn a_non_empty_out_directory_is_refused() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("keep"), "x").unwrap();
    gate()
        .args(["run", "--stand-in", "--out"])
        .arg(d.path())
        .assert()
        .code(2)
        .stderr(predicates::str::contains("is not empty"));
    assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
}

#[test]
fn a_url_the_gate_cannot_speak_to_is_exit_2_before_anything_starts() {
    let (_d, out) = scratch();
    for (url, says) in [
        (
            "https://127.0.0.1:8443",
            "speaks plain HTTP to a serve on this box, not https",
        ),
        ("127.0.0.1:8080", "is not a URL"),
        ("localhost:8080", "names no host"),
        (
            "http://user:secret@127.0.0.1:8080",
            "sends no user name or password",
        ),
        ("http://127.0.0.1:8080/?key=1", "has no query or fragment"),
    ] {
        gate()
            .args(["run", "--url", url, "--out"])
            .arg(&out)
            .assert()
            .code(2)
            .stderr(predicates::str::contains(says));
        assert!(!out.exists(), "{url}: a run directory was created");
    }
}

#[test]
fn nothing_to_gate_is_exit_2() {
    gate()
        .arg("run")
        .assert()
        .code(2)
        .stderr(predicates::str::contains("nothing to gate"));
}

#[test]
fn a_serve_that_listens_late_is_waited_for() {
    // Connection refused for 300 ms, then ready: readiness polling rides it out.
    let (_d, out) = scratch();
    gate()
        .args(["run", "--stand-in", "--replies", "1", "--out"])
        .arg(&out)
        .args(UNFLIPPABLE)
        .args(["--", "--startup-ms", "300", "--tokens", "3"])
        .assert()
        .code(0);
    let ready_ms = json(&out.join("run.json"))["startup"]["after_ms"]
        .as_f64()
        .unwrap();
    assert!(
        ready_ms >= 300.0,
        "ready after {ready_ms} ms, before the stand-in listened"
    );
}
