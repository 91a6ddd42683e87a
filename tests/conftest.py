"""Fixtures shared by several test modules (records and journals are built with builders.py).

* ``plain_seam``: the IO seam reset (``ioseam.configure()``) before and
  after the test; a module whose tests configure the seam opts in with
  ``pytestmark = pytest.mark.usefixtures("plain_seam")``.
* ``store``: an empty :class:`fiskj.store.FileStore` in ``tmp_path / "runs"``
  (a module may override it with a store of its own).
* ``results_out_of_the_repo`` (automatic): ``fiskj-harness run``'s results folders go to a
  temporary folder, not the repository.
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


@pytest.fixture(autouse=True, scope="session")
def results_out_of_the_repo(tmp_path_factory):
    """``fiskj-harness run`` writes a results folder by default (``./fiskj-results``, docs/results.md): in the
    tests it goes to a temporary folder ($FISKJ_HARNESS_RESULTS), never into the repository."""
    import os

    old = os.environ.get("FISKJ_HARNESS_RESULTS")
    os.environ["FISKJ_HARNESS_RESULTS"] = str(tmp_path_factory.mktemp("fiskj-results"))
    yield
    if old is None:
        os.environ.pop("FISKJ_HARNESS_RESULTS", None)
    else:
        os.environ["FISKJ_HARNESS_RESULTS"] = old
