"""The import graph of fiskj/ and harness/ has no cycle, and no import runs up the layers.

The layers are docs/architecture.md's table "Layers" (read from the doc, so
the doc and the test cannot disagree): a module may import its own layer
or a lower one (:func:`layer_violations`); every module must have a layer.

The graph is read from the source with :mod:`ast`, never by importing (a
module may do work when it is imported).  An edge ``A -> B`` is
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

import pytest

ROOT = Path(__file__).resolve().parents[1]
ARCHITECTURE = ROOT / "docs" / "architecture.md"
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
    """module -> the edges out of it (sorted, one per distinct target: the first import of it); a new dict
    each call (the files are parsed once per test session)."""
    return dict(_import_graph())


@functools.lru_cache(maxsize=1)
def _import_graph() -> dict[str, list[Edge]]:
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


class LayerTableError(ValueError):
    """docs/architecture.md's "Layers" table is missing or malformed (what and where)."""


def read_layers(text: str) -> dict[str, int]:
    """The ``## Layers`` section's table of ``text``: module name (``a.b``, or ``a.b.*`` for a package and
    everything under it) -> rank (1 = lowest).  A row is ``| rank | ... | modules |``: the first cell an
    integer, the last the names in backticks.  Raises :class:`LayerTableError` when the section or its
    rows are missing, a rank repeats or does not increase, or a name is placed twice."""
    found = re.search(r"^## Layers[ \t]*$", text, re.M)
    if found is None:
        raise LayerTableError("no '## Layers' section")
    section = text[found.end():].split("\n## ", 1)[0]
    out: dict[str, int] = {}
    last = 0
    for n, line in enumerate(section.splitlines(), 1):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or not cells[0].isdigit():
            continue
        rank = int(cells[0])
        if rank <= last:
            raise LayerTableError(f"Layers section line {n}: rank {rank} after rank {last} (ranks increase down the table)")
        last = rank
        names = re.findall(r"`([^`]+)`", cells[-1])
        if not names:
            raise LayerTableError(f"Layers section line {n}: no module in its last cell")
        for name in names:
            if not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*(\.\*)?", name):
                raise LayerTableError(f"Layers section line {n}: {name!r} is not a module name (a.b or a.b.*)")
            if name in out:
                raise LayerTableError(f"Layers section line {n}: {name} is placed twice (rank {out[name]} and {rank})")
            out[name] = rank
    if not out:
        raise LayerTableError("the '## Layers' section has no table rows")
    return out


def layer_of(module: str, layers: dict[str, int]) -> int | None:
    """The rank of ``module``: its own name's, else that of the longest ``pkg.*`` covering it; None: unplaced."""
    if module in layers:
        return layers[module]
    parts = module.split(".")
    for k in range(len(parts), 0, -1):
        rank = layers.get(".".join(parts[:k]) + ".*")
        if rank is not None:
            return rank
    return None


def layer_violations(graph: dict[str, list[Edge]], layers: dict[str, int]) -> tuple[list[Edge], list[str]]:
    """The edges that import a higher layer than their own, and the modules no layer places."""
    unplaced = sorted(m for m in graph if layer_of(m, layers) is None)
    up = [e for edges in graph.values() for e in edges
          if None not in (layer_of(e.source, layers), layer_of(e.target, layers))
          and layer_of(e.target, layers) > layer_of(e.source, layers)]  # type: ignore[operator]
    return up, unplaced


def render_violation(edge: Edge, layers: dict[str, int]) -> str:
    return (f"{edge.source} (layer {layer_of(edge.source, layers)}) imports {edge.target} "
            f"(layer {layer_of(edge.target, layers)}): {edge.where()}")


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


def test_no_module_outside_the_self_test_imports_a_patch():
    """A patch breaks fiskj when called: only the mutants' table names one, and only a child's preload calls it."""
    bad = [e for m, edges in import_graph().items() for e in edges
           if e.target.startswith("harness.selftest.patches") and not m.startswith("harness.selftest")]
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


# --- the layers ------------------------------------------------------------------------------------


