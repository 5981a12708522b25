"""The release atlas: what every vLLM, SGLang and FlashInfer release declares.

``atlas_data/<engine>.json`` is written by ``scripts/gen_release_atlas.py`` from the
released wheels (``pip download --no-deps``; the sources read as text and parsed with
``ast``, never imported), for every vLLM release from 0.6.0, every SGLang release from
0.4.0 and every FlashInfer release from 0.2.0 to the newest on the index when it ran.
Per release: the command-line options (option strings, dest, action, nargs, choices,
type, default, and for an option that takes a config record as JSON the record's class),
the fields of those records (nested records included), vLLM's environment variables, the
FlashInfer APIs vLLM's ``has_flashinfer_*`` helpers probe, FlashInfer's public module
names, and the wheel's ``Requires-Dist`` pins; where a release differs from the newest, two
launcher facts: how ``vllm serve --model X`` is taken (:func:`serve_model`) and whether
``sglang serve`` exists (:func:`serve_launcher`). An option whose own action refuses it
once given carries ``refuses`` (the message). SGLang 0.5.11-0.5.22 are read from their
``cp312`` wheels, FlashInfer 0.2.0.post1-0.4.1 from their sdists (PyPI has no wheel of them;
``scripts/atlas_fetch.py`` unpacks the ``.py`` files and PKG-INFO, nothing is built).

Stored compactly: each distinct row once (``rows``), each release a list of row indexes.
Loaded lazily, once per engine (json; no engine is imported).
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

_DATA = Path(__file__).resolve().parent / "atlas_data"

#: the packages the atlas holds (one data file each)
EXTRACTED = ("vllm", "sglang", "flashinfer")

EXACT = "exact"
BETWEEN = "between"
OLDER = "older-than-oldest"
NEWER = "newer-than-newest"


def version_key(text: str) -> tuple[int, ...] | None:
    """A sortable key of a release number (``0.8.5.post1`` after ``0.8.5``; local tags
    such as ``+cu130`` dropped); None for a pre-release or anything unparsable."""
    m = re.fullmatch(r"v?(\d+(?:\.\d+)*)(?:\.?post(\d+))?(?:\+[\w.]+)?", (text or "").strip())
    if m is None:
        return None
    nums = [int(x) for x in m.group(1).split(".")][:4]
    return (*nums, *[0] * (4 - len(nums)), int(m.group(2) or 0))


@cache
def _doc(engine: str) -> dict[str, Any]:
    path = _DATA / f"{engine}.json"
    try:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"rows": [], "releases": {}}
    return data


def releases(engine: str) -> list[str]:
    """The releases read for ``engine``, oldest first."""
    found = list(_doc(engine)["releases"])
    return sorted(found, key=lambda v: version_key(v) or (0,))


def nearest_release(engine: str, version: str | None) -> tuple[str | None, str]:
    """The release read whose rules speak for ``version``, and how it relates:

    * ``exact``: that very release was read;
    * ``between``: not read (a release the index never had, a local build); the newest
      release read before it;
    * ``newer-than-newest``: past the newest release read; the newest (extrapolated);
    * ``older-than-oldest``: before the oldest release read; None (nothing speaks for it).

    An unparsable version gives (None, "older-than-oldest") only when it cannot be
    placed; callers treat None as "no table".
    """
    known = releases(engine)
    key = version_key(version or "")
    if not known or key is None:
        return None, OLDER
    if version in known:
        return version, EXACT
    before = [v for v in known if (version_key(v) or (0,)) <= key]
    if not before:
        return None, OLDER
    if version_key(before[-1]) == key:  # the same release with a local tag (+cu130)
        return before[-1], EXACT
    return before[-1], NEWER if before[-1] == known[-1] else BETWEEN


def _entry(engine: str, release: str) -> dict[str, Any]:
    doc = _doc(engine)
    entry: dict[str, Any] = doc["releases"].get(release) or {}
    return entry


def _rows(engine: str, release: str, key: str) -> list[Any]:
    rows: list[Any] = _doc(engine)["rows"]
    return [rows[i] for i in _entry(engine, release).get(key) or ()]


def options(engine: str, release: str) -> list[dict[str, Any]]:
    """Every option of ``release``'s parser, in its order (the shape of the generated
    engine tables: option_strings, dest, action, nargs, choices, type, default, ...)."""
    return [dict(row) for row in _rows(engine, release, "options")]


def records(engine: str, release: str) -> dict[str, list[Any]]:
    """Config record class -> its fields: a name, or [name, nested record class]."""
    return {k: v for k, v in _rows(engine, release, "records")}


def envs(engine: str, release: str) -> dict[str, Any]:
    """The environment variables ``release`` declares, with the defaults its source spells."""
    return {k: v for k, v in _rows(engine, release, "envs")}


def serve_model(engine: str, release: str) -> str | None:
    """How ``release``'s ``vllm serve`` takes ``--model X`` (None: moved to the positional
    model, the newest releases' way): "refused" (vLLM 0.8.5 .. 0.11.0
    FlexibleArgumentParser.parse_args raises ValueError on a ``--model`` word) or
    "positional" (vLLM 0.6.0 vllm/scripts.py: left as an option, the positional model_tag
    required). Read from the source by ``scripts/gen_release_atlas.py``."""
    value = _entry(engine, release).get("serve_model")
    return value if isinstance(value, str) else None


def serve_launcher(engine: str, release: str) -> bool:
    """Whether ``release`` has the ``<engine> serve`` launcher: False where its wheel has no
    CLI package (SGLang 0.4.0: no sglang/cli, only ``python -m sglang.launch_server``)."""
    return _entry(engine, release).get("serve_launcher", True) is not False


def pins(engine: str, release: str) -> list[str]:
    """The wheel's ``Requires-Dist`` lines."""
    return [str(p) for p in _rows(engine, release, "pins")]


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pinned(engine: str, release: str, dist: str) -> str | None:
    """The version specifier ``release`` declares for ``dist`` in its unconditional (or
    ``extra == ...``) ``Requires-Dist`` lines (``flashinfer-python`` -> ``==0.7.2.post1``;
    ``flashinfer_python[cu13]==0.6.12`` counts for ``flashinfer-python``); None when it names
    none. A line restricted to another platform (``sys_platform`` / ``platform_machine``
    markers) is skipped."""
    want = _normalise(dist)
    for line in pins(engine, release):
        req, _, marker = line.partition(";")
        if "platform" in marker:
            continue
        m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*(.*)", req)
        if m and _normalise(m.group(1)) == want:
            return m.group(2).strip().strip("()") or ""
    return None


def flashinfer_probes(release: str) -> dict[str, list[tuple[str, str]]]:
    """vLLM ``release``'s ``has_flashinfer_*`` helpers (vllm/utils/flashinfer.py): helper ->
    the (module, attribute) pairs it requires (attribute "" for a module check)."""
    return {k: [(m, a) for m, a in v] for k, v in _rows("vllm", release, "flashinfer_probes")}


def flashinfer_modules(release: str) -> dict[str, frozenset[str]]:
    """FlashInfer ``release``'s public modules -> the names each defines or imports."""
    return {k: frozenset(v) for k, v in _rows("flashinfer", release, "modules")}
