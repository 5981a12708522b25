"""``--format junit``: valid against the junit-10 layout, one test case per check and subject."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
import xmlschema

from flightcheck import Intent, evaluate
from flightcheck._report import render
from flightcheck._vocabulary.facts import Facts
from flightcheck._vocabulary.plan import build_plan
from flightcheck._vocabulary.report import Report, verdict_of
from flightcheck._vocabulary.results import CheckResult, PlanStep, Severity, Status
from support import FIXTURES
from support.cli import cli
from support.evaluation import facts, host_doc

XSD = FIXTURES / "junit" / "junit-10.xsd"


@pytest.fixture(scope="module")
def schema() -> xmlschema.XMLSchema:
    return xmlschema.XMLSchema(XSD)


def synthetic(strict: bool = False) -> Report:
    step = PlanStep("env", "VLLM_ALLREDUCE_USE_SYMM_MEM", "0", "the symm-mem all-reduce binds multicast", "FC304")
    results = [
        CheckResult(
            "FC301",
            "fabric-not-ready",
            Status.FAIL,
            Severity.ERROR,
            "gpu:0",
            "fabric state not_started",
            "systemctl start nvidia-fabricmanager",
            {"state": "not_started"},
        ),
        CheckResult(
            "FC301",
            "fabric-not-ready",
            Status.FAIL,
            Severity.ERROR,
            "gpu:1",
            "fabric state not_started",
            "systemctl start nvidia-fabricmanager",
            {},
        ),
        CheckResult(
            "FC304",
            "multicast-bind-failed",
            Status.FAIL,
            Severity.WARNING,
            "host",
            "bind failed: CUDA error 401",
            "systemctl stop nvidia-fabricmanager && nvidia-smi -r && systemctl start nvidia-fabricmanager",
            {},
            (step,),
        ),
        CheckResult("FC309", "multicast-probe-unavailable", Status.UNKNOWN, Severity.INFO, "host", "probe did not run"),
        CheckResult(
            "FC601", "shm-too-small", Status.SKIP, Severity.ERROR, "host", "one rank: nothing crosses /dev/shm"
        ),
        # compiler output with ANSI colour and a CDATA terminator must not break the XML
        CheckResult(
            "FC109",
            "compile-smoke-failed",
            Status.FAIL,
            Severity.ERROR,
            "arch:103a",
            'nvcc said \x1b[31merror\x1b[0m: <sm_103a> & "]]>" unsupported',
            "install CUDA 13",
            {"out": "\x00\x07bell"},
        ),
        CheckResult("FC602", "memlock-limited", Status.PASS, Severity.WARNING, "host", "ulimit -l is unlimited"),
        CheckResult("FC602", "memlock-limited", Status.PASS, Severity.WARNING, "host", "again"),
    ]
    plan = build_plan(results)
    verdict, code = verdict_of(results, plan, strict)
    return Report(
        verdict,
        code,
        Intent(tensor_parallel_size=8, model="/models/k"),
        results,
        plan,
        Facts(),
        strict=strict,
        timings={"total_s": 1e-05},
    )  # str() of this is "1e-05": not an xs:decimal


def cases(xml: str) -> dict[str, ET.Element]:
    root = ET.fromstring(xml)
    return {tc.get("name"): tc for tc in root.iter("testcase")}


def test_synthetic_report_is_valid_and_maps_every_status(schema):
    xml = render(synthetic(), "junit")
    schema.validate(xml)
    tcs = cases(xml)
    assert len(tcs) == 8  # one per check and subject (the repeated subject made unique)
    f = tcs["FC301 fabric-not-ready [gpu:0]"].find("failure")
    assert f is not None and f.get("message") == "fabric state not_started" and f.get("type") == "error"
    assert "fix: systemctl start nvidia-fabricmanager" in f.text and '"state": "not_started"' in f.text
    # a failing warning does not block: it passes, the finding in system-out, with the fallback step
    warn = tcs["FC304 multicast-bind-failed"]
    assert warn.find("failure") is None
    out = warn.find("system-out").text
    assert "bind failed: CUDA error 401" in out and "nvidia-smi -r" in out
    assert "fallback: VLLM_ALLREDUCE_USE_SYMM_MEM=0" in out
    assert tcs["FC309 multicast-probe-unavailable"].find("skipped").get("message").startswith("unknown: ")
    assert tcs["FC601 shm-too-small"].find("skipped").get("message").startswith("skip: ")
    bad = tcs["FC109 compile-smoke-failed [arch:103a]"].find("failure")
    assert "\x1b" not in bad.get("message") and "]]>" in bad.get("message") and "<sm_103a>" in bad.text
    assert {"FC602 memlock-limited", "FC602 memlock-limited #2"} <= set(tcs)


def test_totals_agree_with_the_cases_and_the_verdict(schema):
    for strict in (False, True):
        rep = synthetic(strict)
        root = ET.fromstring(render(rep, "junit"))
        suites = root.findall("testsuite")
        assert sum(int(s.get("tests")) for s in suites) == int(root.get("tests")) == len(rep.checks)
        failures = sum(int(s.get("failures")) for s in suites)
        assert failures == int(root.get("failures")) == (4 if strict else 3)  # strict: the warning blocks too
        assert sum(int(s.get("skipped")) for s in suites) == 2
        for s in suites:
            props = {p.get("name"): p.get("value") for p in s.iter("property")}
            assert props["verdict"] == rep.verdict == "not-ready" and props["exit_code"] == "1"
            assert int(s.get("tests")) == len(s.findall("testcase"))


def test_real_evaluation_and_the_cli(schema, tmp_path):
    small_shm = facts("b300", host={**host_doc("b300")["host"], "shm_bytes": 64 << 20, "ulimit_memlock": 65536})
    rep = evaluate(small_shm, Intent(tensor_parallel_size=8))
    xml = render(rep, "junit")
    schema.validate(xml)
    assert cases(xml)["FC601 shm-too-small"].find("failure") is not None
    out = tmp_path / "flightcheck.xml"
    proc = cli("check", "--example", "b300", "--format", "junit", "--output", str(out))
    assert proc.returncode == 0 and proc.stdout == ""
    schema.validate(str(out))
    root = ET.parse(out).getroot()
    assert root.get("failures") == "0" and int(root.get("tests")) > 0


def test_the_schema_is_strict_enough_to_catch_mistakes(schema):
    assert not schema.is_valid('<testsuites><testsuite name="x"/></testsuites>')  # tests is required
    assert not schema.is_valid('<testsuites><testsuite name="x" tests="1"><testcase/></testsuite></testsuites>')
    assert not schema.is_valid(
        '<testsuites><testsuite name="x" tests="1">'
        '<testcase name="a"><failure/><skipped/></testcase></testsuite></testsuites>'
    )


def test_cluster_report_is_written_by_the_same_code_and_stays_valid(schema):
    """A suite per node and one across nodes, the node report's case outcomes, and a
    tiny total time still an xs:decimal (the cluster writer once printed str(1e-05))."""
    from flightcheck._checks.cluster.evaluate import evaluate_cluster
    from flightcheck._cli.cluster import render as render_cluster

    small_shm = facts("b300", host={**host_doc("b300")["host"], "shm_bytes": 64 << 20})
    rep = evaluate_cluster({"a": facts("b300"), "b": small_shm}, Intent(tensor_parallel_size=8, nnodes=2))
    rep.timings["total_s"] = 1e-05
    xml = render_cluster(rep, "junit")
    schema.validate(xml)
    root = ET.fromstring(xml)
    assert root.get("time") == "0.000"
    assert [s.get("hostname") for s in root.findall("testsuite")] == ["a", "b", "across-nodes"]
    node_b = render(rep.nodes["b"], "junit")  # node b alone, as `check` writes it
    assert (
        cases(xml)["FC601 shm-too-small"].find("failure").text
        == cases(node_b)["FC601 shm-too-small"].find("failure").text
    )
