#!/bin/sh
# Install the LangGraph subject's packages (pyproject.toml's `langgraph` extra, pinned) into a virtual
# environment of their own: .cache/langgraph/ (git-ignored).  Prints the path of its python, the
# subject's interpreter (subjects/langgraph/README.md):
#
#   export FISKJ_LANGGRAPH_PYTHON="$(scripts/install-langgraph.sh)"
#
# Why not the project's .venv: langchain-mcp-adapters (0.3.2, the newest) requires mcp<2, and the harness's
# MCP server is built on mcp>=2.3; one environment cannot hold both.  A LangGraph agent is its users'
# own program in its own environment anyway; the harness only starts it.
#
# Idempotent and quiet: when the environment holds exactly the extra's pins it only prints the path.
# Exits non-zero with a one-line reason: 2 python3 (with venv) missing, 4 the install failed.
set -eu

case "$0" in */*) here="${0%/*}" ;; *) here=. ;; esac
root="$(CDPATH='' cd -- "$here/.." && pwd)"
prefix="${PREFIX:-$root/.cache/langgraph}"
py="$prefix/bin/python"
me="scripts/install-langgraph.sh"

command -v python3 >/dev/null 2>&1 || { echo "$me: python3 is not installed" >&2; exit 2; }
pins="$(python3 -c 'import sys, tomllib
with open(sys.argv[1], "rb") as f:
    print("\n".join(tomllib.load(f)["project"]["optional-dependencies"]["langgraph"]))' "$root/pyproject.toml")"
if [ -x "$py" ] && [ -f "$prefix/pins.txt" ] && [ "$(cat "$prefix/pins.txt")" = "$pins" ]; then
    echo "$py"
    exit 0
fi
mkdir -p "$prefix"
log="$prefix/install.log"
if ! { python3 -m venv "$prefix" && printf '%s\n' "$pins" >"$prefix/requirements.txt" \
        && "$py" -m pip install -q --disable-pip-version-check -r "$prefix/requirements.txt"; } >"$log" 2>&1; then
    echo "$me: installing the langgraph extra into $prefix failed (log: $log):" >&2
    tail -n 20 "$log" >&2
    exit 4
fi
printf '%s\n' "$pins" >"$prefix/pins.txt"
echo "$py"
