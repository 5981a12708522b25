"""JUnit XML reporter (the Jenkins / Ant ``junit-10`` layout most CI systems read).

One ``<testsuite>`` per check family, one ``<testcase>`` per check and subject:

- a failing check that blocks the launch (``error``; with ``--strict`` also ``warning``)
  is a ``<failure>`` whose text carries the message, the exact fix and the evidence;
- a failing check that does not block (a warning, an info) passes, with the finding in its
  ``<system-out>``: the JUnit totals then agree with flightcheck's exit code;
- ``skip`` (does not apply) and ``unknown`` (could not be evaluated) are ``<skipped>``,
  the message saying which.

Every suite carries the verdict and exit code as properties; the fallback step a check
contributes is in that test case's ``<system-out>``. The cluster report writes its
documents with the same ``document`` and ``Suite`` (a suite per node instead of per family).
"""

from __future__ import annotations

import datetime as _dt
import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from typing import TYPE_CHECKING, NamedTuple

from flightcheck._vocabulary.report import blocks
from flightcheck._vocabulary.results import FAMILIES, CheckResult, Status

if TYPE_CHECKING:
    from flightcheck._vocabulary.report import Report

# XML 1.0 cannot carry most control characters (compiler output may hold ANSI escapes)
_BAD_XML = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _xml_text(text: object) -> str:
    return _BAD_XML.sub("", str(text))


def _case_text(r: CheckResult) -> str:
    parts = [r.message]
    if r.fix:
        parts.append(f"fix: {r.fix}")
    if r.evidence:
        parts.append("evidence: " + json.dumps(r.evidence, sort_keys=True, default=str))
    return "\n\n".join(p for p in parts if p)


def _add_case(suite: ET.Element, r: CheckResult, name: str, strict: bool) -> str:
    """Add one test case; return its outcome: failure | skipped | passed."""
    tc = ET.SubElement(suite, "testcase", name=_xml_text(name), classname=f"flightcheck.{r.code[:3]}xx", time="0")
    outcome = "passed"
    out: list[str] = []
    if blocks(r, strict):
        ET.SubElement(tc, "failure", message=_xml_text(r.message[:1000]), type=r.severity.value).text = _xml_text(
            _case_text(r)
        )
        outcome = "failure"
    elif r.status is Status.FAIL:
        out.append(f"{r.severity.value} (does not block the launch): {_case_text(r)}")
    elif r.status in (Status.SKIP, Status.UNKNOWN):
        ET.SubElement(tc, "skipped", message=_xml_text(f"{r.status.value}: {r.message}"[:1000]))
        outcome = "skipped"
    elif r.message:
        out.append(r.message)
    for step in r.plan:
        if step.kind == "env":
            what = f"{step.name}={step.value}"
        else:
            what = f"{step.kind} {step.name}" + (f" {step.value}" if step.value is not None else "")
        out.append(f"fallback: {what} ({step.why})")
    if out:
        ET.SubElement(tc, "system-out").text = _xml_text("\n".join(out))
    return outcome


class Suite(NamedTuple):
    """One ``<testsuite>``: its results, the properties it carries, the host and package it names."""

    name: str
    results: list[CheckResult]
    properties: list[tuple[str, object]]
    hostname: str
    package: str


def _add_suite(root: ET.Element, index: int, s: Suite, strict: bool, stamp: str) -> dict[str, int]:
    """Add one suite (a test case per result, names kept unique); return its tally."""
    suite = ET.SubElement(root, "testsuite", name=_xml_text(s.name), tests="0")
    props = ET.SubElement(suite, "properties")
    for key, value in s.properties:
        ET.SubElement(props, "property", name=key, value=_xml_text(value))
    seen: dict[str, int] = {}
    tally = {"tests": 0, "failures": 0, "skipped": 0}
    for r in s.results:
        name = f"{r.code} {r.name}" + (f" [{r.subject}]" if r.subject not in ("host", "cluster") else "")
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1:  # a check may report the same subject twice: keep names unique
            name += f" #{seen[name]}"
        outcome = _add_case(suite, r, name, strict)
        tally["tests"] += 1
        if outcome != "passed":
            tally["failures" if outcome == "failure" else "skipped"] += 1
    for key, value in (
        ("tests", tally["tests"]),
        ("failures", tally["failures"]),
        ("errors", 0),
        ("skipped", tally["skipped"]),
        ("time", 0),
        ("timestamp", stamp),
        ("hostname", s.hostname),
        ("id", index),
        ("package", s.package),
    ):
        suite.set(key, _xml_text(value))
    return tally


def document(name: str, total_s: float, suites: Iterable[Suite], strict: bool) -> str:
    """A ``<testsuites>`` document of ``suites`` (the node report's and the cluster report's)."""
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    root = ET.Element("testsuites", name=name, time=f"{float(total_s):.3f}")  # xs:decimal: never "1e-05"
    failures = tests = 0
    for i, s in enumerate(suites):
        tally = _add_suite(root, i, s, strict, stamp)
        tests += tally["tests"]
        failures += tally["failures"]
    root.set("tests", str(tests))
    root.set("failures", str(failures))
    root.set("errors", "0")  # junit-10 has no "skipped" total on <testsuites>; suites carry it
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def render(report: Report) -> str:
    """The report as JUnit XML text: one suite per check family."""
    host = report.facts.host.hostname if report.facts.host and report.facts.host.hostname else "localhost"
    i = report.intent
    props: list[tuple[str, object]] = [
        ("verdict", report.verdict),
        ("exit_code", report.exit_code),
        ("engine", i.engine),
        ("tensor_parallel_size", i.tensor_parallel_size),
        ("model", i.model or ""),
    ]
    by_family: dict[str, list[CheckResult]] = {}
    for r in report.checks:
        by_family.setdefault(r.code[:3], []).append(r)
    suites = (
        Suite(
            f"flightcheck: {FAMILIES.get(prefix, prefix + 'xx')}",
            by_family[prefix],
            props,
            host,
            f"flightcheck.{prefix}xx",
        )
        for prefix in sorted(by_family)
    )
    return document("flightcheck", report.timings.get("total_s", 0.0), suites, report.strict)
