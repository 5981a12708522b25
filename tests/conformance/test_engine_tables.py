"""The committed engine tables (src/flightcheck/_knowledge/data) are what the installed
engines say: regenerating them with the conformance venv gives the same bytes."""

from __future__ import annotations

import json
import subprocess


def expected_files(conformance) -> list[str]:
    v = conformance.pinned_versions()
    return [f"vllm_{v['vllm']}_args.json", f"vllm_{v['vllm']}_envs.json", f"sglang_{v['sglang']}_args.json"]


def test_data_directory_holds_only_the_generated_json(conformance) -> None:
    names = sorted(p.name for p in conformance.DATA.iterdir())
    assert names == sorted(expected_files(conformance)), "only the generated JSON files live there"
    for name in names:
        doc = json.loads((conformance.DATA / name).read_text())
        assert doc["generated_by"] == "scripts/gen_engine_tables.py"
        engine, version = name.split("_")[:2]
        assert doc["engine"] == engine and doc["engine_version"] == version
        assert doc["source"].startswith(f"{engine} {version} ")
        assert ".py" in doc["source"], "the source names the engine file(s) it was read from"


def test_every_option_row_is_complete(conformance) -> None:
    keys = {
        "option_strings",
        "dest",
        "action",
        "action_class",
        "nargs",
        "const",
        "default",
        "type",
        "choices",
        "required",
        "deprecated",
    }
    for engine in ("vllm", "sglang"):
        doc = conformance.table(engine)
        assert len(doc["options"]) > 100
        for opt in doc["options"]:
            assert set(opt) == keys, (engine, opt["dest"])
        assert len({o["dest"] for o in doc["options"]}) > 100
        for key in ("kv_cache_dtypes", "quantization_choices", "load_formats"):
            assert doc[key]["values"], (engine, key)
            assert doc[key]["from"]
        assert "auto" in doc["kv_cache_dtypes"]["values"] and "auto" in doc["load_formats"]["values"]


def test_vllm_envs_table_has_the_pins_and_the_variables(conformance) -> None:
    doc = conformance.table("vllm", "envs")
    assert doc["flashinfer_python"] and doc["flashinfer_python"][0].startswith("flashinfer-python")
    assert doc["transformers"] and doc["transformers"][0].startswith("transformers")
    names = [var["name"] for var in doc["variables"]]
    assert len(names) == doc["count"] == len(set(names)) > 100
    assert all(var["in_environment_variables"] or var["in_type_checking"] for var in doc["variables"])


def test_regenerating_gives_the_committed_files(conformance, engine_python: str, tmp_path) -> None:
    proc = subprocess.run(
        [engine_python, str(conformance.GEN), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
        env=conformance.child_env(),
        cwd=str(conformance.REPO),
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    produced = sorted(p.name for p in tmp_path.iterdir())
    assert produced == sorted(expected_files(conformance))
    for name in produced:
        committed_text = (conformance.DATA / name).read_text()
        fresh_text = (tmp_path / name).read_text()
        committed, fresh = json.loads(committed_text), json.loads(fresh_text)
        if fresh["python"] != committed["python"]:
            import pytest

            pytest.skip(
                f"{name} was generated with Python {committed['python']}, this venv runs "
                f"{fresh['python']}: argparse details differ between versions"
            )
        assert fresh_text == committed_text, (
            f"{name} differs from what the installed engine says: run "
            "`.conformance-venv/bin/python scripts/gen_engine_tables.py` and commit the result"
        )
