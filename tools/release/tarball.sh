#!/usr/bin/env bash
# One release tarball: the binary for one target with its manual pages, completions, licences
# and README, under one top directory named for the version and the target.
#   tools/release/tarball.sh VERSION TARGET BINARY ASSETS REPO OUT
# VERSION is Cargo.toml's (0.2.0, not the tag's v0.2.0); TARGET a Rust target triple; BINARY
# the built gate for TARGET; ASSETS what tools/package-assets.sh wrote (man/*.1, complete/);
# REPO the checkout (for LICENSE-MIT, LICENSE-APACHE, README.md); OUT where the tarball goes.
# Prints the tarball's path: OUT/npu-serve-smoke-VERSION-TARGET.tar.gz, holding
#   npu-serve-smoke-VERSION-TARGET/npu-serve-smoke (mode 755)
#   npu-serve-smoke-VERSION-TARGET/man/*.1
#   npu-serve-smoke-VERSION-TARGET/complete/{npu-serve-smoke.bash,_npu-serve-smoke,npu-serve-smoke.fish}
#   npu-serve-smoke-VERSION-TARGET/{LICENSE-MIT,LICENSE-APACHE,README.md}
# The Action's download path (action.yml) unpacks exactly this layout: change both or neither.
# With SOURCE_DATE_EPOCH set, the same inputs make the same bytes (reproducible-builds.org):
# names sorted, owner root, every mtime that date, no name or time in the gzip header.
# Needs GNU tar (--sort). Exit 2 on a bad argument, with one line saying which.
set -euo pipefail

usage="usage: tools/release/tarball.sh VERSION TARGET BINARY ASSETS REPO OUT"
bad() {
    echo "tarball.sh: $*" >&2
    exit 2
}

[ $# -eq 6 ] || bad "expected 6 arguments, got $# ($usage)"
version=$1 target=$2 binary=$3 assets=$4 repo=$5 out=$6

# The name goes into a URL and a directory: a semantic version and a triple, nothing else.
[[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.+-]+)?$ ]] ||
    bad "VERSION '$version' is not a version like 0.2.0 (Cargo.toml's, without the tag's v)"
[[ $target =~ ^[a-z0-9_]+(-[a-z0-9_]+){2,3}$ ]] ||
    bad "TARGET '$target' is not a target triple like x86_64-unknown-linux-musl"
{ [ -f "$binary" ] && [ -x "$binary" ]; } || bad "BINARY $binary is not an executable file"
[ -d "$assets" ] || bad "ASSETS $assets is not a directory (make it with tools/package-assets.sh)"
completions=(npu-serve-smoke.bash _npu-serve-smoke npu-serve-smoke.fish)
for c in "${completions[@]}"; do
    [ -f "$assets/complete/$c" ] || bad "ASSETS $assets has no complete/$c (make it with tools/package-assets.sh)"
done
shopt -s nullglob
pages=("$assets"/man/*.1)
shopt -u nullglob
[ ${#pages[@]} -gt 0 ] || bad "ASSETS $assets has no man/*.1 (make it with tools/package-assets.sh)"
docs=(LICENSE-MIT LICENSE-APACHE README.md)
for d in "${docs[@]}"; do
    [ -f "$repo/$d" ] || bad "REPO $repo has no $d"
done
mkdir -p "$out" || bad "OUT $out cannot be made"

name=npu-serve-smoke-$version-$target
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
top=$stage/$name
# Modes set here, not taken from the checkout or the artifact: an upload/download between
# jobs loses them, and the layout promises a 755 binary.
install -d -m 755 "$top" "$top/man" "$top/complete"
install -m 755 "$binary" "$top/npu-serve-smoke"
install -m 644 "${pages[@]}" "$top/man/"
for c in "${completions[@]}"; do
    install -m 644 "$assets/complete/$c" "$top/complete/$c"
done
for d in "${docs[@]}"; do
    install -m 644 "$repo/$d" "$top/$d"
done

reproducible=(--sort=name --owner=0 --group=0 --numeric-owner)
if [ -n "${SOURCE_DATE_EPOCH:-}" ]; then
    reproducible+=("--mtime=@$SOURCE_DATE_EPOCH")
fi
tarball=$out/$name.tar.gz
# Written beside and renamed, so OUT never holds half a tarball under the final name.
tar "${reproducible[@]}" -C "$stage" -cf - "$name" | gzip -n >"$stage/$name.tar.gz"
mv "$stage/$name.tar.gz" "$tarball"
echo "$tarball"
