#!/usr/bin/env python3
"""Dump what the INSTALLED engines declare into src/flightcheck/_knowledge/data/*.json.

Run with the conformance venv's interpreter (scripts/conformance_env.sh builds it)::

    .conformance-venv/bin/python scripts/gen_engine_tables.py [--out DIR]

Writes, for the versions installed:

* ``vllm_<v>_args.json``: every option of the ``vllm serve`` parser, built as
  ``vllm/entrypoints/cli/main.py`` builds it (``FlexibleArgumentParser`` with subparsers,
  ``ServeSubcommand.subparser_init`` -> ``make_arg_parser``), plus its KV-cache dtypes,
  quantization methods and load formats.
* ``sglang_<v>_args.json``: every option of the parser ``sglang.srt.server_args.
  prepare_server_args`` builds (``argparse.ArgumentParser(prog="sglang serve")`` +
  ``ServerArgs.add_cli_args``), with the same lists.
* ``vllm_<v>_envs.json``: every variable ``vllm/envs.py`` declares (read as text with
  ``ast``: the ``if TYPE_CHECKING:`` block and the ``environment_variables`` dict), with its
  default as the source spells it, plus pins from vLLM's wheel metadata
  (``importlib.metadata.requires("vllm")``: flashinfer-python, transformers, torch).

Each engine is read in its own child process with a scrubbed environment (no VLLM_*,
SGLANG_* or HF_* from the caller; VLLM_TARGET_DEVICE=cpu; offline), so that the tables
depend on the installed packages and the Python version only. Output is deterministic:
sets are sorted and object addresses are removed from reprs.
"""

from __future__ import annotations

import argparse
import ast
import enum
import importlib
import importlib.metadata
import importlib.util
import inspect
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "src" / "flightcheck" / "_knowledge" / "data"
GENERATED_BY = "scripts/gen_engine_tables.py"

_ADDR = re.compile(r" at 0x[0-9a-fA-F]+")


# --------------------------------------------------------------------------- helpers


def stable_repr(value: object) -> str:
    return _ADDR.sub("", repr(value))


def jsonable(value: object, depth: int = 0) -> object:
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if depth > 8:
        return stable_repr(value)
    if isinstance(value, enum.Enum):
        return jsonable(value.value, depth + 1)
    if isinstance(value, dict):
        return {str(k): jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (set, frozenset)):
        return [jsonable(v, depth + 1) for v in sorted(value, key=stable_repr)]
    if isinstance(value, (list, tuple)):
        return [jsonable(v, depth + 1) for v in value]
    import dataclasses

    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        try:
            return {
                "__class__": type(value).__qualname__,
                **{f.name: jsonable(getattr(value, f.name), depth + 1) for f in dataclasses.fields(value)},
            }
        except Exception:  # noqa: BLE001 - a record that cannot be walked shows as its repr
            return stable_repr(value)
    fields = getattr(type(value), "__struct_fields__", None)  # msgspec.Struct
    if fields:
        return {
            "__class__": type(value).__qualname__,
            **{n: jsonable(getattr(value, n, None), depth + 1) for n in fields},
        }
    if callable(value):
        return callable_name(value)
    return stable_repr(value)


def callable_name(fn: object) -> str:
    if isinstance(fn, type):
        return fn.__name__ if fn.__module__ == "builtins" else f"{fn.__module__}.{fn.__qualname__}"
    mod = getattr(fn, "__module__", None)
    qual = getattr(fn, "__qualname__", None)
    if qual:
        return f"{mod}.{qual}" if mod and mod != "builtins" else qual
    func = getattr(fn, "func", None)  # functools.partial
    if func is not None:
        return f"partial({callable_name(func)})"
    return stable_repr(fn)


def action_kind(action: argparse.Action) -> str:
    """The argparse action an option behaves as: the first argparse class in its MRO."""
    names = {
        "_StoreAction": "store",
        "_StoreConstAction": "store_const",
        "_StoreTrueAction": "store_true",
        "_StoreFalseAction": "store_false",
        "_AppendAction": "append",
        "_AppendConstAction": "append_const",
        "_CountAction": "count",
        "_HelpAction": "help",
        "_VersionAction": "version",
        "_ExtendAction": "extend",
        "_SubParsersAction": "parsers",
        "BooleanOptionalAction": "BooleanOptionalAction",
    }
    for cls in type(action).__mro__:
        if cls.__module__ == "argparse" and cls.__name__ in names:
            return names[cls.__name__]
    return "custom"


def describe_parser(parser: argparse.ArgumentParser) -> list[dict]:
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            continue
        cls = type(action)
        out.append(
            {
                "option_strings": list(action.option_strings),
                "dest": action.dest,
                "action": action_kind(action),
                "action_class": cls.__name__
                if cls.__module__ == "argparse"
                else f"{cls.__module__}.{cls.__qualname__}",
                "nargs": action.nargs,
                "const": jsonable(action.const),
                "default": jsonable(action.default),
                "type": None if action.type is None else callable_name(action.type),
                "choices": None
                if action.choices is None
                else jsonable(
                    sorted(action.choices, key=stable_repr)
                    if isinstance(action.choices, (set, frozenset))
                    else list(action.choices)
                ),
                "required": bool(action.required),
                "deprecated": bool(getattr(action, "deprecated", False)),
            }
        )
    return out


