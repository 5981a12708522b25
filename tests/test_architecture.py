"""The architecture as tests: no import cycle, and every engine flag spelling or engine
variable name lives in the engine knowledge modules (``flightcheck._knowledge.vllm`` /
``.sglang``), so a spelling cannot drift between two copies.

(Upward imports are import-linter's contract in pyproject.toml; CI runs ``lint-imports``.)
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from flightcheck._knowledge import engines, sglang, vllm

SRC = Path(__file__).resolve().parents[1] / "src" / "flightcheck"
#: modules that may spell engine flags: the knowledge modules, and flightcheck's own
#: command line, whose flags the contract spells as vLLM spells them.
ALLOWED = {
    # the engine packages: every module in them
    "_knowledge/engines.py",
    "_cli/main.py",
}
#: flightcheck's own intent flags, spelled as vLLM spells them by the contract: the intent's
#: validation names them in its messages.
OWN_FLAG_MODULES = {"_vocabulary/intent.py"}
#: spellings every command line shares (the model, its revision, node count, a config
#: file), flightcheck's own included, and one-letter flags that also belong to the shell
#: tools the fixes name (``nvidia-smi -r``, ``grep -q``): not engine-specific.
GENERIC = {"--model", "--revision", "--nnodes", "--config", "-n", "-r", "-q"}
ENV_NAME = re.compile(r"\b(?:VLLM|SGLANG)_[A-Z0-9_]{3,}")


def _modules() -> dict[str, Path]:
    out = {}
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC.parent).with_suffix("")
        name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        out[name] = path
    return out


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            inside.update(id(n) for n in ast.walk(node))
    return inside


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for name, path in mods.items():
        tree = ast.parse(path.read_text())
        skip = _type_checking_nodes(tree)
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [f"{node.module}.{a.name}" for a in node.names] + [node.module]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            for t in targets:
                if t in mods and t != name:
                    graph[name].add(t)
                    break
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle() -> None:
    graph = _graph()
    assert len(graph) > 100  # every module was read
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _engine_flags() -> set[str]:
    flags: set[str] = set()
    for mod in (vllm, sglang):
        flags |= set(mod.ALIASES) | set(mod.ALIASES.values()) | set(mod.FIELDS) | set(mod.BOOL_FLAGS)
        flags |= {v.split()[0] for v in mod.FLAG.values()}
    flags |= set(sglang.MULTICAST_FLAGS) | {sglang.FI_FUSION_BACKEND_FLAG, sglang.FI_FUSION_DISABLE_FLAG}
    return flags - GENERIC


def _strings(tree: ast.AST) -> list[tuple[int, str]]:
    """Every string literal of a module but its docstrings (prose may name a flag)."""
    docs = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = getattr(node, "body", [])
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docs.add(id(body[0].value))
    return [
        (n.lineno, n.value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
    ]


def _spellings_outside_knowledge() -> list[str]:
    flags = _engine_flags()
    flag_re = re.compile(
        r"(?<![\w-])(" + "|".join(sorted(map(re.escape, flags), key=len, reverse=True)) + r")(?![\w-])"
    )
    found = []
    for path in _modules().values():
        rel = str(path.relative_to(SRC))
        if rel in ALLOWED or rel.startswith(("_knowledge/vllm/", "_knowledge/sglang/")):
            continue
        own = rel in OWN_FLAG_MODULES
        for line, text in _strings(ast.parse(path.read_text())):
            for m in flag_re.finditer(text):
                if not own:
                    found.append(f"{rel}:{line}: {m.group(1)}")
            for m in ENV_NAME.finditer(text):
                found.append(f"{rel}:{line}: {m.group(0)}")
    return found


def test_engine_spellings_live_in_the_engine_knowledge_modules() -> None:
    assert _engine_flags() >= {"--tensor-parallel-size", "-tp", "--tp", "--context-length", "--enable-symm-mem"}
    assert _spellings_outside_knowledge() == []


def test_one_spelling_per_option_and_engine() -> None:
    """FC202, FC401 and FC403 spell SGLang's TP the same way (they once did not)."""
    assert engines.flag("sglang", "tp") == "--tp" and engines.flag("vllm", "tp") == "-tp"
    assert engines.layout("sglang", 8, 2, ep=True) == "--tp 8 --pp-size 2 --ep-size 8"
    assert engines.layout("vllm", 1, 1, 8, ep=True) == "-tp 1 -dp 8 --enable-expert-parallel"


# ---- engine names: compared only inside the engine packages ----------------------------------

#: where an engine's name may be compared: its own package, the registration. Nowhere else,
#: without exception: the engine-reader child (``_collect/engine_reader.py``) is told the
#: engine's paths by its parent, and the log scan (``_diagnose/scan.py``) asks every
#: registered engine's ``log`` rules.
ENGINE_HOMES = ("_knowledge/vllm/", "_knowledge/sglang/", "_knowledge/engines.py")
ENGINE_WORDS = frozenset({"vllm", "sglang"})


def _is_name(node: ast.AST) -> bool:
    """An engine's name: the literal, or a knowledge package's ``NAME`` (``_vllm.NAME``)."""
    if isinstance(node, ast.Attribute) and node.attr == "NAME":
        return True
    return isinstance(node, ast.Constant) and node.value in ENGINE_WORDS


def _holds_name(node: ast.AST) -> bool:
    """A literal tuple / list / set / dict with an engine name in it."""
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_is_name(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        return any(k is not None and _is_name(k) for k in node.keys)
    return False


def engine_name_comparisons(tree: ast.AST) -> list[int]:
    """Lines comparing something with an engine's name: ``x == "vllm"``, ``x in ("vllm",
    ...)``, ``case "sglang":``, a dispatch ``{"vllm": a, "sglang": b}[x]`` / ``.get(x)``."""
    lines: list[int] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(_is_name(o) or _holds_name(o) for o in operands):
                lines.append(node.lineno)
        elif (
            isinstance(node, ast.MatchValue)
            and _is_name(node.value)
            or isinstance(node, ast.Subscript)
            and _holds_name(node.value)
            or (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "get"
                and _holds_name(node.func.value)
            )
        ):
            lines.append(node.lineno)
    return sorted(lines)


def test_no_engine_name_comparison_outside_the_engine_packages() -> None:
    found: dict[str, list[int]] = {}
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith(ENGINE_HOMES):
            continue
        lines = engine_name_comparisons(ast.parse(path.read_text(encoding="utf-8")))
        if lines:
            found[rel] = lines
    assert found == {}, f"ask the Engine (engines.get(name)) instead of comparing its name: {found}"


def test_the_engine_name_counter_counts() -> None:
    src = (
        'a == "vllm"\n'
        'b != "sglang"\n'
        'c in ("vllm", "sglang")\n'
        'x = {"vllm": 1, "sglang": 2}[e]\n'
        'y = {"vllm": 1}.get(e)\n'
        'match e:\n    case "sglang":\n        pass\n'
        'z = package(facts, "vllm")\n'  # naming an engine is not comparing it
        "if engine != _vllm.NAME: pass\n"
    )
    assert engine_name_comparisons(ast.parse(src)) == [1, 2, 3, 4, 5, 7, 10]
