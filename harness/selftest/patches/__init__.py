"""The patches of the mutant self-test: plain functions that break fiskj, grouped by technique.

* :mod:`.fingerprint`: the resume guard (fingerprint fields, which runs may be resumed);
* :mod:`.tails`: the torn-tail repair on open, and readers of a torn tail;
* :mod:`.lock`: the run lock (its kind, its descriptor, when it is taken and released);
* :mod:`.loop`: the agent loop and its fold (what a leg journals, runs and settles);
* :mod:`.store`: the store's and the journal's writes (fsync, directories, framing, limits, create);
* :mod:`.reader`: the engine's reading of its journal (lines, damage, the fold's status).

A patch changes :mod:`fiskj` in the process that calls it and returns
nothing; importing these modules changes nothing.  Which patch is which
mutant is the table of :mod:`harness.selftest.mutants`, and only a child
process calls one (:func:`harness.selftest.mutants.preload`).  A patch looks
functions up on their modules (``Journal._write_line``, ``FileStore.open``,
``JournalReader._scan``) so that it reaches every caller.
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["wrap"]


def wrap(owner: Any, name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator of a patch: ``owner.name`` (a module's function or a class's method) becomes the decorated
    function, called with the original first (``def _scan(original, self, f): ...``)."""
    original = getattr(owner, name)

    def install(patch: Callable[..., Any]) -> Callable[..., Any]:
        def patched(*args: Any, **kwargs: Any) -> Any:
            return patch(original, *args, **kwargs)

        setattr(owner, name, patched)
        return patched

    return install
