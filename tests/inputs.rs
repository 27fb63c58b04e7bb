//! Bad input is one clear line and exit 2 before anything is held, started or created; output
//! nobody reads is not an error of the verdict; profile values are held to the command line's
//! bounds. (issue 14, items 7 and 8)

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use crate::util::*;

/// `run --stand-in --out OUT <extra>` is exit 2 with `says` on stderr, and leaves nothing: no
/// run directory, no serve started (the hold file, where given, is not created either).
pub(crate) fn refused_before_anything(
    out: &Path,
    extra: &[&str],
    env: &[(&str, &Path)],
    says: &str,
) {
    let mut g = gate();
    g.args(["run", "--stand-in", "--out"])
        .arg(out)
        .args(UNFLIPPABLE)
        .args(extra);
    for (k, v) in env {
        g.env(k, v);
    }
    let o = g.output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{extra:?}: {stderr}");
    assert!(stderr.contains(says), "{extra:?}: {stderr}");
    assert_eq!(
        stderr.lines().count(),
        1,
        "{extra:?}: one line, not a chain: {stderr}"
    );
    assert!(
        !stderr.contains("started the serve"),
        "{extra:?} started a serve: {stderr}"
    );
    assert!(!out.exists(), "{extra:?} created {}", out.display());
}

#[test]
fn every_path_is_checked_before_anything_is_held_started_or_created() {
    let (d, out) = scratch();
    let missing = d.path().join("missing");
    let junit_dir = d.path().join("junit-is-a-dir");
    std::fs::create_dir(&junit_dir).unwrap();
    let log = missing.join("serve.log");
    let prom_missing = format!(
        "--prom: {} cannot be written: the directory {} does not exist",
        missing.join("gate.prom").display(),
        missing.display()
    );
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec![
                "--junit".into(),
                missing.join("j.xml").display().to_string(),
            ],
            "does not exist",
        ),
        (
            vec!["--junit".into(), junit_dir.display().to_string()],
            "is a directory",
        ),
        (
            vec![
                "--prom".into(),
                missing.join("gate.prom").display().to_string(),
            ],
            &prom_missing,
        ),
        (
            vec!["--prom".into(), junit_dir.display().to_string()],
            "is a directory",
        ),
        (
            vec!["--hold".into(), d.path().display().to_string()],
            "is a directory",
        ),
        (
            vec![
                "--hold".into(),
                missing.join("npu.hold").display().to_string(),
            ],
            "does not exist",
        ),
    ];
    for (extra, says) in &cases {
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        refused_before_anything(&out, &extra, &[], says);
    }
    // The step summary GitHub names is checked too, before the run rather than after it.
    refused_before_anything(
        &out,
        &[],
        &[("GITHUB_STEP_SUMMARY", &missing.join("summary.md"))],
        "GITHUB_STEP_SUMMARY",
    );
    // An attached serve's log is read after the replies: missing, it is refused now.
    let url = "http://127.0.0.1:9";
    let o = gate()
        .args(["run", "--out"])
        .arg(&out)
        .args(["--url", url, "--serve-log"])
        .arg(&log)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--serve-log") && stderr.contains("serve.log"),
        "{stderr}"
    );
    assert!(!out.exists());
}

#[test]
fn judge_checks_its_report_paths_before_judging() {
    let (d, out) = scratch();
    let (code, _) = stand_in_run(&out, &["--replies", "1"], &["--tokens", "4"]);
    assert_eq!(code, Some(0));
    let junit = d.path().join("missing/j.xml");
    gate()
        .arg("judge")
        .arg(&out)
        .arg("--junit")
        .arg(&junit)
        .assert()
        .code(2)
        .stdout("")
        .stderr(predicates::str::contains("does not exist"));
}

#[test]
fn profile_values_out_of_the_flags_bounds_are_refused_with_one_line() {
    let (d, out) = scratch();
    for (text, says) in [
        (
            "grace = 1e30",
            "grace in the profile: 1000000000000000000000000000000 s is out of range",
        ),
        ("grace = 1e19", "grace in the profile"),
        ("ready_timeout = 1e300", "ready_timeout in the profile"),
        (
            "replies = 0",
            "replies in the profile: 0 replies is out of range (1 to 10000)",
        ),
        ("max_tokens = 0", "max_tokens in the profile"),
        ("replies = -1", "replies in the profile: -1 replies"),
        (
            "warmup = 101",
            "warmup in the profile: 101 warm-up replies is out of range (0 to 100)",
        ),
    ] {
        let profile = d.path().join("gate.toml");
        std::fs::write(&profile, format!("stand_in = true\n{text}\n")).unwrap();
        let o = gate()
            .args(["run", "--profile"])
            .arg(&profile)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{text}: {stderr}");
        assert!(stderr.contains(says), "{text}: {stderr}");
        assert!(!stderr.contains("panicked"), "{text}: {stderr}");
        assert!(!out.exists(), "{text}");
    }
}

