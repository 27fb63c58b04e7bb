#!/usr/bin/env bash
# Build the Debian package: the release binary, its manual pages and completions (made by the
# binary itself, tools/package-assets.sh), then cargo-deb (Cargo.toml's
# [package.metadata.deb]). ripgrep's ci/build-deb does the same in the same order.
#   tools/build-deb.sh [--target TRIPLE] [--no-build] [--assets DIR] [--output DIR]
#     --target    a cross build's target; cargo-deb names the package's architecture from it
#     --no-build  the binary is built already (target/[TRIPLE/]release/npu-serve-smoke, as the
#                 release workflow's cross build leaves it)
#     --assets    the pages and completions made already (tools/package-assets.sh's OUT);
#                 else a host build of the same commit makes them (they do not depend on the
#                 target)
#     --output    where the .deb goes (default target/debian)
# CARGO_DEB names cargo-deb if it is not on PATH as `cargo deb` (tools/install-report-tools.sh
# prints it); CARGO_TARGET_DIR is honoured. Prints the .deb's path.
set -euo pipefail
cd "$(dirname "$0")/.."

usage="usage: tools/build-deb.sh [--target TRIPLE] [--no-build] [--assets DIR] [--output DIR]"
target=
build=yes
assets=
output=target/debian
while [ $# -gt 0 ]; do
    case $1 in
    --target | --assets | --output)
        if [ $# -lt 2 ] || [ -z "$2" ]; then
            echo "build-deb.sh: $1 needs a value ($usage)" >&2
            exit 2
        fi
        case $1 in
        --target) target=$2 ;;
        --assets) assets=$2 ;;
        --output) output=$2 ;;
        esac
        shift 2
        ;;
    --no-build) build=no; shift ;;
    *) echo "build-deb.sh: unknown argument '$1' ($usage)" >&2; exit 2 ;;
    esac
done
if [ -n "$assets" ] && [ ! -f "$assets/complete/npu-serve-smoke.bash" ]; then
    echo "build-deb.sh: $assets holds no pages and completions (make them with tools/package-assets.sh)" >&2
    exit 2
fi

target_dir=${CARGO_TARGET_DIR:-target}
release_dir=$target_dir/release
cargo_target=()
if [ -n "$target" ]; then
    release_dir=$target_dir/$target/release
    cargo_target=(--target "$target")
fi
if [ "$build" = yes ]; then
    cargo build --release --locked "${cargo_target[@]}" >&2
fi
if [ ! -x "$release_dir/npu-serve-smoke" ]; then
    echo "build-deb.sh: no binary at $release_dir/npu-serve-smoke to package" >&2
    exit 2
fi

# Where Cargo.toml's assets name them: target/release/assets/..., which cargo-deb reads under
# the real target directory (target/TRIPLE/release/ for a cross build).
if [ -n "$assets" ]; then
    rm -rf "$release_dir/assets"
    cp -R "$assets" "$release_dir/assets"
else
    if [ -n "$target" ] && [ "$build" = yes ]; then
        cargo build --release --locked >&2
    fi
    tools/package-assets.sh "$target_dir/release/npu-serve-smoke" "$release_dir/assets"
fi
# cargo-deb gzips the pages it is given from the source tree, but not files under
# target/release/ (it takes them for build products): Debian policy 12.1 wants them gzipped.
gzip -9nf "$release_dir"/assets/man/*.1

cargo_deb=(cargo deb)
[ -n "${CARGO_DEB:-}" ] && cargo_deb=("$CARGO_DEB" deb)
mkdir -p "$output"
# --strip: the release profile keeps line tables for the gate's own backtraces, and cargo-deb
# would keep them too; the package ships the stripped binary (lintian: unstripped-binary).
"${cargo_deb[@]}" --no-build --locked --strip --output "$output" "${cargo_target[@]}" | tail -n 1
