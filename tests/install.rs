//! The installs' own proof (issue 29, item 1; issue 51): `tools/serve-smoke.py`, which
//! `tools/install-llama-server.sh` and `tools/install-vllm.sh` run before they mark a serve
//! served, against look-alike servers run as real child processes on loopback: one that
//! streams a reply passes; one that is ready and then dies of SIGILL on its first completion (a
//! build for an instruction the box does not run), one that never comes up and one never ready
//! in time fail, each with a line saying how it ended and the last lines of its log; a serve
//! that forks a worker (as vLLM's engine does) leaves no process behind. The real installs are
//! proved by `.ci/run` on a clean clone.

use std::path::Path;
use std::process::{Command, Output};

const REPO: &str = env!("CARGO_MANIFEST_DIR");

/// A llama-server look-alike in Python: `/health` answers 200, and a chat completion does
/// what `on_post` says (Python statements in `do_POST`).
fn look_alike(dir: &Path, on_post: &str) -> std::path::PathBuf {
    let path = dir.join("llama-server");
    let script = format!(
        r#"#!/usr/bin/env python3
import http.server, os, signal, sys
port = int(sys.argv[sys.argv.index("--port") + 1])
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"{{}}")
    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
{on_post}
    def log_message(self, *a): pass
print("main: server is listening on 127.0.0.1", flush=True)
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
"#
    );
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    path
}

/// The smoke against `server`: its exit code and what it said.
fn smoke(server: &Path) -> (Option<i32>, String) {
    smoke_within(server, "60")
}

/// The smoke against `server`, waiting at most `ready_s` for it to be ready.
fn smoke_within(server: &Path, ready_s: &str) -> (Option<i32>, String) {
    let o: Output = Command::new("python3")
        .arg(Path::new(REPO).join("tools/serve-smoke.py"))
        .args(["install-test", ready_s, "--"])
        .arg(server)
        .args([
            "-m",
            "model.gguf",
            "--host",
            "127.0.0.1",
            "--port",
            "{port}",
        ])
        .output()
        .unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn a_server_that_streams_text_passes_the_smoke() {
    let d = tempfile::tempdir().unwrap();
    let server = look_alike(
        d.path(),
        r#"        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for piece in ["Paris", " is", " the capital."]:
            self.wfile.write(b'data: {"choices":[{"index":0,"delta":{"content":"%s"}}]}\n\n' % piece.encode())
        self.wfile.write(b"data: [DONE]\n\n")"#,
    );
    let (code, said) = smoke(&server);
    assert_eq!(code, Some(0), "{said}");
    assert!(
        said.contains("smoke completion ok: 'Paris is the capital.'"),
        "{said}"
    );
}

#[test]
fn a_server_that_dies_of_sigill_on_its_first_token_fails_the_smoke_naming_the_signal() {
    let d = tempfile::tempdir().unwrap();
    let server = look_alike(
        d.path(),
        r#"        print("traps: llama-server trap invalid opcode in libggml-cpu.so", flush=True)
        os.kill(os.getpid(), signal.SIGILL)"#,
    );
    let (code, said) = smoke(&server);
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("does not serve"), "{said}");
    assert!(said.contains("died of SIGILL"), "{said}");
    assert!(said.contains("not portable"), "{said}");
    // The last lines of its log, as it wrote them.
    assert!(
        said.contains("    traps: llama-server trap invalid opcode"),
        "{said}"
    );
}

#[test]
fn a_server_that_answers_nothing_fails_the_smoke() {
    let d = tempfile::tempdir().unwrap();
    let server = look_alike(
        d.path(),
        r#"        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        self.wfile.write(b"data: [DONE]\n\n")"#,
    );
    let (code, said) = smoke(&server);
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("carried no text"), "{said}");
}

#[test]
fn a_server_that_exits_before_it_is_ready_fails_the_smoke_with_its_code() {
    let d = tempfile::tempdir().unwrap();
    let server = d.path().join("llama-server");
    std::fs::write(
        &server,
        "#!/bin/sh\necho 'error: unknown model format' >&2\nexit 3\n",
    )
    .unwrap();
    std::fs::set_permissions(&server, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let (code, said) = smoke(&server);
    assert_eq!(code, Some(1), "{said}");
    assert!(
        said.contains("exited with code 3 before it was ready"),
        "{said}"
    );
    assert!(said.contains("    error: unknown model format"), "{said}");
}

#[test]
fn a_server_never_ready_in_time_fails_the_smoke_and_is_stopped() {
    let d = tempfile::tempdir().unwrap();
    let server = d.path().join("llama-server");
    std::fs::write(
        &server,
        "#!/bin/sh\necho 'Warming up model for the compilation...'\nexec sleep 600\n",
    )
    .unwrap();
    std::fs::set_permissions(&server, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let (code, said) = smoke_within(&server, "2");
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("was not ready within 2 s"), "{said}");
    assert!(
        said.contains("    Warming up model for the compilation..."),
        "{said}"
    );
}

#[test]
fn a_server_that_forks_a_worker_leaves_no_process_behind() {
    // vLLM's frontend forks its engine, which forks its worker: the smoke ends the whole group.
    let d = tempfile::tempdir().unwrap();
    let pid_file = d.path().join("worker.pid");
    let server = look_alike(
        d.path(),
        r#"        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        self.wfile.write(b'data: {"choices":[{"index":0,"delta":{"content":"Paris"}}]}\n\n')
        self.wfile.write(b"data: [DONE]\n\n")"#,
    );
    // A wrapper that starts a worker that ignores SIGTERM, then becomes the server.
    let wrapper = d.path().join("serve");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nsh -c 'trap \"\" TERM; echo $$ > {pid}; while :; do sleep 1; done' &\nexec {server} \"$@\"\n",
            pid = pid_file.display(),
            server = server.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let (code, said) = smoke(&wrapper);
    assert_eq!(code, Some(0), "{said}");
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    let proc = Path::new("/proc").join(pid.trim());
    // The worker was sent SIGKILL with the group before the smoke exited; a zombie not yet
    // reaped by init is gone as a process all the same. One wide bound for the kernel to act.
    let alive = || {
        std::fs::read_to_string(proc.join("stat"))
            .map(|s| !s.contains(") Z "))
            .unwrap_or(false)
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while alive() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(
        !alive(),
        "the worker {} outlived the smoke: {said}",
        pid.trim()
    );
}