/// `run | true` and `run 2>&1 | head -1`: the reader is gone before the gate has said
/// anything. The gate still runs to the end, archives the run and exits with the verdict's
/// code, never 101.
#[test]
fn closed_stdout_and_stderr_do_not_change_the_verdict_or_lose_the_run() {
    let (d, out) = scratch();
    let junit = d.path().join("junit.xml");
    let _claim = gate(); // a claim on the box while the gates run
    let mut args: Vec<std::ffi::OsString> = ["run", "--stand-in", "--replies", "2", "--out"]
        .map(Into::into)
        .into();
    args.push(out.clone().into());
    args.extend(UNFLIPPABLE.map(Into::into));
    args.extend(["--junit".into(), junit.clone().into()]);
    args.extend(["--", "--tokens", "6"].map(Into::into));
    assert_eq!(with_streams_closed(&args), Some(0));
    assert_eq!(json(&out.join("result.json"))["result"], "PASS");
    assert!(junit.exists(), "the JUnit report was not written");

    // A failing verdict keeps its exit code too.
    let (_d2, out2) = scratch();
    let mut args: Vec<std::ffi::OsString> = ["run", "--stand-in", "--replies", "1", "--out"]
        .map(Into::into)
        .into();
    args.push(out2.clone().into());
    args.extend(UNFLIPPABLE.map(Into::into));
    args.extend(["--", "--empty"].map(Into::into));
    assert_eq!(with_streams_closed(&args), Some(1));
    assert_eq!(json(&out2.join("result.json"))["result"], "FAIL");

    // Commands that only print: completions, judge, compare.
    for args in [
        vec!["completions".into(), "bash".into()],
        vec!["judge".into(), out.clone().into_os_string()],
        vec!["compare".into(), out.clone().into_os_string()],
    ] {
        assert_eq!(with_streams_closed(&args), Some(0), "{args:?}");
    }
}

/// Run the gate with `args`, its stdout and stderr pipes closed by the reader before it
/// writes anything (every write gets EPIPE); its exit code, within a bounded wait.
fn with_streams_closed(args: &[std::ffi::OsString]) -> Option<i32> {
    let mut child = std::process::Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    drop(child.stderr.take());
    wait_code(&mut child, Duration::from_secs(60))
}

/// Wait (bounded) for a child; its exit code.
fn wait_code(child: &mut std::process::Child, limit: Duration) -> Option<i32> {
    let start = std::time::Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code();
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("it did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Settings that contradict each other are refused, not silently merged. (issue 15, item 11)
#[test]
fn contradictory_settings_are_refused_with_one_line() {
    let (d, out) = scratch();
    let profile = d.path().join("serve.toml");
    std::fs::write(&profile, "serve = [\"./serve\", \"--port\", \"{port}\"]\n").unwrap();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec![
                "--stand-in".into(),
                "--url".into(),
                "http://127.0.0.1:9".into(),
            ],
            "--stand-in launches the built-in serve; --url names one already running",
        ),
        (
            vec![
                "--stand-in".into(),
                "--profile".into(),
                profile.display().to_string(),
            ],
            "the profile names a serve command and --stand-in asks for the built-in serve",
        ),
        (
            vec![
                "--stand-in".into(),
                "--fast-route".into(),
                "route: x".into(),
                "--slow-route".into(),
                "route: x".into(),
            ],
            "are the same pattern /route: x/",
        ),
        (
            vec!["--replies".into(), "-1".into()],
            "-1 replies is out of range (1 to 10000)",
        ),
        (
            vec!["--max-tokens".into(), "-5".into()],
            "max_tokens -5 is out of range",
        ),
        (
            vec!["--stand-in".into(), "--warmup".into(), "101".into()],
            "101 warm-up replies is out of range (0 to 100)",
        ),
        (
            vec!["--stand-in".into(), "--warmup".into(), "-1".into()],
            "-1 warm-up replies is out of range (0 to 100)",
        ),
        (
            vec!["--stand-in".into(), "--warmup".into(), "two".into()],
            "\"two\" is not a whole number",
        ),
        (
            vec!["--busy-skip".into(), "20".into(), "--stand-in".into()],
            "0.2 means 20%",
        ),
    ];
    for (extra, says) in &cases {
        refused_before_the_run(&out, extra, says);
    }
}

/// `run --out OUT <extra>` is exit 2 with `says` on stderr and creates nothing (the message
/// may be clap's, of several lines).
pub(crate) fn refused_before_the_run<S: AsRef<std::ffi::OsStr> + std::fmt::Debug>(
    out: &Path,
    extra: &[S],
    says: &str,
) {
    let o = gate()
        .args(["run", "--out"])
        .arg(out)
        .args(extra)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{extra:?}: {stderr}");
    assert!(stderr.contains(says), "{extra:?}: {stderr}");
    assert!(!out.exists(), "{extra:?}");
}

