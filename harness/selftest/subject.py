"""``python -m harness.selftest.subject ARGS...``: fiskj's command line with the leg's preload applied first.

The mutant subject (:func:`harness.selftest.mutants.subject_for`): it
loads the preload named in ``$FISKJ_PRELOAD`` (:mod:`harness.subject.preload`;
the mutants' table applies ``$FISKJ_MUTANT``), then runs
:func:`fiskj.cli.main`, as a leg forked by the fork server does.  A
reproducer may name the mutant alone (``FISKJ_MUTANT=no-fsync``): without
a preload, that name is applied from :mod:`harness.selftest.mutants`.
With neither it is plain ``python -m fiskj``.  An unknown name or module
exits 2 with a message, before anything runs.
"""

from __future__ import annotations

import os
import sys

from harness.names import EXIT_USAGE, MUTANT_ENV


def main(argv: list[str] | None = None) -> int:
    """Apply the preload (or the mutant named alone), then run fiskj's command line on ``argv``; its exit status."""
    from harness.selftest.mutants import preload
    from harness.subject.preload import load_preload

    try:
        if load_preload() is None and os.environ.get(MUTANT_ENV, "").strip():
            preload(os.environ)
    except (KeyError, ImportError) as exc:
        print(f"harness.selftest.subject: {exc.args[0] if exc.args else exc}", file=sys.stderr)
        return EXIT_USAGE
    from fiskj.cli import main as fiskj_main

    return fiskj_main(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(main())
