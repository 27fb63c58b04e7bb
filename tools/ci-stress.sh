#!/usr/bin/env bash
# The README's test suite on a busy box (issue 54): the tests are built once, then each run
# runs every test binary (unit, integration, doc) as `cargo test --locked` would, with a CPU hog
# pinned to one core throughout (--hog) or on a quiet box (--quiet), and says per run its wall
# time, how many tests passed, failed and were ignored, each failure by name, and the slowest
# 20 tests by their own time (libtest's --report-time, read from its JSON events).
#
#   tools/ci-stress.sh [--hog|--quiet] [--runs N] [--out DIR]
#
# The real serves and the report tools are installed (or found cached) first, as the README's
# test command does, and CI=true is set, so a test that would skip for want of one fails here.
# A run's records go to DIR (default target/ci-stress): run-K.json (libtest's events),
# run-K.txt (the summary), and one line a run appended to runs.tsv. Exit 0 only when every run
# had no failure; a failure is never retried (issue 54: retries are not a fix).
set -euo pipefail
cd "$(dirname "$0")/.."

mode=hog runs=1 out=target/ci-stress
while [ $# -gt 0 ]; do
    case "$1" in
        --hog) mode=hog ;;
        --quiet) mode=quiet ;;
        --runs) runs=${2:?--runs takes a count}; shift ;;
        --out) out=${2:?--out takes a directory}; shift ;;
        -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "ci-stress: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
    shift
done
case "$runs" in ''|*[!0-9]*|0) echo "ci-stress: --runs takes a count from 1, got '$runs'" >&2; exit 2 ;; esac
if [ "$mode" = hog ] && ! command -v taskset >/dev/null; then
    echo "ci-stress: --hog pins its loop to one core with taskset, which is not here" >&2
    exit 2
fi
mkdir -p "$out"

eval "$(tools/install-llama-server.sh)"
eval "$(tools/install-vllm.sh)"
eval "$(tools/install-report-tools.sh)"
export CI=true

# Built once, before any hog: the suite's time is the tests', not the compiler's.
cargo build --release --locked
mapfile -t bins < <(cargo test --locked --no-run --message-format=json 2>/dev/null |
    python3 -c '
import json, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("profile", {}).get("test") and m.get("executable"):
        print(m["executable"])
')
[ ${#bins[@]} -gt 0 ] || { echo "ci-stress: cargo built no test binary" >&2; exit 1; }

hog_pid=
stop_hog() { [ -n "$hog_pid" ] && kill "$hog_pid" 2>/dev/null; wait "$hog_pid" 2>/dev/null || true; hog_pid=; }
trap stop_hog EXIT

failed_runs=0
for k in $(seq 1 "$runs"); do
    events="$out/run-$k.json"
    : > "$events"
    if [ "$mode" = hog ]; then
        # One core kept busy for the whole run, at the suite's own priority.
        taskset -c 0 sh -c 'while :; do :; done' &
        hog_pid=$!
    fi
    start=$(date +%s)
    status=0
    for bin in "${bins[@]}"; do
        # libtest's JSON and per-test times are unstable options of the stable harness:
        # RUSTC_BOOTSTRAP lets this run of the binary take them; nothing is built with it.
        RUSTC_BOOTSTRAP=1 "$bin" -Z unstable-options --format json --report-time >> "$events" || status=1
    done
    # The doc tests, as `cargo test` runs them (no per-test times: rustdoc's harness).
    doc=0
    cargo test --locked --doc -q > "$out/run-$k.doc.txt" 2>&1 || { status=1; doc=1; }
    wall=$(( $(date +%s) - start ))
    stop_hog
    python3 - "$events" "$mode" "$k" "$wall" "$doc" "$out" <<'EOF' | tee "$out/run-$k.txt"
import json, sys
events, mode, k, wall, doc, out = sys.argv[1:]
passed, failed, ignored, times = 0, [], 0, []
for line in open(events, encoding="utf-8", errors="replace"):
    try:
        e = json.loads(line)
    except ValueError:
        continue
    if e.get("type") != "test":
        continue
    if e.get("event") == "ok":
        passed += 1
        times.append((e.get("exec_time", 0.0), e["name"]))
    elif e.get("event") == "failed":
        failed.append(e["name"])
        times.append((e.get("exec_time", 0.0), e["name"]))
    elif e.get("event") == "ignored":
        ignored += 1
if doc == "1":
    failed.append("(the doc tests: see run-%s.doc.txt)" % k)
print(f"run {k} ({mode}): {wall} s, {passed} passed, {len(failed)} failed, {ignored} ignored")
for name in failed:
    print(f"  FAILED {name}")
print("the slowest 20, by each test's own time:")
for t, name in sorted(times, reverse=True)[:20]:
    print(f"  {t:8.1f} s  {name}")
with open(f"{out}/runs.tsv", "a") as f:
    f.write(f"{mode}\t{wall}\t{passed}\t{len(failed)}\t{ignored}\t{' '.join(failed)}\n")
EOF
    [ "$status" -eq 0 ] || failed_runs=$((failed_runs + 1))
done
echo "ci-stress: $runs run(s) $mode, $failed_runs with a failure (records in $out)"
[ "$failed_runs" -eq 0 ]
