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

``--under-load N`` runs the session beside N busy processes per core (started once by the controller,
ended with the session): the load test of tests/README.md "Under load" (every catch must hold on a
loaded machine; ``scripts/load-test.sh``).  ``--long`` also runs the tests marked ``long``: campaigns of a
real agent's bug variants whose invariants faster tests of the own mutants hold, and the comparisons over every
crash point whose default tests take a seeded sample (tests/README.md "What the suite costs"); without it they
are skipped, said in the summary.  It also gives the property tests their long example budget (tests/budget.py).

``tmp_path`` and every pytest temporary folder are on ``/dev/shm`` (tmpfs) when it is writable and allows
executables, as the harness's trial folders are: ``$PYTEST_DEBUG_TEMPROOT`` is set to it unless given (or
``--basetemp``); on a disk every fsync of the engine's appends and SQLite's commits was a wait.

Hypothesis runs under one profile for the whole suite: no deadline and no "too slow" health check, since
these machines are noisy and a loaded CI must not fail a property on timing.
"""

from __future__ import annotations

import compileall
import os
from pathlib import Path


def _tmpfs_root() -> str | None:
    """``/dev/shm`` when it is a writable folder that allows executables, else ``None``."""
    shm = "/dev/shm"
    try:
        ok = os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK) and not os.statvfs(shm).f_flag & os.ST_NOEXEC
    except OSError:
        return None
    return shm if ok else None


# tmp_path on tmpfs, as the harness's own trial folders (harness/runner/trial.py): the engine fsyncs every
# append and SQLite every commit, and on a disk each fsync is a wait (tests/README.md "What the suite costs").
# pytest's own root for its numbered session folders ($PYTEST_DEBUG_TEMPROOT), set before any is made; an
# explicit $PYTEST_DEBUG_TEMPROOT or --basetemp wins.  (xdist's workers get their folders from the controller.)
if "PYTEST_DEBUG_TEMPROOT" not in os.environ and _tmpfs_root():
    os.environ["PYTEST_DEBUG_TEMPROOT"] = _tmpfs_root()  # type: ignore[assignment]

import pytest
from hypothesis import HealthCheck, settings

from fiskj import ioseam

settings.register_profile("fiskj", deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile("fiskj")
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


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--under-load", type=int, default=0, metavar="N",
                     help="run the session beside N busy processes per core (tests/README.md \"Under load\")")
    parser.addoption("--long", action="store_true",
                     help="also run the tests marked long (tests/README.md \"What the suite costs\")")


def pytest_configure(config: pytest.Config) -> None:
    """Under ``--long`` the property tests draw their long budget (tests/budget.py), set before any test module
    is imported."""
    import budget

    budget.LONG = bool(config.getoption("long"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("long"):
        return
    skip = pytest.mark.skip(reason="long: in the long suite only (tests/README.md \"What the suite costs\"); run with --long")
    for item in items:
        if "long" in item.keywords:
            item.add_marker(skip)


_LOAD: list = []


def _start_load(per_core: int) -> None:
    """Start ``per_core`` busy processes per core (plain CPU loops at normal priority), once per session."""
    import subprocess
    import sys

    for _ in range(per_core * (os.cpu_count() or 1)):
        _LOAD.append(subprocess.Popen([sys.executable, "-I", "-S", "-c", "while True: pass"],
                                      stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    for proc in _LOAD:
        proc.kill()
        proc.wait()
    _LOAD.clear()


def pytest_sessionstart(session: pytest.Session) -> None:
    """Compile fiskj/ and harness/ to bytecode once, before any worker starts: the suite starts hundreds of
    Python processes (campaigns, agents, race agents, tools), and with ``PYTHONDONTWRITEBYTECODE`` set (as on
    these machines) none of them writes its ``.pyc``, so each would compile every module it imports."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return  # the controller did it
    if session.config.getoption("under_load", 0) > 0:
        _start_load(session.config.getoption("under_load"))
    root = Path(__file__).resolve().parent.parent
    for package in ("fiskj", "harness"):
        compileall.compile_dir(str(root / package), quiet=1)
