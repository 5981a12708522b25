"""The committed release atlas (src/flightcheck/_knowledge/atlas_data) is what the
conformance releases' own files say: ``scripts/gen_release_atlas.py`` run on the installed
vllm / sglang / flashinfer-python (their files read as text, never imported) gives the
committed entries; and the atlas' options agree with the import-based engine tables."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

from flightcheck._knowledge import atlas

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def gen() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_release_atlas", ROOT / "scripts" / "gen_release_atlas.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def site(engine_python: str) -> Path:
    return next((Path(engine_python).absolute().parents[1] / "lib").glob("python3*/site-packages"))


def _metadata(site: Path, dist: str) -> str:
    (info,) = site.glob(f"{dist}-*.dist-info")
    return (info / "METADATA").read_text(encoding="utf-8")


def _version(site: Path, dist: str) -> str:
    (info,) = site.glob(f"{dist}-*.dist-info")
    return info.name[len(dist) + 1 : -len(".dist-info")]


@pytest.mark.parametrize(
    ("engine", "dist"), [("vllm", "vllm"), ("sglang", "sglang"), ("flashinfer", "flashinfer_python")]
)
def test_the_committed_entry_matches_a_regeneration_from_the_installed_release(
    gen: ModuleType, site: Path, engine: str, dist: str
) -> None:
    version = _version(site, dist)
    assert version in atlas.releases(engine), f"{engine} {version} is not in the atlas"
    keep = None
    if engine == "flashinfer":  # the atlas keeps the modules vLLM's helpers probe
        probes = [pairs for r in atlas.releases("vllm") for pairs in atlas.flashinfer_probes(r).values()]
        keep = {"flashinfer"} | {module for pairs in probes for module, _ in pairs}
    fresh = gen.pack(engine, {version: gen.release(engine, site, metadata=_metadata(site, dist), keep=keep)})
    rows = fresh["rows"]
    for key, indexes in fresh["releases"][version].items():
        if not isinstance(indexes, list):  # a scalar fact (serve_model, serve_launcher)
            assert atlas._entry(engine, version).get(key) == indexes, (engine, key)
            continue
        regenerated = [rows[i] for i in indexes]
        committed = atlas._rows(engine, version, key)
        assert json.dumps(regenerated, sort_keys=True) == json.dumps(committed, sort_keys=True), (engine, key)


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_the_atlas_options_agree_with_the_import_based_table(conformance, engine: str) -> None:
    """Every option the engine's parser declares (import-based table) is in the AST-read
    atlas, with the same dest and arity; choices where the atlas has them are a superset
    (never narrower: a narrower list would refuse a value the engine takes)."""
    version = conformance.pinned_versions()[engine]
    table = [o for o in conformance.table(engine)["options"] if o["action"] != "help"]
    mine = {s: o for o in atlas.options(engine, version) for s in o["option_strings"] or [o["dest"]]}

    def arity(o: dict) -> object:
        no_value = ("store_true", "store_false", "store_const", "count", "BooleanOptionalAction")
        return 0 if o["action"] in no_value or o["nargs"] == 0 else o["nargs"]

    for o in table:
        strings = o["option_strings"] or [o["dest"]]
        found = [mine[s] for s in strings if s in mine]
        assert found, f"{engine} {version}: {strings} missing from the atlas"
        row = found[0]
        assert row["dest"] == o["dest"], strings
        assert arity(row) == arity(o), strings
        if row["choices"] is not None:
            assert o["choices"] is not None and {str(c) for c in o["choices"]} <= {str(c) for c in row["choices"]}, (
                strings
            )
