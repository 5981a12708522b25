"""What the docstrings and comments under src/ point at exists: repository paths
(``src/flightcheck/...``, ``tests/...``, ``scripts/...``, ``docs/...``, ``bench/...``), paths
inside the package (``_knowledge/triton.py``, ``_checks/cluster/``), dotted names
(``flightcheck._checks.framework.check``), relative ``:mod:`` references, and the code
ranges a module docstring gives (``FC506–FC512 in :mod:`.files```).

Modules move (a module becomes a package of the same name, and back): a ``x.py`` whose
``x/`` package exists counts as existing, and so does the other way round.
Paths of the engines' own sources (``vllm/config/model.py``, NCCL's ``src/init.cc``) are not
the repository's and are not matched.
"""

from __future__ import annotations

import ast
import importlib
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

from flightcheck._checks import load_all
from flightcheck._checks.framework import REGISTRY
from support import REPO

PKG = REPO / "src" / "flightcheck"

#: a path from the repository root, or from the package (``_knowledge/...``, ``flightcheck/_x/...``)
PATH = re.compile(
    r"(?<![\w./-])((?:src/flightcheck|tests|scripts|docs|bench|recipes|\.ci)/[\w./-]*[\w/]"
    r"|(?:flightcheck/)?_[a-z]\w*/[\w./-]*[\w/])"
)
#: ``flightcheck.x.y``, not a schema id (``flightcheck.report/v1``) or a file name
DOTTED = re.compile(r"(?<![\w./-])(flightcheck(?:\.\w+)+)(?![\w/-])")
RELATIVE_MOD = re.compile(r":mod:`(\.[\w.]+)`")
RANGE = re.compile(r"FC(\d{3})\s*[–-]\s*FC(\d{3})")
CODE = re.compile(r"(?<!\w)FC(\d{3})(?!\d)")


def texts(path: Path) -> Iterator[tuple[int, str, bool]]:
    """(line, text, is the module docstring) for every docstring and comment of ``path``."""
    source = path.read_text()
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc is not None:
                line = node.body[0].lineno if node.body else 1
                yield line, doc, isinstance(node, ast.Module)
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            yield tok.start[0], tok.string, False


def module_of(path: Path) -> str:
    parts = path.relative_to(REPO / "src").with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_of(path: Path) -> str:
    mod = module_of(path)
    return mod if path.name == "__init__.py" else mod.rpartition(".")[0]


def exists(p: Path) -> bool:
    """``p``, or the same module as a package / as a file."""
    if p.exists():
        return True
    if p.suffix == ".py":
        return (p.with_suffix("") / "__init__.py").exists()
    return p.suffix == "" and p.with_suffix(".py").exists()


def attribute_exists(dotted: str) -> bool:
    """The longest importable prefix of ``dotted``, then attributes for the rest."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for name in parts[i:]:
            if not hasattr(obj, name):
                return False
            obj = getattr(obj, name)
        return True
    return False


def path_exists(ref: str) -> bool:
    ref = ref.rstrip("./")
    for base in (REPO, PKG):
        p = base / ref.removeprefix("flightcheck/")
        if exists(p):
            return True
        # a module path and an attribute: ``_collect/engine_reader.read_in_process``
        stem, dot, attr = ref.removeprefix("flightcheck/").rpartition(".")
        if dot and exists(base / f"{stem}.py") and (base / f"{stem}.py").is_relative_to(PKG):
            module = module_of(base / f"{stem}.py")
            if attribute_exists(f"{module}.{attr}"):
                return True
    return False


def broken_references() -> list[str]:
    load_all()
    declared_in: dict[str, str] = {c: chk.source for c, chk in REGISTRY.items()}
    out: list[str] = []
    for path in sorted(PKG.rglob("*.py")):
        where = path.relative_to(REPO)
        for line, text, is_module_doc in texts(path):
            for m in PATH.finditer(text):
                if not path_exists(m.group(1)):
                    out.append(f"{where}:{line}: {m.group(1)}")
            for m in DOTTED.finditer(text):
                if not attribute_exists(m.group(1)):
                    out.append(f"{where}:{line}: {m.group(1)}")
            for m in RELATIVE_MOD.finditer(text):
                try:
                    importlib.import_module(m.group(1), package_of(path))
                except ImportError:
                    out.append(f"{where}:{line}: :mod:`{m.group(1)}` (from {package_of(path)})")
            if is_module_doc:
                out += bad_ranges(f"{where}:{line}", text, declared_in)
    return out


def bad_ranges(where: str, doc: str, declared_in: dict[str, str]) -> list[str]:
    """A range whose ends are no checks, or that cuts short the one module it names: every
    code that module declares is named in the docstring (in a range or by itself)."""
    named: set[str] = {f"FC{n}" for n in CODE.findall(doc)}
    for a, b in RANGE.findall(doc):
        named |= {f"FC{n}" for n in range(int(a), int(b) + 1)}
    out = []
    for a, b in RANGE.findall(doc):
        ends = [f"FC{a}", f"FC{b}"]
        if any(e not in declared_in for e in ends):
            out.append(f"{where}: FC{a}–FC{b} (no check {[e for e in ends if e not in declared_in]})")
            continue
        inside = {f"FC{n}" for n in range(int(a), int(b) + 1)} & set(declared_in)
        modules = {declared_in[c] for c in inside}
        if len(modules) == 1:
            (module,) = modules
            left_out = sorted(c for c, src in declared_in.items() if src == module and c not in named)
            if left_out:
                out.append(f"{where}: FC{a}–FC{b} leaves out {left_out} of {module}")
    return out


def test_docstring_and_comment_references_exist() -> None:
    broken = broken_references()
    assert broken == [], "references to what does not exist:\n" + "\n".join(broken)


def test_the_scanner_finds_what_it_is_for(tmp_path: Path) -> None:
    """The patterns match the forms the sources use, and a moved module still resolves."""
    assert path_exists("_knowledge/vllm/") and path_exists("src/flightcheck/_checks/framework.py")
    assert path_exists("_knowledge/vllm.py")  # a module that became a package
    assert path_exists("_collect/engine_reader.read_in_process") and not path_exists("_collect/engine_reader.nope")
    assert not path_exists("_checks/cluster.py/x") and not path_exists("tests/no_such_test.py")
    assert attribute_exists("flightcheck._checks.framework.check") and not attribute_exists("flightcheck._nope.x")
    text = "see ``_checks/toolchain/nvcc.py``, flightcheck._checks.framework.Context and vllm/config/model.py"
    assert [m.group(1) for m in PATH.finditer(text)] == ["_checks/toolchain/nvcc.py"]
    assert [m.group(1) for m in DOTTED.finditer(text + " flightcheck.report/v1")] == [
        "flightcheck._checks.framework.Context"
    ]
    declared = {"FC501": "a.py", "FC502": "a.py", "FC503": "b.py", "FC504": "b.py"}
    assert bad_ranges("x", "FC503–FC504 here", declared) == []
    assert bad_ranges("x", "FC501–FC501 in a", declared) == ["x: FC501–FC501 leaves out ['FC502'] of a.py"]
    assert bad_ranges("x", "FC501–FC509", declared) == ["x: FC501–FC509 (no check ['FC509'])"]
