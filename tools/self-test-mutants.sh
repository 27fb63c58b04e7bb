#!/usr/bin/env bash
# Break the gate on purpose, one mutant at a time, and show that `self-test` catches each: it
# must exit 1 and name the checks that failed.
#
# Each mutant in tools/mutants/mutants.json replaces one exact text ("old") in one file with
# another ("new"). It is applied to a scratch copy of src/, built into its own target
# directory (target/mutants, so the normal build is untouched), and self-tested. About 30 s a
# mutant on 2 cores after the first build. Exit 0 when every mutant is caught; 1 when one is
# missed, or stale (its "old" text is no longer in the file exactly once: update the mutant
# with the code it mutates, or it changes nothing). Names given as arguments run only those.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
target=${CARGO_TARGET_DIR:-$repo/target}/mutants
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
spec="$repo/tools/mutants/mutants.json"

missed=0
count=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' "$spec")
for i in $(seq 0 $((count - 1))); do
    rm -rf "$scratch/src"
    cp -r "$repo/src" "$repo/build.rs" "$repo/Cargo.toml" "$repo/Cargo.lock" "$scratch/"
    if ! line=$(python3 - "$spec" "$i" "$scratch" <<'PY'
import json, sys
spec, i, scratch = json.load(open(sys.argv[1])), int(sys.argv[2]), sys.argv[3]
m = spec[i]
path = f"{scratch}/{m['file']}"
src = open(path).read()
if m["old"] == m["new"] or src.count(m["old"]) != 1:
    print(f"{m['name']}\t{m['what']}")
    sys.exit(1)
open(path, "w").write(src.replace(m["old"], m["new"]))
print(f"{m['name']}\t{m['what']}")
PY
    ); then
        echo "STALE   ${line%%$'\t'*} (${line#*$'\t'}): its text is not in its file exactly once, or it changes nothing"
        missed=1
        continue
    fi
    name=${line%%$'\t'*}
    what=${line#*$'\t'}
    if [ "$#" -gt 0 ] && [[ " $* " != *" $name "* ]]; then
        continue
    fi
    if ! cargo build --quiet --locked --manifest-path "$scratch/Cargo.toml" --target-dir "$target" 2>"$scratch/build.log"; then
        echo "BROKEN  $name: the mutant does not build"
        sed 's/^/        /' "$scratch/build.log" | head -20
        missed=1
        continue
    fi
    set +e
    out=$("$target/debug/npu-serve-smoke" self-test 2>/dev/null)
    code=$?
    set -e
    if [ "$code" -eq 1 ]; then
        echo "caught  $name ($what):"
        echo "$out" | grep '^self-test FAIL' | sed 's/^self-test FAIL  /          /' | cut -c1-200
    else
        echo "MISSED  $name ($what): self-test exited $code"
        missed=1
    fi
done
exit "$missed"
