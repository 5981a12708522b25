"""Generate the release atlas: what each vLLM, SGLang and FlashInfer release declares.

Every release's sources are read as text and parsed with ``ast`` (never imported): the
wheels fetched by ``scripts/atlas_fetch.py`` into a cache directory of
``<package>/<version>/`` trees. Per release it extracts

* vLLM: the ``vllm serve`` options (``vllm/engine/arg_utils.py`` ``add_cli_args``, the
  front-end's ``make_arg_parser`` in ``vllm/entrypoints/openai/cli_args.py`` or
  ``vllm/entrypoints/common/cli_args.py``): the explicit ``add_argument`` calls, and the
  options generated from config dataclasses by that release's ``get_kwargs`` (a field's
  ``Literal`` -> choices, ``bool`` -> ``--x/--no-x``, a list -> ``nargs='+'``, a dataclass ->
  a JSON record, ...); the fields of every config record an option takes as JSON, nested
  records included; the variables of ``vllm/envs.py``; the FlashInfer APIs its
  ``has_flashinfer_*`` helpers probe (``vllm/utils/flashinfer.py``); its pins;
  ``serve_model``: how ``vllm serve --model X`` is taken, where not the newest way
  (:func:`serve_model_option`); choices spread from an imported dict literal or a
  ``register_module`` registry (:func:`_spread_choices`);
* SGLang: ``ServerArgs.add_cli_args`` (``sglang/srt/server_args.py``) and its pins; an option
  whose custom action raises once given (``refuses``); ``serve_launcher: false`` for a wheel
  without sglang/cli;
* FlashInfer: the public names of its modules (``flashinfer/<module>/__init__.py``).

The result is written compactly (``src/flightcheck/_knowledge/atlas_data/<engine>.json``):
every distinct option row is stored once and each release lists the rows it has, by index.

    python scripts/gen_release_atlas.py --cache CACHE [--out DIR]
    python scripts/gen_release_atlas.py --cache CACHE --merge   (add / replace only the cached releases)

``--merge`` is for a cache that holds some releases only: the committed file is loaded, its
``rows`` are kept as they are and the cached releases' rows are appended, so that every other
release's entry (and every row it points at) stays byte-identical; an engine with nothing in
the cache is not rewritten.
    python scripts/gen_release_atlas.py --site SITE_PACKAGES --engine vllm   (one installed release, to stdout)
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "src" / "flightcheck" / "_knowledge" / "atlas_data"

Reader = Callable[[str], "str | None"]  # a path inside the release ("vllm/envs.py") -> its text


def version_key(text: str) -> tuple[int, ...]:
    """A sortable key of a release number (``0.8.5.post1`` after ``0.8.5``)."""
    m = re.fullmatch(r"(\d+(?:\.\d+)*)(?:\.post(\d+))?", text)
    if m is None:
        raise ValueError(f"not a release number: {text!r}")
    nums = [int(x) for x in m.group(1).split(".")]
    return (*nums, *[0] * (4 - len(nums)), int(m.group(2) or 0))


def _parse(text: str | None) -> ast.Module | None:
    if text is None:
        return None
    try:
        return ast.parse(text)
    except SyntaxError:
        return None


def _literal(node: ast.AST | None) -> tuple[bool, Any]:
    """(True, value) when ``node`` is a literal ast.literal_eval can read, else (False, None)."""
    if node is None:
        return False, None
    try:
        return True, ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


def _dotted(node: ast.AST) -> str:
    """``argparse.BooleanOptionalAction`` -> that text; '' for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return f"{head}.{node.attr}" if head else ""
    return ""


# --------------------------------------------------------------------------- module index


class Source:
    """The parsed modules of one release, with an index of classes and module-level names."""

    def __init__(self, files: dict[str, ast.Module], read: Reader | None = None) -> None:
        self.files = files
        self.read = read
        self.classes: dict[str, ast.ClassDef] = {}
        self.aliases: dict[str, ast.AST] = {}  # module-level NAME = <type expression>
        self.constants: dict[str, ast.AST] = {}  # module-level NAME = <any expression>
        self.imports: dict[str, str] = {}  # NAME -> the module a loaded file imports it from
        for path in sorted(files, key=lambda p: (not p.startswith(("vllm/config", "sglang/srt/server_args")), p)):
            self._index(files[path])

    def _index(self, tree: ast.Module) -> None:
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                self.classes.setdefault(node.name, node)
            elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                self.constants.setdefault(node.targets[0].id, node.value)
                self.aliases.setdefault(node.targets[0].id, node.value)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
                self.constants.setdefault(node.target.id, node.value)
                self.aliases.setdefault(node.target.id, node.value)
            elif sys.version_info >= (3, 12) and isinstance(node, getattr(ast, "TypeAlias", ())):
                self.aliases.setdefault(node.name.id, node.value)  # type: ignore[attr-defined]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for a in node.names:
                    self.imports.setdefault(a.asname or a.name, node.module)
            elif isinstance(node, ast.If):  # TYPE_CHECKING imports
                for sub in node.body:
                    if isinstance(sub, ast.ImportFrom) and sub.module and sub.level == 0:
                        for a in sub.names:
                            self.imports.setdefault(a.asname or a.name, sub.module)
                if _dotted(node.test).split(".")[-1] == "TYPE_CHECKING":
                    # ``else: NAME = Any``: what the name is when the parser is built. vLLM
                    # 0.10.2 vllm/config/__init__.py ``QuantizationMethods = Any`` makes
                    # ``--quantization`` take any string (the real parser, checked in
                    # tests/conformance/test_releases.py), though the name is also imported
                    for sub in node.orelse:
                        if (
                            isinstance(sub, ast.Assign)
                            and len(sub.targets) == 1
                            and isinstance(sub.targets[0], ast.Name)
                        ):
                            self.aliases.setdefault(sub.targets[0].id, sub.value)

    def want(self, name: str, depth: int = 0) -> None:
        """Load the module a name is imported from (and what it re-exports from), once."""
        if self.read is None or depth > 4 or name in self.classes or name in self.aliases:
            return
        module = self.imports.get(name)
        if module is None:
            return
        for path in (module.replace(".", "/") + ".py", module.replace(".", "/") + "/__init__.py"):
            if path in self.files:
                continue
            tree = _parse(self.read(path))
            if tree is not None:
                self.files[path] = tree
                before = self.imports.get(name)
                self.imports.pop(name, None)
                self._index(tree)
                if self.imports.get(name) == before:
                    return
                self.want(name, depth + 1)
                return

    def is_dataclass(self, name: str, depth: int = 0) -> bool:
        self.want(name)
        cls = self.classes.get(name)
        if cls is None or depth > 8:
            return False
        for dec in cls.decorator_list:
            text = _dotted(dec.func if isinstance(dec, ast.Call) else dec)
            if text.split(".")[-1] in ("dataclass", "config"):
                return True
        return any(self.is_dataclass(_dotted(b).split(".")[-1], depth + 1) for b in cls.bases)

    def fields(self, name: str, depth: int = 0, initvars: bool = False) -> list[tuple[str, ast.AST, ast.AST | None]]:
        """A dataclass's fields, base classes first: (name, annotation, default expression);
        ``initvars``: with its ``InitVar`` pseudo-fields (the constructor takes them)."""
        self.want(name)
        cls = self.classes.get(name)
        if cls is None or depth > 8:
            return []
        out: list[tuple[str, ast.AST, ast.AST | None]] = []
        for base in cls.bases:
            out += self.fields(_dotted(base).split(".")[-1], depth + 1, initvars)
        for node in cls.body:
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                text = ast.unparse(node.annotation)
                if text.startswith(("ClassVar", "typing.ClassVar")):
                    continue
                if text.startswith(("InitVar", "dataclasses.InitVar")) and not initvars:
                    continue
                out = [f for f in out if f[0] != node.target.id]
                out.append((node.target.id, node.annotation, node.value))
        return out


