"""Prometheus reporter: the node_exporter textfile-collector format.

Write it with ``--output /var/lib/node_exporter/textfile/flightcheck.prom`` (the file is
replaced atomically, so the collector never reads half of it). Series:

- ``flightcheck_check_status{code,name,severity,subject}``: 0 pass, 1 fail, 2 unknown,
  3 skip. One series per check and subject; where a check reports one subject twice the
  worst status wins (duplicate series break the textfile collector).
- ``flightcheck_ready``: 1 when the launch would work (exit 0), else 0.
- ``flightcheck_verdict{verdict}``: 1 for the verdict of this run, 0 for the others.
- ``flightcheck_exit_code``, ``flightcheck_failures{severity}``,
  ``flightcheck_fallback_steps``, ``flightcheck_last_run_timestamp_seconds``,
  ``flightcheck_run_duration_seconds`` and ``flightcheck_info{version,engine}``.

Alert on ``flightcheck_ready == 0`` or on
``flightcheck_check_status{severity="error"} == 1``; ``time() -
flightcheck_last_run_timestamp_seconds`` says when the file went stale. The rules and a
Grafana dashboard over these series are ``recipes/prometheus/flightcheck-alerts.yml`` and
``recipes/grafana/flightcheck-dashboard.json``; their tests hold them to the names here.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from flightcheck._vocabulary.results import Severity, Status
from flightcheck._vocabulary.version import __version__

if TYPE_CHECKING:
    from flightcheck._vocabulary.report import Report
    from flightcheck._vocabulary.results import CheckResult

STATUS_VALUE = {Status.PASS: 0, Status.FAIL: 1, Status.UNKNOWN: 2, Status.SKIP: 3}
#: which status wins when one check reports a subject twice: fail > unknown > pass > skip
STATUS_RANK = {Status.FAIL: 3, Status.UNKNOWN: 2, Status.PASS: 1, Status.SKIP: 0}
VERDICTS = ("ready", "ready-with-fallbacks", "not-ready", "unknown")


def _label(value: object) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def series_labels(**labels: object) -> str:
    """``{a="x",b="y"}``, values escaped as the exposition format wants."""
    return "{" + ",".join(f'{k}="{_label(v)}"' for k, v in labels.items()) + "}"


def metric_family(out: list[str], name: str, help_text: str, samples: Sequence[tuple[str, float]]) -> None:
    """Append one gauge family (``# HELP``, ``# TYPE``, its samples) to ``out``."""
    out.append(f"# HELP {name} {help_text}")
    out.append(f"# TYPE {name} gauge")
    for labels, value in samples:
        out.append(f"{name}{labels} {value}")


def status_samples(rows: Iterable[tuple[dict[str, str], Status]]) -> list[tuple[str, float]]:
    """``flightcheck_check_status`` samples, one per label set: where a check reports one
    subject twice the worst status wins (duplicate series break the textfile collector)."""
    worst: dict[tuple[tuple[str, str], ...], Status] = {}
    for labels, status in rows:
        key = tuple(labels.items())
        if key not in worst or STATUS_RANK[status] > STATUS_RANK[worst[key]]:
            worst[key] = status
    return [(series_labels(**dict(key)), STATUS_VALUE[status]) for key, status in worst.items()]


def check_labels(r: CheckResult) -> dict[str, str]:
    """The labels of one result's ``flightcheck_check_status`` series."""
    return {"code": r.code, "name": r.name, "severity": r.severity.value, "subject": r.subject}


def render(report: Report, now: float | None = None) -> str:
    """The report as Prometheus text exposition (``# HELP`` / ``# TYPE`` / samples)."""
    out: list[str] = []
    metric_family(
        out,
        "flightcheck_check_status",
        "Result of one flightcheck check for one subject: 0 pass, 1 fail, "
        "2 unknown (could not be evaluated), 3 skip (does not apply).",
        status_samples((check_labels(r), r.status) for r in report.checks),
    )
    metric_family(
        out,
        "flightcheck_ready",
        "1 when the checked launch would work on this node (exit code 0), else 0.",
        [("", 1 if report.exit_code == 0 else 0)],
    )
    metric_family(
        out,
        "flightcheck_verdict",
        "1 for the verdict of the last run (ready, ready-with-fallbacks, not-ready, unknown), 0 for the others.",
        [(series_labels(verdict=v), 1 if v == report.verdict else 0) for v in VERDICTS],
    )
    metric_family(
        out,
        "flightcheck_exit_code",
        "Exit code of the last run: 0 ready, 1 not ready, 3 unknown.",
        [("", report.exit_code)],
    )
    failing = {s: 0 for s in Severity}
    for r in report.checks:
        if r.status is Status.FAIL:
            failing[r.severity] += 1
    metric_family(
        out,
        "flightcheck_failures",
        "Failing check results of the last run, by severity.",
        [(series_labels(severity=s.value), n) for s, n in failing.items()],
    )
    metric_family(
        out,
        "flightcheck_fallback_steps",
        "Changes the fallback plan makes to the launch (environment and arguments).",
        [("", len(report.plan.steps) if report.plan else 0)],
    )
    metric_family(
        out,
        "flightcheck_last_run_timestamp_seconds",
        "Unix time the last run finished.",
        [("", round(time.time() if now is None else now, 3))],
    )
    metric_family(
        out,
        "flightcheck_run_duration_seconds",
        "Wall time of the last run (collection and evaluation).",
        [("", float(report.timings.get("total_s", report.timings.get("evaluate_s", 0.0))))],
    )
    metric_family(
        out,
        "flightcheck_info",
        "flightcheck version and the engine the last run checked.",
        [(series_labels(version=__version__, engine=report.intent.engine), 1)],
    )
    return "\n".join(out) + "\n"
