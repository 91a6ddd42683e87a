"""The patches of the mutant self-test: plain functions that break fiskj, grouped by technique; importing
them changes nothing, only a child process calls one (docs/selftest.md "Patches")."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator

__all__ = ["wrap", "StandIn", "swapped"]


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


class StandIn:
    """Stands in for ``inner``: the keyword arguments replace some of its attributes, the rest are its own."""

    def __init__(self, inner: Any, **replaced: Any) -> None:
        self.__dict__.update(replaced, _inner=inner)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@contextmanager
def swapped(owner: Any, **values: Any) -> Iterator[None]:
    """Set attributes of ``owner`` for the ``with`` block, then put the old values back."""
    saved = {name: getattr(owner, name) for name in values}
    for name, value in values.items():
        setattr(owner, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(owner, name, value)