# --------------------------------------------------------------------------- type hints


def _atoms(src: Source, node: ast.AST | None, depth: int = 0) -> list[tuple[str, Any]]:
    """The members of a type hint, flattened: ("bool",), ("literal", values), ("list", inner)..."""
    if node is None or depth > 12:
        return [("other", None)]
    if isinstance(node, ast.Constant):
        if node.value is None:
            return [("None", None)]
        if isinstance(node.value, str):  # a string annotation
            parsed = _parse(node.value)
            if parsed and parsed.body and isinstance(parsed.body[0], ast.Expr):
                return _atoms(src, parsed.body[0].value, depth + 1)
        return [("other", None)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _atoms(src, node.left, depth + 1) + _atoms(src, node.right, depth + 1)
    if isinstance(node, ast.Subscript):
        head = _dotted(node.value).split(".")[-1]
        args = list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
        if head == "Optional":
            return _atoms(src, args[0], depth + 1) + [("None", None)]
        if head == "Union":
            return [a for arg in args for a in _atoms(src, arg, depth + 1)]
        if head == "Annotated":
            return _atoms(src, args[0], depth + 1)
        if head == "SkipValidation":
            # pydantic's SkipValidation[X] is X to the parser: vLLM 0.10.2 vllm/config/scheduler.py
            # ``enable_chunked_prefill: SkipValidation[bool]``, a BooleanOptionalAction flag; but
            # a record under it is not validated (``target_model_config:
            # SkipValidation[ModelConfig]``): no nested record there
            return [("other", None) if a[0] == "dataclass" else a for a in _atoms(src, args[0], depth + 1)]
        if head == "Literal":
            values: list[Any] = []
            for arg in args:
                ok, value = _literal(arg)
                if ok:
                    values.append(value)
                    continue
                inner = _atoms(src, arg, depth + 1) if isinstance(arg, (ast.Name, ast.Attribute)) else []
                if len(inner) == 1 and inner[0][0] == "literal" and inner[0][1] is not None:
                    values += inner[0][1]
                    continue
                return [("literal", None)]
            return [("literal", values)]
        if head in ("list", "List", "Sequence", "tuple", "Tuple", "set", "Set"):
            kind = {"List": "list", "Sequence": "list", "Tuple": "tuple", "Set": "set"}.get(head, head)
            return [(kind, args)]
        if head in ("dict", "Dict", "Mapping"):
            return [("dict", None)]
        if head in ("type", "Type", "Callable"):
            return [("other", None)]
        return [("other", head)]
    name = _dotted(node).split(".")[-1]
    if name in ("bool", "int", "float", "str"):
        return [(name, None)]
    if name in ("dict", "Dict"):
        return [("dict", None)]
    if name in ("list", "List"):
        return [("list", [])]
    if name == "Any":
        return [("other", None)]
    if src.is_dataclass(name):
        return [("dataclass", name)]
    src.want(name)
    if name in src.aliases and name not in src.classes:
        return _atoms(src, src.aliases[name], depth + 1)
    return [("other", name)]


def _elem_type(src: Source, args: list[ast.AST]) -> str:
    if not args:
        return "str"
    inner = [a for a in _atoms(src, args[0]) if a[0] != "None"]
    kinds = {a[0] for a in inner}
    if len(kinds) > 1:
        return "str"
    if kinds == {"literal"}:
        values = inner[0][1] or []
        return "int" if values and all(isinstance(v, int) for v in values) else "str"
    return next(iter(kinds)) if kinds <= {"int", "float", "str"} and kinds else "str"


def field_kwargs(src: Source, name: str, annotation: ast.AST, bool_action: str) -> dict[str, Any]:
    """What vLLM's ``get_kwargs`` makes of one config dataclass field (arg_utils.py)."""
    atoms = _atoms(src, annotation)
    kinds = {a[0] for a in atoms}
    out: dict[str, Any] = {"action": "store", "nargs": None, "choices": None, "type": "str"}
    dataclass = next((a[1] for a in atoms if a[0] == "dataclass"), None)
    if dataclass is not None:
        out["type"] = "json"
        out["record"] = dataclass
    elif kinds == {"bool", "str", "None"}:
        out.update(nargs="?", const=True)
    elif "bool" in kinds:
        out.update(action=bool_action, nargs=0, type=None)
    elif "literal" in kinds:
        values = next(a[1] for a in atoms if a[0] == "literal")
        if values and "str" not in kinds:
            out["choices"] = sorted(values, key=str) + ([None] if "None" in kinds else [])
        out["type"] = "int" if values and all(isinstance(v, int) for v in values) else "str"
    elif kinds & {"tuple", "list", "set"}:
        kind = next(a for a in atoms if a[0] in ("tuple", "list", "set"))
        out["nargs"] = "+"
        out["type"] = _elem_type(src, kind[1] or [])
        if kind[0] == "tuple" and kind[1] and not any(isinstance(x, ast.Constant) and x.value is ... for x in kind[1]):
            out["nargs"] = len(kind[1])
    elif "int" in kinds:
        out["type"] = "hr_int_or_auto" if name == "max_model_len" else "int"
    elif "float" in kinds:
        out["type"] = "float"
    elif "dict" in kinds:
        out["type"] = "dict_or_str" if ("str" in kinds or "other" in kinds) else "json"
    if "None" in kinds and out["type"] in ("int", "float", "hr_int_or_auto") and "bool" not in kinds:
        out["type"] = "str"  # optional_type(int): "None" is a value too; the reader keeps the text
    return out


def _default(src: Source, node: ast.AST | None) -> Any:
    """A field's default when the source spells it as a literal (``field(default=...)`` too)."""
    if node is None:
        return None
    if isinstance(node, ast.Call) and _dotted(node.func).split(".")[-1] in ("field", "Field"):
        for kw in node.keywords:
            if kw.arg == "default":
                return _default(src, kw.value)
        return None
    ok, value = _literal(node)
    return value if ok and isinstance(value, (str, int, float, bool, list, type(None))) else None


# --------------------------------------------------------------------------- vLLM


def _records(src: Source, cls: str, into: dict[str, list[Any]], depth: int = 0) -> None:
    """The fields of config record ``cls`` and of the records it nests, into ``into``."""
    if cls in into or depth > 8:
        return
    row: list[Any] = []
    into[cls] = row
    for name, annotation, _ in src.fields(cls, initvars=True):
        # a nested record only where the field is that record and nothing else (| None):
        # a union with dict or str takes any keys
        atoms = [a for a in _atoms(src, annotation) if a[0] != "None"]
        nested = atoms[0][1] if len(atoms) == 1 and atoms[0][0] == "dataclass" else None
        row.append([name, nested] if nested else name)
        if nested:
            _records(src, nested, into, depth + 1)


class _Emitter:
    """Collects option rows in the order a release's parser declares them."""

    def __init__(self, src: Source, bool_action: str) -> None:
        self.src = src
        self.bool_action = bool_action
        self.rows: list[dict[str, Any]] = []
        self.records: dict[str, list[Any]] = {}

    def add(self, strings: list[str], row: dict[str, Any]) -> None:
        dest = row.get("dest") or _dest(strings)
        if strings and not strings[0].startswith("-"):
            strings = []  # a positional: argparse gives it no option strings
            if any(not r["option_strings"] and r["dest"] == dest for r in self.rows):
                return
        taken = {s for r in self.rows for s in r["option_strings"]}
        if any(s in taken for s in strings):
            return  # one branch of an if/else pair already declared it
        full = {"option_strings": strings, "dest": dest, "action": "store", "nargs": None, "choices": None}
        full.update({"type": "str", "default": None, "const": None, "required": False})
        full.update(row)
        full["dest"] = dest
        if full.get("record"):
            _records(self.src, full["record"], self.records)
        self.rows.append(full)


def _dest(strings: list[str]) -> str:
    longs = [s for s in strings if s.startswith("--")]
    if not strings:
        return ""
    if not strings[0].startswith("-"):
        return strings[0]
    return (longs[0] if longs else strings[0]).lstrip("-").replace("-", "_")


_ACTIONS = {
    "store_true": "store_true",
    "store_false": "store_false",
    "store_const": "store_const",
    "append": "append",
    "count": "count",
    "BooleanOptionalAction": "BooleanOptionalAction",
    "StoreBoolean": "store",
}


def _explicit(src: Source, call: ast.Call, kwargs_of: dict[str, dict[str, dict[str, Any]]]) -> tuple[list[str], dict]:
    """One ``add_argument`` call: its option strings and the row it declares."""
    strings: list[str] = []
    row: dict[str, Any] = {}
    spread: list[Any] | None = None  # choices read by _spread_choices: they win over **kwargs' None
    for arg in call.args:
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            strings.append(arg.value)
        elif isinstance(arg, ast.Starred):
            continue
    for kw in call.keywords:
        if kw.arg is None:  # **model_kwargs["field"]  /  **{**model_kwargs["field"], "default": None}
            parts: list[tuple[ast.AST | None, ast.AST]] = [(None, kw.value)]
            if isinstance(kw.value, ast.Dict):
                parts = list(zip(kw.value.keys, kw.value.values, strict=False))
            for key_node, v in parts:
                if key_node is not None:
                    ok, key = _literal(key_node)
                    if ok and key == "default":
                        row["default"] = _default(src, v)
                    continue
                if isinstance(v, ast.Subscript) and isinstance(v.value, ast.Name):
                    ok, key = _literal(v.slice)
                    generated = kwargs_of.get(v.value.id, {}).get(key) if ok else None
                    if generated is not None:
                        row.update({k: x for k, x in generated.items() if k != "flags"})
            continue
        if kw.arg == "action":
            text = (
                kw.value.value
                if isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str)
                else _dotted(kw.value).split(".")[-1]
            )
            row["action"] = _ACTIONS.get(text, "store")
            no_value = ("store_true", "store_false", "store_const", "count", "BooleanOptionalAction")
            if row["action"] in no_value or (text not in _ACTIONS and _custom_takes_no_value(src, text)):
                row["nargs"] = 0
                row["type"] = None
            raised = _custom_raises(src, text) if text not in _ACTIONS else None
            if raised is not None:  # given at all, the parse fails: "ValueError: <its help>"
                help_ok, help_text = _literal(next((k.value for k in call.keywords if k.arg == "help"), None))
                row["refuses"] = f"{raised}: {help_text}" if help_ok and isinstance(help_text, str) else raised
        elif kw.arg == "nargs":
            ok, value = _literal(kw.value)
            row["nargs"] = value if ok else None
        elif kw.arg == "choices":
            ok, value = _literal(kw.value)
            if not ok and isinstance(kw.value, ast.Name) and kw.value.id in src.constants:
                ok, value = _literal(src.constants[kw.value.id])
            if not ok:
                ok, value = _spread_choices(src, kw.value)
                spread = list(value) if ok else None
            if ok and isinstance(value, (set, frozenset)):  # a set's order is the hash seed's: sorted
                value = sorted(value, key=str)
            row["choices"] = list(value) if ok and isinstance(value, (list, tuple)) else None
        elif kw.arg == "type":
            name = _dotted(kw.value).split(".")[-1] if not isinstance(kw.value, ast.Call) else ""
            row["type"] = {"int": "int", "float": "float", "str": "str", "loads": "json"}.get(name, "str")
            if name in ("human_readable_int", "human_readable_int_or_auto"):
                row["type"] = "hr_int" if name == "human_readable_int" else "hr_int_or_auto"
        elif kw.arg == "default":
            row["default"] = _default(src, kw.value)
        elif kw.arg == "dest":
            ok, value = _literal(kw.value)
            if ok:
                row["dest"] = value
        elif kw.arg == "const":
            ok, value = _literal(kw.value)
            row["const"] = value if ok else None
        elif kw.arg == "required":
            ok, value = _literal(kw.value)
            row["required"] = bool(value) if ok else False
    if spread is not None:  # argparse takes one choices: the explicit one (0.10.2 --reasoning-parser)
        row["choices"] = spread
    if row.get("action") in ("store_true", "store_false") and "default" not in row:
        row["default"] = row["action"] == "store_false"
    return strings, row


