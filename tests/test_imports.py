"""The import graph of fiskj/ and harness/ has no cycle, and the roles import only what they may.

The graph is read from the source with :mod:`ast`, never by importing (a
mutant module patches fiskj when it is imported).  An edge ``A -> B`` is
any import of B written anywhere in A:

* ``import B`` and ``from B import name`` at module level, inside a
  function, a class, a ``try`` or an ``if`` (relative imports resolved);
  ``from P import name`` where ``P.name`` is a module is an edge to
  ``P.name``, else to ``P`` (a package ``__init__`` and what it re-exports
  count like any module);
* ``importlib.import_module("B")`` and ``__import__("B")`` with a literal
  string; with an f-string or a sum whose literal start is ``"P."`` or
  ``f"{__name__}."``, an edge to every module under that package (any of
  them may be the one imported);
* a ``"B:function"`` string (a registry of entry points resolved by name).

Imports under ``if TYPE_CHECKING:`` are not edges (they never run).
A cycle is printed as a chain ``a -> b -> ... -> a`` with the file and
line of every import in it.
"""

from __future__ import annotations

import ast
import functools
import re
from collections import deque
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("fiskj", "harness")
_ENTRY_POINT = re.compile(r"^((?:fiskj|harness)(?:\.[A-Za-z_]\w*)*):[A-Za-z_]\w*$")


@dataclass(frozen=True)
class Edge:
    """``source`` imports ``target`` at ``path:line`` (``how``: ``import``, ``dynamic`` or ``entry-point``)."""

    source: str
    target: str
    path: str
    line: int
    how: str

    def where(self) -> str:
        return f"{self.path}:{self.line}" + ("" if self.how == "import" else f" ({self.how})")


