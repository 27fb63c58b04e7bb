#!/usr/bin/env bash
# A released npu-serve-smoke for this runner, checked against its release's SHA256SUMS before
# anything in it runs: what tools/ci/gate.sh does with a `version` (GATE_VERSION).
#   tools/ci/fetch-gate.sh VERSION [BASE_URL]
# VERSION   the release, 0.2.0 or v0.2.0 (its tag is v0.2.0)
# BASE_URL  where releases are downloaded from (`release-url`), e.g. an internal mirror; default
#           https://github.com/$GITHUB_ACTION_REPOSITORY/releases/download
# It downloads <BASE_URL>/v<VERSION>/SHA256SUMS and <BASE_URL>/v<VERSION>/<asset>, where the
# asset is npu-serve-smoke-<VERSION>-<target>.tar.gz for this runner's target: Linux on x86_64
# (x86_64-unknown-linux-musl) or aarch64 (aarch64-unknown-linux-musl). The asset's sha256 must
# be the one on its one line of SHA256SUMS (sha256sum's format), and its members must all lie
# in its one top directory, npu-serve-smoke-<VERSION>-<target>/ (no absolute name, no `..`, no
# link). Then it unpacks the asset, says on stderr which release it is (version, target,
# sha256, URL), and prints the binary's path on stdout:
#   <new directory>/npu-serve-smoke-<VERSION>-<target>/npu-serve-smoke
# The new directory (mktemp -d under RUNNER_TEMP, else TMPDIR, else /tmp) is the caller's to
# remove, two levels above that path, when the gate is done.
# Anything wrong (another kind of runner, a malformed version, a failed download, SHA256SUMS
# malformed or without the asset's line, a sum that does not match, a member out of place) is
# one line on stderr and exit 2: nothing from the asset has run and the directory is gone.
#
# What the sums vouch for: they come from the same server as the asset, so they catch a
# truncated, corrupted or stale download and a file that is not the one the release lists, not
# a server that lies. https (GitHub, or the mirror's certificate) is what vouches for the server;
# an http:// release-url trusts the network in between. GATE_SHA256SUMS (the action's
# `sha256sums`) closes that: the release's SHA256SUMS, pinned in the workflow when the version
# was chosen, is used instead of the server's, so a mirror can serve no other build.
set -euo pipefail

say() { echo "gate.sh: $*" >&2; }
die() {
    say "$*"
    exit 2
}
# A value as one printable line, for a message.
shown() { printf '%s' "${1//[^[:print:]]/?}"; }

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
    die "usage: fetch-gate.sh VERSION [BASE_URL]"
fi

# Digits and dots, and a pre-release after a hyphen: the version becomes part of a URL and of
# file names here, so no slash and nothing a shell or curl would read gets that far.
version=${1#v}
if ! [[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z][0-9A-Za-z.-]*)?$ ]]; then
    die "version must be a release's, like 0.2.0 or v0.2.0, not '$(shown "$1")'"
fi

os=$(uname -s 2>/dev/null || true)
machine=$(uname -m 2>/dev/null || true)
[ -n "$os" ] || os=${RUNNER_OS:-unknown}
[ -n "$machine" ] || machine=${RUNNER_ARCH:-unknown}
case $machine in
x86_64 | amd64 | X64) arch=x86_64 ;;
aarch64 | arm64 | ARM64) arch=aarch64 ;;
*) arch= ;;
esac
if [ "$os" != Linux ] || [ -z "$arch" ]; then
    die "no npu-serve-smoke release runs on $(shown "$os") $(shown "$machine") (Linux on x86_64 or aarch64 only): leave version empty to build the gate here"
fi
target=$arch-unknown-linux-musl

base=${2:-}
if [ -z "$base" ]; then
    [ -n "${GITHUB_ACTION_REPOSITORY:-}" ] ||
        die "no release-url, and no GITHUB_ACTION_REPOSITORY to download version $version from: give release-url"
    base=https://github.com/$GITHUB_ACTION_REPOSITORY/releases/download
fi
base=${base%/}
case $base in
https://*) redirects='=https' ;;
http://*) redirects='=https,http' ;;
*) die "release-url must be an https:// or http:// URL, not '$(shown "$base")'" ;;
esac
if [[ $base == *[^[:graph:]]* ]]; then
    die "release-url must be a URL without spaces, not '$(shown "$base")'"
fi

# A new directory for every run, never a cache: on a self-hosted runner the serve under test is
# a pull request's build running as this same user, so a gate binary kept between runs is one
# an earlier serve could have rewritten for the next gate to run (an attack path). mktemp -d
# makes it private (0700) under a name nothing earlier chose. Nothing here stands against a
# process of the same user running at the same time (it could trace the gate as well); what it
# does stop is a file left behind by an earlier run.
tmp=${RUNNER_TEMP:-${TMPDIR:-/tmp}}
dir=$(mktemp -d "$tmp/npu-serve-smoke-gate.XXXXXXXX" 2>/dev/null) ||
    die "failed to make a directory in $(shown "$tmp") for the release: set RUNNER_TEMP or TMPDIR to one that can be written"