def _imported_dict_keys(src: Source, name: str) -> list[str] | None:
    """The keys of a module-level dict literal ``name`` that a loaded file imports (vLLM
    0.6.0 .. 0.6.4.post1 ``QUANTIZATION_METHODS`` in
    vllm/model_executor/layers/quantization/__init__.py, imported by
    vllm/engine/arg_utils.py), or the items of such a list literal of strings (the same name
    in 0.6.5 .. 0.8.4: ``QUANTIZATION_METHODS: List[str] = ["aqlm", ...]``); None when it is
    anything but such a literal."""
    module = src.imports.get(name)
    if module is None or src.read is None:
        return None
    base = module.replace(".", "/")
    tree = _parse(src.read(f"{base}/__init__.py")) or _parse(src.read(f"{base}.py"))
    for node in tree.body if tree is not None else []:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
        target = node.target if isinstance(node, ast.AnnAssign) else target
        if isinstance(target, ast.Name) and target.id == name and isinstance(node.value, ast.Dict):  # type: ignore[union-attr]
            keys = [_literal(k) for k in node.value.keys]  # type: ignore[union-attr]
            if all(ok and isinstance(k, str) for ok, k in keys):
                return [k for _, k in keys]
        if isinstance(target, ast.Name) and target.id == name and isinstance(node.value, ast.List):  # type: ignore[union-attr]
            items = [_literal(e) for e in node.value.elts]  # type: ignore[union-attr]
            if all(ok and isinstance(v, str) for ok, v in items):
                return [v for _, v in items]
    return None


