#!/usr/bin/env python3
"""A serve whose logprobs are hostile (issue 31): `logprobs_serve.py PORT MODE`.

Every chat request is answered with a stream of 8 one-letter tokens, each chunk carrying
choice 0's `logprobs` as MODE says:
- wide: 10,000 alternatives a token (about 300 KB a chunk);
- long: a token text of 1 MB, and 20 alternatives of 64 KB each;
- many: 5,000 token records in one chunk (more than the reply's events allow);
- broken: a token record whose logprob is a string, in the third chunk.
Stdlib only.
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

MODE = sys.argv[2]
TOKENS = 8


def logprobs(i, token):
    if MODE == "wide":
        top = [{"token": f"t{j}", "logprob": -j / 10} for j in range(10_000)]
        return {"content": [{"token": token, "logprob": -0.1, "top_logprobs": top}]}
    if MODE == "long":
        top = [{"token": "y" * 65536, "logprob": -1.0 - j} for j in range(20)]
        return {"content": [{"token": "x" * (1 << 20), "logprob": -0.1, "top_logprobs": top}]}
    if MODE == "many":
        records = [{"token": token, "logprob": -0.1, "top_logprobs": []}] * 5_000
        return {"content": records}
    if MODE == "broken" and i == 2:
        return {"content": [{"token": token, "logprob": "-0.1"}]}
    return {"content": [{"token": token, "logprob": -0.1, "top_logprobs": []}]}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def send(self, status, ctype, body):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path.startswith("/v1/models"):
            self.send(200, "application/json", b'{"data":[{"id":"hostile-logprobs"}]}')
        else:
            self.send(200, "application/json", b"{}")

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        for i in range(TOKENS):
            token = "abcdefgh"[i]
            chunk = {
                "choices": [
                    {
                        "index": 0,
                        "delta": {"content": token},
                        "logprobs": logprobs(i, token),
                        "finish_reason": "stop" if i == TOKENS - 1 else None,
                    }
                ]
            }
            self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        usage = {"choices": [], "usage": {"completion_tokens": TOKENS}}
        self.wfile.write(b"data: " + json.dumps(usage).encode() + b"\n\ndata: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True


HTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
