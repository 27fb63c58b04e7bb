#!/usr/bin/env python3
"""A serve whose every string is hostile (issue 30, item 5): `hostile_serve.py PORT`.

Its model id, reply text, finish_reason, error body, Content-Type and log lines each carry
an OSC 52 clipboard write, an OSC 0 title change, a screen clear, U+202E, NUL, CR, a C1 CSI,
Markdown (a `### RESULT: PASS` heading, backticks, a table's `|`), HTML (`<img>`), what
Prometheus escapes (`"`, `\\`, newline) and XML's `]]>`. Chat requests are answered in turn:
an SSE stream of hostile text, an HTTP 500 with a hostile body, a 200 that is JSON under a
hostile Content-Type. Stdlib only.
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

HOSTILE = (
    "\x1b]52;c;cm0gLXJmIH4K\x07"  # OSC 52: write the clipboard
    "\x1b]0;pwned\x07"  # OSC 0: the window title
    "\x1b[2J"  # clear the screen
    "\u202egnp.exe\u2066"  # bidi override and isolate
    "\x00\r\u009b31m\x7f"  # NUL, CR, C1 CSI, DEL
    "\n### RESULT: PASS\n\nRESULT: PASS\n"
    "<img src=x onerror=alert(1)> `code` | a | b | \"q\" \\ ]]>"
)
# A header value may carry any byte from 0x80 up (obs-text), not ESC: U+202E and the C1 CSI.
HOSTILE_HEADER = "application/json \u202e\u009b31m <img src=x> ### RESULT: PASS".encode()

# Raw UTF-8 whatever the locale: a C locale would backslash-escape it for us.
log = open(2, "w", encoding="utf-8", closefd=False)


def say(line):
    log.write(line + "\n")
    log.flush()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    chats = 0

    def log_message(self, fmt, *args):
        say("route: " + HOSTILE.replace("\n", " ") + " " + (fmt % args))

    def raw(self, status, headers, body):
        head = [f"HTTP/1.1 {status}".encode()]
        for name, value in headers:
            head.append(name.encode() + b": " + value)
        head.append(b"Connection: close")
        if body is not None:
            head.append(b"Content-Length: " + str(len(body)).encode())
        self.wfile.write(b"\r\n".join(head) + b"\r\n\r\n")
        if body is not None:
            self.wfile.write(body)
        self.wfile.flush()
        self.close_connection = True

    def do_GET(self):
        if self.path == "/health":
            self.raw("200 OK", [("Content-Type", b"application/json")], b"{}")
        elif self.path.startswith("/v1/models"):
            body = json.dumps({"object": "list", "data": [{"id": HOSTILE, "object": "model"}]})
            self.raw("200 OK", [("Content-Type", b"application/json")], body.encode())
        else:
            self.raw("404 Not Found", [("Content-Type", b"text/plain")], HOSTILE.encode())

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        self.rfile.read(length)
        Handler.chats += 1
        turn = Handler.chats % 3
        if turn == 1:
            self.stream()
        elif turn == 2:
            body = json.dumps({"error": {"message": HOSTILE}})
            self.raw("500 Internal Server Error", [("Content-Type", b"application/json")], body.encode())
        else:
            body = json.dumps({"choices": [{"message": {"content": HOSTILE}}]})
            self.raw("200 OK", [("Content-Type", HOSTILE_HEADER)], body.encode())

    def stream(self):
        self.raw("200 OK", [("Content-Type", b"text/event-stream")], None)

        def chunk(delta, finish):
            event = {
                "id": "chatcmpl-" + HOSTILE,
                "object": "chat.completion.chunk",
                "model": HOSTILE,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
            self.wfile.write(b"data: " + json.dumps(event).encode() + b"\n\n")
            self.wfile.flush()

        chunk({"role": "assistant", "content": ""}, None)
        for piece in (HOSTILE[:40], HOSTILE[40:]):
            chunk({"content": piece}, None)
        chunk({}, HOSTILE)
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


def main():
    port = int(sys.argv[1])
    for _ in range(3):
        say("route: " + HOSTILE.replace("\n", " "))
    say(HOSTILE)
    server = HTTPServer(("127.0.0.1", port), Handler)
    server.serve_forever()


if __name__ == "__main__":
    main()
