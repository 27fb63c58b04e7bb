#!/usr/bin/env bash
# Break the gate on purpose, one mutant at a time (tools/mutants/*.patch), and show that
# `self-test` catches each: it must exit 1 and name the checks that failed.
#
# Each mutant is applied to a scratch copy of src/, built into its own target directory
# (target/mutants, so the normal build is untouched), and self-tested. About 30 s a mutant on
# 2 cores after the first build. Exit 0 when every mutant is caught; 1 when one is missed or
# no longer applies (then the patch needs updating with the code it mutates).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
target=${CARGO_TARGET_DIR:-$repo/target}/mutants
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

missed=0
for patch in "$repo"/tools/mutants/*.patch; do
    name=$(basename "$patch" .patch)
    what=$(head -n 1 "$patch" | sed 's/^# //')
    rm -rf "$scratch/src"
    cp -r "$repo/src" "$repo/Cargo.toml" "$repo/Cargo.lock" "$scratch/"
    if ! (cd "$scratch" && git apply "$patch" 2>/dev/null); then
        echo "STALE   $name: the patch no longer applies"
        missed=1
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
        echo "$out" | grep '^self-test FAIL' | sed 's/^self-test FAIL  /          /' | cut -c1-220
    else
        echo "MISSED  $name ($what): self-test exited $code"
        missed=1
    fi
done
exit "$missed"
