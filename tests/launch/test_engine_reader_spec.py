"""The engine-reader child knows no engine: the spec the parent passes
(``engines.reader_spec``, from each engine's ``ReaderRules.child``) says where its parser,
validation and record are. Run against tiny fake vLLM / SGLang packages on a temporary
PYTHONPATH (``support/fake_engines.py``, the module paths and APIs of vllm 0.33.0 /
sglang 0.5.23) with this interpreter, the child gives the documents the engine-specific
child gave before it was made engine-agnostic: ``tests/fixtures/launch/engine_reader_fake.json``
was written by that child (commit 2c096fd's ``_collect/engine_reader.py``) for the same lines.

The real engines' conformance is tests/conformance/test_engine_reader.py (their venv)."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from flightcheck._knowledge import engines
from flightcheck._launch.engine_ask import READER_SCRIPT, reader_command
from support.fake_engines import SGLANG_LINES, VLLM_LINES, write_fake_engines

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "launch" / "engine_reader_fake.json"
#: what differs between two runs of the same reading
_VOLATILE = ("elapsed_s", "python")


@pytest.fixture(scope="module")
def fake_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_fake_engines(tmp_path_factory.mktemp("fake-engines"))


@pytest.fixture(scope="module")
def golden() -> dict[str, Any]:
    return json.loads(GOLDEN.read_text())


def _env(root: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "SGLANG_", "HF_", "PYTHONPATH"))}
    if root is not None:
        env["PYTHONPATH"] = str(root)
    return env


def _steady(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k not in _VOLATILE}


def _batch(engine: str, lines: list[list[str]], root: Path | None, cwd: Path) -> list[dict[str, Any]]:
    proc = subprocess.run(
        reader_command(sys.executable, engine, "--batch", "--timeout", "60"),
        input="".join(json.dumps(line) + "\n" for line in lines) + "not json\n",
        capture_output=True,
        text=True,
        env=_env(root),
        cwd=str(cwd),
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return [_steady(json.loads(x)) for x in proc.stdout.splitlines()]


@pytest.mark.parametrize(("engine", "lines"), [("vllm", VLLM_LINES), ("sglang", SGLANG_LINES)])
def test_the_child_reads_as_the_engine_specific_one_did(
    engine: str, lines: list[list[str]], fake_root: Path, golden: dict[str, Any], tmp_path: Path
) -> None:
    docs = _batch(engine, lines, fake_root, tmp_path)
    assert len(docs) == len(lines) + 1
    # every path of both procedures is taken: accepted, refused at each stage, other forms
    stages = {d["error_stage"] for d in docs}
    assert {None, "parse", "usage"} <= stages and stages & {"validate", "dispatch"}
    assert docs == golden[engine]


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_one_line_after_the_separator(engine: str, fake_root: Path, golden: dict[str, Any], tmp_path: Path) -> None:
    line = (VLLM_LINES if engine == "vllm" else SGLANG_LINES)[0]
    proc = subprocess.run(
        reader_command(sys.executable, engine, "--timeout", "60", "--", *line),
        capture_output=True,
        text=True,
        env=_env(fake_root),
        cwd=str(tmp_path),
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert _steady(json.loads(proc.stdout)) == golden[f"{engine}-single"]


def _child_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("engine_reader_under_test", READER_SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_forms_split_as_before(golden: dict[str, Any]) -> None:
    child = _child_module()
    for engine, lines in (("vllm", VLLM_LINES), ("sglang", SGLANG_LINES)):
        got = [list(child.split_command(engines.reader_spec(engine), line)) for line in lines]
        assert got == golden["split"][engine]


def test_in_process_reading_is_the_same_document(
    fake_root: Path, golden: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(fake_root))
    child = _child_module()
    try:
        got = [
            _steady(child.read_in_process(engines.reader_spec("vllm"), line))
            for line in [*VLLM_LINES[:3], VLLM_LINES[7]]
        ]
    finally:
        for name in [m for m in sys.modules if m == "vllm" or m.startswith("vllm.")]:
            del sys.modules[name]  # the fake must not stand in for vLLM in later tests
    assert got == golden["vllm-in-process"]


def test_an_engine_missing_is_an_import_error(tmp_path: Path) -> None:
    [doc, bad] = _batch("sglang", [["sglang", "serve", "--model-path", "M"]], None, tmp_path)
    assert doc["error_stage"] == "import" and doc["error"].startswith("sglang is not installed")
    assert bad["error_stage"] == "usage"


@pytest.mark.parametrize(
    "args",
    [["--", "x"], ["--spec", "{not json", "--", "x"], ["--spec", "[]", "--", "x"], ["--spec", '{"engine": "e"}']],
)
def test_a_bad_spec_is_a_usage_error(args: list[str], tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(READER_SCRIPT), *args],
        capture_output=True,
        text=True,
        cwd=str(tmp_path),
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    doc = json.loads(proc.stdout)
    assert doc["error_stage"] == "usage" and doc["error"]


def test_the_child_names_no_engine() -> None:
    """No engine's name, module or variable in the child's code (its docstring aside)."""
    tree = ast.parse(READER_SCRIPT.read_text())
    doc = ast.get_docstring(tree, clean=False)
    words = [
        n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value != doc
    ]
    names = [
        n.id if isinstance(n, ast.Name) else n.attr for n in ast.walk(tree) if isinstance(n, (ast.Name, ast.Attribute))
    ]
    for engine in engines.names():
        assert not [w for w in words if engine in w.lower()], engine
        assert not [n for n in names if engine in n.lower()], engine


def test_every_engine_spec_has_the_same_canonical_fields() -> None:
    specs = [engines.reader_spec(name) for name in engines.names()]
    assert all(list(s["fields"]) == list(specs[0]["fields"]) for s in specs)
    assert all(json.loads(json.dumps(s)) == s for s in specs)  # JSON as it is