def _registered_names(src: Source, manager: str) -> list[str] | None:
    """The names registered with ``@MANAGER.register_module(...)`` by the modules the
    manager's package ``__init__.py`` imports (importing the manager runs them): vLLM 0.8.5 ..
    0.11.0 vllm/reasoning/__init__.py, each parser module decorated with
    ``@ReasoningParserManager.register_module("name")`` (abs_reasoning_parsers.py
    ``_register_module`` fills ``reasoning_parsers``). None when one registration is not a
    literal name (then the choices are not known)."""
    module = src.imports.get(manager)
    if module is None or src.read is None:
        return None
    base = module.replace(".", "/")
    init = _parse(src.read(f"{base}/__init__.py"))
    if init is None:
        return None
    names: list[str] = []
    subs = [n.module for n in init.body if isinstance(n, ast.ImportFrom) and n.level == 1 and n.module]
    for sub in subs:
        tree = _parse(src.read(f"{base}/{sub.replace('.', '/')}.py"))
        if tree is None:
            return None
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            if node.func.attr != "register_module" or _dotted(node.func.value) != manager:
                continue
            cls = next((c for c in tree.body if isinstance(c, ast.ClassDef) and node in c.decorator_list), None)
            if cls is None or node.keywords:
                return None  # a call (not a decorator) or a keyword: not read
            if not node.args:
                names.append(cls.name)  # register_module(): the class's own name
                continue
            ok, value = _literal(node.args[0])
            if ok and isinstance(value, str):
                names.append(value)
            elif ok and isinstance(value, list) and all(isinstance(v, str) for v in value):
                names.extend(value)
            else:
                return None
    return list(dict.fromkeys(names))


def _spread_choices(src: Source, node: ast.AST) -> tuple[bool, Any]:
    """``choices=[*NAME, None]`` where NAME is an imported dict literal (its keys, in order;
    vLLM 0.6.0 .. 0.6.4.post1 vllm/engine/arg_utils.py ``--quantization``) or list literal
    of strings (0.6.5 .. 0.8.4), or
    ``choices=list(MANAGER.registry)`` (:func:`_registered_names`; vLLM 0.10.2
    vllm/engine/arg_utils.py ``--reasoning-parser``); (False, None) otherwise."""
    if (
        isinstance(node, ast.Call)
        and _dotted(node.func) == "list"
        and len(node.args) == 1
        and isinstance(node.args[0], ast.Attribute)
        and isinstance(node.args[0].value, ast.Name)
    ):
        names = _registered_names(src, node.args[0].value.id)
        return (True, names) if names else (False, None)
    if not isinstance(node, ast.List):
        return False, None
    out: list[Any] = []
    for elt in node.elts:
        if isinstance(elt, ast.Starred) and isinstance(elt.value, ast.Name):
            keys = _imported_dict_keys(src, elt.value.id)
            if keys is None:
                return False, None
            out.extend(keys)
            continue
        ok, value = _literal(elt)
        if not ok:
            return False, None
        out.append(value)
    return True, out


def _custom_takes_no_value(src: Source, name: str) -> bool:
    """A custom ``argparse.Action`` class that sets ``nargs=0`` itself (a deprecated flag)."""
    src.want(name)
    cls = src.classes.get(name)
    if cls is None:
        return False
    text = ast.unparse(cls)
    return bool(re.search(r"nargs\s*=\s*0\b|\[.nargs.\]\s*=\s*0\b|setdefault\(.nargs., 0\)", text))


