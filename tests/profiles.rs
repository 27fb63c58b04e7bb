//! Gate profiles: the examples under docs/profiles/ run, and the command line wins.

use std::path::{Path, PathBuf};

use crate::util::*;

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("docs/profiles")
        .join(name)
}

#[test]
fn the_stand_in_profile_runs_and_run_json_records_the_merged_settings() {
    let (_d, out) = scratch();
    let o = gate()
        .args(["run", "--profile"])
        .arg(example("stand-in.toml"))
        .args(["--floor", "0", "--first-token-ms", "600000", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{stdout}");
    assert!(
        line(&stdout, "route").contains("ok    the serve log names the fast route"),
        "{stdout}"
    );
    let settings = &json(&out.join("run.json"))["settings"];
    assert_eq!(settings["floor"], 0.0, "the command line wins: {settings}");
    assert_eq!(
        settings["fast_route"], "route: stand-in",
        "from the profile: {settings}"
    );
    assert_eq!(settings["grace"], 5.0, "from the profile: {settings}");
    assert_eq!(settings["max_tokens"], 64, "{settings}");
    assert!(settings["profile"]
        .as_str()
        .unwrap()
        .ends_with("stand-in.toml"));
}

#[test]
fn the_llama_server_profile_runs() {
    if std::env::var("LLAMA_SERVER").is_err() {
        assert_ne!(
            std::env::var("CI").as_deref(),
            Ok("true"),
            "LLAMA_SERVER must be set in CI"
        );
        eprintln!("skipped: no llama-server (run: eval \"$(tools/install-llama-server.sh)\")");
        return;
    }
    let _alone = exclusive();
    let (_d, out) = scratch();
    // The profile as shipped, and the gate's own busy-box policy: a failure of the timing lines
    // alone, where the serve waited for a CPU a tenth of its time, is a SKIP, which this test
    // of the profile's settings accepts (issue 54: with a hog on one core the rate read 16.7
    // tok/s against the profile's floor of 20, the serve waiting 50%). Its route, its answers
    // and its output are held either way: busy-skip never excuses them.
    let o = assert_cmd::Command::new(BIN)
        .args(["run", "--profile"])
        .arg(example("llama-server.toml"))
        .arg("--out")
        .arg(&out)
        .args(["--busy-skip", "0.1"])
        .timeout(std::time::Duration::from_secs(300))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    match o.status.code() {
        Some(0) => assert!(stdout.ends_with("RESULT: PASS\n"), "{stdout}"),
        Some(3) => assert!(stdout.contains("RESULT: SKIP (busy box: "), "{stdout}"),
        other => panic!("exit {other:?}: {stdout}"),
    }
    for check in ["route", "content", "output"] {
        assert!(
            line(&stdout, check).starts_with(&format!("{check:<12} ok")),
            "{stdout}"
        );
    }
    let serve_argv = &json(&out.join("run.json"))["serve_argv"];
    assert_eq!(
        serve_argv[0],
        std::env::var("LLAMA_SERVER").unwrap().as_str(),
        "${{LLAMA_SERVER}} expanded"
    );
}

#[test]
fn a_bad_profile_is_exit_2_naming_the_file() {
    let d = tempfile::tempdir().unwrap();
    let bad = d.path().join("bad.toml");
    std::fs::write(&bad, "flor = 60\n").unwrap();
    gate()
        .args(["run", "--profile"])
        .arg(&bad)
        .assert()
        .code(2)
        .stderr(predicates::str::contains("bad.toml is not valid"));
}
