"""The Prometheus and Grafana recipes (``recipes/prometheus``, ``recipes/grafana``) as data:
the textfiles flightcheck writes for a few kinds of node, parsed; the dashboard's query
expressions; the metric selectors in a PromQL expression. Shared by the recipe tests."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from support import FIXTURES, REPO
from support.cli import cli_in_process
from support.evaluation import host_doc

RULES = REPO / "recipes" / "prometheus" / "flightcheck-alerts.yml"
RULES_TEST = REPO / "recipes" / "prometheus" / "flightcheck-alerts.test.yml"
DASHBOARD = REPO / "recipes" / "grafana" / "flightcheck-dashboard.json"

#: what a test needs installed: Debian's prometheus and prometheus-node-exporter packages
BINARIES = {
    "promtool": "prometheus",
    "prometheus": "prometheus",
    "prometheus-node-exporter": "prometheus-node-exporter",
}


def binary(name: str) -> str:
    """The path of ``name``, or skip the test saying which package is missing."""
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed (apt-get install {BINARIES[name]})")
    return path


# ---------------------------------------------------------------- the textfiles


@dataclass
class Sample:
    """One sample line of the exposition format."""

    name: str
    labels: dict[str, str]
    value: float


_SAMPLE = re.compile(r"^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def parse_textfile(text: str) -> list[Sample]:
    """The samples of a textfile (comments skipped); every line must parse."""
    samples = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        assert m, f"not a sample line: {line!r}"
        labels = dict(_LABEL.findall(m.group(2) or ""))
        samples.append(Sample(m.group(1), labels, float(m.group(3))))
    return samples


def unknown_facts(tmp: Path) -> Path:
    """The healthy B300 with its driver section unread (a collector that timed out): every
    error check that needs the driver is unknown and nothing fails, so the run exits 3."""
    doc = host_doc("b300")
    doc["driver"] = None
    doc["unavailable"] = {"driver": "nvidia-smi did not answer within 10s"}
    path = tmp / "unknown-facts.json"
    path.write_text(json.dumps(doc))
    return path


#: node -> (flightcheck arguments before --format, the exit code that run must give)
def node_runs(tmp: Path) -> dict[str, tuple[list[str], int]]:
    """The per-node runs the recipes are tested on, each a real ``flightcheck check``."""
    return {
        "healthy": (["check", "--example", "b300"], 0),
        "fallbacks": (["check", "--example", "b300-multicast-401"], 0),
        "failing": (["check", "--example", "b300-no-toolkit"], 1),
        "unknown": (["check", "--facts", str(unknown_facts(tmp))], 3),
        "stale": (["check", "--example", "b300"], 0),
    }


def cluster_run() -> tuple[list[str], int]:
    """``flightcheck cluster`` over the four recorded nodes (its ``node``-labelled series):
    two GB200 trays with too few GPUs for TP 8, and FC8xx across the nodes."""
    return (["cluster", "--facts-dir", str(FIXTURES / "cluster"), "--nnodes", "4", "-tp", "8", "-pp", "4"], 1)


def write_textfiles(runs: dict[str, tuple[list[str], int]], out: Path) -> dict[str, Path]:
    """Run flightcheck's command line for each entry with ``--format prometheus -o
    out/<name>/flightcheck.prom``; assert each exit code; the paths by name. In this
    process (``cli_in_process``): five fresh interpreters cost ~3 s on a loaded 2-CPU box."""
    paths = {}
    for name, (args, expected) in runs.items():
        path = out / name / "flightcheck.prom"
        path.parent.mkdir(parents=True, exist_ok=True)
        rc, stdout, stderr = cli_in_process(*args, "--format", "prometheus", "-o", str(path))
        assert rc == expected, (name, rc, stdout, stderr)
        assert path.is_file(), name
        paths[name] = path
    return paths


# ---------------------------------------------------------------- the recipes' expressions


def dashboard() -> dict[str, Any]:
    """The Grafana dashboard JSON."""
    return json.loads(DASHBOARD.read_text())


def panels(dash: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel, the panels of collapsed rows included."""
    for p in dash["panels"]:
        yield p
        yield from p.get("panels", [])


def dashboard_targets(dash: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(panel title, refId, target) of every query target of the dashboard."""
    return [(p["title"], t["refId"], t) for p in panels(dash) for t in p.get("targets", [])]


_VARIABLE = re.compile(r"\$\{(\w+)(?::\w+)?\}|\[\[(\w+)\]\]|\$(\w+)")


def substitute(expr: str, dash: dict[str, Any]) -> str:
    """The expression as Grafana sends it with every variable at "All": the variable's
    ``allValue`` (a regex matching everything). An undefined variable raises KeyError."""
    all_values = {v["name"]: v["allValue"] for v in dash["templating"]["list"] if v["type"] in ("query", "custom")}

    def value(m: re.Match[str]) -> str:
        return all_values[m.group(1) or m.group(2) or m.group(3)]

    return _VARIABLE.sub(value, expr)


@dataclass
class Selector:
    """A metric named in an expression, with its label matchers (label -> (op, value))."""

    metric: str
    matchers: dict[str, tuple[str, str]] = field(default_factory=dict)


_KEYWORDS = {"and", "or", "unless", "bool", "offset", "inf", "nan"}
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
_MATCHER = re.compile(r'(\w+)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')


def selectors(expr: str) -> tuple[list[Selector], set[str]]:
    """The metric selectors of a PromQL expression and the label names its grouping and
    matching clauses (``by``, ``on``, ...) name. Enough PromQL for the recipes: a
    function is a name followed by ``(``, a metric any other name outside the braces."""
    found: list[Selector] = []
    grouping: set[str] = set()

    def braces(m: re.Match[str]) -> str:
        found.append(Selector(m.group(1), {k: (op, v) for k, op, v in _MATCHER.findall(m.group(2))}))
        return " "

    rest = re.sub(r"([a-zA-Z_:][\w:]*)\s*\{([^}]*)\}", braces, expr)
    rest = re.sub(r"\[[^\]]*\]", " ", rest)  # range selectors: [5m]

    def group(m: re.Match[str]) -> str:
        grouping.update(x.strip() for x in m.group(2).split(",") if x.strip())
        return " "

    rest = _GROUPING.sub(group, rest)
    for m in re.finditer(r"(?<![\w.:])[a-zA-Z_:][\w:]*", rest):
        after = rest[m.end() :].lstrip()
        if after.startswith("(") or m.group(0).lower() in _KEYWORDS:
            continue
        found.append(Selector(m.group(0)))
    return found, grouping
