#!/bin/sh
# Install Claude Code (@anthropic-ai/claude-code), pinned, from npm into a folder of the project:
# .cache/claude-code/ (git-ignored; never a global install).  Prints the path of the `claude` binary.
#
# Idempotent and quiet: when the pinned version is installed already it only prints the path (no network);
# otherwise it runs `npm install` (its output kept in .cache/claude-code/install.log, shown only on failure).
# Exits non-zero with a one-line reason: 2 node or npm missing, 3 the npm registry unreachable (or the version
# not on it), 4 the install failed.  (npm warns EBADENGINE on Node.js < 22; the package's `claude` is a native
# binary and runs all the same.)
#
#   scripts/install-claude-code.sh            # -> /abs/path/.cache/claude-code/node_modules/.bin/claude
#   CLAUDE_CODE_VERSION=2.1.328 PREFIX=dir scripts/install-claude-code.sh
set -eu

version="${CLAUDE_CODE_VERSION:-2.1.328}"
package="@anthropic-ai/claude-code"
case "$0" in */*) here="${0%/*}" ;; *) here=. ;; esac
root="$(CDPATH='' cd -- "$here/.." && pwd)"
prefix="${PREFIX:-$root/.cache/claude-code}"
bin="$prefix/node_modules/.bin/claude"
me="scripts/install-claude-code.sh"

installed() {
    # The version in the installed package.json, or nothing.
    pj="$prefix/node_modules/@anthropic-ai/claude-code/package.json"
    [ -f "$pj" ] && [ -x "$bin" ] || return 1
    node -e 'process.stdout.write(require(process.argv[1]).version)' "$pj" 2>/dev/null
}

command -v node >/dev/null 2>&1 || { echo "$me: node is not installed (npm needs it; Claude Code itself is a native binary)" >&2; exit 2; }
command -v npm >/dev/null 2>&1 || { echo "$me: npm is not installed (needed to fetch $package from the npm registry)" >&2; exit 2; }

if [ "$(installed || true)" = "$version" ]; then
    echo "$bin"
    exit 0
fi

registry="$(npm config get registry 2>/dev/null || echo https://registry.npmjs.org/)"
mkdir -p "$prefix"
log="$prefix/install.log"
# one retry a second later unless the caller's npm configuration says how many ($npm_config_fetch_retries)
if ! npm view "$package@$version" version --fetch-retries="${npm_config_fetch_retries:-1}" --fetch-retry-mintimeout=1000 \
        --fetch-retry-maxtimeout=2000 --fetch-timeout=20000 >"$log" 2>&1; then
    echo "$me: cannot reach $package@$version on the npm registry $registry (see $log)" >&2
    exit 3
fi
[ -f "$prefix/package.json" ] || printf '{"private": true, "description": "Claude Code for fiskj-harness (scripts/install-claude-code.sh)"}\n' >"$prefix/package.json"
if ! npm install --prefix "$prefix" --no-save --no-audit --no-fund --no-package-lock --loglevel=error \
        "$package@$version" >>"$log" 2>&1; then
    echo "$me: npm install $package@$version failed (log: $log):" >&2
    tail -n 20 "$log" >&2
    exit 4
fi
got="$(installed || true)"
if [ "$got" != "$version" ]; then
    echo "$me: after the install $bin is ${got:-missing}, expected version $version (log: $log)" >&2
    exit 4
fi
echo "$bin"
