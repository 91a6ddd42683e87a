"""A preload for tests/test_subject.py whose effect shows: its hook prints the Zen of Python and notes its call."""

#: The environments the hook was called with (in this process).
CALLS: list[dict[str, str]] = []


def preload(environ):
    CALLS.append(dict(environ))
    import this  # noqa: F401 - printing the Zen is the visible effect (once per process)