trap 'rm -rf -- "$dir"' EXIT

download() { # URL FILE MAX_BYTES
    local err code=0
    # Retries are for a flaky mirror (timeouts, 5xx), bounded; a 404 is final at once.
    err=$(curl --fail --silent --show-error --location \
        --proto '=https,http' --proto-redir "$redirects" \
        --connect-timeout 20 --max-time 120 --retry 2 --retry-delay 2 \
        --max-filesize "$3" --output "$2" "$1" 2>&1) || code=$?
    if [ "$code" -ne 0 ]; then
        err=${err##*$'\n'}
        die "failed to download $1 (${err:-curl exited with $code}): not running it"
    fi
}

asset=npu-serve-smoke-$version-$target.tar.gz
top=npu-serve-smoke-$version-$target
sums_url=$base/v$version/SHA256SUMS
url=$base/v$version/$asset

if [ -n "${GATE_SHA256SUMS:-}" ]; then
    # Pinned in the workflow: the server's copy is not asked for.
    printf '%s\n' "$GATE_SHA256SUMS" >"$dir/SHA256SUMS"
    sums_url="the workflow's sha256sums"
else
    download "$sums_url" "$dir/SHA256SUMS" $((1 << 20))
fi
# sha256sum's lines: 64 hex digits, a space, a space (text) or * (binary), the file's name.
if [ "$(tr -d '\000' <"$dir/SHA256SUMS" | wc -c)" -ne "$(wc -c <"$dir/SHA256SUMS")" ]; then
    die "SHA256SUMS from $sums_url is not sha256sum's output (it holds a NUL byte): not running it"
fi
sum_line='^([0-9a-fA-F]{64}) [ *]([^[:cntrl:]]+)$'
expected=
found=0
n=0
while IFS= read -r line || [ -n "$line" ]; do
    n=$((n + 1))
    [ -n "$line" ] || continue
    [[ $line =~ $sum_line ]] ||
        die "SHA256SUMS from $sums_url is not sha256sum's output (line $n): not running it"
    if [ "${BASH_REMATCH[2]}" = "$asset" ]; then
        found=$((found + 1))
        expected=${BASH_REMATCH[1],,}
    fi
done <"$dir/SHA256SUMS"
[ "$found" -ne 0 ] || die "SHA256SUMS from $sums_url has no line for $asset: not running it"
[ "$found" -eq 1 ] || die "SHA256SUMS from $sums_url has $found lines for $asset, not one: not running it"

download "$url" "$dir/$asset" $((256 << 20))
actual=$(sha256sum <"$dir/$asset")
actual=${actual%% *}
if [ "$actual" != "$expected" ]; then
    die "$asset does not match SHA256SUMS from $sums_url (sha256 $actual, expected $expected): not running it"
fi

# Listed before it is unpacked: every member in the one top directory, by a name with no `..`,
# and each a plain file or a directory (a link could point the binary anywhere).
if ! names=$(tar -tzf "$dir/$asset" 2>"$dir/tar.err") ||
    ! kinds=$(tar -tvzf "$dir/$asset" 2>"$dir/tar.err" | cut -c1 | sort -u | tr -d '\n'); then
    die "$asset is not a tar.gz tar can read ($(shown "$(head -n 1 "$dir/tar.err")")): not running it"
fi
while IFS= read -r name; do
    case $name in
    "$top" | "$top/" | "$top"/*) ;;
    *) die "$asset has a member outside $top/ ('$(shown "$name")'): not running it" ;;
    esac
    if [[ /$name/ == */../* ]]; then
        die "$asset has a member with .. in its name ('$(shown "$name")'): not running it"
    fi
done <<<"$names"
if [[ ! $kinds =~ ^[-d]+$ ]]; then
    die "$asset has a member that is neither a file nor a directory (a link or a device): not running it"
fi
tar -xzf "$dir/$asset" -C "$dir" --no-same-owner --no-same-permissions 2>"$dir/tar.err" ||
    die "failed to unpack $asset ($(shown "$(head -n 1 "$dir/tar.err")")): not running it"
gate=$dir/$top/npu-serve-smoke
if [ ! -f "$gate" ] || [ ! -x "$gate" ]; then
    die "$asset has no program $top/npu-serve-smoke: not running it"
fi

say "running npu-serve-smoke $version ($target), sha256 $actual, from $url"
trap - EXIT
printf '%s\n' "$gate"
