#!/usr/bin/env bash
# docs/fleet.md's worked example: a fleet of two "boxes" on one machine, each gated twice by
# tools/ci/gate.sh (what the example workflow's jobs run) against the built-in stand-in, then
# compared, as the fleet's compare job does. Each box has its own device hold file and its own
# archive folder; each run gets its box's host name from a UTS namespace of its own
# (`unshare --uts`, root only), so run.json's host says which box it ran on. Without root the
# runs keep this machine's name and the archive folders alone tell the boxes apart.
#   docs/ci/fleet-example.sh [WORKDIR]     (default: a new temporary directory)
# npu-serve-smoke must be on PATH (or GATE_BIN name it). Exit: 0 when every run passed, else
# the first failing run's code.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
work=${1:-$(mktemp -d)}
gate=${GATE_BIN:-npu-serve-smoke}

own_hostname=no
if [ "$(id -u)" -eq 0 ] && unshare --uts true 2>/dev/null; then
    own_hostname=yes
fi

status=0
for box in box-a box-b; do
    mkdir -p "$work/$box" "$work/archives/$box"
    for n in 1 2; do
        # What the box's job would be given: its hold file, its archive, the stand-in as serve.
        export GATE_HOLD=$work/$box/npu0.hold
        export GATE_OUT=$work/archives/$box/run-$n
        export GATE_ARGS=--stand-in
        export GATE_REPLIES=${GATE_REPLIES:-3}
        export GATE_FLOOR=${GATE_FLOOR:-10}
        export GATE_FIRST_TOKEN_MS=${GATE_FIRST_TOKEN_MS:-5000}
        echo "== $box, run $n" >&2
        code=0
        if [ "$own_hostname" = yes ]; then
            # The box's name and the script are the inner shell's $1 and $2, not pasted in.
            # shellcheck disable=SC2016
            unshare --uts bash -c 'hostname "$1" && exec "$2"' - "$box" "$repo/tools/ci/gate.sh" || code=$?
        else
            "$repo/tools/ci/gate.sh" || code=$?
        fi
        if [ "$code" -ne 0 ] && [ "$status" -eq 0 ]; then
            status=$code
        fi
    done
done

echo "== the fleet" >&2
"$gate" compare "$work"/archives/*/*
exit "$status"
