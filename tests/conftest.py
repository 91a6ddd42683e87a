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

import compileall
import os
from pathlib import Path

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


def pytest_sessionstart(session: pytest.Session) -> None:
    """Compile fiskj/ and harness/ to bytecode once, before any worker starts: the suite starts hundreds of
    Python processes (campaigns, agents, race agents, tools), and with ``PYTHONDONTWRITEBYTECODE`` set (as on
    these machines) none of them writes its ``.pyc``, so each would compile every module it imports."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return  # the controller did it
    root = Path(__file__).resolve().parent.parent
    for package in ("fiskj", "harness"):
        compileall.compile_dir(str(root / package), quiet=1)