def choices_of(options: list[dict], dest: str) -> list | None:
    for opt in options:
        if opt["dest"] == dest and opt["option_strings"]:
            return opt["choices"]
    return None


def value_list(options: list[dict], dest: str, fallback=None) -> dict:
    """The values an option accepts: the parser's ``choices``, else (an option the parser
    takes as a free string and a config validator checks later) the engine's own list,
    named by ``fallback = (where, values)``."""
    choices = choices_of(options, dest)
    if choices is not None:
        return {"values": [c for c in choices if c is not None], "from": f"parser choices of {dest}"}
    if fallback is None:
        return {"values": None, "from": f"parser has no choices for {dest}"}
    where, values = fallback
    return {"values": list(values), "from": f"{where} (the parser takes {dest} as a free string)"}


def rel_source(module: object) -> str:
    path = Path(inspect.getsourcefile(module))  # type: ignore[arg-type]
    parts = path.parts
    top = module.__name__.split(".")[0]  # type: ignore[attr-defined]
    idx = len(parts) - 1 - parts[::-1].index(top)
    return "/".join(parts[idx:])


def requires(dist: str, names: tuple[str, ...]) -> dict[str, list[str]]:
    """Requirement strings from the wheel metadata whose project is one of ``names``."""
    norm = lambda s: re.sub(r"[-_.]+", "-", s).lower()
    want = {norm(n) for n in names}
    found: dict[str, list[str]] = {}
    for req in importlib.metadata.requires(dist) or []:
        m = re.match(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req)
        if m and norm(m.group(1)) in want and "extra ==" not in req:
            found.setdefault(norm(m.group(1)), []).append(req)
    return found


def header(engine: str, files: list[str]) -> dict:
    version = importlib.metadata.version(engine)
    return {
        "source": f"{engine} {version} (installed from PyPI), read from: " + ", ".join(files),
        "generated_by": GENERATED_BY,
        "engine": engine,
        "engine_version": version,
        "python": "{}.{}".format(*sys.version_info[:2]),
    }


# --------------------------------------------------------------------------- children


def child_vllm() -> dict:
    from vllm.engine import arg_utils
    from vllm.entrypoints.cli import serve as serve_mod
    from vllm.entrypoints.common import cli_args
    from vllm.utils import argparse_utils
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    sys.argv = ["vllm", "serve"]  # the CLI's prog; arg_utils.add_cli_args reads sys.argv
    top = FlexibleArgumentParser(description="vLLM CLI")
    subparsers = top.add_subparsers(required=False, dest="subparser")
    parser = serve_mod.ServeSubcommand().subparser_init(subparsers)
    options = describe_parser(parser)

    from typing import get_args

    from vllm.config import cache as cache_cfg
    from vllm.model_executor import model_loader
    from vllm.model_executor.layers import quantization as quant
    from vllm.platforms import current_platform

    files = [rel_source(m) for m in (serve_mod, cli_args, arg_utils, argparse_utils, cache_cfg, quant, model_loader)]
    doc = header("vllm", files)
    doc.update(
        {
            "parser": "vllm serve (ServeSubcommand.subparser_init on the vllm CLI's FlexibleArgumentParser)",
            "prog": parser.prog,
            "platform": type(current_platform).__name__,
            "kv_cache_dtypes": value_list(
                options, "kv_cache_dtype", ("vllm.config.cache.KV_CACHE_DTYPES", cache_cfg.KV_CACHE_DTYPES)
            ),
            "quantization_choices": value_list(
                options,
                "quantization",
                ("vllm.model_executor.layers.quantization.QUANTIZATION_METHODS", quant.QUANTIZATION_METHODS),
            ),
            "deprecated_quantization": list(getattr(quant, "DEPRECATED_QUANTIZATION_METHODS", [])),
            "load_formats": value_list(
                options,
                "load_format",
                ("vllm.model_executor.model_loader.LoadFormats", get_args(model_loader.LoadFormats)),
            ),
            "options": options,
        }
    )
    return {"args": doc, "envs": vllm_envs()}


