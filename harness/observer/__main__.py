"""``python -m harness.observer ARGS... -- PROG ARGS...``: build (once) and exec the tracer (docs/observer.md
"Use"); ``--print-binary`` prints its path.  Exit status: the program's, or 125 when the tracer cannot be built.
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
