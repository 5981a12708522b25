"""The Engine interface: a third engine is a package and one registration, a new release is
a regenerated table, an unknown engine is refused in one line (never mapped to another)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from flightcheck._knowledge import argtables, engines
from flightcheck._knowledge.vllm.engine import VLLM
from flightcheck._launch import engine_args
from flightcheck._launch.command import parse_command
from flightcheck._vocabulary.engine import ENGINE_NAMES
from flightcheck._vocabulary.errors import UsageError
from flightcheck._vocabulary.intent import Intent

DATA = Path(argtables.__file__).resolve().parent / "data"


class _FakeCommand:
    cli = "fakeserve"
    modules: Mapping[str, tuple[str, bool]] = {"fakeserve.entry": ("fakeserve-entry", False)}


class FakeEngine(VLLM):
    """A third engine: vLLM's syntax and memory rules under another name, console script
    and distribution (what a fork of vLLM would be)."""

    name = "fakeserve"  # type: ignore[assignment]  # a name outside the Literal, on purpose
    display = "FakeServe"
    package = "fakeserve"
    command = _FakeCommand()


def _clear_caches() -> None:
    argtables.clear()
    engine_args._PARSERS.clear()
    engine_args._INDEX.clear()


@pytest.fixture
def data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A copy of the generated tables that a test may add to."""
    for f in DATA.glob("*.json"):
        shutil.copy(f, tmp_path / f.name)
    monkeypatch.setattr(argtables, "_DATA", tmp_path)
    _clear_caches()
    yield tmp_path
    monkeypatch.undo()
    _clear_caches()


@pytest.fixture
def fake(data: Path) -> Iterator[FakeEngine]:
    """The fake engine registered, with a table of its own (vLLM's, renamed)."""
    shutil.copy(data / f"vllm_{argtables.TABLE_VERSION['vllm']}_args.json", data / "fakeserve_1.0.0_args.json")
    _clear_caches()
    engine = FakeEngine()
    engines.register(engine)
    yield engine
    engines.unregister(engine.name)


def test_a_new_engine_is_a_package_and_one_registration(fake: FakeEngine) -> None:
    assert "fakeserve" in engines.names()
    assert engines.get("fakeserve") is fake
    cmd = parse_command(["fakeserve", "serve", "org/model", "-tp", "4", "--max-model-len", "32k"])
    assert cmd.engine == "fakeserve" and cmd.form == "fakeserve-cli"
    assert cmd.intent.engine == "fakeserve"
    assert cmd.intent.reader == "built-in" and cmd.intent.refused == []
    assert (cmd.intent.model, cmd.intent.tensor_parallel_size, cmd.intent.max_model_len) == ("org/model", 4, 32000)
    by_module = parse_command(["python3", "-m", "fakeserve.entry", "--model", "m", "-pp", "2"])
    assert (by_module.engine, by_module.form, by_module.intent.pipeline_parallel_size) == (
        "fakeserve",
        "fakeserve-entry",
        2,
    )
    assert engines.flag("fakeserve", "tp") == "-tp"
    assert Intent(engine="fakeserve").engine == "fakeserve"  # type: ignore[arg-type]


def test_an_unregistered_engine_is_refused_not_mapped() -> None:
    assert engines.names() == ENGINE_NAMES
    with pytest.raises(UsageError, match="--engine 'fakeserve': expected one of vllm, sglang"):
        engines.get("fakeserve")
    with pytest.raises(UsageError, match="expected one of vllm, sglang"):
        Intent(engine="tgi")  # type: ignore[arg-type]
    assert engines.get(None).name == "vllm"  # a launch that names none: the default
    assert engines.find("tgi") is None  # a name read from facts: a fact, not a usage error
    assert parse_command(["fakeserve", "serve", "m"]).engine is None  # not a launch we know


def test_a_new_release_is_a_regenerated_table(data: Path) -> None:
    old = argtables.TABLE_VERSION["vllm"]
    with pytest.raises(engine_args.Refused):
        engine_args.parse("vllm", ["m", "--fake-new-option", "3"], serve=True, load_config=lambda p: [])
    doc = json.loads((data / f"vllm_{old}_args.json").read_text())
    new_option = dict(doc["options"][-1])
    new_option.update(option_strings=["--fake-new-option"], dest="fake_new_option", nargs=None, action="store")
    new_option.update(type="int", default=None, choices=None)
    doc["options"].append(new_option)
    (data / "vllm_0.34.0_args.json").write_text(json.dumps(doc))
    (data / "vllm_0.34.0rc1_args.json").write_text(json.dumps(doc))
    (data / "vllm_0.34.0.dev7_args.json").write_text(json.dumps(doc))
    _clear_caches()
    # PEP 440 order: 0.34.0.dev7 < 0.34.0rc1 < 0.34.0 (a string sort puts 0.34.0 first)
    assert argtables.releases("vllm") == (old, "0.34.0.dev7", "0.34.0rc1", "0.34.0")
    assert argtables.TABLE_VERSION["vllm"] == "0.34.0"
    parsed = engine_args.parse("vllm", ["m", "--fake-new-option", "3"], serve=True, load_config=lambda p: [])
    assert parsed.values["fake_new_option"] == 3
    assert argtables.TABLE_VERSION["sglang"] == "0.5.23"  # the other engine's table untouched


def test_cli_refuses_an_unknown_engine_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from flightcheck._cli.main import main

    assert main(["check", "--engine", "tgi", "--facts", "b300"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "invalid choice: 'tgi'" in err