def vllm_envs() -> dict:
    spec = importlib.util.find_spec("vllm.envs")
    path = Path(spec.origin)  # type: ignore[union-attr, arg-type]
    text = path.read_text()
    tree = ast.parse(text)
    seg = lambda node: " ".join(ast.get_source_segment(text, node).split()) if node is not None else None
    declared: dict[str, dict] = {}
    getters: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for stmt in node.body:
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                    declared[stmt.target.id] = {
                        "annotation": seg(stmt.annotation),
                        "type_checking_default": seg(stmt.value),
                        "line": stmt.lineno,
                    }
        target = None
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            target, value = node.target.id, node.value
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            target, value = node.targets[0].id, node.value
        if target == "environment_variables" and isinstance(value, ast.Dict):
            for k, v in zip(value.keys, value.values, strict=False):
                if isinstance(k, ast.Constant) and isinstance(k.value, str):
                    getters[k.value] = v

    def getter_default(name: str, node: ast.AST) -> str | None:
        """The default the getter passes to os.getenv / os.environ.get / env_*(NAME, default)."""
        for sub in ast.walk(node):
            if not isinstance(sub, ast.Call) or len(sub.args) < 2:
                continue
            first = sub.args[0]
            if isinstance(first, ast.Constant) and first.value == name:
                return seg(sub.args[1])
        return None

    import vllm.envs as envs_mod

    runtime_keys = list(getattr(envs_mod, "environment_variables", {}).keys())
    names = list(dict.fromkeys([*declared, *getters, *runtime_keys]))
    variables = []
    for name in names:
        node = getters.get(name)
        variables.append(
            {
                "name": name,
                "annotation": declared.get(name, {}).get("annotation"),
                "type_checking_default": declared.get(name, {}).get("type_checking_default"),
                "getter_default": getter_default(name, node) if node is not None else None,
                "getter": seg(node),
                "in_type_checking": name in declared,
                "in_environment_variables": name in runtime_keys,
            }
        )
    doc = header("vllm", [rel_source(envs_mod), "vllm-<v>.dist-info/METADATA (Requires-Dist)"])
    pins = requires(
        "vllm",
        (
            "flashinfer-python",
            "transformers",
            "torch",
            "flashinfer-cubin",
            "flashinfer-jit-cache",
            "nvidia-cutlass-dsl",
        ),
    )
    doc.update(
        {
            "flashinfer_python": pins.get("flashinfer-python"),
            "transformers": pins.get("transformers"),
            "torch": pins.get("torch"),
            "requires_selected": pins,
            "requires_dist": [r for r in importlib.metadata.requires("vllm") or [] if "extra ==" not in r],
            "count": len(variables),
            "variables": variables,
        }
    )
    return doc


def child_sglang() -> dict:
    from sglang.srt import server_args as sa
    from sglang.srt.arg_groups import arg_utils as sg_arg_utils

    sys.argv = ["sglang", "serve"]
    parser = argparse.ArgumentParser(prog="sglang serve")
    sa.ServerArgs.add_cli_args(parser)
    options = describe_parser(parser)
    files = [rel_source(sa), rel_source(sg_arg_utils), "sglang/srt/arg_groups/fields/*.py"]
    doc = header("sglang", files)
    doc.update(
        {
            "parser": "sglang serve / sglang.launch_server (prepare_server_args: "
            "argparse.ArgumentParser(prog='sglang serve') + ServerArgs.add_cli_args)",
            "prog": parser.prog,
            "allow_abbrev": parser.allow_abbrev,
            "kv_cache_dtypes": value_list(options, "kv_cache_dtype"),
            "quantization_choices": value_list(options, "quantization"),
            "load_formats": value_list(options, "load_format"),
            "requires_selected": requires("sglang", ("flashinfer-python", "transformers", "torch")),
            "options": options,
        }
    )
    return {"args": doc}


# --------------------------------------------------------------------------- parent


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not re.match(r"^(VLLM_|SGLANG_|HF_|TRANSFORMERS_|CUDA_|PYTHON)", k)}
    env.update(
        VLLM_TARGET_DEVICE="cpu",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        VLLM_NO_USAGE_STATS="1",
        DO_NOT_TRACK="1",
        TOKENIZERS_PARALLELISM="false",
    )
    return env


def run_child(engine: str, python: str, timeout: float) -> dict:
    proc = subprocess.run(
        [python, str(Path(__file__).resolve()), "--child", engine],
        capture_output=True,
        check=False,
        env=clean_env(),
        timeout=timeout,
        cwd=str(REPO),
    )
    if proc.returncode != 0:
        tail = proc.stderr.decode(errors="replace")[-3000:]
        raise SystemExit(f"reading {engine} failed (exit {proc.returncode}):\n{tail}")
    return json.loads(proc.stdout.decode())


def dump(path: Path, doc: dict) -> None:
    path.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=DATA, help="directory for the JSON files")
    ap.add_argument("--python", default=sys.executable, help="the engines' interpreter")
    ap.add_argument("--engine", choices=["vllm", "sglang"], action="append")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--child", choices=["vllm", "sglang"], help=argparse.SUPPRESS)
    ns = ap.parse_args()
    if ns.child:
        # Engine logs must not reach the JSON on stdout.
        real = os.dup(1)
        os.dup2(2, 1)
        doc = child_vllm() if ns.child == "vllm" else child_sglang()
        os.write(real, json.dumps(doc).encode())
        sys.stdout.flush()
        os._exit(0)
    ns.out.mkdir(parents=True, exist_ok=True)
    for engine in ns.engine or ["vllm", "sglang"]:
        docs = run_child(engine, ns.python, ns.timeout)
        version = docs["args"]["engine_version"]
        written = []
        for kind, doc in docs.items():
            path = ns.out / f"{engine}_{version}_{kind}.json"
            dump(path, doc)
            written.append(path)
        for path in written:
            print(f"wrote {path} ({path.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
