#!/usr/bin/env bash
# SHA256SUMS for a release: one `sha256sum` line (64 hex digits, two spaces, the bare file
# name) for every tarball and .deb in DIR, so `sha256sum -c SHA256SUMS` checks a download in
# the directory it landed in.
#   tools/release/sums.sh DIR
# Writes DIR/SHA256SUMS and prints its path. Exit 2 on a bad argument (no DIR, or a DIR
# holding nothing to sum), with one line saying which.
set -euo pipefail

bad() {
    echo "sums.sh: $*" >&2
    exit 2
}

[ $# -eq 1 ] || bad "expected 1 argument, got $# (usage: tools/release/sums.sh DIR)"
dir=$1
[ -d "$dir" ] || bad "DIR $dir is not a directory"
cd "$dir"
# One order on every runner, whatever its locale.
export LC_ALL=C
shopt -s nullglob
files=(*.tar.gz *.deb)
shopt -u nullglob
[ ${#files[@]} -gt 0 ] || bad "DIR $dir holds no .tar.gz or .deb to sum"
for f in "${files[@]}"; do
    # sha256sum escapes a name with a backslash or newline, and a checker then reads a
    # different name: refuse such a name rather than write that line.
    [[ $f =~ ^[A-Za-z0-9._+-]+$ ]] || bad "'$f' in $dir is not a plain file name"
done
sha256sum -- "${files[@]}" >SHA256SUMS.partial
mv SHA256SUMS.partial SHA256SUMS
echo "$dir/SHA256SUMS"
