"""``python -m harness.selftest.subject ARGS...``: fiskj's command line with ``$FISKJ_MUTANT`` applied first.

The harness's subject for mutant runs (:func:`harness.selftest.subject_for`).
Without ``FISKJ_MUTANT`` it is plain ``python -m fiskj``.  An unknown name
exits 2 with a message, before anything runs.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    from harness.selftest.mutants import apply_from_env

    try:
        apply_from_env()
    except KeyError as exc:
        print(f"harness.selftest.subject: {exc.args[0]}", file=sys.stderr)
        return 2
    from fiskj.cli import main as fiskj_main

    return fiskj_main(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(main())
