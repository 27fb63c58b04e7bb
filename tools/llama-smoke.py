#!/usr/bin/env python3
"""Prove a freshly built llama-server serves: start it on loopback with the given model, wait
for GET /health, ask for one real streamed chat completion, and stop it.

`--version` runs no kernel: a build whose CPU kernels use an instruction this box does not run
(AMX's `tilezero` under a virtual machine that does not pass AMX through) prints its version
and then dies of SIGILL on its first token. Only a real completion shows that it serves.

    llama-smoke.py SERVER MODEL

Exit 0 and one line on stderr when the server streamed text; exit 1 with a line saying what
happened (how the server ended, the last lines of its log) when it did not. Talks only to
127.0.0.1; every wait is bounded.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import http.client

READY_TIMEOUT_S = 180.0
REPLY_TIMEOUT_S = 180.0
LOG_TAIL_LINES = 15


def say(text):
    print(f"install-llama-server: {text}", file=sys.stderr, flush=True)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def how_it_ended(code):
    """The server's end in words: its signal by name (SIGILL: an instruction this CPU does not
    run), or its exit code."""
    if code is None:
        return "still running"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = ""
        if -code == signal.SIGILL:
            hint = " (an instruction this CPU does not run: the build is not portable)"
        return f"died of {name}{hint}"
    return f"exited with code {code}"


def log_tail(path):
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 64 * 1024))
            text = f.read().decode("utf-8", "replace")
    except OSError as e:
        return f"(its log could not be read: {e})"
    lines = [ln for ln in text.splitlines() if ln.strip()][-LOG_TAIL_LINES:]
    return "\n".join("    " + ln for ln in lines) or "    (its log is empty)"


def get_status(port, path):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", path)
        return conn.getresponse().status
    finally:
        conn.close()


def stream_completion(port, server):
    """One streamed chat completion; the text it carried. Raises on a broken stream."""
    body = json.dumps(
        {
            "messages": [{"role": "user", "content": "What is the capital of France?"}],
            "max_tokens": 16,
            "temperature": 0,
            "stream": True,
        }
    )
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=REPLY_TIMEOUT_S)
    deadline = time.monotonic() + REPLY_TIMEOUT_S
    text = []
    try:
        conn.request(
            "POST",
            "/v1/chat/completions",
            body=body,
            headers={"Content-Type": "application/json"},
        )
        resp = conn.getresponse()
        if resp.status != 200:
            raise RuntimeError(f"the chat completion was answered with HTTP {resp.status}")
        while time.monotonic() < deadline:
            line = resp.readline(1 << 20)
            if not line:
                break
            line = line.strip()
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                return "".join(text)
            chunk = json.loads(data)
            for choice in chunk.get("choices", []):
                piece = (choice.get("delta") or {}).get("content")
                if piece:
                    text.append(piece)
        if server.poll() is not None:
            raise RuntimeError(f"the server {how_it_ended(server.returncode)} mid-reply")
        raise RuntimeError("the stream ended without [DONE]")
    finally:
        conn.close()


def main():
    if len(sys.argv) != 3:
        print("usage: llama-smoke.py SERVER MODEL", file=sys.stderr)
        return 2
    server_path, model = sys.argv[1:]
    port = free_port()
    log = tempfile.NamedTemporaryFile(prefix="llama-smoke.", suffix=".log", delete=False)
    argv = [server_path, "-m", model, "--host", "127.0.0.1", "--port", str(port),
            "-t", "1", "-c", "512", "-np", "1"]
    server = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            if server.poll() is not None:
                raise RuntimeError(f"the server {how_it_ended(server.returncode)} before it was ready")
            try:
                if get_status(port, "/health") == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the server was not ready within {READY_TIMEOUT_S:.0f} s")
            time.sleep(0.2)
        try:
            text = stream_completion(port, server)
        except (OSError, ValueError, http.client.HTTPException) as e:
            # A connection reset or a cut chunk is most often the server dying mid-reply:
            # wait a moment for it to be reaped, so the line names the signal.
            try:
                server.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            ended = "" if server.poll() is None else f"; the server {how_it_ended(server.returncode)}"
            raise RuntimeError(f"the streamed chat completion broke ({e}){ended}")
        if not text.strip():
            raise RuntimeError("the streamed chat completion carried no text")
        if server.poll() is not None:
            raise RuntimeError(f"the server {how_it_ended(server.returncode)} after its reply")
        say(f"smoke completion ok: {text.strip()[:60]!r}")
        os.unlink(log.name)
        return 0
    except RuntimeError as e:
        say(f"the built llama-server does not serve: {e}; the last lines of its log ({log.name}):")
        print(log_tail(log.name), file=sys.stderr, flush=True)
        return 1
    finally:
        if server.poll() is None:
            server.terminate()
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()


if __name__ == "__main__":
    sys.exit(main())
