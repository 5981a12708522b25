"""The catalogue against the source and test layout: every check lives in its family's
package, is documented, and has a test named for its code in its family's test module.

Test names are read from the test files with ``ast`` (not by importing them), so a test
module that fails to import still counts against its codes here rather than hiding them.
"""

from __future__ import annotations

import ast
import pkgutil
import re
from functools import cache

import pytest

import flightcheck._checks as checks_pkg
from flightcheck._checks import FAMILY_MODULES, load_all
from flightcheck._checks.framework import DOC_SECTIONS, REGISTRY, Check, iter_checks
from support import TESTS

#: Code prefix -> the family package under ``flightcheck._checks`` and ``tests/checks/test_<family>.py``.
FAMILIES = {
    "FC1": "toolchain",
    "FC2": "gpu",
    "FC3": "fabric",
    "FC4": "memory",
    "FC5": "checkpoint",
    "FC6": "host",
    "FC7": "engine",
    "FC8": "cluster",
    "FC9": "k8s",
}
CHECK_TESTS = TESTS / "checks"
NAMED = re.compile(r"test_fc(\d{3})_\w+")

load_all()
ALL: list[Check] = list(iter_checks("node")) + list(iter_checks("cluster"))
CODES = sorted(REGISTRY)


def family_of(code: str) -> str:
    return FAMILIES[code[:3]]


@cache
def named_tests(module: str) -> dict[str, str]:
    """``test_fcNNN_...`` name -> its source (decorators included) in tests/checks/<module>.py."""
    path = CHECK_TESTS / f"{module}.py"
    source = path.read_text()
    tree = ast.parse(source, filename=str(path))
    functions = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name.startswith("Test")):
        functions += [n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    out = {}
    for fn in functions:
        if NAMED.fullmatch(fn.name):
            parts = [ast.get_source_segment(source, d) or "" for d in fn.decorator_list]
            out[fn.name] = "\n".join([*parts, ast.get_source_segment(source, fn) or ""])
    return out


def test_the_registry_and_the_iterators_agree():
    assert sorted(c.code for c in ALL) == CODES and len(CODES) == len(ALL)
    assert {c[:3] for c in CODES} == set(FAMILIES)


def test_every_family_is_a_package_with_a_test_module():
    packages = {m.name for m in pkgutil.iter_modules(checks_pkg.__path__) if m.ispkg}
    assert packages - {"shared"} == set(FAMILIES.values())
    assert FAMILY_MODULES == tuple(FAMILIES.values())  # imported in code order
    for family in FAMILIES.values():
        assert (CHECK_TESTS / f"test_{family}.py").is_file(), f"tests/checks/test_{family}.py is missing"


@pytest.mark.parametrize("code", CODES)
def test_every_check_lies_under_its_familys_package(code):
    chk = REGISTRY[code]
    package = f"flightcheck._checks.{family_of(code)}"
    assert chk.code == code and chk.family == code[:3]
    assert chk.func.__module__.startswith(package + "."), f"{code} is defined in {chk.func.__module__}"


@pytest.mark.parametrize("code", CODES)
def test_every_code_has_a_named_test_in_its_familys_module(code):
    """At least one ``test_fcNNN_...`` in tests/checks/test_<family>.py, and it names the
    code it is about (it asserts on that code's outcome, not on a neighbour's)."""
    module = f"test_{family_of(code)}"
    prefix = f"test_{code.lower()}_"
    tests = {name: src for name, src in named_tests(module).items() if name.startswith(prefix)}
    assert tests, f"tests/checks/{module}.py has no test named {prefix}..."
    assert any(f'"{code}"' in src for src in tests.values()), (
        f"none of {sorted(tests)} mentions {code!r}: a test named for a code asserts on that code"
    )


def test_named_tests_name_codes_of_their_own_family():
    for module in (f"test_{family}" for family in FAMILIES.values()):
        for name in named_tests(module):
            code = "FC" + NAMED.fullmatch(name).group(1)
            assert code in REGISTRY, f"{module}.{name}: no check {code}"
            assert f"test_{family_of(code)}" == module, f"{module}.{name}: {code} is tested in test_{family_of(code)}"


@pytest.mark.parametrize("chk", ALL, ids=lambda c: c.code)
def test_every_check_is_documented(chk):
    assert re.fullmatch(r"FC\d{3}", chk.code)
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", chk.name), chk.name
    assert chk.summary and not chk.summary.startswith("#"), f"{chk.code} needs a one-line summary"
    for section in DOC_SECTIONS:
        assert section in chk.doc, f"{chk.code} lacks {section!r}"
        body = chk.doc.split(section, 1)[1].split("##", 1)[0].strip()
        assert len(body) > 20, f"{chk.code}: section {section!r} is empty"
