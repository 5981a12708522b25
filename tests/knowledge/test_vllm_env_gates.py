"""The vLLM variables' gates (first release, default) match the released wheels (issue 10, item 4).

``tests/fixtures/vllm_envs/gates.json`` is the extract ``scripts/gen_vllm_env_gates.py`` made
from the ``vllm/envs.py`` of every vLLM release from 0.10.1.1 to 0.33.0 (``pip download
--no-deps vllm==X``; ~37 wheels of 250-500 MB: too much for CI to download, so the extract
is committed and the script regenerates it). Here the knowledge module is checked against
that extract offline, and the extraction itself against envs.py snippets in each style the
wheels use.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

from flightcheck._knowledge import vllm

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "vllm_envs" / "gates.json"


@pytest.fixture(scope="module")
def gen() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_vllm_env_gates", ROOT / "scripts" / "gen_vllm_env_gates.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def extract() -> dict:
    return json.loads(FIXTURE.read_text())


def test_the_extract_covers_the_releases_the_module_gates_on(extract: dict) -> None:
    versions = extract["versions"]
    for must in ("0.11.0", "0.19.0", "0.20.0", "0.21.0", "0.33.0"):
        assert must in versions
    for since in vllm.SINCE.values():  # each gate's release and the one before it were read
        i = versions.index(since)
        assert i > 0, since


def test_every_gate_and_default_matches_the_wheels(gen: ModuleType, extract: dict) -> None:
    assert gen.check(extract) == []


def test_each_variable_the_fallback_sets_is_declared_from_its_gate_on(extract: dict) -> None:
    for name, since in vllm.SINCE.items():
        have = [v for v in extract["versions"] if name in extract["declared"][v]]
        assert have and have[0] == since, name
        # declared in every release from then on (never dropped and re-added)
        assert have == extract["versions"][extract["versions"].index(since) :], name


def test_a_wrong_gate_or_default_is_reported(gen: ModuleType, extract: dict, monkeypatch) -> None:
    monkeypatch.setitem(vllm.SINCE, vllm.FLASHINFER_ALLREDUCE_BACKEND, "0.16.0")  # the old, wrong claim
    monkeypatch.setitem(vllm.ENV_DEFAULTS, vllm.ALLREDUCE_USE_FLASHINFER, (("0.17.0", "1"),))
    problems = gen.check(extract)
    assert any(p.startswith(f"{vllm.FLASHINFER_ALLREDUCE_BACKEND}: SINCE says 0.16.0") for p in problems)
    assert any(p.startswith(f"{vllm.ALLREDUCE_USE_FLASHINFER} in 0.17.0") for p in problems)


def test_defaults_by_release() -> None:
    assert vllm.env_default(vllm.ALLREDUCE_USE_SYMM_MEM, "0.10.2") == "0"
    assert vllm.env_default(vllm.ALLREDUCE_USE_SYMM_MEM, "0.11.0") == "1"
    assert vllm.env_default(vllm.FLASHINFER_ALLREDUCE_BACKEND, "0.18.1") == "trtllm"
    assert vllm.env_default(vllm.FLASHINFER_ALLREDUCE_BACKEND, "0.33.0") == "auto"
    assert vllm.env_default(vllm.ALLREDUCE_USE_FLASHINFER, "0.28.0") == "0"
    assert vllm.env_default(vllm.ALLREDUCE_USE_FLASHINFER, "0.29.0") == "1"
    assert vllm.env_default(vllm.KIMI_K3_GEMM_AR, "0.28.0") is None  # not declared yet


SNIPPET = """
import os
environment_variables: dict[str, Callable[[], Any]] = {
    "VLLM_ALLREDUCE_USE_SYMM_MEM": lambda: bool(int(os.getenv("VLLM_ALLREDUCE_USE_SYMM_MEM", "1"))),
    "VLLM_FLASHINFER_ALLREDUCE_BACKEND": env_with_choices(
        "VLLM_FLASHINFER_ALLREDUCE_BACKEND", "auto", ["auto", "trtllm", "mnnvl"]
    ),
    "VLLM_USE_DIRECT_DCP_Q_GATHER": lambda: maybe_convert_bool(os.getenv("VLLM_USE_DIRECT_DCP_Q_GATHER")),
    "VLLM_RAY_EXTRA_ENV_VARS_TO_COPY": lambda: os.environ.get("VLLM_RAY_EXTRA_ENV_VARS_TO_COPY", ""),
    "VLLM_NOT_TRACKED": lambda: os.getenv("VLLM_NOT_TRACKED", "x"),
}
"""


def test_extraction_reads_each_getter_style(gen: ModuleType) -> None:
    got = gen.declared(SNIPPET)
    assert got == {
        "VLLM_ALLREDUCE_USE_SYMM_MEM": "'1'",
        "VLLM_FLASHINFER_ALLREDUCE_BACKEND": "'auto'",
        "VLLM_USE_DIRECT_DCP_Q_GATHER": "None",
        "VLLM_RAY_EXTRA_ENV_VARS_TO_COPY": "''",
    }
