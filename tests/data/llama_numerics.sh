#!/bin/sh
# The same serve with other numerics, for the reference line's tests and ladder
# (docs/reference.md, "The ladder on the real llama-server"):
#   llama_numerics.sh [FLAG...] -- SERVE [ARG...]
# runs SERVE ARG... FLAG...: the serve's own arguments stay the same on both sides, and only the
# flags before `--` (llama.cpp flags that change its arithmetic, e.g. --rope-freq-scale 0.5)
# differ. exec, so the gate supervises and reads the serve itself, not a shell.
set -eu
n=0
for a in "$@"; do
    if [ "$a" = "--" ]; then
        break
    fi
    n=$((n + 1))
done
if [ "$n" -eq "$#" ]; then
    echo "llama_numerics.sh: usage: llama_numerics.sh [FLAG...] -- SERVE [ARG...]" >&2
    exit 2
fi
# Move the flags after the serve's arguments: rotate each to the end, then drop the `--`.
i=0
while [ "$i" -lt "$n" ]; do
    a=$1
    shift
    set -- "$@" "$a"
    i=$((i + 1))
done
shift
exec "$@"
