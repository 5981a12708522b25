"""The check framework: unique codes and names, crash isolation, verdicts and exit codes.

The catalogue's documentation and layout are tested in tests/checks/test_catalogue.py.
"""

from __future__ import annotations

import pytest

from flightcheck import Intent, evaluate
from flightcheck._checks import framework as fw
from flightcheck._checks.framework import iter_checks
from flightcheck._vocabulary.plan import Plan, build_plan
from flightcheck._vocabulary.report import verdict_of
from flightcheck._vocabulary.results import ERROR, WARNING, CheckResult, Severity, Status
from support.evaluation import facts

ALL = list(iter_checks("node")) + list(iter_checks("cluster"))


def test_codes_and_names_are_unique_and_reuse_is_refused():
    assert len({c.code for c in ALL}) == len(ALL)
    assert len({c.name for c in ALL}) == len(ALL)
    with pytest.raises(RuntimeError):
        fw.check(ALL[0].code, "some-new-name", ERROR)(lambda ctx: iter(()))
    with pytest.raises(RuntimeError):
        fw.check("FC999", ALL[0].name, ERROR)(lambda ctx: iter(()))
    assert "FC999" not in fw.REGISTRY


def _res(status: str, severity: Severity) -> CheckResult:
    return CheckResult("FC000", "x", Status(status), severity)


def test_verdicts_and_exit_codes():
    assert verdict_of([_res("pass", ERROR)], Plan()) == ("ready", 0)
    assert verdict_of([_res("fail", WARNING)], Plan()) == ("ready", 0)
    assert verdict_of([_res("fail", WARNING)], Plan(), strict=True) == ("not-ready", 1)
    assert verdict_of([_res("fail", ERROR), _res("unknown", ERROR)], Plan()) == ("not-ready", 1)
    assert verdict_of([_res("unknown", ERROR)], Plan()) == ("unknown", 3)
    assert verdict_of([_res("unknown", WARNING)], Plan()) == ("ready", 0)
    assert verdict_of([_res("pass", ERROR)], Plan(env={"X": "1"})) == ("ready-with-fallbacks", 0)


def test_a_crashing_check_becomes_unknown_and_the_rest_still_run(monkeypatch):
    def boom(ctx):
        raise ZeroDivisionError("division by zero")
        yield  # pragma: no cover

    monkeypatch.setitem(fw.REGISTRY, "FC998", fw.Check("FC998", "test-boom", ERROR, boom))
    report = evaluate(facts("b300"), Intent(tensor_parallel_size=8))
    [crashed] = [r for r in report.checks if r.code == "FC998"]
    assert crashed.status is Status.UNKNOWN
    assert "ZeroDivisionError" in crashed.message
    assert any(r.code == "FC601" for r in report.checks)
    assert report.exit_code == 3 and report.verdict == "unknown"


def test_plan_is_the_union_of_failing_steps_first_writer_wins():
    step = fw.PlanStep("env", "A", "1", "why", "FC303")
    results = [
        CheckResult("FC303", "a", Status.FAIL, WARNING, plan=(step,)),
        CheckResult(
            "FC304",
            "b",
            Status.FAIL,
            WARNING,
            plan=(fw.PlanStep("env", "A", "2", "", "FC304"), fw.PlanStep("drop_arg", "--x", None, "", "FC304")),
        ),
        CheckResult("FC305", "c", Status.PASS, WARNING, plan=(fw.PlanStep("env", "B", "1", "", "FC305"),)),
    ]
    plan = build_plan(results)
    assert plan.env == {"A": "1"}
    assert plan.drop_args == ["--x"]
    assert plan.reasons == ["FC303", "FC304"]
    assert plan.to_dict()["steps"][0]["code"] == "FC303"