def _custom_raises(src: Source, name: str) -> str | None:
    """The exception a custom ``argparse.Action`` class's ``__call__`` raises whenever the
    option is given (an unconditional ``raise`` in its body: SGLang 0.4.0
    sglang/srt/server_args.py ``DeprecatedAction`` raises ``ValueError(self.help)``), else None."""
    cls = src.classes.get(name)
    call = next((f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__call__"), None) if cls else None
    for stmt in call.body if call is not None else []:
        if isinstance(stmt, ast.Raise) and isinstance(stmt.exc, ast.Call):
            return _dotted(stmt.exc.func).split(".")[-1] or None
    return None


def _calls(node: ast.AST, method: str) -> Iterator[ast.Call]:
    """Every ``X.method(...)`` call under ``node``, in source order."""
    found = [n for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)]
    for n in sorted(found, key=lambda n: (n.lineno, n.col_offset)):
        if isinstance(n.func, ast.Attribute) and n.func.attr == method:
            yield n


def _generated(src: Source, cls: str, bool_action: str) -> dict[str, dict[str, Any]]:
    """``get_kwargs(cls)``: every field's argparse keywords."""
    out: dict[str, dict[str, Any]] = {}
    for name, annotation, default in src.fields(cls):
        row = field_kwargs(src, name, annotation, bool_action)
        row["default"] = _default(src, default)
        out[name] = row
    return out


def _customise(fn: ast.AST, var: str, kwargs: dict[str, dict[str, Any]]) -> None:
    """``var["field"]["key"] = value`` / ``del var["field"]["key"]`` statements of ``fn``."""
    for node in ast.walk(fn):
        targets: list[ast.AST] = []
        value: ast.AST | None = None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.Delete):
            targets = node.targets
        for t in targets:
            if not (isinstance(t, ast.Subscript) and isinstance(t.value, ast.Subscript)):
                continue
            inner = t.value
            if not (isinstance(inner.value, ast.Name) and inner.value.id == var):
                continue
            ok1, field_name = _literal(inner.slice)
            ok2, key = _literal(t.slice)
            if not (ok1 and ok2) or field_name not in kwargs:
                continue
            row = kwargs[field_name]
            if value is None:
                row.pop(key, None)
                if key == "nargs":
                    row["nargs"] = None
                continue
            if key == "type":
                text = ast.unparse(value)
                row["type"] = "json" if "loads" in text else ("int" if text == "int" else "str")
            elif key == "action":
                ok, lit = _literal(value)
                row["action"] = _ACTIONS.get(lit if ok else _dotted(value).split(".")[-1], "store")
                if row["action"] == "append":
                    row["nargs"] = None
            elif key in ("nargs", "choices", "default", "flags"):
                ok, lit = _literal(value)
                if key == "choices":
                    row["choices"] = list(lit) if ok and isinstance(lit, (list, tuple)) else None
                else:
                    row[key] = lit if ok else None


def _class_methods(src: Source, cls: str, depth: int = 0) -> list[ast.FunctionDef]:
    node = src.classes.get(cls)
    if node is None or depth > 8:
        return []
    out: list[ast.FunctionDef] = []
    for base in node.bases:
        out += _class_methods(src, _dotted(base).split(".")[-1], depth + 1)
    out += [n for n in node.body if isinstance(n, ast.FunctionDef)]
    return out


def _walk_adder(src: Source, em: _Emitter, fn: ast.FunctionDef, owner: str | None, seen: set[str]) -> None:
    """The options one ``add_cli_args`` / ``make_arg_parser`` declares, in order (calls into
    ``Cls.add_cli_args(parser)`` followed)."""
    kwargs_of: dict[str, dict[str, dict[str, Any]]] = {}
    for node in ast.walk(fn):  # X_kwargs = get_kwargs(Cls)  /  get_kwargs(cls)
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            v = node.value
            if isinstance(v, ast.Call) and _dotted(v.func).split(".")[-1] == "get_kwargs" and v.args:
                cls = _dotted(v.args[0]).split(".")[-1]
                cls = owner if cls == "cls" and owner else cls
                var = node.targets[0].id
                kwargs_of[var] = _generated(src, cls, em.bool_action)
                for method in _class_methods(src, cls):
                    if method.name.startswith("_customize"):
                        args = [a.arg for a in method.args.args]
                        if len(args) >= 2:
                            _customise(method, args[1], kwargs_of[var])
    events: list[tuple[int, int, ast.AST]] = []
    for node in ast.walk(fn):
        is_call = isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
        if is_call and node.func.attr in ("add_argument", "add_cli_args"):  # type: ignore[attr-defined]
            events.append((node.lineno, node.col_offset, node))  # type: ignore[attr-defined]
    for _, _, node in sorted(events, key=lambda e: (e[0], e[1])):
        assert isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
        if node.func.attr == "add_cli_args":
            target = _dotted(node.func.value).split(".")[-1]
            if target == "super" or isinstance(node.func.value, ast.Call):
                target = _base_of(src, owner) or ""
            if target and target not in seen:
                seen.add(target)
                for method in reversed(_class_methods(src, target)):  # the most derived one
                    if method.name == "add_cli_args":
                        _walk_adder(src, em, method, target, seen)
                        break
            continue
        strings, row = _explicit(src, node, kwargs_of)
        star = next((a for a in node.args if isinstance(a, ast.Starred)), None)
        fstring = next((a for a in node.args if isinstance(a, ast.JoinedStr)), None)
        if fstring is not None:  # for key, value in X_kwargs.items(): add_argument(f"--{key...}", **value)
            loop = _loop_over(fn, node)
            if loop is not None and loop[0] in kwargs_of:
                for key, generated in kwargs_of[loop[0]].items():
                    extra = list(generated.get("flags") or []) if star is not None else []
                    em.add([*extra, "--" + key.replace("_", "-")], {k: x for k, x in generated.items() if k != "flags"})
            continue
        if strings:
            em.add(strings, row)


def _base_of(src: Source, cls: str | None) -> str | None:
    node = src.classes.get(cls or "")
    if node is None or not node.bases:
        return None
    return _dotted(node.bases[0]).split(".")[-1]


def _loop_over(fn: ast.AST, call: ast.Call) -> tuple[str, str] | None:
    """The ``for key, value in VAR.items()`` loop around ``call``: (VAR, key name)."""
    for node in ast.walk(fn):
        if isinstance(node, ast.For) and any(c is call for c in ast.walk(node)):
            it = node.iter
            if (
                isinstance(it, ast.Call)
                and isinstance(it.func, ast.Attribute)
                and it.func.attr == "items"
                and isinstance(it.func.value, ast.Name)
                and isinstance(node.target, ast.Tuple)
                and isinstance(node.target.elts[0], ast.Name)
            ):
                return it.func.value.id, node.target.elts[0].id
    return None


def _function(tree: ast.Module, name: str) -> ast.FunctionDef | None:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    return None


_VLLM_FILES = (
    "vllm/engine/arg_utils.py",
    "vllm/entrypoints/openai/cli_args.py",
    "vllm/entrypoints/common/cli_args.py",
    "vllm/entrypoints/cli/serve.py",
    "vllm/config.py",
    "vllm/envs.py",
    "vllm/utils/flashinfer.py",
    "vllm/utils/argparse_utils.py",
)


def _vllm_sources(read: Reader, listing: list[str]) -> dict[str, ast.Module]:
    wanted = [p for p in listing if p in _VLLM_FILES or p.startswith(("vllm/config/", "vllm/utils/"))]
    wanted += [p for p in listing if p.startswith("vllm/") and p.endswith(("_args.py", "cli_args.py"))]
    out: dict[str, ast.Module] = {}
    for path in dict.fromkeys(wanted):
        tree = _parse(read(path))
        if tree is not None:
            out[path] = tree
    return out