/// `--device-freq` and `--device-temp` are read every 250 ms during the replies: a file that
/// is not there, cannot be read or holds no number is refused before anything is held, started
/// or created, from the command line or a profile. (issue 20, item 3)
#[test]
fn the_devices_files_are_checked_before_anything_is_held_started_or_created() {
    let (d, out) = scratch();
    let missing = d.path().join("missing/cur_freq");
    let garbage = d.path().join("temp1_input");
    std::fs::write(&garbage, "N/A\n").unwrap();
    let empty = d.path().join("empty");
    std::fs::write(&empty, "").unwrap();
    let hold = d.path().join("npu.hold");
    // A FIFO with no writer: opening it to read would wait for ever.
    let fifo = d.path().join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let path = |p: &Path| p.display().to_string();
    let cases: Vec<(&str, String, &str)> = vec![
        ("--device-temp", path(&fifo), "does not read as a number"),
        ("--device-freq", path(&missing), "cannot be read"),
        ("--device-temp", path(&missing), "cannot be read"),
        ("--device-freq", path(d.path()), "cannot be read"),
        (
            "--device-temp",
            path(&garbage),
            "does not read as a number (\"N/A\")",
        ),
        ("--device-freq", path(&empty), "does not read as a number"),
    ];
    for (flag, file, says) in &cases {
        let extra = [*flag, file.as_str(), "--hold", hold.to_str().unwrap()];
        refused_before_anything(&out, &extra, &[], says);
        let stderr_names_it = format!("{flag} {file}");
        refused_before_anything(&out, &extra, &[], &stderr_names_it);
        assert!(!hold.exists(), "{flag} {file}: the hold was taken");
    }
    // From a profile too, the same refusal.
    let profile = d.path().join("gate.toml");
    std::fs::write(
        &profile,
        "stand_in = true\ndevice_temp = \"missing/temp1_input\"\n",
    )
    .unwrap();
    refused_before_the_run(
        &out,
        &["--profile", profile.to_str().unwrap()],
        "--device-temp",
    );
}

