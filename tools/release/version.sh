#!/usr/bin/env bash
# The version a release tag names, checked against Cargo.toml's: a tag v0.2.0 on a commit whose
# Cargo.toml says 0.1.0 would publish binaries whose --version contradicts their file names.
#   tools/release/version.sh TAG REPO
# Prints the version (0.2.0 for v0.2.0). Exit 1, with one line, when the tag is not `v` and
# Cargo.toml's version; exit 2 on a bad argument. Asks cargo (`cargo pkgid`), which reads the
# manifest as cargo builds it.
set -euo pipefail

bad() {
    echo "version.sh: $*" >&2
    exit 2
}

[ $# -eq 2 ] || bad "expected 2 arguments, got $# (usage: tools/release/version.sh TAG REPO)"
tag=$1 repo=$2
[ -f "$repo/Cargo.toml" ] || bad "REPO $repo has no Cargo.toml"
# path+file:///…#npu-serve-smoke@0.2.0 (cargo 1.77 and later) or path+file:///…#0.2.0.
id=$(cargo pkgid --quiet --manifest-path "$repo/Cargo.toml")
version=${id##*[#@]}
if [ "$tag" != "v$version" ]; then
    echo "version.sh: the tag $tag is not v$version, Cargo.toml's version: tag v$version, or bump Cargo.toml's version and tag that" >&2
    exit 1
fi
echo "$version"