def vllm_release(read: Reader, listing: list[str]) -> dict[str, Any]:
    """The atlas entry of one vLLM release (its sources read through ``read``)."""
    files = _vllm_sources(read, listing)
    src = Source(files, read)
    arg_utils = read("vllm/engine/arg_utils.py") or ""
    bool_action = "BooleanOptionalAction" if "BooleanOptionalAction" in arg_utils else "store_true"
    em = _Emitter(src, bool_action)
    front = files.get("vllm/entrypoints/common/cli_args.py") or files.get("vllm/entrypoints/openai/cli_args.py")
    maker = _function(front, "make_arg_parser") if front is not None else None
    if maker is not None:
        if "model_tag" not in ast.unparse(maker):
            em.add(["model_tag"], {"nargs": "?"})  # vllm serve's positional, in cli/serve.py then
        _walk_adder(src, em, maker, None, set())
    else:
        em.add(["model_tag"], {"nargs": "?"})
        for method in reversed(_class_methods(src, "AsyncEngineArgs")):
            if method.name == "add_cli_args":
                _walk_adder(src, em, method, "AsyncEngineArgs", set())
    serve = files.get("vllm/entrypoints/cli/serve.py")
    if serve is not None:  # options the serve subcommand adds around make_arg_parser
        for fn in ast.walk(serve):
            if isinstance(fn, ast.FunctionDef) and fn.name == "subparser_init":
                for call in _calls(fn, "add_argument"):
                    strings, row = _explicit(src, call, {})
                    if strings:
                        em.add(strings, row)
    options = [{k: v for k, v in row.items() if k != "record" or v} for row in em.rows]
    out: dict[str, Any] = {
        "options": options,
        "records": em.records,
        "envs": vllm_envs(files.get("vllm/envs.py")),
        "flashinfer_probes": flashinfer_probes(read("vllm/utils/flashinfer.py")),
    }
    handling = serve_model_option(read)
    if handling is not None:  # the newest releases' handling (moved to the positional) is the default
        out["serve_model"] = handling
    return out


_FLEXIBLE = ("vllm/utils/argparse_utils.py", "vllm/utils/__init__.py", "vllm/utils.py")


def serve_model_option(read: Reader) -> str | None:
    """How ``vllm serve --model X`` is taken, from ``FlexibleArgumentParser.parse_args``:

    * None: it is moved to the positional model (vLLM 0.11.1 .. 0.33.0
      vllm/utils/argparse_utils.py, with a warning);
    * "refused": ``any(arg == '--model' for arg in args)`` raises ValueError (vLLM 0.8.5 ..
      0.11.0 vllm/utils.py, then vllm/utils/__init__.py);
    * "positional": parse_args does not touch it and the serve subparser's ``model_tag`` is a
      required positional (vLLM 0.6.0 vllm/scripts.py): argparse refuses a line without one.
    """
    parse_args = None
    for path in _FLEXIBLE:
        tree = _parse(read(path))
        for node in ast.walk(tree) if tree is not None else []:
            if isinstance(node, ast.ClassDef) and node.name == "FlexibleArgumentParser":
                parse_args = next(
                    (f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "parse_args"), None
                )
        if parse_args is not None:
            break
    text = ast.unparse(parse_args) if parse_args is not None else ""
    for node in ast.walk(parse_args) if parse_args is not None else []:
        if isinstance(node, ast.Raise) and "you should provide the model as a" in ast.unparse(node):
            return "refused"
    if "--model" in text:
        return None
    for path in ("vllm/scripts.py", "vllm/entrypoints/cli/serve.py"):
        tree = _parse(read(path))
        for call in _calls(tree, "add_argument") if tree is not None else []:
            first = call.args[0] if call.args else None
            if isinstance(first, ast.Constant) and first.value == "model_tag":
                if not any(kw.arg == "nargs" for kw in call.keywords):
                    return "positional"
                return None
    return None


def vllm_envs(tree: ast.Module | None) -> dict[str, Any]:
    """``vllm/envs.py``'s variables: name -> the default its reader spells, as text."""
    if tree is None:
        return {}
    out: dict[str, Any] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=False):
                ok, name = _literal(key)
                if ok and isinstance(name, str) and name.startswith("VLLM_") and isinstance(value, ast.Lambda):
                    out.setdefault(name, _env_default(value.body))
    return out


def _env_default(body: ast.AST) -> Any:
    """The default of ``os.getenv("X", "d")`` / ``os.environ.get("X", "d")`` in a reader."""
    for node in ast.walk(body):
        if isinstance(node, ast.Call) and _dotted(node.func).split(".")[-1] in ("getenv", "get") and len(node.args) > 1:
            ok, value = _literal(node.args[1])
            if ok and isinstance(value, (str, int, float, bool, type(None))):
                return value
    return None


def flashinfer_probes(text: str | None) -> dict[str, list[list[str]]]:
    """vLLM's ``has_flashinfer_*`` helpers (vllm/utils/flashinfer.py): helper -> the
    (module, attribute) pairs it requires, from its ``required_functions`` list or its
    ``_has_module("flashinfer.x")`` / ``_get_submodule`` calls."""
    tree = _parse(text)
    if tree is None:
        return {}
    out: dict[str, list[list[str]]] = {}
    for fn in tree.body:
        if not (isinstance(fn, ast.FunctionDef) and fn.name.startswith("has_flashinfer")):
            continue
        needs: list[list[str]] = []
        for node in ast.walk(fn):
            if (
                isinstance(node, (ast.List, ast.Tuple))
                and all(isinstance(e, ast.Tuple) for e in node.elts)
                and node.elts
            ):
                for e in node.elts:
                    ok, pair = _literal(e)
                    if ok and len(pair) == 2 and all(isinstance(x, str) for x in pair):
                        needs.append([pair[0], pair[1]])
            if isinstance(node, ast.Call) and node.args:
                ok, mod = _literal(node.args[0])
                name = _dotted(node.func).split(".")[-1]
                if (
                    ok
                    and isinstance(mod, str)
                    and mod.startswith("flashinfer")
                    and name in ("_has_module", "find_spec")
                ):
                    needs.append([mod, ""])
        if needs:
            out[fn.name] = [list(p) for p in dict.fromkeys(tuple(p) for p in needs)]
    return out


# --------------------------------------------------------------------------- SGLang


