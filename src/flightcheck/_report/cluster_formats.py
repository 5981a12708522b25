"""Machine formats of a cluster report: JSON (``flightcheck.cluster-report/v1``), JUnit XML
and Prometheus textfile. JUnit and Prometheus follow the node report's formats (same test
case outcomes, same series and values) with the node added: one test suite per node plus
``across-nodes`` for FC8xx; a ``node`` label on every per-node series."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from flightcheck._report import json_format
from flightcheck._report.junit_format import Suite, document
from flightcheck._report.prometheus_format import check_labels, metric_family, series_labels, status_samples

if TYPE_CHECKING:
    from flightcheck._checks.cluster.evaluate import ClusterReport
    from flightcheck._vocabulary.results import CheckResult

#: The suite / node label of the cross-node checks.
ACROSS = "across-nodes"

#: One JSON object, printed by the JSON library (never wrapped or coloured), as the node report.
render_json = json_format.render


def _groups(report: ClusterReport) -> list[tuple[str, list[CheckResult]]]:
    return [*((name, rep.checks) for name, rep in report.nodes.items()), (ACROSS, report.checks)]


def render_junit(report: ClusterReport) -> str:
    """JUnit XML: one suite per node (its own checks) and one for the cross-node checks."""
    suites = []
    for node, results in _groups(report):
        verdict = report.nodes[node].verdict if node in report.nodes else report.verdict
        props: list[tuple[str, object]] = [
            ("verdict", verdict),
            ("cluster_verdict", report.verdict),
            ("exit_code", report.exit_code),
        ]
        suites.append(Suite(f"flightcheck: {node}", results, props, node, "flightcheck.cluster"))
    return document("flightcheck cluster", report.timings.get("total_s", 0.0), suites, report.strict)


def render_prometheus(report: ClusterReport, now: float | None = None) -> str:
    """node_exporter textfile format: the node series with a ``node`` label, plus totals."""
    out: list[str] = []
    metric_family(
        out,
        "flightcheck_check_status",
        "Result of one flightcheck check for one subject on one node: 0 pass, 1 fail, 2 unknown, 3 skip.",
        status_samples(
            ({"node": node, **check_labels(r)}, r.status) for node, results in _groups(report) for r in results
        ),
    )
    ready = [(series_labels(node=n), int(rep.exit_code == 0)) for n, rep in report.nodes.items()]
    ready += [(series_labels(node=n), 0) for n in report.unreachable]
    metric_family(
        out,
        "flightcheck_ready",
        "1 when the node's own checks say the launch would work there (a node that gave no facts: 0).",
        ready,
    )
    metric_family(
        out,
        "flightcheck_cluster_ready",
        "1 when the whole multi-node launch would work (exit code 0), else 0.",
        [("", int(report.exit_code == 0))],
    )
    metric_family(
        out,
        "flightcheck_exit_code",
        "Exit code of the last cluster run: 0 ready, 1 not ready, 3 unknown.",
        [("", report.exit_code)],
    )
    metric_family(
        out,
        "flightcheck_cluster_nodes",
        "Nodes of the last run: answered, unreachable (FC803), skipped (no GPU).",
        [
            (series_labels(state=k), len(v))
            for k, v in (("answered", report.nodes), ("unreachable", report.unreachable), ("skipped", report.skipped))
        ],
    )
    metric_family(
        out,
        "flightcheck_last_run_timestamp_seconds",
        "Unix time the last run finished.",
        [("", round(time.time() if now is None else now, 3))],
    )
    return "\n".join(out) + "\n"
