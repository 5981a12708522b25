"""Cluster evaluation: every node as ``check`` would judge it, then the cross-node checks,
then one verdict over the whole launch (JSON schema ``flightcheck.cluster-report/v1``).

How ``--model`` interacts: the model is compared across nodes through the ``checkpoint``
sections each node recorded from its own disk (FC802); it is never read here, where the
command runs, on behalf of a remote node. Each node is therefore evaluated with the intent
minus the model: its checkpoint checks (FC5xx) judge what the node's own section recorded
(the reader's findings on that node's disk, as ``check --facts node.json`` does), and the
memory fit (FC4xx), which needs the shards' headers, is not part of a cluster report: run
``flightcheck check --model M`` on a node for that.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from flightcheck._checks.cluster.context import ClusterContext
from flightcheck._checks.evaluate import evaluate
from flightcheck._checks.framework import iter_checks, run_check
from flightcheck._vocabulary.plan import Plan, build_plan
from flightcheck._vocabulary.report import verdict_of
from flightcheck._vocabulary.results import CheckResult
from flightcheck._vocabulary.version import __version__

if TYPE_CHECKING:
    from flightcheck._vocabulary.facts import Facts
    from flightcheck._vocabulary.intent import Intent
    from flightcheck._vocabulary.report import Report

SCHEMA = "flightcheck.cluster-report/v1"


@dataclass
class ClusterReport:
    """Every node's report, the cross-node results, and the verdict over all of them."""

    verdict: str
    exit_code: int
    intent: Intent
    nodes: dict[str, Report]
    checks: list[CheckResult]
    plan: Plan
    unreachable: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)  # Ray nodes left out, and why
    source: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    strict: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The JSON report."""
        return {
            "schema": SCHEMA,
            "version": __version__,
            "verdict": self.verdict,
            "exit_code": self.exit_code,
            "intent": self.intent.to_dict(),
            "source": self.source,
            "nodes": {name: rep.to_dict() for name, rep in self.nodes.items()},
            "unreachable": self.unreachable,
            "skipped": self.skipped,
            "checks": [r.to_dict() for r in self.checks],
            "plan": self.plan.to_dict() if self.plan else None,
            "timings": self.timings,
        }


def node_intent(intent: Intent) -> Intent:
    """The intent each node is judged with: the model is compared through checkpoint
    sections, never read here for a remote node (see the module docstring)."""
    return dataclasses.replace(intent, model=None, revision=None)


def evaluate_cluster(
    nodes: dict[str, Facts],
    intent: Intent,
    *,
    unreachable: dict[str, str] | None = None,
    expected: int | None = None,
    skipped: dict[str, str] | None = None,
    source: dict[str, Any] | None = None,
    strict: bool = False,
) -> ClusterReport:
    """Evaluate each node, then the cross-node checks, and decide the cluster's verdict."""
    t0 = time.perf_counter()
    per_node = node_intent(intent)
    reports = {name: evaluate(facts, per_node, strict=strict) for name, facts in sorted(nodes.items())}
    ctx = ClusterContext(
        nodes, intent, unreachable=unreachable, expected=expected, source=(source or {}).get("kind", "facts-dir")
    )
    cross: list[CheckResult] = []
    for chk in iter_checks("cluster"):
        cross.extend(run_check(chk, ctx))  # type: ignore[arg-type]  # cluster checks take a ClusterContext
    every = [r for rep in reports.values() for r in rep.checks] + cross
    plan = build_plan(every)
    verdict, code = verdict_of(every, plan, strict)
    return ClusterReport(
        verdict,
        code,
        intent,
        reports,
        cross,
        plan,
        dict(ctx.unreachable),
        dict(sorted((skipped or {}).items())),
        dict(source or {}),
        {"evaluate_s": round(time.perf_counter() - t0, 4)},
        strict,
    )
