#!/bin/sh
# Install what the test suite needs beyond the project's .venv, when missing: the LangGraph subject's own
# environment (scripts/install-langgraph.sh: .cache/langgraph, from PyPI), Claude Code (scripts/install-claude-code.sh:
# .cache/claude-code, pinned, from npm: the real agent tests/test_claude_code_client.py and tests/test_mcp_server.py
# drive), and the Debian packages:
# headless Chromium, which tests/test_html_report.py uses to load the HTML report (harness/report/html.py)
# in a real browser.
#
# Idempotent and quiet: does nothing when every package is there; otherwise installs them with
# apt-get as root (sudo -n when not root), running `apt-get update` only when the install fails on
# old or missing package lists.  Called by the README's test command and .ci/run before pytest.
set -eu

case "$0" in */*) here="${0%/*}" ;; *) here=. ;; esac
sh "$here/install-langgraph.sh" >/dev/null
sh "$here/install-claude-code.sh" >/dev/null

missing=""
command -v chromium >/dev/null 2>&1 || missing="$missing chromium"
[ -z "$missing" ] && exit 0

if [ "$(id -u)" = 0 ]; then
    as_root=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    as_root="sudo -n"
else
    echo "scripts/setup-test-deps.sh: missing Debian package(s):$missing; run this script as root" >&2
    echo "  (or: apt-get install -y$missing)" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
apt_install() {
    # shellcheck disable=SC2086
    $as_root apt-get install -y -q --no-install-recommends $missing >"$log" 2>&1
}
if ! apt_install; then
    $as_root apt-get update -q >"$log" 2>&1 || { cat "$log" >&2; exit 1; }
    apt_install || { cat "$log" >&2; echo "scripts/setup-test-deps.sh: could not install:$missing" >&2; exit 1; }
fi
command -v chromium >/dev/null 2>&1 || { echo "scripts/setup-test-deps.sh: chromium still missing after the install" >&2; exit 1; }
