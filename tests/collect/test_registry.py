"""The collector registry: ``COLLECTOR_MODULES`` (which sections each collector module
gives) must say what the modules' own ``@collector`` / ``@probe`` declarations say, since a
``check`` on recorded facts imports only the modules whose sections the files leave out."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import msgspec

import flightcheck
from flightcheck import _collect
from flightcheck._collect import COLLECTOR_MODULES, collect, sections_of

EXAMPLE = Path(flightcheck.__file__).parent / "_examples" / "b300.json"


def declared() -> dict[str, tuple[str, ...] | None]:
    """Module -> the sections its declarations give, or None when one of its probes runs
    whatever the facts files give (as COLLECTOR_MODULES spells it)."""
    _collect._load_modules()  # every module, whatever is provided
    out: dict[str, set[str] | None] = {}
    prefix = _collect.__name__ + "."
    for c in _collect.COLLECTORS.values():
        got = out.setdefault(c.func.__module__.removeprefix(prefix), set())
        assert got is not None
        got.update(c.sections)
    for p in _collect.PROBES.values():
        mod = p.func.__module__.removeprefix(prefix)
        if p.overrides_files:
            out[mod] = None
        else:
            sections = out.setdefault(mod, set())
            if sections is not None:
                sections.add(p.section)
    return {m: None if s is None else tuple(sorted(s)) for m, s in out.items()}


def test_the_table_says_what_the_declarations_say() -> None:
    table = {m: None if s is None else tuple(sorted(s)) for m, s in COLLECTOR_MODULES.items()}
    assert table == declared()


CHILD = r"""
import json, sys
from flightcheck._collect import _load_modules
_load_modules(json.loads(sys.argv[1]))
print(json.dumps(sorted(m for m in sys.modules if m.startswith("flightcheck._collect."))))
"""


def loaded_for(provided: list[str]) -> set[str]:
    """The collector modules a fresh interpreter imports when ``provided`` are given."""
    out = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(provided)], capture_output=True, text=True, check=True, timeout=60
    )
    return {m.removeprefix("flightcheck._collect.") for m in json.loads(out.stdout)}


def test_a_module_whose_sections_are_all_given_is_not_imported() -> None:
    given = sorted(sections_of(json.loads(EXAMPLE.read_text())))
    loaded = loaded_for(given)
    # every section given: only the probe that reads the model named now is imported
    assert "checkpoint" in loaded
    for mod in ("host", "env", "toolchain", "python_env", "jit_cache", "nvml", "compile_smoke", "multicast"):
        assert mod not in loaded, mod


def test_a_module_with_one_section_missing_is_imported() -> None:
    all_sections = {s for ss in COLLECTOR_MODULES.values() if ss for s in ss}
    # nvml gives four sections: without "imex" in the files, it must still run
    loaded = loaded_for(sorted(all_sections - {"imex"}))
    assert "nvml" in loaded
    assert "toolchain" not in loaded
    loaded = loaded_for([])
    assert set(COLLECTOR_MODULES) <= loaded


COLLECT = r"""
import sys, msgspec
from flightcheck._collect import collect
doc = msgspec.to_builtins(collect(None, [sys.argv[1]]))
doc.pop("collected_at", None)
print(msgspec.json.encode(doc).decode())
"""


def test_recorded_facts_collect_the_same_either_way() -> None:
    # the same facts from a fresh interpreter (the given modules skipped) as from this one
    # (every collector module imported first)
    fresh = subprocess.run(
        [sys.executable, "-c", COLLECT, str(EXAMPLE)], capture_output=True, text=True, check=True, timeout=60
    )
    _collect._load_modules()
    doc = msgspec.to_builtins(collect(None, [str(EXAMPLE)]))
    doc.pop("collected_at", None)
    assert json.loads(fresh.stdout) == json.loads(json.dumps(doc))
    assert doc["toolchain"] and doc["gpus"]
