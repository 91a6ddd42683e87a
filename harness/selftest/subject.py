"""``python -m harness.selftest.subject ARGS...``: fiskj's command line with the leg's preload applied first.

The mutant subject (:func:`harness.selftest.mutants.subject_for`): it
imports the module named in ``$FISKJ_PRELOAD`` (a mutant module patches
fiskj on import; :mod:`harness.subject.preload`), then runs
:func:`fiskj.cli.main`, as a leg forked by the fork server does.  A
reproducer may name the mutant alone (``FISKJ_MUTANT=no-fsync``): without
a preload, that name is looked up in :mod:`harness.selftest.mutants`.
With neither it is plain ``python -m fiskj``.  An unknown name or module
exits 2 with a message, before anything runs.
"""

from __future__ import annotations

import sys

from harness.names import EXIT_USAGE


def main(argv: list[str] | None = None) -> int:
    from harness.selftest.mutants import apply_from_env

    try:
        apply_from_env()
    except (KeyError, ImportError) as exc:
        print(f"harness.selftest.subject: {exc.args[0] if exc.args else exc}", file=sys.stderr)
        return EXIT_USAGE
    from fiskj.cli import main as fiskj_main

    return fiskj_main(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(main())
