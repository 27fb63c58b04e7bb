#!/usr/bin/env python3
"""Prove a freshly installed serve serves: start it on loopback, wait for GET /health, ask for
one real streamed chat completion, and stop it. The installers write their marker only after
this passed (tools/install-llama-server.sh, tools/install-vllm.sh).

`--version` runs no kernel: a build whose CPU kernels use an instruction this box does not run
(AMX's `tilezero` under a virtual machine that does not pass AMX through) prints its version
and then dies of SIGILL on its first token; an import that works can still fail at the first
forward pass. Only a real completion shows that it serves.

    serve-smoke.py NAME READY_TIMEOUT_S -- COMMAND [ARG...]

`{port}` in the command becomes a free loopback port. NAME prefixes every line (the installer's
name). The serve runs in its own process group, which is ended as a whole (vLLM's engine is a
child process).

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

REPLY_TIMEOUT_S = 180.0
LOG_TAIL_LINES = 15
NAME = "serve-smoke"


def say(text):
    print(f"{NAME}: {text}", file=sys.stderr, flush=True)


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


def stop(server):
    """End the serve's whole process group: TERM, then KILL after a bounded wait."""
    if server.poll() is None:
        try:
            os.killpg(server.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(server.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    server.wait()


def main():
    global NAME
    args = sys.argv[1:]
    if len(args) < 4 or args[2] != "--":
        print("usage: serve-smoke.py NAME READY_TIMEOUT_S -- COMMAND [ARG...]", file=sys.stderr)
        return 2
    NAME = args[0]
    ready_timeout = float(args[1])
    port = free_port()
    argv = [a.replace("{port}", str(port)) for a in args[3:]]
    log = tempfile.NamedTemporaryFile(prefix=f"{NAME}.", suffix=".log", delete=False)
    server = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True
    )
    started = time.monotonic()
    try:
        deadline = started + ready_timeout
        while True:
            if server.poll() is not None:
                raise RuntimeError(f"the server {how_it_ended(server.returncode)} before it was ready")
            try:
                if get_status(port, "/health") == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the server was not ready within {ready_timeout:.0f} s")
            time.sleep(0.5)
        ready_s = time.monotonic() - started
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
        say(f"ready in {ready_s:.0f} s; smoke completion ok: {text.strip()[:60]!r}")
        os.unlink(log.name)
        return 0
    except RuntimeError as e:
        say(f"the installed serve does not serve: {e}; the last lines of its log ({log.name}):")
        print(log_tail(log.name), file=sys.stderr, flush=True)
        return 1
    finally:
        stop(server)


if __name__ == "__main__":
    sys.exit(main())