def modules() -> dict[str, Path]:
    """Every module of the packages: dotted name -> file (a package is its ``__init__.py``)."""
    out = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _literal_prefix(node: ast.expr, module: str) -> tuple[str, bool] | None:
    """The literal start of a module-name expression and whether that is all of it; None when unknown."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value, True
    if isinstance(node, ast.JoinedStr):
        prefix = ""
        for part in node.values:
            if isinstance(part, ast.Constant):
                prefix += str(part.value)
            elif (not prefix and isinstance(part, ast.FormattedValue) and isinstance(part.value, ast.Name)
                  and part.value.id == "__name__"):
                prefix = module
            else:
                return prefix, False
        return prefix, True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left = _literal_prefix(node.left, module)
        if left is None or not left[1]:
            return left
        right = _literal_prefix(node.right, module)
        return (left[0], False) if right is None else (left[0] + right[0], right[1])
    if isinstance(node, ast.Name) and node.id == "__name__":
        return module, True
    return None


class _Imports(ast.NodeVisitor):
    def __init__(self, module: str, path: Path, is_package: bool, known: dict[str, Path]) -> None:
        self.module, self.known = module, known
        self.package = module if is_package else module.rpartition(".")[0]
        self.path = str(path.relative_to(ROOT))
        self.edges: list[Edge] = []

    def _add(self, target: str, node: ast.AST, how: str = "import") -> None:
        while target and target not in self.known:  # an attribute path: the longest module prefix
            target = target.rpartition(".")[0]
        if target and target != self.module:
            self.edges.append(Edge(self.module, target, self.path, getattr(node, "lineno", 0), how))

    def visit_If(self, node: ast.If) -> None:
        if not _is_type_checking(node.test):
            for child in node.body:
                self.visit(child)
        for child in node.orelse:
            self.visit(child)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name.split(".")[0] in PACKAGES:
                self._add(alias.name, node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            base = self.package.split(".")
            base = base[: len(base) - (node.level - 1)]
            source = ".".join(base + ([node.module] if node.module else []))
        else:
            source = node.module or ""
        if source.split(".")[0] not in PACKAGES:
            return
        for alias in node.names:
            sub = f"{source}.{alias.name}"
            self._add(sub if sub in self.known else source, node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name in ("import_module", "__import__") and node.args:
            found = _literal_prefix(node.args[0], self.module)
            if found is not None:
                text, whole = found
                if whole:
                    self._add(text, node, "dynamic")
                elif text.endswith(".") and text.split(".")[0] in PACKAGES:
                    for mod in self.known:  # any module under the package may be the one imported
                        if mod.startswith(text):
                            self._add(mod, node, "dynamic")
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str):
            match = _ENTRY_POINT.match(node.value)
            if match:
                self._add(match.group(1), node, "entry-point")


def import_graph() -> dict[str, list[Edge]]:
    """module -> the edges out of it (sorted, one per distinct target: the first import of it)."""
    known = modules()
    graph: dict[str, list[Edge]] = {}
    for module, path in known.items():
        visitor = _Imports(module, path, path.name == "__init__.py", known)
        visitor.visit(ast.parse(path.read_text(encoding="utf-8"), str(path)))
        first: dict[str, Edge] = {}
        for edge in visitor.edges:
            first.setdefault(edge.target, edge)
        graph[module] = sorted(first.values(), key=lambda e: e.target)
    return graph


def _components(graph: dict[str, list[Edge]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            advanced = False
            for edge in edges:
                nxt = edge.target
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(graph.get(nxt, []))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    comp.append(member)
                    if member == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return sorted(out)


def _path(graph: dict[str, list[Edge]], start: str, goal: str, inside: set[str]) -> list[Edge]:
    """The shortest chain of edges from ``start`` to ``goal`` through ``inside`` (BFS)."""
    prev: dict[str, Edge | None] = {start: None}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        if node == goal:
            break
        for edge in graph[node]:
            if edge.target in inside and edge.target not in prev:
                prev[edge.target] = edge
                queue.append(edge.target)
    chain: list[Edge] = []
    node = goal
    while prev.get(node) is not None:
        edge = prev[node]
        assert edge is not None
        chain.append(edge)
        node = edge.source
    return chain[::-1]


def cycles(graph: dict[str, list[Edge]] | None = None) -> list[list[Edge]]:
    """Cycles that together use every import edge inside every strongly connected component.

    Each is a chain of edges ``a -> b -> ... -> a``; one per edge not yet
    covered by an earlier cycle, so every import that takes part in a cycle
    appears in at least one of them.
    """
    graph = import_graph() if graph is None else graph
    out = []
    for comp in _components(graph):
        inside = set(comp)
        covered: set[tuple[str, str]] = set()
        for source in comp:
            for edge in graph[source]:
                if edge.target not in inside or (edge.source, edge.target) in covered:
                    continue
                chain = [edge] + _path(graph, edge.target, edge.source, inside)
                covered.update((e.source, e.target) for e in chain)
                out.append(chain)
    return out


def render(chain: list[Edge]) -> str:
    """``a -> b -> a`` and the import behind every arrow."""
    names = " -> ".join([chain[0].source] + [e.target for e in chain])
    return names + "\n" + "\n".join(f"      {e.source} -> {e.target}: {e.where()}" for e in chain)


# --- the tests ---------------------------------------------------------------------------------


def test_the_graph_sees_imports_in_functions_relative_imports_and_importlib_strings():
    graph = {m: {e.target for e in edges} for m, edges in import_graph().items()}
    assert "fiskj.codec" in graph["fiskj.reader"]            # a relative import
    assert "harness.subject.contract" in graph["harness.cli.main"]  # an import inside a function
    src = ("import importlib\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import harness.cli.main\n"
           "def f(x):\n    from . import main\n    importlib.import_module('harness.report.report')\n"
           "    importlib.import_module(f'harness.checkers.{x}')\n    return 'harness.campaign.gate:run_gate'\n")
    visitor = _Imports("harness.cli.fake", ROOT / "harness" / "cli" / "fake.py", False, modules())
    visitor.visit(ast.parse(src))
    targets = {e.target for e in visitor.edges}
    assert {"harness.cli.main", "harness.report.report", "harness.checkers.i1_suspend",
            "harness.campaign.gate"} <= targets
    assert all(e.line != 4 for e in visitor.edges)          # under TYPE_CHECKING: not an edge


def test_cycles_are_found_and_printed_as_chains():
    e = lambda a, b: Edge(a, b, f"{a}.py", 1, "import")  # noqa: E731
    graph = {"a": [e("a", "b")], "b": [e("b", "c")], "c": [e("c", "a"), e("c", "d")], "d": []}
    (chain,) = cycles(graph)
    assert render(chain).splitlines()[0] == "a -> b -> c -> a"


def test_there_is_no_import_cycle_in_fiskj_and_harness():
    found = cycles()
    assert not found, f"{len(found)} import cycle(s):\n" + "\n".join(f"  {render(c)}" for c in found)


def test_the_subject_and_the_families_never_import_the_selftest():
    """The mutant subject and the fork server apply a preload by name (``FISKJ_PRELOAD``)."""
    bad = [e for m, edges in import_graph().items() for e in edges
           if m.startswith(("harness.subject", "harness.families")) and e.target.startswith("harness.selftest")]
    assert not bad, "\n".join(f"  {e.source} -> {e.target}: {e.where()}" for e in bad)


def test_no_module_imports_a_mutant_module():
    """A mutant module patches fiskj when imported: only a child process names it, in ``FISKJ_PRELOAD``."""
    bad = [e for edges in import_graph().values() for e in edges
           if e.target.startswith("harness.selftest.mutants.") and not e.target.rpartition(".")[2].startswith("_")]
    assert not bad, "\n".join(f"  {e.source} -> {e.target}: {e.where()}" for e in bad)


#: Names with one definition in harness/ (harness/names.py's, and the shared functions); a role imports them.
SHARED = ("reproduce_command", "replay_command", "fault_counts", "campaign_report", "RACES", "RACE_NAMES",
          "FAMILIES", "EXIT_OK", "EXIT_VIOLATION")


def _definitions(name: str) -> list[str]:
    """``path:line`` of every module-level assignment, ``def`` or ``class`` of ``name`` in harness/."""
    return _definition_index().get(name, [])


@functools.lru_cache(maxsize=1)
def _definition_index() -> dict[str, list[str]]:
    """Every module-level name defined in harness/ -> ``path:line`` of each definition (each file parsed once)."""
    out: dict[str, list[str]] = {}
    for path in sorted((ROOT / "harness").rglob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                names = [node.name]
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
            else:
                continue
            for name in names:
                out.setdefault(name, []).append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return out


def test_each_shared_name_and_constant_is_defined_once():
    import harness.names

    twice = {name: where for name in (*harness.names.__all__, *SHARED) if len(where := _definitions(name)) > 1}
    assert not twice, "defined more than once (import it from its one module):\n" + "\n".join(
        f"  {name}: {', '.join(where)}" for name, where in twice.items())
