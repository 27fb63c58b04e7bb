#!/usr/bin/env bash
# One gate run for a CI job: what action.yml runs (GitHub), and what docs/ci/gitlab-ci.yml runs
# (GitLab). Its inputs are environment variables, never text pasted into shell code (a value is
# only ever one argument of the gate's):
#   GATE_PROFILE          --profile FILE
#   GATE_SERVE            --serve-cmd COMMAND: the serve's command line in shell quoting, which
#                         the gate splits (no shell runs it)
#   GATE_FLOOR            --floor TOK_S
#   GATE_FIRST_TOKEN_MS   --first-token-ms MS
#   GATE_BASELINE         --baseline DIR
#   GATE_REPLIES          --replies N
#   GATE_HOLD             --hold FILE (the device's hold file, one per device on the box)
#   GATE_OUT              the run directory (default: runs/gate-<UTC time>-<pid>); created empty
#                         here, so the gate's JUnit file can go inside it as junit.xml
#   GATE_ARGS             anything else for `run`, one argument a line (e.g. --stand-in)
#   GATE_ON_SKIP          fail (default) or pass: what a SKIP (exit 3, hold not acquired) is
#   GATE_ON_INCONCLUSIVE  fail (default) or pass: what an INCONCLUSIVE (exit 4) is
#   GATE_VERSION          a released gate to run, e.g. 0.2.0 or v0.2.0: tools/ci/fetch-gate.sh
#                         downloads this runner's tarball (Linux, x86_64 or aarch64) and the
#                         release's SHA256SUMS into a new directory, checks the sum and unpacks
#                         it; anything wrong is one line and exit 2 before anything runs
#   GATE_RELEASE_URL      where releases are downloaded from, <url>/v<version>/<asset> (e.g. an
#                         internal mirror); default
#                         https://github.com/$GITHUB_ACTION_REPOSITORY/releases/download
#   GATE_SHA256SUMS       with GATE_VERSION: the release's SHA256SUMS, pinned in the workflow,
#                         used instead of the server's (fetch-gate.sh reads it)
#   GATE_BIN              the gate to run (not with GATE_VERSION); else npu-serve-smoke on PATH;
#                         else built with cargo from GITHUB_ACTION_PATH (or this script's
#                         checkout) into a cache
# Numbers go to the gate as given: its own parser refuses a bad one with its one line, exit 2.
# Exit: the gate's code, except a SKIP or INCONCLUSIVE counted as pass, which exits 0. Writes
# `result`, `exit-code`, `run-dir`, `artifact-name` and, with a version, `gate-version` to
# GITHUB_OUTPUT when it is set; the gate itself writes the step summary when
# GITHUB_STEP_SUMMARY is set.
set -euo pipefail

say() { echo "gate.sh: $*" >&2; }

policy() { # NAME VALUE: fail or pass, else exit 2 before anything runs.
    case $2 in
    fail | pass) ;;
    *)
        say "$1 must be fail or pass, not '$2'"
        exit 2
        ;;
    esac
}
on_skip=${GATE_ON_SKIP:-fail}
on_inconclusive=${GATE_ON_INCONCLUSIVE:-fail}
policy on-skip "$on_skip"
policy on-inconclusive "$on_inconclusive"

# The gate: a release checked against its SHA256SUMS, given, on PATH, or built (once; cargo's
# incremental target dir makes later builds of the same checkout quick) from the action's own
# checkout. A release goes into a new directory each run, removed when the script ends: never a
# cache the serve under test could rewrite between runs (fetch-gate.sh says why).
gate=${GATE_BIN:-}
if [ -n "${GATE_VERSION:-}" ]; then
    if [ -n "$gate" ]; then
        say "GATE_BIN and version both name the gate to run: give one"
        exit 2
    fi
    gate=$("$(dirname "${BASH_SOURCE[0]}")/fetch-gate.sh" "$GATE_VERSION" "${GATE_RELEASE_URL:-}") ||
        exit $?
    fetched=${gate%/*/*}
    trap 'rm -rf -- "$fetched"' EXIT
fi
if [ -z "$gate" ]; then
    gate=$(command -v npu-serve-smoke || true)
fi
if [ -z "$gate" ]; then
    src=${GITHUB_ACTION_PATH:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
    cache=${NPU_SERVE_SMOKE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/npu-serve-smoke}
    say "no npu-serve-smoke on PATH: building it from $src into $cache/gate-target"
    cargo build --release --locked --quiet --manifest-path "$src/Cargo.toml" \
        --target-dir "$cache/gate-target" >&2
    gate=$cache/gate-target/release/npu-serve-smoke
fi

out=${GATE_OUT:-runs/gate-$(date -u +%Y%m%dT%H%M%SZ)-$$}
if [[ $out == *$'\n'* ]]; then
    # It goes into GITHUB_OUTPUT as one line.
    say "the run directory's name has a line break: give another out"
    exit 2
fi
argv=(run --out "$out" --junit "$out/junit.xml")
[ -n "${GATE_PROFILE:-}" ] && argv+=(--profile "$GATE_PROFILE")
[ -n "${GATE_SERVE:-}" ] && argv+=(--serve-cmd "$GATE_SERVE")
[ -n "${GATE_FLOOR:-}" ] && argv+=(--floor "$GATE_FLOOR")
[ -n "${GATE_FIRST_TOKEN_MS:-}" ] && argv+=(--first-token-ms "$GATE_FIRST_TOKEN_MS")
[ -n "${GATE_BASELINE:-}" ] && argv+=(--baseline "$GATE_BASELINE")
[ -n "${GATE_REPLIES:-}" ] && argv+=(--replies "$GATE_REPLIES")
[ -n "${GATE_HOLD:-}" ] && argv+=(--hold "$GATE_HOLD")
if [ -n "${GATE_ARGS:-}" ]; then
    mapfile -t extra <<<"$GATE_ARGS"
    for a in "${extra[@]}"; do
        [ -n "$a" ] && argv+=("$a")
    done
fi

# The gate refuses a run directory that is not empty; an empty one it takes, and the JUnit
# file's directory must be there before it starts.
mkdir -p "$out"
code=0
"$gate" "${argv[@]}" || code=$?
if [ "$code" -eq 2 ]; then
    # It could not run: nothing was written, and an empty directory is no archive.
    rmdir "$out" 2>/dev/null || true
fi

case $code in
0) result=pass ;;
1) result=fail ;;
2) result=error ;;
3) result=skip ;;
4) result=inconclusive ;;
*) result=interrupted ;;
esac
status=$code
if { [ "$result" = skip ] && [ "$on_skip" = pass ]; } ||
    { [ "$result" = inconclusive ] && [ "$on_inconclusive" = pass ]; }; then
    status=0
    say "RESULT ${result^^} counted as pass (on-$result: pass)"
    if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
        printf '\n%s counted as pass here (on-%s: pass).\n' "${result^^}" "$result" >>"$GITHUB_STEP_SUMMARY"
    fi
fi

if [ -n "${GITHUB_OUTPUT:-}" ]; then
    artifact=npu-gate-${RUNNER_NAME:-${HOSTNAME:-local}}-$(basename "$out")
    {
        echo "result=$result"
        echo "exit-code=$code"
        [ -d "$out" ] && echo "run-dir=$out"
        echo "artifact-name=${artifact//[^A-Za-z0-9._-]/-}"
        if [ -n "${GATE_VERSION:-}" ]; then
            echo "gate-version=${GATE_VERSION#v}"
        fi
    } >>"$GITHUB_OUTPUT"
fi
exit "$status"
