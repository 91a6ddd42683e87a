"""fiskj's public API: ``fiskj.__all__`` (docs/architecture.md "The public API") resolves, and stays light.

``import fiskj`` loads none of its modules; the first public name loads the
API's modules, never the HTTP stack (fiskj/model.py imports it at the first
request).  Checked in a fresh interpreter: this one has imported much more.
"""

from __future__ import annotations

import ast
import json
import pkgutil
import subprocess
import sys

import pytest

import fiskj

#: Modules of the HTTP stack (fiskj.model.http_stack loads them at the first model request).
HTTP_STACK = ("http.client", "urllib.request", "urllib.error", "socket", "ssl", "email.utils")


def _fresh(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def test_every_public_name_resolves_to_the_object_its_module_exports():
    import importlib

    assert len(fiskj.__all__) == len(set(fiskj.__all__))
    modules = [importlib.import_module(f"fiskj.{m.name}") for m in pkgutil.iter_modules(fiskj.__path__)
               if m.name != "__main__"]  # (__main__ runs the CLI)
    for name in fiskj.__all__:
        value = getattr(fiskj, name)
        homes = [m.__name__ for m in modules if name in getattr(m, "__all__", ()) and getattr(m, name) is value]
        assert homes, f"fiskj.{name} is not the object any fiskj module exports under that name"
    assert set(fiskj.__all__) <= set(dir(fiskj))


def test_a_public_name_is_never_a_module_name():
    """A submodule, once imported, is an attribute of the package: a public name equal to it would be shadowed."""
    modules = {m.name for m in pkgutil.iter_modules(fiskj.__path__)}
    assert not set(fiskj.__all__) & modules


def test_a_name_outside_the_api_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'not_public'"):
        getattr(fiskj, "not_public")


def test_the_star_import_gives_exactly_the_public_names():
    names = _fresh("import json\nbefore = set(globals())\nfrom fiskj import *\n"
                   "print(json.dumps(sorted(set(globals()) - before - {'before'})))\n")
    assert names == sorted(fiskj.__all__)


def test_importing_fiskj_loads_none_of_its_modules_and_its_api_no_http_stack():
    got = _fresh("import json, sys\nimport fiskj\nbare = sorted(m for m in sys.modules if m.startswith('fiskj'))\n"
                 "from fiskj import *\n"
                 f"http = sorted(m for m in {HTTP_STACK!r} if m in sys.modules)\n"
                 "print(json.dumps({'bare': bare, 'http': http}))\n")
    assert got == {"bare": ["fiskj"], "http": []}


def test_the_lightness_check_sees_a_module_that_loads_the_http_stack():
    """The check above can fail: a fresh interpreter that imports the HTTP stack is seen doing so."""
    got = _fresh(f"import json, sys\nimport http.client\nprint(json.dumps(sorted(m for m in {HTTP_STACK!r} "
                 "if m in sys.modules)))\n")
    assert "http.client" in got


def test_the_architecture_doc_names_every_public_name_and_the_package_points_to_it():
    import re
    from pathlib import Path

    from fiskj import errors

    doc = (Path(__file__).resolve().parents[1] / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = doc.split("## The public API", 1)[1].split("\n## ", 1)[0].split("\n### ", 1)[0]
    named = set(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", section))
    public = set(fiskj.__all__)
    assert set(errors.__all__) <= public  # "every class of errors.py"
    assert public - set(errors.__all__) <= named, sorted(public - set(errors.__all__) - named)
    assert "The public API" in ast.get_docstring(ast.parse(Path(fiskj.__file__).read_text(encoding="utf-8")))
