"""A new release is a regenerated table, a new engine a package plus one registration: shown
end to end through ``flightcheck check``, with no change to the code.

* A fake vLLM 0.34.0 with one new option is added to a copy of the release atlas
  (``_knowledge/atlas_data/vllm.json``, what ``scripts/gen_release_atlas.py`` writes from
  the wheels: one more entry in ``releases``, one more row). A launch line with the new
  option then passes FC703 when the facts say vLLM 0.34.0 is installed, and is refused
  (FC703, error) when they say 0.33.0: the built-in table (``data/vllm_0.33.0_args.json``)
  is not touched, the command is read again by the installed release's options
  (``_launch/release_read.py``).
* A third engine (``tests/knowledge/test_engine_registry.py``'s ``FakeEngine``, vLLM's
  rules under another name) registered with one ``engines.register`` call: ``check`` reads
  its launch line, evaluates every check and reports, none crashing.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flightcheck._knowledge import argtables, atlas, engines
from flightcheck._launch import engine_args
from knowledge.test_engine_registry import FakeEngine
from support.ckptgen import load_config, write_checkpoint
from support.cli import cli_in_process

B300 = Path(atlas.__file__).resolve().parents[1] / "_examples" / "b300.json"
NEW_FLAG = "--fake-new-option"


def _clear() -> None:
    atlas._doc.cache_clear()
    argtables.clear()
    engine_args._PARSERS.clear()
    engine_args._INDEX.clear()


@pytest.fixture
def atlas_with_a_new_release(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A copy of the atlas in which vLLM 0.34.0 = 0.33.0 plus one option; its name."""
    data = tmp_path / "atlas_data"
    shutil.copytree(atlas._DATA, data)
    path = data / "vllm.json"
    doc = json.loads(path.read_text())
    newest = atlas.releases("vllm")[-1]
    entry = json.loads(json.dumps(doc["releases"][newest]))
    option = {
        "action": "store",
        "choices": None,
        "const": None,
        "default": None,
        "dest": "fake_new_option",
        "nargs": None,
        "option_strings": [NEW_FLAG],
        "required": False,
        "type": "int",
    }
    doc["rows"].append(option)
    entry["options"].append(len(doc["rows"]) - 1)
    doc["releases"]["0.34.0"] = entry
    path.write_text(json.dumps(doc))
    monkeypatch.setattr(atlas, "_DATA", data)
    _clear()
    yield "0.34.0"
    monkeypatch.undo()
    _clear()


def _facts(tmp_path: Path, vllm: str) -> Path:
    doc = json.loads(B300.read_text())
    doc["python"]["packages"]["vllm"] = vllm
    out = tmp_path / f"facts-{vllm}.json"
    out.write_text(json.dumps(doc))
    return out


def _check(facts: Path, *line: str) -> tuple[int, dict[str, Any]]:
    rc, out, err = cli_in_process("check", "--facts", str(facts), "--format", "json", "--", *line)
    assert rc in (0, 1, 3), err
    return rc, json.loads(out)


def _result(report: dict[str, Any], code: str) -> dict[str, Any]:
    [r] = [c for c in report["checks"] if c["code"] == code]
    return r


def test_a_new_release_is_a_row_of_the_atlas(
    atlas_with_a_new_release: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLIGHTCHECK_ENGINE_READ", "0")  # the built-in reader, as without the engine
    new = atlas_with_a_new_release
    assert atlas.releases("vllm")[-1] == new and atlas.nearest_release("vllm", new) == (new, atlas.EXACT)
    assert argtables.TABLE_VERSION["vllm"] == "0.33.0"  # the built-in table is not regenerated
    line = ("vllm", "serve", "org/model", "-tp", "8", NEW_FLAG, "3")

    _rc, report = _check(_facts(tmp_path, new), *line)
    fc703 = _result(report, "FC703")
    assert fc703["status"] == "pass", fc703
    assert report["intent"]["reader_release"] == new and report["intent"]["reader_relation"] == "exact"

    rc, report = _check(_facts(tmp_path, "0.33.0"), *line)
    fc703 = _result(report, "FC703")
    assert (fc703["status"], fc703["severity"], rc) == ("fail", "error", 1), fc703
    assert NEW_FLAG in fc703["message"]


def test_without_the_new_release_the_flag_is_judged_by_the_newest_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same line and facts with the atlas as committed: 0.34.0 is past the newest release
    read, whose rules refuse the option: FC703 warns (extrapolated), it does not stop."""
    monkeypatch.setenv("FLIGHTCHECK_ENGINE_READ", "0")
    _rc, report = _check(_facts(tmp_path, "0.34.0"), "vllm", "serve", "org/model", "-tp", "8", NEW_FLAG, "3")
    fc703 = _result(report, "FC703")
    assert fc703["status"] == "fail" and fc703["severity"] == "warning", fc703
    assert report["intent"]["reader_relation"] == "newer-than-newest"


@pytest.fixture
def third_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeEngine]:
    data = tmp_path / "data"
    shutil.copytree(argtables._DATA, data)
    shutil.copy(data / f"vllm_{argtables.TABLE_VERSION['vllm']}_args.json", data / "fakeserve_1.0.0_args.json")
    monkeypatch.setattr(argtables, "_DATA", data)
    _clear()
    engine = FakeEngine()
    engines.register(engine)  # the one registration
    yield engine
    engines.unregister(engine.name)
    monkeypatch.undo()
    _clear()


def test_check_runs_a_third_engine_with_one_registration(
    third_engine: FakeEngine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLIGHTCHECK_ENGINE_READ", "0")
    model = write_checkpoint(tmp_path / "model", load_config("tiny-llama"), shards=2, dense=True)
    _rc, report = _check(B300, "fakeserve", "serve", str(model), "-tp", "8", "--max-model-len", "4096")
    intent = report["intent"]
    assert (intent["engine"], intent["reader"], intent["tensor_parallel_size"]) == ("fakeserve", "built-in", 8)
    assert intent["model"] == str(model) and report.get("memory")
    crashed = [c["code"] for c in report["checks"] if str(c.get("message", "")).startswith("check crashed:")]
    assert crashed == [] and len(report["checks"]) > 50
    assert _result(report, "FC703")["status"] == "pass"
    # its name is accepted wherever an engine is named: check's own --engine too
    rc, out, err = cli_in_process("check", "--facts", str(B300), "--engine", "fakeserve", "--format", "json")
    assert rc in (0, 1, 3), err
    assert json.loads(out)["intent"]["engine"] == "fakeserve"
