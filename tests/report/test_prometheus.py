"""``--format prometheus``: node_exporter textfile format that prometheus_client parses."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from flightcheck import Intent, evaluate
from flightcheck._report import render
from flightcheck._report.prometheus_format import render as render_prom
from flightcheck._vocabulary.facts import Facts
from flightcheck._vocabulary.plan import build_plan
from flightcheck._vocabulary.report import Report, verdict_of
from flightcheck._vocabulary.results import CheckResult, PlanStep, Severity, Status
from support.cli import cli
from support.evaluation import facts, host_doc


def parsed(text: str) -> dict[str, list]:
    """metric family name -> samples; fails on any syntax the parser rejects."""
    return {fam.name: fam.samples for fam in text_string_to_metric_families(text)}


def report_of(results: list[CheckResult]) -> Report:
    plan = build_plan(results)
    verdict, code = verdict_of(results, plan)
    return Report(verdict, code, Intent(engine="sglang"), results, plan, Facts(), timings={"total_s": 0.25})


def test_statuses_ready_and_timestamp():
    step = PlanStep("env", "NCCL_NVLS_ENABLE", "0", "why", "FC304")
    rep = report_of(
        [
            CheckResult(
                "FC304", "multicast-bind-failed", Status.FAIL, Severity.WARNING, "host", "401", None, {}, (step,)
            ),
            CheckResult("FC309", "multicast-probe-unavailable", Status.UNKNOWN, Severity.INFO, "host", "no probe"),
            CheckResult("FC601", "shm-too-small", Status.SKIP, Severity.ERROR, "host", "one rank"),
            CheckResult("FC201", "nvidia-driver-unavailable", Status.PASS, Severity.ERROR, "host", ""),
        ]
    )
    m = parsed(render_prom(rep, now=1_700_000_000.5))
    status = {(s.labels["code"], s.labels["subject"]): s.value for s in m["flightcheck_check_status"]}
    assert status == {("FC304", "host"): 1, ("FC309", "host"): 2, ("FC601", "host"): 3, ("FC201", "host"): 0}
    labels = next(s.labels for s in m["flightcheck_check_status"] if s.labels["code"] == "FC304")
    assert labels == {"code": "FC304", "name": "multicast-bind-failed", "severity": "warning", "subject": "host"}
    assert m["flightcheck_ready"][0].value == 1
    assert {s.labels["verdict"]: s.value for s in m["flightcheck_verdict"]} == {
        "ready": 0,
        "ready-with-fallbacks": 1,
        "not-ready": 0,
        "unknown": 0,
    }
    assert m["flightcheck_last_run_timestamp_seconds"][0].value == 1_700_000_000.5
    assert m["flightcheck_fallback_steps"][0].value == 1
    assert m["flightcheck_run_duration_seconds"][0].value == 0.25
    assert {s.labels["severity"]: s.value for s in m["flightcheck_failures"]} == {"error": 0, "warning": 1, "info": 0}
    assert m["flightcheck_info"][0].labels["engine"] == "sglang"


def test_help_documents_the_status_values():
    text = render_prom(report_of([]))
    help_line = next(line for line in text.splitlines() if line.startswith("# HELP flightcheck_check_status"))
    assert "0 pass, 1 fail, 2 unknown" in help_line and "3 skip" in help_line
    assert "# TYPE flightcheck_ready gauge" in text


def test_hostile_subjects_are_escaped_and_duplicates_collapse_to_the_worst():
    weird = 'shard:a "quoted"\\name\nnext.safetensors'
    rep = report_of(
        [
            CheckResult("FC503", "shard-size-mismatch", Status.PASS, Severity.ERROR, weird, ""),
            CheckResult("FC503", "shard-size-mismatch", Status.FAIL, Severity.ERROR, weird, "truncated"),
            CheckResult("FC503", "shard-size-mismatch", Status.PASS, Severity.ERROR, weird, ""),
        ]
    )
    text = render_prom(rep)
    samples = parsed(text)["flightcheck_check_status"]
    assert len(samples) == 1  # duplicate series would break the textfile collector
    assert samples[0].labels["subject"] == weird and samples[0].value == 1
    assert parsed(text)["flightcheck_ready"][0].value == 0


def test_real_evaluation_and_atomic_output_file(tmp_path):
    rep = evaluate(
        facts("b300", host={**host_doc("b300")["host"], "shm_bytes": 1 << 20}), Intent(tensor_parallel_size=8)
    )
    m = parsed(render(rep, "prometheus"))
    assert any(s.labels["code"] == "FC601" and s.value == 1 for s in m["flightcheck_check_status"])
    assert m["flightcheck_ready"][0].value == 0 and m["flightcheck_exit_code"][0].value == 1
    out = tmp_path / "flightcheck.prom"
    proc = cli("check", "--example", "b300", "--format", "prometheus", "--output", str(out))
    assert proc.returncode == 0 and proc.stdout == ""
    assert [p.name for p in tmp_path.iterdir()] == ["flightcheck.prom"]  # no temp file left behind
    assert oct(out.stat().st_mode & 0o777) == "0o644"  # readable by node_exporter
    m = parsed(out.read_text())
    assert m["flightcheck_ready"][0].value == 1
    assert len(m["flightcheck_check_status"]) == len(
        {(s.labels["code"], s.labels["subject"]) for s in m["flightcheck_check_status"]}
    )
