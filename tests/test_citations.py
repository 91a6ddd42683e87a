"""The repository cites only what it holds: field-case ids resolve in docs/field-cases.md, and no file names
the format notes or case list that live outside it (docs/spec.md "Sources")."""

from __future__ import annotations

import functools
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Where citations are written: code, tests, docs, scenarios, subject profiles and the agents in subjects/.
CITING = ("fiskj", "harness", "tests", "docs", "scenarios", "subjects", "bench", "scripts", "schemas")
SUFFIXES = {".py", ".md", ".toml", ".mjs", ".json", ".yml", ".sh"}
CASE = re.compile(r"\bF(\d\d)\b|field_case_f(\d\d)")
OUTSIDE = re.compile(r"FORMAT\.md|STYLE\.md|shared/cases|\.\./shared/|cases/field-cases")


@functools.lru_cache(maxsize=1)
def texts() -> dict[str, str]:
    """Every citing file's text, by its path relative to the repository (README.md included)."""
    out = {"README.md": (ROOT / "README.md").read_text(encoding="utf-8")}
    for top in CITING:
        for path in (ROOT / top).rglob("*"):
            if path.suffix in SUFFIXES and "__pycache__" not in path.parts and path.is_file():
                out[str(path.relative_to(ROOT))] = path.read_text(encoding="utf-8", errors="replace")
    return out


def test_every_field_case_id_cited_has_a_row_in_docs_field_cases():
    rows = set(re.findall(r"^\| (F\d\d) \|", (ROOT / "docs" / "field-cases.md").read_text(encoding="utf-8"), re.M))
    cited = {f"F{a or b}": name for name, text in texts().items() for a, b in CASE.findall(text)}
    assert cited and {case: where for case, where in cited.items() if case not in rows} == {}


def test_no_file_cites_the_format_notes_or_the_case_list_by_a_path_outside_the_repository():
    found = [f"{name}:{text.count(chr(10), 0, m.start()) + 1}: {m.group()}"
             for name, text in texts().items() if name != "tests/test_citations.py"
             for m in OUTSIDE.finditer(text)]
    assert found == []


def test_each_test_a_field_case_row_names_exists():
    doc = (ROOT / "docs" / "field-cases.md").read_text(encoding="utf-8")
    named = re.findall(r"`(tests/[\w/]+\.py)::(test_\w+)(\*?)`", doc)
    assert len(named) >= 18
    for path, test, prefix in named:
        source = (ROOT / path).read_text(encoding="utf-8")
        end = "" if prefix else r"\b"                      # ``test_name_*``: a prefix of some tests
        assert re.search(f"def {test}{end}", source), f"{path}::{test}{prefix}"
