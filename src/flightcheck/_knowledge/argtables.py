"""The engines' own parser tables, as generated from the installed engines.

``data/<engine>_<version>_args.json`` is written by ``scripts/gen_engine_tables.py`` from
vllm 0.33.0 / sglang 0.5.23 (every option: its option strings, nargs, choices, action kind,
type and default). flightcheck's built-in reader builds its parser from these tables, so
each flag's arity and choices are the engine's, not hand-copied. Loaded once, lazily
(json, a few milliseconds).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

from flightcheck._vocabulary.version import parse

_DATA = Path(__file__).resolve().parent / "data"


@cache
def releases(engine: str) -> tuple[str, ...]:
    """The engine releases ``data/`` has a table of, oldest first (PEP 440 order: a new
    release is a regenerated table, picked up with no other change)."""
    found = []
    for path in _DATA.glob(f"{engine}_*_args.json"):
        text = path.name.removeprefix(f"{engine}_").removesuffix("_args.json")
        v = parse(text)
        if v is not None:
            found.append((v, text))
    return tuple(text for _, text in sorted(found))


class _Newest(Mapping[str, str]):
    """engine -> the newest release with a table (the reader's reference version)."""

    def __getitem__(self, engine: str) -> str:
        known = releases(engine)
        if not known:
            raise KeyError(engine)
        return known[-1]

    def __iter__(self) -> Iterator[str]:
        names = {p.name.split("_", 1)[0] for p in _DATA.glob("*_args.json")}
        return iter(sorted(n for n in names if releases(n)))

    def __len__(self) -> int:
        return sum(1 for _ in self)


#: The engine release each table was generated from (the reader's reference version).
TABLE_VERSION: Mapping[str, str] = _Newest()


def clear() -> None:
    """Forget the tables read (a test that points ``_DATA`` elsewhere)."""
    releases.cache_clear()
    table.cache_clear()


@cache
def table(engine: str) -> dict[str, Any]:
    """The whole generated table of ``engine`` (its newest release's)."""
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
