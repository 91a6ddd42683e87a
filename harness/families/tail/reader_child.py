"""``python -m harness.families.tail.reader_child DIR``: the subject's reader answers on every file of DIR.

Run by :func:`harness.families.tail.executor.reader_answers` with the
subject's environment, so the subject's preload (a mutant of fiskj's
reader) applies here and only here (:mod:`harness.subject.preload`).
Prints one JSON line per file: ``{"file": NAME, "answer": {...}}``.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict

from harness.families.tail.executor import answer_for
from harness.subject.preload import load_preload


def main(argv: list[str] | None = None) -> int:
    """Answer for each file of the one directory argument; exit 2 on a usage error."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not os.path.isdir(args[0]):
        print("usage: python -m harness.families.tail.reader_child DIR", file=sys.stderr)
        return 2
    load_preload()
    for name in sorted(os.listdir(args[0])):
        answer = asdict(answer_for(os.path.join(args[0], name)))
        print(json.dumps({"file": name, "answer": answer}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
