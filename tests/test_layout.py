"""The test tree's own rules: test modules share helpers only through ``tests/support``
(no test module imports another, nor conftest), and no test reaches outside the
repository for data (the ``shared`` folder beside a checkout is not something users have).
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

from support import TESTS

SOURCES = sorted(p for p in TESTS.rglob("*.py") if "fixtures" not in p.parts and "fakes" not in p.parts)
#: joined here so that this file does not name them itself
OUTSIDE = (os.path.join("..", "shared"), os.path.join("/work", "shared"))


def rel(path: Path) -> str:
    return str(path.relative_to(TESTS.parent))


def imported_modules(tree: ast.AST) -> list[str]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            out.append("." * node.level + (node.module or ""))
    return out


def docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring nodes (prose may name the folder it promises not to read)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def test_the_tree_is_found():
    assert any(p.name == "conftest.py" for p in SOURCES) and len(SOURCES) > 40


def test_no_module_imports_a_test_module_or_conftest():
    bad = []
    for path in SOURCES:
        for name in imported_modules(ast.parse(path.read_text(), filename=str(path))):
            top = name.split(".")[0]
            if name.startswith(".") or top in ("conftest", "tests") or top.startswith("test_"):
                bad.append(f"{rel(path)} imports {name!r}")
    assert not bad, "helpers are shared through tests/support (import support.<module>):\n" + "\n".join(bad)


def test_nothing_is_read_from_outside_the_repository():
    bad = []
    for path in SOURCES:
        tree = ast.parse(path.read_text(), filename=str(path))
        skip = docstrings(tree)
        for node in ast.walk(tree):
            literal = isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip
            if literal and any(o in node.value for o in OUTSIDE):
                bad.append(f"{rel(path)}:{node.lineno} {node.value!r}")
    assert not bad, "\n".join(bad)
