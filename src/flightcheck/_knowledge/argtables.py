"""The engines' own parser tables, as generated from the installed engines.

``data/<engine>_<version>_args.json`` is written by ``scripts/gen_engine_tables.py`` from
vllm 0.33.0 / sglang 0.5.23 (every option: its option strings, nargs, choices, action kind,
type and default). flightcheck's built-in reader builds its parser from these tables, so
each flag's arity and choices are the engine's, not hand-copied. Loaded once, lazily
(json, a few milliseconds).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

_DATA = Path(__file__).resolve().parent / "data"

#: The engine release each table was generated from (the reader's reference version).
TABLE_VERSION: dict[str, str] = {"vllm": "0.33.0", "sglang": "0.5.23"}


@cache
def table(engine: str) -> dict[str, Any]:
    """The whole generated table of ``engine`` ("vllm" or "sglang")."""
    path = _DATA / f"{engine}_{TABLE_VERSION[engine]}_args.json"
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def options(engine: str) -> list[dict[str, Any]]:
    """Every option of the engine's parser, in the parser's order."""
    opts: list[dict[str, Any]] = table(engine)["options"]
    return opts


def default(engine: str, dest: str) -> Any:
    """The parser default of ``dest`` (None when the engine has no such option)."""
    for opt in options(engine):
        if opt["dest"] == dest:
            return opt["default"]
    return None


def values(engine: str, key: str) -> tuple[str, ...]:
    """A value list of the table (``kv_cache_dtypes``, ``quantization_choices``, ...)."""
    entry = table(engine).get(key) or {}
    return tuple(entry.get("values") or ())
