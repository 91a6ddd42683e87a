"""``python -m harness.observer --log PATH --root DIR ... -- PROG ARGS...``: build (once) and exec the tracer.

The arguments are the tracer's (docs/observer.md); ``--print-binary`` prints
the path of the built binary instead.  Exit status: the program's, or 125
when the tracer cannot be built or its arguments are wrong.
"""

from __future__ import annotations

import os
import sys

from .build import observer_binary
from .errors import ObserverError


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        binary = str(observer_binary())
    except ObserverError as exc:
        print(f"fiskj-observe: {exc}", file=sys.stderr)
        return 125
    if argv == ["--print-binary"]:
        print(binary)
        return 0
    os.execv(binary, [binary, *argv])
    return 125  # not reached


if __name__ == "__main__":
    sys.exit(main())
