"""Machine formats of a cluster report: JSON (``flightcheck.cluster-report/v1``), JUnit XML
and Prometheus textfile. JUnit and Prometheus follow the node report's formats (same test
case outcomes, same series and values) with the node added: one test suite per node plus
``across-nodes`` for FC8xx; a ``node`` label on every per-node series."""

from __future__ import annotations

import datetime as _dt
import json
import time
import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING

from .._report.junit_format import add_case, xml_text
from .._report.prometheus_format import STATUS_RANK, STATUS_VALUE, metric_family, series_labels

if TYPE_CHECKING:
    from .._checks._framework import CheckResult, Status
    from .evaluate import ClusterReport

#: The suite / node label of the cross-node checks.
ACROSS = "across-nodes"


def render_json(report: ClusterReport) -> str:
    """One JSON object, printed by the JSON library (never wrapped or coloured)."""
    return json.dumps(report.to_dict(), indent=2, ensure_ascii=False, default=str) + "\n"


def _groups(report: ClusterReport) -> list[tuple[str, list[CheckResult]]]:
    return [*((name, rep.checks) for name, rep in report.nodes.items()), (ACROSS, report.checks)]


def render_junit(report: ClusterReport) -> str:
    """JUnit XML: one suite per node (its own checks) and one for the cross-node checks."""
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    root = ET.Element("testsuites", name="flightcheck cluster", time=str(report.timings.get("total_s", 0.0)))
    totals = {"tests": 0, "failures": 0}
    for i, (node, results) in enumerate(_groups(report)):
        suite = ET.SubElement(root, "testsuite", name=xml_text(f"flightcheck: {node}"), tests="0")
        props = ET.SubElement(suite, "properties")
        verdict = report.nodes[node].verdict if node in report.nodes else report.verdict
        for key, value in (("verdict", verdict), ("cluster_verdict", report.verdict), ("exit_code", report.exit_code)):
            ET.SubElement(props, "property", name=key, value=xml_text(value))
        seen: dict[str, int] = {}
        tally = {"tests": 0, "failures": 0, "skipped": 0}
        for r in results:
            name = f"{r.code} {r.name}" + (f" [{r.subject}]" if r.subject not in ("host", "cluster") else "")
            seen[name] = seen.get(name, 0) + 1
            if seen[name] > 1:  # unique test names, as the node report keeps them
                name += f" #{seen[name]}"
            outcome = add_case(suite, r, name, report.strict)
            tally["tests"] += 1
            if outcome in ("failure", "skipped"):
                tally["failures" if outcome == "failure" else "skipped"] += 1
        for key, value in (("tests", tally["tests"]), ("failures", tally["failures"]), ("errors", 0), ("skipped", tally["skipped"]),
                           ("time", 0), ("timestamp", stamp), ("hostname", node), ("id", i), ("package", "flightcheck.cluster")):
            suite.set(key, xml_text(value))
        totals["tests"] += tally["tests"]
        totals["failures"] += tally["failures"]
    root.set("tests", str(totals["tests"]))
    root.set("failures", str(totals["failures"]))
    root.set("errors", "0")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def render_prometheus(report: ClusterReport, now: float | None = None) -> str:
    """node_exporter textfile format: the node series with a ``node`` label, plus totals."""
    worst: dict[tuple[str, str, str, str, str], Status] = {}
    for node, results in _groups(report):
        for r in results:  # one series per key: duplicates break the textfile collector
            key = (node, r.code, r.name, r.severity.value, r.subject)
            if key not in worst or STATUS_RANK[r.status] > STATUS_RANK[worst[key]]:
                worst[key] = r.status
    out: list[str] = []
    metric_family(
        out, "flightcheck_check_status",
        "Result of one flightcheck check for one subject on one node: 0 pass, 1 fail, 2 unknown, 3 skip.",
        [(series_labels(node=n, code=c, name=nm, severity=s, subject=subj), STATUS_VALUE[st]) for (n, c, nm, s, subj), st in worst.items()],
    )
    ready = [(series_labels(node=n), int(rep.exit_code == 0)) for n, rep in report.nodes.items()]
    ready += [(series_labels(node=n), 0) for n in report.unreachable]
    metric_family(out, "flightcheck_ready", "1 when the node's own checks say the launch would work there (a node that gave no facts: 0).", ready)
    metric_family(out, "flightcheck_cluster_ready", "1 when the whole multi-node launch would work (exit code 0), else 0.",
            [("", int(report.exit_code == 0))])
    metric_family(out, "flightcheck_exit_code", "Exit code of the last cluster run: 0 ready, 1 not ready, 3 unknown.", [("", report.exit_code)])
    metric_family(out, "flightcheck_cluster_nodes", "Nodes of the last run: answered, unreachable (FC803), skipped (no GPU).",
            [(series_labels(state=k), len(v)) for k, v in (("answered", report.nodes), ("unreachable", report.unreachable), ("skipped", report.skipped))])
    metric_family(out, "flightcheck_last_run_timestamp_seconds", "Unix time the last run finished.",
            [("", round(time.time() if now is None else now, 3))])
    return "\n".join(out) + "\n"
