//! A serve log of any size is read as a stream: bounded memory, its route lines found, its
//! last lines quoted, and a signal while it is read is the run's interruption. (issue 14,
//! items 3 and 6)

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::util::*;

/// A serve script: runs `log` (shell) with its output going to the log, then `then`.
fn serve_script(dir: &Path, log: &str, then: &str) -> PathBuf {
    let path = dir.join("serve.sh");
    std::fs::write(&path, format!("#!/bin/sh\n{{\n{log}\n}} >&2\n{then}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// 256 MiB with no newline in it.
const ONE_HUGE_LINE: &str = "head -c 268435456 /dev/zero | tr '\\0' 'x'";

#[test]
fn a_huge_log_is_matched_as_a_stream_in_bounded_memory() {
    let (d, out) = scratch();
    let serve = serve_script(
        d.path(),
        &format!("{ONE_HUGE_LINE}\necho\necho 'load_tensors: NPU buffer'"),
        &format!("exec {BIN} stand-in \"$@\""),
    );
    let o = gate()
        .args(["run", "--replies", "1", "--out"])
        .arg(&out)
        .args(UNFLIPPABLE)
        .args([
            "--fast-route",
            "^load_tensors: NPU",
            "--slow-route",
            "CPU_Mapped",
        ])
        .arg("--")
        .arg(&serve)
        .args(["--port", "{port}", "--tokens", "3"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        line(&stdout, "route")
            .contains("ok    the serve log names the fast route, not the slow one"),
        "{stdout}"
    );
    // The flood's middle is dropped, marked, and counted; its head and its tail are kept.
    let log_bytes = std::fs::metadata(out.join("serve.log")).unwrap().len();
    assert!(
        log_bytes <= (64 << 20) + 4096,
        "serve.log holds {log_bytes} bytes"
    );
    let manifest = json(&out.join("run.json"));
    let kept = &manifest["serve_log_kept"];
    assert!(kept["bytes"].as_u64().unwrap() > 256 << 20, "{kept}");
    assert!(
        kept["dropped"].as_u64().unwrap() >= (256 << 20) - (64 << 20),
        "{kept}"
    );
    let marker = format!(
        "[npu-serve-smoke: {} bytes of the serve's output were dropped here",
        kept["dropped"]
    );
    let log = std::fs::read(out.join("serve.log")).unwrap();
    assert!(
        log.windows(marker.len()).any(|w| w == marker.as_bytes()),
        "no marker {marker:?} in serve.log"
    );
    let rss_kib = manifest["gate_max_rss_kib"].as_u64().unwrap();
    assert!(rss_kib < 64 * 1024, "the gate's peak RSS was {rss_kib} KiB");
    // judge reads the archive's log the same way.
    let o = gate()
        .args(["judge", "--slow-route", "NPU buffer"])
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{stdout}");
    assert!(
        line(&stdout, "route")
            .contains("names the slow route /NPU buffer/: \"load_tensors: NPU buffer\""),
        "{stdout}"
    );
}

#[test]
fn a_serve_that_exits_after_a_huge_log_is_quoted_by_its_last_lines() {
    let (d, out) = scratch();
    let serve = serve_script(
        d.path(),
        &format!("{ONE_HUGE_LINE}\necho\necho 'error: no NPU found'"),
        "exit 3",
    );
    let o = gate()
        .args(["run", "--out"])
        .arg(&out)
        .arg("--")
        .arg(&serve)
        .arg("{port}")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{stdout}");
    let serve_line = line(&stdout, "serve");
    assert!(
        serve_line.contains("exited (exit status: 3) before it was ready; last log lines: \"xxxx")
            && serve_line.ends_with("\"error: no NPU found\""),
        "{serve_line}"
    );
    assert!(serve_line.len() < 2_000, "{} bytes", serve_line.len());
}

/// SIGTERM while the gate reads a large log after the stop: the run is INTERRUPTED at once,
/// not judged to the end of the log first.
#[test]
fn a_signal_while_the_log_is_read_interrupts_the_run() {
    let (d, out) = scratch();
    // Many short lines, each matched on its own: reading them takes the gate a while.
    let serve = serve_script(
        d.path(),
        "yes 'llama_kv_cache: a line of a verbose log' | head -c 402653184",
        &format!("exec {BIN} stand-in \"$@\""),
    );
    let mut args: Vec<String> = ["run", "--replies", "1", "--fast-route", "x$", "--out"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.push(out.display().to_string());
    args.extend(UNFLIPPABLE.iter().map(|s| s.to_string()));
    args.push("--".into());
    args.push(serve.display().to_string());
    args.extend(["--port", "{port}", "--tokens", "3"].map(String::from));
    let mut g = Running::start(&args);
    g.wait_to_say("reading the serve log (", Duration::from_secs(120));
    let signalled = Instant::now();
    g.signal(Signal::SIGTERM);
    assert_eq!(g.wait(Duration::from_secs(60)), Some(143), "{}", g.said);
    // Wide margin: it should take milliseconds; reading the log whole takes far longer.
    assert!(
        signalled.elapsed() < Duration::from_secs(10),
        "the signal waited for the log: {:?}",
        signalled.elapsed()
    );
    let result = json(&out.join("result.json"));
    assert_eq!(result["result"], "INTERRUPTED", "{result}");
    let route = result["lines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["check"] == "route")
        .unwrap();
    assert_eq!(route["status"], "info", "{route}");
    assert!(
        route["text"]
            .as_str()
            .unwrap()
            .contains("interrupted before the serve log was read"),
        "{route}"
    );
    assert_eq!(json(&out.join("run.json"))["interrupted"], "SIGTERM");
}

/// The serve's output is a pipe the gate copies: the serve cannot name the run directory from
/// its own descriptors, and what is put at serve.log's name meanwhile (a FIFO here) is neither
/// waited on nor read: the log is judged from the descriptor the gate wrote it through.
#[test]
fn the_serve_writes_into_a_pipe_and_its_log_is_read_from_the_gates_own_descriptor() {
    let (d, out) = scratch();
    let fds = d.path().join("fds");
    let serve = serve_script(
        d.path(),
        &format!(
            "echo 'load_tensors: NPU buffer'\nreadlink /proc/self/fd/2 > '{}'",
            fds.display()
        ),
        &format!(
            "rm -f \"$GATE_OUT/serve.log\" && mkfifo \"$GATE_OUT/serve.log\"\nexec {BIN} stand-in \"$@\""
        ),
    );
    let o = gate()
        .env("GATE_OUT", &out)
        .args(["run", "--replies", "1", "--out"])
        .arg(&out)
        .args(UNFLIPPABLE)
        .args([
            "--fast-route",
            "^load_tensors: NPU",
            "--slow-route",
            "CPU_Mapped",
        ])
        .arg("--")
        .arg(&serve)
        .args(["--port", "{port}", "--tokens", "3"])
        .timeout(LONG)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        line(&stdout, "route")
            .contains("ok    the serve log names the fast route, not the slow one"),
        "{stdout}"
    );
    let named = std::fs::read_to_string(&fds).unwrap();
    assert!(
        named.starts_with("pipe:["),
        "the serve's stderr was {named:?}"
    );
    assert!(
        std::fs::symlink_metadata(out.join("serve.log"))
            .unwrap()
            .file_type()
            .is_fifo(),
        "the FIFO the serve made is still there, unread"
    );
    let manifest = json(&out.join("run.json"));
    assert_eq!(manifest["serve_log_kept"]["dropped"], 0, "{manifest}");
    assert!(manifest["serve_log_kept"]["bytes"].as_u64().unwrap() > 0);
}
