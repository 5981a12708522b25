"""The tests of launches a check must not stop can fail: an exception injected into a check
turns them red.

A check that crashes answers ``unknown`` ("check crashed: ..."), which stops nothing, so a
"stays silent" or "does not stop" test that only looks for failures stays green on a check
that no longer runs at all. Two proofs that ours do not:

- every registered check, its function replaced by one that raises, makes the shared helpers
  (``assert_silent`` for node checks, ``evaluated`` for cluster checks) fail on a healthy host;
- the real must-not-stop and healthy-host tests, run in a child pytest with the checks each
  one names broken (tests/support/mutation.py, ``FLIGHTCHECK_TEST_BREAK=named``), all fail,
  and between them they cover every family FC1..FC9 and every error check.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from flightcheck import Intent
from flightcheck._checks import load_all
from flightcheck._checks.cluster.evaluate import evaluate_cluster
from flightcheck._checks.framework import REGISTRY
from flightcheck._vocabulary.facts import from_dict
from flightcheck._vocabulary.results import ERROR
from support import FIXTURES, REPO
from support.evaluation import assert_silent, crashes, evaluated, facts, results
from support.mutation import BREAK_ENV, break_checks, codes_named

load_all()
NODE = sorted(c for c, chk in REGISTRY.items() if chk.scope == "node")
CLUSTER = sorted(c for c, chk in REGISTRY.items() if chk.scope == "cluster")
FAMILIES = {f"FC{n}" for n in range(1, 10)}
#: where the tests that evaluate checks on a launch live; the child runs these only
SUITES = ("tests/checks", "tests/checkpoint", "tests/memory")
SELECT = "does_not_stop or healthy or silent"
#: the modules with such tests (the child imports no other: collecting is most of its time)
SELECTED_DEF = re.compile(r"^def test_\w*(?:does_not_stop|healthy|silent)", re.MULTILINE)


def modules_to_run() -> list[str]:
    skip = {Path(__file__).name, "test_does_not_stop_coverage.py"}  # this one; one that reads text only
    return [
        str(f.relative_to(REPO))
        for suite in SUITES
        for f in sorted((REPO / suite).rglob("test_*.py"))
        if f.name not in skip and SELECTED_DEF.search(f.read_text())
    ]


def test_the_registry_has_every_family() -> None:
    assert {c[:3] for c in REGISTRY} == FAMILIES


@pytest.mark.parametrize("code", NODE)
def test_assert_silent_fails_on_a_crashed_node_check(code: str, monkeypatch: pytest.MonkeyPatch) -> None:
    node = facts("b300")
    assert_silent(code, node, allow_unknown=True, tensor_parallel_size=8)  # healthy: silent
    assert break_checks(monkeypatch, [code]) == [code]
    (r,) = results(node, tensor_parallel_size=8)[code]
    assert r.status.value == "unknown" and f"injected into {code}" in r.message  # what a crash looks like
    with pytest.raises(AssertionError, match="crashed"):
        assert_silent(code, node, tensor_parallel_size=8)
    with pytest.raises(AssertionError, match="crashed"):  # accepting unknown never accepts a crash
        assert_silent(code, node, allow_unknown=True, tensor_parallel_size=8)


@pytest.mark.parametrize("code", CLUSTER)
def test_evaluated_fails_on_a_crashed_cluster_check(code: str, monkeypatch: pytest.MonkeyPatch) -> None:
    docs = [json.loads((FIXTURES / "cluster" / f"{n}.json").read_text()) for n in ("hgx-b300-a", "hgx-b300-b")]
    nodes = {d["host"]["hostname"]: from_dict(d) for d in docs}
    intent = Intent(tensor_parallel_size=8, pipeline_parallel_size=2, nnodes=2)

    def got() -> list:
        return [r for r in evaluate_cluster(nodes, intent).checks if r.code == code]

    assert crashes(evaluated(code, got())) == []
    break_checks(monkeypatch, [code])
    with pytest.raises(AssertionError, match="crashed"):
        evaluated(code, got())


def test_codes_named_reads_function_names_and_parametrize_ids() -> None:
    assert codes_named("test_fc118_fc123_fc125_does_not_stop_when_vllm_turns_flashinfer_off[FC123]") == [
        "FC118",
        "FC123",
        "FC125",
    ]
    assert codes_named("test_healthy_recorded_hosts_do_not_fail[FC309-hgx-h100-8]") == ["FC309"]
    assert codes_named("test_healthy_engine") == [] and codes_named("test_fc1xx_x[FC1019]") == []


def test_every_must_not_stop_test_turns_red_when_its_check_crashes(tmp_path: Path) -> None:
    """The child runs each must-not-stop / healthy-host test that names a check with that
    check broken: every one must fail. (The same tests pass in this run, unbroken.)"""
    xml = tmp_path / "mutation.xml"
    env = {**os.environ, BREAK_ENV: "named"}
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        *modules_to_run(),
        "-k",
        SELECT,
        "-p",
        "no:cacheprovider",
        "-q",
        f"--junitxml={xml}",
    ]
    proc = subprocess.run(cmd, check=False, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert xml.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    red: set[str] = set()
    skipped: set[str] = set()
    green: list[str] = []
    for case in ET.parse(xml).iter("testcase"):
        name = case.get("name") or ""
        tags = {child.tag for child in case}
        if "skipped" in tags:  # a tool this machine lacks (tests/checks/test_toolchain_runtime_...)
            skipped |= set(codes_named(name))
        elif tags & {"failure", "error"}:
            red |= set(codes_named(name))
        else:
            green.append(f"{case.get('classname')}::{name}")
    assert green == [], f"stayed green with the checks they name broken: {green}"
    assert red, proc.stdout[-3000:]
    assert {c[:3] for c in red} == FAMILIES, f"families without a test that can fail: {FAMILIES - {c[:3] for c in red}}"
    errors = {c for c, chk in REGISTRY.items() if chk.severity == ERROR}
    unproven = errors - red - skipped
    assert unproven == set(), f"error checks whose must-not-stop tests were not proven: {sorted(unproven)}"
