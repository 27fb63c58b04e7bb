#!/usr/bin/env python3
"""Benchmark the gate's accuracy and its own cost, against targets (docs/performance.md).

Runs over the release binary (built first unless --no-build), on loopback only, about a
minute on 2 cores:

 (a) accuracy: the gate against the stand-in at --ttft-ms 250 --gaps-ms 40,10;
     |reported - sent| for first-token and each gap, from the stand-in's send trace;
 (b) cost at a high rate: one stream of 20,000 tokens at 0.05 ms gaps: the gate's own CPU
     (user + sys of the whole process, start to exit, as the kernel counts it for its parent,
     the same way as curl's) per 1,000 tokens, its peak RSS, its rate error against the trace;
 (c) the floor: curl -N streaming the same request, its CPU per 1,000 tokens, so the gate's
     cost is a ratio to curl's measured in the same run;
 (d) overhead around the serve: gate wall time minus the serve's time to ready and the
     replies' time;
 (e) route evidence: the same 20,000-token stream from a stand-in the gate launches, with
     --route-lib, --route-device and --device-busy fdinfo:pos (the tree walked, open files read
     on every 250 ms sample, maps when the tree changes), against the stand-in attached with
     --url (no tree to walk): the gate's own CPU (run.json gate_cpu_s, so the launched serve's
     CPU is not counted) per 1,000 tokens each way, and the ratio of the first to curl's.

Per-token costs subtract a 10-token run of the same client, so start-up is not counted as
streaming. Each cost figure is the median of --trials runs. Exit 1 when a target is missed.
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "target", "release", "npu-serve-smoke")
UNFLIPPABLE = ["--floor", "0", "--first-token-ms", "600000"]
BIG, SMALL = 20000, 10

TARGETS = {
    "first_token_error_ms_median": 1.0,
    "gap_error_ms_median": 1.0,
    "cpu_ratio_to_curl": 1.5,
    "peak_rss_mib": 20.0,
    "rate_error_pct": 1.0,
    "overhead_ms": 100.0,
    "route_on_cpu_ratio_to_curl": 1.5,
}


def load_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def children_cpu():
    u = resource.getrusage(resource.RUSAGE_CHILDREN)
    return u.ru_utime + u.ru_stime


def run_gate(args, tmp, name):
    """(run.json, replies, wall seconds, CPU seconds of the whole gate process)."""
    out = os.path.join(tmp, name)
    cpu_before = children_cpu()
    start = time.monotonic()
    # PASS or FAIL are both a run made; the verdict is not what is measured here (a 10-token
    # reply at 0.05 ms gaps arrives in one read and has no rate).
    done = subprocess.run([BIN, "run", "--out", out] + args,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if done.returncode not in (0, 1):
        raise RuntimeError(f"the gate exited {done.returncode}: {' '.join(args)}")
    wall = time.monotonic() - start
    cpu = children_cpu() - cpu_before
    with open(os.path.join(out, "run.json")) as f:
        manifest = json.load(f)
    return manifest, load_jsonl(os.path.join(out, "replies.jsonl")), wall, cpu


def settled_trace(path, requests):
    """The trace once it ends all of its first `requests` requests. The stand-in writes an
    event's line after the write returns, so on a busy box the last lines of a reply can land
    after its client has exited."""
    deadline = time.monotonic() + 10
    while True:
        with open(path) as f:
            complete = f.read().split("\n")[:-1]  # a line being written has no newline yet
        lines = [json.loads(line) for line in complete if line.strip()]
        if sum(1 for t in lines if t["kind"] == "event" and t["done"]) >= requests:
            return lines
        if time.monotonic() > deadline:
            raise RuntimeError(f"the stand-in's trace did not end {requests} requests in 10 s")
        time.sleep(0.01)


def trace_events(trace):
    """[(request received_ns, [(sent_ns, has_text, usage), ...])] per request."""
    requests = []
    for t in trace:
        if t["kind"] == "request":
            requests.append((t["received_ns"], []))
        elif not t["done"]:
            requests[-1][1].append((t["sent_ns"], t["content_chars"] + t["reasoning_chars"] > 0))
    return requests


def accuracy(tmp):
    trace = os.path.join(tmp, "accuracy.trace.jsonl")
    manifest, replies, _, _ = run_gate(
        ["--stand-in", "--replies", "5", *UNFLIPPABLE, "--",
         "--ttft-ms", "250", "--gaps-ms", "40,10", "--tokens", "20", "--trace", trace],
        tmp, "accuracy")
    first_errors, gap_errors = [], []
    for reply, (received, events) in zip(replies, trace_events(load_jsonl(trace))):
        sent = [s for s, text in events if text]
        arrived = [c["at_ns"] for c in reply["chunks"] if c["content_chars"] + c["reasoning_chars"] > 0]
        assert len(sent) == len(arrived), "the gate and the trace disagree on the events"
        reported_first = (arrived[0] - reply["sent_ns"]) / 1e6
        first_errors.append(abs(reported_first - (sent[0] - received) / 1e6))
        for i in range(1, len(sent)):
            gap_errors.append(abs((arrived[i] - arrived[i - 1]) - (sent[i] - sent[i - 1])) / 1e6)
    return {
        "first_token_error_ms_median": statistics.median(first_errors),
        "first_token_error_ms_max": max(first_errors),
        "gap_error_ms_median": statistics.median(gap_errors),
        "gap_error_ms_max": max(gap_errors),
        "gaps": len(gap_errors),
    }


def start_stand_in(tmp, trace):
    proc = subprocess.Popen([BIN, "stand-in", "--port", "0", "--tokens", str(BIG),
                             "--gaps-ms", "0.05", "--trace", trace],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for line in proc.stderr:
        if line.startswith("stand-in: listening on "):
            return proc, line.split()[-1]
    raise RuntimeError("the stand-in did not start")


def curl_cpu(url, max_tokens):
    body = json.dumps({"model": "stand-in", "messages": [{"role": "user", "content": "hi"}],
                       "stream": True, "stream_options": {"include_usage": True},
                       "temperature": 0, "max_tokens": max_tokens})
    before = children_cpu()
    subprocess.run(["curl", "-sN", url + "/v1/chat/completions", "-H",
                    "content-type: application/json", "-d", body],
                   check=True, stdout=subprocess.DEVNULL)
    return children_cpu() - before


def cost(tmp, trials):
    trace = os.path.join(tmp, "cost.trace.jsonl")
    stand_in, url = start_stand_in(tmp, trace)
    try:
        gate_big, gate_small, curl_big, curl_small, rss, rate_errors = [], [], [], [], [], []
        for i in range(trials):
            attach = ["--url", url, "--replies", "1", *UNFLIPPABLE]
            open(trace, "w").close()
            m, replies, _, cpu = run_gate(attach + ["--max-tokens", str(BIG)], tmp, f"big-{i}")
            gate_big.append(cpu)
            rss.append(m["gate_max_rss_kib"] / 1024)
            (_, events), = trace_events(settled_trace(trace, 1))
            sent = [s for s, text in events if text]
            reference = (len(sent) - 1) / ((sent[-1] - sent[0]) / 1e9)
            reported = replies[0]["metrics"]["rate_tok_s"]
            rate_errors.append(abs(reported - reference) / reference * 100)
            _, _, _, cpu = run_gate(attach + ["--max-tokens", str(SMALL)], tmp, f"small-{i}")
            gate_small.append(cpu)
            curl_big.append(curl_cpu(url, BIG))
            curl_small.append(curl_cpu(url, SMALL))
            settled_trace(trace, 4)  # before the next trial empties it
    finally:
        stand_in.terminate()
        stand_in.wait()
    per_k = lambda big, small: (statistics.median(big) - statistics.median(small)) / ((BIG - SMALL) / 1000)
    gate = per_k(gate_big, gate_small)
    curl = per_k(curl_big, curl_small)
    return {
        "gate_cpu_ms_per_1000_tokens": gate * 1e3,
        "curl_cpu_ms_per_1000_tokens": curl * 1e3,
        "cpu_ratio_to_curl": gate / curl if curl > 0 else float("inf"),
        "peak_rss_mib": max(rss),
        "peak_rss_mib_each": rss,
        "rate_error_pct": statistics.median(rate_errors),
        "rate_error_pct_max": max(rate_errors),
    }


def route_cost(tmp, trials, curl_per_k):
    """Gate CPU per 1,000 tokens with route evidence on (launched) and off (attached)."""
    device = os.path.join(tmp, "accel0")
    open(device, "w").close()
    evidence = ["--route-lib", "npu-serve-smoke$", "--route-device", "/accel0$",
                "--device-busy", "fdinfo:pos"]
    trace = os.path.join(tmp, "route.trace.jsonl")
    stand_in, url = start_stand_in(tmp, trace)
    on = {BIG: [], SMALL: []}
    off = {BIG: [], SMALL: []}
    try:
        for i in range(trials):
            for tokens in (BIG, SMALL):
                launched = ["--stand-in", "--replies", "1", *UNFLIPPABLE, *evidence,
                            "--max-tokens", str(tokens), "--", "--tokens", str(BIG),
                            "--gaps-ms", "0.05", "--hold-open", device]
                m, _, _, _ = run_gate(launched, tmp, f"route-on-{tokens}-{i}")
                on[tokens].append(m["gate_cpu_s"])
                attached = ["--url", url, "--replies", "1", *UNFLIPPABLE, "--max-tokens", str(tokens)]
                m, _, _, _ = run_gate(attached, tmp, f"route-off-{tokens}-{i}")
                off[tokens].append(m["gate_cpu_s"])
    finally:
        stand_in.terminate()
        stand_in.wait()
    per_k = lambda d: (statistics.median(d[BIG]) - statistics.median(d[SMALL])) / ((BIG - SMALL) / 1000)
    on_k, off_k = per_k(on), per_k(off)
    return {
        "route_on_gate_cpu_ms_per_1000_tokens": on_k * 1e3,
        "route_off_gate_cpu_ms_per_1000_tokens": off_k * 1e3,
        "route_on_cpu_ratio_to_curl": on_k / curl_per_k if curl_per_k > 0 else float("inf"),
    }


def overhead(tmp, trials):
    results = []
    for i in range(trials):
        m, replies, wall, _ = run_gate(["--stand-in", "--replies", "3", *UNFLIPPABLE], tmp, f"overhead-{i}")
        serve = m["startup"]["after_ms"] + sum((r["end_ns"] - r["sent_ns"]) / 1e6 for r in replies)
        results.append(wall * 1e3 - serve)
    return {"overhead_ms": statistics.median(results), "overhead_ms_max": max(results)}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--no-build", action="store_true", help="use the release binary as it is")
    p.add_argument("--trials", type=int, default=5, help="runs per cost figure (median)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = p.parse_args()
    if not args.no_build:
        subprocess.run(["cargo", "build", "--release", "--locked", "--quiet"], cwd=ROOT, check=True)
    with tempfile.TemporaryDirectory(prefix="npu-serve-smoke-bench.") as tmp:
        figures = {**accuracy(tmp), **cost(tmp, args.trials), **overhead(tmp, args.trials)}
        curl_per_k = figures["curl_cpu_ms_per_1000_tokens"] / 1e3
        figures.update(route_cost(tmp, args.trials, curl_per_k))
    missed = [k for k, limit in TARGETS.items() if figures[k] > limit]
    if args.json:
        print(json.dumps({"figures": figures, "targets": TARGETS, "missed": missed}, indent=2))
    else:
        for k, v in figures.items():
            if isinstance(v, list):
                print(f"{k:32} {', '.join(f'{x:.1f}' for x in v)}")
                continue
            target = f"  (target <= {TARGETS[k]})" if k in TARGETS else ""
            mark = "  MISSED" if k in missed else ""
            print(f"{k:32} {v:10.3f}{target}{mark}")
        print(f"load average at the end: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