def test_no_import_runs_up_the_layers_of_the_architecture_doc():
    layers = read_layers(ARCHITECTURE.read_text(encoding="utf-8"))
    up, unplaced = layer_violations(import_graph(), layers)
    assert not unplaced, ("modules the Layers table of docs/architecture.md does not place (add them to a row):\n"
                          + "\n".join(f"  {m}" for m in unplaced))
    assert not up, (f"{len(up)} import(s) against the layers of docs/architecture.md (move the shared thing to "
                    "the lower layer):\n" + "\n".join(f"  {render_violation(e, layers)}" for e in up))


def test_every_layer_of_the_doc_places_a_module():
    """A row that names no existing module is a stale row (a package renamed or deleted)."""
    graph = import_graph()
    layers = read_layers(ARCHITECTURE.read_text(encoding="utf-8"))
    stale = [name for name in layers
             if not any(m == name or (name.endswith(".*") and (m == name[:-2] or m.startswith(name[:-1])))
                        for m in graph)]
    assert not stale, f"Layers rows name no module: {stale}"


_TABLE = """# doc

## Layers

| rank | layer | modules |
|---|---|---|
| 1 | base | `p.base` |
| 2 | middle | `p.mid.*` |
| 3 | top | `p.top` `p.mid.late` |

## Next
"""


def _graph(*pairs: tuple[str, str]) -> dict[str, list[Edge]]:
    graph: dict[str, list[Edge]] = {}
    for a, b in pairs:
        graph.setdefault(a, []).append(Edge(a, b, f"{a}.py", 3, "import"))
        graph.setdefault(b, [])
    return graph


def test_a_planted_import_up_the_layers_is_found_and_named():
    layers = read_layers(_TABLE)
    assert layers == {"p.base": 1, "p.mid.*": 2, "p.top": 3, "p.mid.late": 3}
    assert layer_of("p.mid.x.y", layers) == 2 and layer_of("p.mid.late", layers) == 3  # the longest name wins
    ok = _graph(("p.top", "p.mid.a"), ("p.mid.a", "p.base"), ("p.mid.late", "p.mid.a"), ("p.mid.a", "p.mid.b"))
    assert layer_violations(ok, layers) == ([], [])
    bad = _graph(("p.top", "p.mid.a"), ("p.base", "p.mid.a"), ("p.mid.a", "p.mid.late"), ("p.mid.a", "p.other"))
    up, unplaced = layer_violations(bad, layers)
    up.sort(key=lambda e: e.source)
    assert [(e.source, e.target) for e in up] == [("p.base", "p.mid.a"), ("p.mid.a", "p.mid.late")]
    assert unplaced == ["p.other"]
    assert render_violation(up[0], layers) == "p.base (layer 1) imports p.mid.a (layer 2): p.base.py:3"


def test_a_planted_function_level_import_against_the_real_layers_is_found():
    """End to end: a checker that imports the campaign inside a function, parsed with ast, against the doc."""
    layers = read_layers(ARCHITECTURE.read_text(encoding="utf-8"))
    graph = import_graph()
    src = "def f():\n    from harness.campaign import campaign\n    return campaign\n"
    visitor = _Imports("harness.checkers.planted", ROOT / "harness" / "checkers" / "planted.py", False, modules())
    visitor.visit(ast.parse(src))
    graph["harness.checkers.planted"] = visitor.edges
    up, unplaced = layer_violations(graph, layers)
    assert unplaced == []
    assert [(e.source, e.target, e.line) for e in up] == [("harness.checkers.planted", "harness.campaign.campaign", 2)]


@pytest.mark.parametrize("text, message", [
    ("# doc\n", "no '## Layers' section"),
    ("## Layers\n\nnone\n", "no table rows"),
    ("## Layers\n| 2 | a | `x` |\n| 1 | b | `y` |\n", "rank 1 after rank 2"),
    ("## Layers\n| 1 | a | `x` |\n| 2 | b | `x` |\n", "placed twice"),
    ("## Layers\n| 1 | a | none |\n", "no module in its last cell"),
    ("## Layers\n| 1 | a | `x/y.py` |\n", "not a module name"),
])
def test_a_malformed_layers_table_is_a_clear_error(text, message):
    with pytest.raises(LayerTableError, match=re.escape(message)):
        read_layers(text)
