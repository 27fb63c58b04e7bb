#!/usr/bin/env bash
# The files a package ships beside the binary, made by the binary itself so they never drift
# from its --help: the manual pages (clap_mangen) and the shell completions (clap_complete).
#   tools/package-assets.sh GATE OUT
# GATE is a npu-serve-smoke that runs on this machine (for a cross build, the host's build of
# the same commit: the pages and completions do not depend on the target). OUT gets:
#   OUT/man/npu-serve-smoke.1, OUT/man/npu-serve-smoke-run.1, ... (one page a command)
#   OUT/complete/npu-serve-smoke.bash, OUT/complete/_npu-serve-smoke (zsh),
#   OUT/complete/npu-serve-smoke.fish
# OUT is made anew. The Debian package (cargo deb, Cargo.toml's [package.metadata.deb]) takes
# them from target/assets, where tools/build-deb.sh puts them; the release tarballs take them
# too (.github/workflows/release.yml).
set -euo pipefail

if [ $# -ne 2 ]; then
    echo "usage: tools/package-assets.sh GATE OUT" >&2
    exit 2
fi
gate=$1
out=$2
"$gate" --version >/dev/null || {
    echo "package-assets.sh: $gate does not run here" >&2
    exit 1
}
rm -rf "$out"
mkdir -p "$out/man" "$out/complete"
"$gate" man --out "$out/man" >/dev/null
"$gate" completions bash >"$out/complete/npu-serve-smoke.bash"
"$gate" completions zsh >"$out/complete/_npu-serve-smoke"
"$gate" completions fish >"$out/complete/npu-serve-smoke.fish"
