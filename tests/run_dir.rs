//! A run directory is one run's, and keeps every finished reply however the gate ends.
//! (issue 14, items 9 and 10)

use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::Signal;

use crate::util::*;

/// Two gates given the same `--out` at the same moment: exactly one gets it; the other is
/// exit 2 before it starts a serve, and the directory holds one run.
#[test]
fn two_gates_with_one_out_get_one_run_directory() {
    for round in 0..3 {
        let (_d, out) = scratch();
        let start = |tag: &str| {
            std::process::Command::new(BIN)
                .args(["run", "--stand-in", "--replies", "1", "--out"])
                .arg(&out)
                .args(UNFLIPPABLE)
                .args(["--", "--tokens", "3", "--route-line"])
                .arg(format!("route: stand-in {tag}"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        };
        let _claim = gate();
        let (a, b) = (start("first"), start("second"));
        let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
        let mut codes = [a.status.code(), b.status.code()];
        codes.sort();
        assert_eq!(codes, [Some(0), Some(2)], "round {round}");
        let loser = if a.status.code() == Some(2) { &a } else { &b };
        let said = String::from_utf8_lossy(&loser.stderr);
        assert!(
            said.contains("was just taken by another run") || said.contains("is not empty"),
            "{said}"
        );
        assert!(!said.contains("started the serve"), "{said}");
        let log = std::fs::read_to_string(out.join("serve.log")).unwrap();
        assert_eq!(log.matches("route: stand-in").count(), 1, "{log}");
        assert_eq!(json(&out.join("result.json"))["result"], "PASS");
    }
}

/// Gates started in the same second without `--out` each get a directory of their own.
#[test]
fn default_run_directories_are_unique() {
    let d = tempfile::tempdir().unwrap();
    let _claim = gate();
    let children: Vec<_> = (0..3)
        .map(|_| {
            std::process::Command::new(BIN)
                .current_dir(d.path())
                .args(["run", "--stand-in", "--replies", "1"])
                .args(UNFLIPPABLE)
                .args(["--", "--tokens", "3"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        assert_eq!(c.wait_with_output().unwrap().status.code(), Some(0));
    }
    let runs: Vec<_> = std::fs::read_dir(d.path().join("runs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(runs.len(), 3, "{runs:?}");
    for r in &runs {
        assert_eq!(
            json(&r.join("result.json"))["result"],
            "PASS",
            "{}",
            r.display()
        );
        assert_eq!(replies(r).len(), 1);
    }
}

/// A gate killed outright mid-run leaves replies.jsonl with every reply it finished, each a
/// whole line, and the archive judges (as a run that made fewer replies than planned).
#[test]
fn a_sigkilled_gate_keeps_each_finished_reply() {
    let (_d, out) = scratch();
    let mut args: Vec<String> = ["run", "--stand-in", "--replies", "50", "--out"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.push(out.display().to_string());
    args.extend(UNFLIPPABLE.iter().map(|s| s.to_string()));
    args.extend(["--", "--tokens", "4", "--gaps-ms", "20"].map(String::from));
    let mut g = Running::start(&args);
    // Said before the reply is appended: after the 4th is said, the 3rd is on disk.
    g.wait_to_say("reply 4/50", Duration::from_secs(60));
    g.signal(Signal::SIGKILL);
    assert_eq!(g.wait(Duration::from_secs(30)), None);
    let text = std::fs::read_to_string(out.join("replies.jsonl")).unwrap();
    assert!(text.ends_with('\n'), "a part line: {text:?}");
    let kept = replies(&out);
    assert!(kept.len() >= 3, "{} replies kept", kept.len());
    for (i, r) in kept.iter().enumerate() {
        assert_eq!(r["index"], i + 1);
        assert!(r["error"].is_null(), "{r}");
    }
    let o = gate().arg("judge").arg(&out).output().unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        line(&stdout, "content").contains(&format!("only {} of 50 replies were made", kept.len())),
        "{stdout}"
    );
}
