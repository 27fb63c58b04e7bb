#!/usr/bin/env bash
# Build the Debian package: the release binary, its manual pages and completions (made by the
# binary itself, tools/package-assets.sh), then cargo-deb (Cargo.toml's
# [package.metadata.deb]). ripgrep's ci/build-deb does the same in the same order.
#   tools/build-deb.sh [--target TRIPLE] [--output DIR]
# CARGO_DEB names cargo-deb if it is not on PATH as `cargo deb` (tools/install-report-tools.sh
# prints it); CARGO_TARGET_DIR is honoured. With --target, the pages and completions come from
# a host build of the same commit (they do not depend on the target). Prints the .deb's path.
set -euo pipefail
cd "$(dirname "$0")/.."

target=
output=target/debian
while [ $# -gt 0 ]; do
    case $1 in
    --target) target=${2:?--target needs a target triple}; shift 2 ;;
    --output) output=${2:?--output needs a directory}; shift 2 ;;
    *) echo "build-deb.sh: unknown argument '$1' (usage: tools/build-deb.sh [--target TRIPLE] [--output DIR])" >&2; exit 2 ;;
    esac
done

target_dir=${CARGO_TARGET_DIR:-target}
cargo build --release --locked >&2
host_gate=$target_dir/release/npu-serve-smoke
release_dir=$target_dir/release
if [ -n "$target" ]; then
    cargo build --release --locked --target "$target" >&2
    release_dir=$target_dir/$target/release
fi
tools/package-assets.sh "$host_gate" "$release_dir/assets"
# cargo-deb gzips the pages it is given from the source tree, but not files under
# target/release/ (it takes them for build products): Debian policy 12.1 wants them gzipped.
gzip -9n "$release_dir"/assets/man/*.1

cargo_deb=(cargo deb)
[ -n "${CARGO_DEB:-}" ] && cargo_deb=("$CARGO_DEB" deb)
mkdir -p "$output"
# --strip: the release profile keeps line tables for the gate's own backtraces, and cargo-deb
# would keep them too; the package ships the stripped binary (lintian: unstripped-binary).
args=(--no-build --locked --strip --output "$output")
[ -n "$target" ] && args+=(--target "$target")
"${cargo_deb[@]}" "${args[@]}" | tail -n 1
