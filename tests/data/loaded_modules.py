"""A preload for tests/test_subject.py: print, as one JSON line, the modules a forked leg starts with."""

import json
import sys


def preload(environ):
    print(json.dumps(sorted(name for name in sys.modules if name != __name__)), flush=True)
