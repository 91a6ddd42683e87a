"""Fixtures shared by several test modules (records and journals are built with builders.py).

* ``plain_seam``: the IO seam reset (``ioseam.configure()``) before and
  after the test; a module whose tests configure the seam opts in with
  ``pytestmark = pytest.mark.usefixtures("plain_seam")``.
* ``store``: an empty :class:`fiskj.store.FileStore` in ``tmp_path / "runs"``
  (a module may override it with a store of its own).
* ``server``: one fake model server (:class:`harness.workload.server.ModelServer`)
  per test module, for the family tests that run a real agent.
"""

from __future__ import annotations

import pytest

from fiskj import ioseam
from fiskj.store import FileStore


@pytest.fixture
def plain_seam():
    ioseam.configure()
    yield
    ioseam.configure()


@pytest.fixture
def store(tmp_path):
    return FileStore(tmp_path / "runs")


@pytest.fixture(scope="module")
def server():
    from harness.workload.server import ModelServer

    with ModelServer() as srv:
        yield srv