def _sglang_field_row(
    src: Source, name: str, annotation: ast.AST, default: ast.AST | None
) -> tuple[list[str], dict] | None:
    """One ``A[T, "help"]`` / ``A[T, Arg(...)]`` field as ``add_cli_args_from_dataclass``
    registers it (sglang/srt/arg_groups/arg_utils.py); None for a field it skips."""
    if not (isinstance(annotation, ast.Subscript) and _dotted(annotation.value).split(".")[-1] in ("A", "Annotated")):
        return None
    parts = annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) else []
    if len(parts) < 2:
        return None
    meta: dict[str, ast.AST] = {}
    if isinstance(parts[1], ast.Call) and _dotted(parts[1].func).split(".")[-1] == "Arg":
        meta = {kw.arg: kw.value for kw in parts[1].keywords if kw.arg}
    elif not (isinstance(parts[1], ast.Constant) and isinstance(parts[1].value, str)):
        return None
    lit = {k: _literal(v) for k, v in meta.items()}
    if lit.get("no_cli", (False, False)) == (True, True):
        return None
    cli = (
        lit["cli_name"][1]
        if lit.get("cli_name", (False, None))[0] and lit["cli_name"][1]
        else "--" + name.replace("_", "-")
    )
    aliases = lit["aliases"][1] if lit.get("aliases", (False, None))[0] and lit["aliases"][1] else []
    strings = [cli, *aliases]
    row: dict[str, Any] = {"dest": name, "default": _default(src, default)}
    if "action" in meta:
        text = _dotted(meta["action"]).split(".")[-1] or str(lit["action"][1])
        row["action"] = _ACTIONS.get(text, "store")
        no_value = ("store_true", "store_false", "BooleanOptionalAction")
        if row["action"] in no_value or (text not in _ACTIONS and _custom_takes_no_value(src, text)):
            row.update(nargs=0, type=None)
        kw = meta.get("action_kwargs")
        if isinstance(kw, ast.Dict):
            for k, v in zip(kw.keys, kw.values, strict=False):
                ok, key = _literal(k) if k is not None else (False, None)
                if ok and key in ("nargs", "choices", "const"):
                    row[key] = _literal(v)[1]
        return strings, row
    atoms = [a for a in _atoms(src, parts[0]) if a[0] != "None"]
    kinds = {a[0] for a in atoms}
    choices = lit["choices"][1] if lit.get("choices", (False, None))[0] else None
    if "type_parser" in meta:
        row["type"] = "str"
    if "literal" in kinds and len(kinds) == 1:
        values = atoms[0][1]
        row["choices"] = list(choices or values) if (choices or values) else None
        row.setdefault("type", "int" if values and all(isinstance(v, int) for v in values) else "str")
    elif kinds == {"list"} and "type_parser" not in meta:
        row["nargs"] = lit["nargs"][1] if lit.get("nargs", (False, None))[1] else "+"
        row["type"] = _elem_type(src, atoms[0][1] or [])
        row["choices"] = list(choices) if choices else None
    elif kinds == {"bool"}:
        row.update(action="store_true", nargs=0, type=None)
    else:
        kind = next(iter(kinds)) if len(kinds) == 1 else "str"
        row.setdefault("type", kind if kind in ("int", "float", "str") else "str")
        row["choices"] = list(choices) if choices else None
        if lit.get("nargs", (False, None))[1]:
            row["nargs"] = lit["nargs"][1]
    if lit.get("const", (False, None))[0] and lit["const"][1] is not None:
        row["const"] = lit["const"][1]
    return strings, row


def sglang_release(read: Reader, listing: list[str]) -> dict[str, Any]:
    """The atlas entry of one SGLang release: ``ServerArgs.add_cli_args``'s options, the
    explicit ``add_argument`` calls and (later releases) the ``A[T, Arg(...)]`` fields
    ``add_cli_args_from_dataclass`` registers from the input namespaces."""
    files: dict[str, ast.Module] = {}
    for path in listing:
        if path == "sglang/srt/server_args.py" or path.startswith("sglang/srt/arg_groups/"):
            tree = _parse(read(path))
            if tree is not None:
                files[path] = tree
    src = Source(files, read)
    em = _Emitter(src, "store_true")
    cls = src.classes.get("ServerArgs")
    for method in cls.body if cls is not None else []:
        if isinstance(method, ast.FunctionDef) and method.name == "add_cli_args":
            events = [n for n in ast.walk(method) if isinstance(n, ast.Call)]
            for call in sorted(events, key=lambda n: (n.lineno, n.col_offset)):
                fname = _dotted(call.func).split(".")[-1]
                if fname == "add_cli_args_from_dataclass":
                    for ns in _sglang_namespaces(src):
                        for name, annotation, default in src.fields(ns):
                            got = _sglang_field_row(src, name, annotation, default)
                            if got is not None:
                                em.add(*got)
                elif fname == "add_argument" and isinstance(call.func, ast.Attribute):
                    strings, row = _explicit(src, call, {})
                    if strings:
                        em.add(strings, row)
    out: dict[str, Any] = {"options": em.rows}
    if not any(p.startswith("sglang/cli/") for p in listing):
        # no sglang/cli package: no ``sglang serve`` (the console script is sglang.cli.main's;
        # SGLang 0.4.0's wheel has only ``python -m sglang.launch_server`` and no entry point).
        # Written only when absent, so releases with it stay byte-identical.
        out["serve_launcher"] = False
    return out


def _sglang_namespaces(src: Source) -> list[str]:
    """The classes ``ServerArgs`` is assembled from (``_INPUT_NAMESPACES``), else itself."""
    value = src.constants.get("_INPUT_NAMESPACES")
    if isinstance(value, (ast.List, ast.Tuple)):
        return [_dotted(e).split(".")[-1] for e in value.elts]
    return ["ServerArgs"]


# --------------------------------------------------------------------------- FlashInfer


def flashinfer_release(read: Reader, listing: list[str], keep: set[str] | None = None) -> dict[str, Any]:
    """The public names of each FlashInfer module (``flashinfer/x/__init__.py`` and
    ``flashinfer/x.py``): what ``from flashinfer.x import name`` finds, read as text."""
    modules: dict[str, list[str]] = {}
    for path in listing:
        if not (path.startswith("flashinfer/") and path.endswith(".py")):
            continue
        parts = path[:-3].split("/")
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if len(parts) > 3 or any(p.startswith("_") for p in parts[1:]):
            continue
        if keep is not None and ".".join(parts) not in keep:
            continue
        tree = _parse(read(path))
        if tree is None:
            continue
        names: set[str] = set()
        body = list(tree.body)
        for node in body:  # module level, into if / try blocks (guarded imports and defs)
            if isinstance(node, ast.If):
                body += node.body + node.orelse
            elif isinstance(node, ast.Try):
                body += node.body + node.orelse + [s for h in node.handlers for s in h.body]
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.ImportFrom):
                names.update(a.asname or a.name for a in node.names if a.name != "*")
            elif isinstance(node, ast.Assign):
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        # a module __getattr__ answers any name: kept, so that nothing is judged missing there
        modules[".".join(parts)] = sorted(n for n in names if not n.startswith("_") or n == "__getattr__")
    return {"modules": modules}


