"""``python -m harness.selftest.subject ARGS...``: fiskj's command line with the leg's preload applied first
(without one, a bare ``$FISKJ_MUTANT``); an unknown name or module exits 2 before anything runs."""

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