/// `--extra-body` asking for more than one choice a reply is refused before anything starts:
/// the gate judges choice 0 and fails content on any other a stream carries (issue 30).
#[test]
fn an_extra_body_asking_for_more_than_one_choice_is_refused() {
    let (_d, out) = scratch();
    for body in [r#"{"n": 2}"#, r#"{"n": "2"}"#, r#"{"n": 0}"#] {
        refused_before_anything(
            &out,
            &["--extra-body", body],
            &[],
            "asks for more than one choice a reply",
        );
    }
    // n = 1 is what the gate reads: allowed.
    let (code, stdout) = stand_in_run(
        &out,
        &["--replies", "1", "--extra-body", r#"{"n": 1}"#],
        &["--tokens", "3", "--gaps-ms", "50"],
    );
    assert_eq!(code, Some(0), "{stdout}");
}

/// A FIFO at `path`: opening it for real would wait for its other end (issue 30).
fn fifo(path: PathBuf) -> PathBuf {
    nix::unistd::mkfifo(&path, nix::sys::stat::Mode::S_IRWXU).unwrap();
    path
}

// Issue 30: opening a FIFO blocks until its other end opens, and the gate once hung on one
// given as any of these. Each is now refused from what it is, before it is opened: exit 2, one
// line, nothing held, started or created. (The gate's 120 s bound ends the old hang.)
#[test]
fn a_fifo_or_a_device_given_as_a_file_is_refused_without_blocking() {
    let (d, out) = scratch();
    let f = fifo(d.path().join("fifo"));
    let shown = f.display().to_string();
    let is_fifo = format!("{shown} is a FIFO, not a file: give a regular file path");
    for flag in ["--junit", "--prom", "--hold", "--prompts"] {
        refused_before_anything(&out, &[flag, &shown], &[], &format!("{flag}: {is_fifo}"));
    }
    refused_before_anything(
        &out,
        &[],
        &[("GITHUB_STEP_SUMMARY", &f)],
        &format!("GITHUB_STEP_SUMMARY: {is_fifo}"),
    );
    // The hold is a lock file: a device is no file to lock, /dev/null included.
    refused_before_anything(
        &out,
        &["--hold", "/dev/null"],
        &[],
        "--hold: /dev/null is a character device, not a file",
    );
    // A report may go to /dev/zero no more than to a FIFO; /dev/null takes it (below).
    refused_before_anything(
        &out,
        &["--junit", "/dev/zero"],
        &[],
        "--junit: /dev/zero is a character device (neither a terminal nor /dev/null)",
    );
}

#[test]
fn a_report_thrown_away_into_dev_null_is_taken_and_dev_null_stays_a_device() {
    use std::os::unix::fs::FileTypeExt;
    let (_d, out) = scratch();
    let (code, stdout) = stand_in_run(
        &out,
        &[
            "--replies",
            "1",
            "--junit",
            "/dev/null",
            "--prom",
            "/dev/null",
        ],
        &["--tokens", "4"],
    );
    assert_eq!(code, Some(0), "{stdout}");
    assert!(std::fs::metadata("/dev/null")
        .unwrap()
        .file_type()
        .is_char_device());
}

// Issue 30: `--prompts /dev/zero` read without end (a GiB of memory); a 1 GiB prompts file was
// read whole. Both are refused from what they are, quickly, with the heap capped so that a
// read would abort the gate rather than pass.
#[test]
fn prompts_from_dev_zero_or_a_sparse_2_gib_file_are_refused_within_a_heap_cap() {
    let (d, out) = scratch();
    let sparse = d.path().join("prompts.jsonl");
    std::fs::File::create(&sparse)
        .unwrap()
        .set_len(2 << 30)
        .unwrap();
    let too_large = format!(
        "--prompts: {} is 2147483648 bytes, more than the 16777216 the gate reads of it",
        sparse.display()
    );
    for (path, says) in [
        (
            Path::new("/dev/zero"),
            "--prompts: /dev/zero is a character device, not a file: give a regular file path",
        ),
        (sparse.as_path(), too_large.as_str()),
    ] {
        let (mut g, _claim) = gate_with_heap_cap();
        let o = g
            .args(["run", "--stand-in", "--out"])
            .arg(&out)
            .arg("--prompts")
            .arg(path)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{stderr}");
        assert_eq!(stderr.trim_end(), format!("npu-serve-smoke: {says}"));
        assert!(!out.exists());
    }
}

/// `--serve-log` naming a FIFO is refused from what it is, one line, exit 2, before anything:
/// opening it to check would block (issue 30).
#[test]
fn a_fifo_given_as_the_serve_log_is_refused_without_blocking() {
    let d = tempfile::tempdir().unwrap();
    let fifo = d.path().join("serve.log");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let o = gate()
        .args(["run", "--url", "http://127.0.0.1:9", "--serve-log"])
        .arg(&fifo)
        .arg("--out")
        .arg(d.path().join("run"))
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{said}");
    assert_eq!(said.lines().count(), 1, "{said}");
    assert!(said.contains("--serve-log"), "{said}");
    assert!(said.contains("is a FIFO"), "{said}");
    assert!(!d.path().join("run").exists());
}

/// A serve command that is never told the gate's port would be waited on until the ready
/// timeout and called "not ready": it is refused before anything starts, with one line, unless
/// `--url` names the port the serve picks itself (issue 30, item 6).
#[test]
fn a_serve_command_without_the_port_is_refused_unless_url_names_it() {
    let (d, out) = scratch();
    let marker = format!("3600.{}", std::process::id());
    let o = gate()
        .args(["run", "--out"])
        .arg(&out)
        .args(["--", "sleep", &marker])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("the serve command has no {port}")
            && stderr.contains("--url http://127.0.0.1:PORT"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(!out.exists(), "the refused run created {}", out.display());
    assert!(!process_with(&marker), "the refused serve was started");
    // Named by --url, the same command is launched (and, listening nowhere, is not ready).
    let free = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{free}");
    let o = gate()
        .args(["run", "--ready-timeout", "1", "--url", &url, "--out"])
        .arg(d.path().join("named"))
        .args(["--", "sleep", "5"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{stdout}");
    assert!(line(&stdout, "serve").contains("not ready"), "{stdout}");
}

/// `--first-token-of` names one of two first tokens (issue 37, item 5); anything else is exit
/// 2 with one line saying both, from `run` (before anything is created) and `judge` alike.
#[test]
fn a_first_token_of_neither_any_nor_content_is_refused_in_one_line() {
    let (_d, out) = scratch();
    let says = "invalid value 'other' for '--first-token-of <CHANNEL>': \"other\" is not a first token: give any (the first token of any channel, reasoning included) or content (the first content token)";
    refused_before_the_run(&out, &["--stand-in", "--first-token-of", "other"], says);
    for args in [
        vec!["run", "--stand-in", "--first-token-of", "other"],
        vec!["judge", "no-such-dir", "--first-token-of", "other"],
    ] {
        let o = gate().args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {stderr}");
        let errors: Vec<&str> = stderr.lines().filter(|l| l.contains("error")).collect();
        assert_eq!(errors.len(), 1, "{args:?}: one line: {stderr}");
        assert!(errors[0].contains(says), "{args:?}: {stderr}");
    }
}