# --------------------------------------------------------------------------- pins and packing


def pins(metadata: str | None) -> list[str]:
    """``Requires-Dist`` lines of the wheel's METADATA, extras' markers kept."""
    return [
        line.split(":", 1)[1].strip() for line in (metadata or "").splitlines() if line.startswith("Requires-Dist:")
    ]


EXTRACT = {"vllm": vllm_release, "sglang": sglang_release, "flashinfer": flashinfer_release}


def probed(vllm_releases: dict[str, dict[str, Any]]) -> set[str]:
    """The FlashInfer modules any vLLM release's helpers probe (the atlas keeps only those:
    every public module of every FlashInfer release would be ~1 MB)."""
    out = {"flashinfer"}
    for entry in vllm_releases.values():
        for pairs in entry.get("flashinfer_probes", {}).values():
            out.update(module for module, _ in pairs)
    return out


def release(engine: str, root: Path, metadata: str | None = None, keep: set[str] | None = None) -> dict[str, Any]:
    """One release from a directory holding its package tree (a cache entry or site-packages);
    ``keep``: the FlashInfer modules to keep (:func:`probed`)."""
    package = engine
    base = root / package
    listing = sorted(str(p.relative_to(root)) for p in base.rglob("*.py")) if base.is_dir() else []

    def read(path: str) -> str | None:
        p = root / path
        try:
            return p.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None

    entry = flashinfer_release(read, listing, keep) if engine == "flashinfer" else EXTRACT[engine](read, listing)
    if metadata is None:
        meta = root / "METADATA"
        metadata = meta.read_text(encoding="utf-8", errors="replace") if meta.exists() else None
    entry["pins"] = pins(metadata)
    return entry


def pack(engine: str, releases: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Intern rows: each distinct option row, env default and record stored once."""
    rows: list[Any] = []
    index: dict[str, int] = {}

    def intern(value: Any) -> int:
        key = json.dumps(value, sort_keys=True)
        if key not in index:
            index[key] = len(rows)
            rows.append(value)
        return index[key]

    out: dict[str, Any] = {}
    for version in sorted(releases, key=version_key):
        entry = releases[version]
        packed: dict[str, Any] = {}
        for key, value in entry.items():
            if key == "options":
                packed[key] = [intern(row) for row in value]
            elif isinstance(value, dict):
                packed[key] = [intern([k, v]) for k, v in value.items()]
            elif isinstance(value, list):
                packed[key] = [intern(v) for v in value]
            else:
                packed[key] = value
        out[version] = packed
    return {"engine": engine, "generated_by": "scripts/gen_release_atlas.py", "rows": rows, "releases": out}


def merge(doc: dict[str, Any], releases: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """``doc`` (a packed document) with ``releases`` added or replaced: its rows are kept in
    place and new ones appended, so the other releases' index lists are unchanged."""
    rows: list[Any] = list(doc["rows"])
    index: dict[str, int] = {}
    for i, row in enumerate(rows):
        index.setdefault(json.dumps(row, sort_keys=True), i)
    fresh = pack(doc["engine"], releases)
    remap: dict[int, int] = {}
    for i, row in enumerate(fresh["rows"]):
        key = json.dumps(row, sort_keys=True)
        if key not in index:
            index[key] = len(rows)
            rows.append(row)
        remap[i] = index[key]
    out = dict(doc["releases"])
    for version, packed in fresh["releases"].items():
        out[version] = {k: [remap[i] for i in v] if isinstance(v, list) else v for k, v in packed.items()}
    return {**doc, "rows": rows, "releases": out}


def _unpack(doc: dict[str, Any], version: str) -> dict[str, Any]:
    """One release of a packed document, as :func:`release` returned it."""
    rows = doc["rows"]
    out: dict[str, Any] = {}
    for key, value in doc["releases"][version].items():
        if not isinstance(value, list):  # a scalar fact (serve_model)
            out[key] = value
        elif key in ("options", "pins"):
            out[key] = [rows[i] for i in value]
        else:
            out[key] = dict(rows[i] for i in value)
    return out


def main() -> int:
    """Regenerate the atlas from the cache (or print one installed release)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", type=Path, help="the <package>/<version>/ trees atlas_fetch.py made")
    ap.add_argument("--site", type=Path, help="a site-packages directory: print its release of --engine")
    ap.add_argument("--engine", choices=sorted(EXTRACT))
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--merge", action="store_true", help="keep the committed releases; add / replace the cached ones")
    args = ap.parse_args()
    if args.site is not None:
        engine = args.engine or "vllm"
        print(json.dumps(release(engine, args.site), indent=1, sort_keys=True))
        return 0
    if args.cache is None:
        ap.error("--cache or --site is required")
    args.out.mkdir(parents=True, exist_ok=True)
    keep: set[str] | None = None
    for engine in [args.engine] if args.engine else ["vllm", "sglang", "flashinfer"]:
        base = args.cache / engine
        if engine == "flashinfer" and keep is None:  # what the committed vLLM atlas probes
            doc = json.loads((args.out / "vllm.json").read_text(encoding="utf-8"))
            keep = probed({v: _unpack(doc, v) for v in doc["releases"]})
        releases = {}
        for d in sorted(base.iterdir()) if base.is_dir() else []:
            if (d / "METADATA").exists() and re.fullmatch(r"\d+(\.\d+)*(\.post\d+)?", d.name):
                releases[d.name] = release(engine, d, keep=keep if engine == "flashinfer" else None)
        committed = args.out / f"{engine}.json"
        if args.merge and committed.exists():
            old = json.loads(committed.read_text(encoding="utf-8"))
            doc = merge(old, releases)
            if engine == "vllm":
                keep = probed({v: _unpack(doc, v) for v in doc["releases"]})
            if not releases:
                print(f"{engine}: nothing cached, left as it is")
                continue
        else:
            if engine == "vllm":
                keep = probed(releases)
            doc = pack(engine, releases)
        text = json.dumps(doc, separators=(",", ":"), sort_keys=True) + "\n"
        (args.out / f"{engine}.json").write_text(text, encoding="utf-8")
        print(f"{engine}: {len(releases)} releases, {len(doc['rows'])} distinct rows, {len(text):,} bytes")
        if args.merge:
            print(f"{engine}: merged {', '.join(sorted(releases, key=version_key))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
