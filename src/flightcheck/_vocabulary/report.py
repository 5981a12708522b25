"""The report of one evaluation and the verdict rule (schema ``flightcheck.report/v1``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from flightcheck._vocabulary.facts import Facts
from flightcheck._vocabulary.intent import Intent
from flightcheck._vocabulary.plan import Plan
from flightcheck._vocabulary.results import CheckResult, Severity, Status
from flightcheck._vocabulary.version import __version__

REPORT_SCHEMA = "flightcheck.report/v1"


READY, READY_WITH_FALLBACKS, NOT_READY, UNKNOWN = "ready", "ready-with-fallbacks", "not-ready", "unknown"


@dataclass
class Report:
    """The outcome of one evaluation (JSON schema ``flightcheck.report/v1``)."""

    verdict: str
    exit_code: int
    intent: Intent
    checks: list[CheckResult]
    plan: Plan
    facts: Facts
    memory: dict[str, Any] | None = None
    summaries: dict[str, str] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    strict: bool = False

    @property
    def failures(self) -> list[CheckResult]:
        """Failing results, errors first."""
        order = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2}
        return sorted((r for r in self.checks if r.status is Status.FAIL), key=lambda r: (order[r.severity], r.code))

    def to_dict(self) -> dict[str, Any]:
        """The JSON report."""
        out: dict[str, Any] = {
            "schema": REPORT_SCHEMA,
            "version": __version__,
            "verdict": self.verdict,
            "exit_code": self.exit_code,
            "host": self.facts.host.hostname if self.facts.host else None,
            "intent": self.intent.to_dict(),
            "checks": [r.to_dict() for r in self.checks],
            "plan": self.plan.to_dict() if self.plan else None,
            "timings": self.timings,
        }
        if self.memory is not None:
            out["memory"] = self.memory
        return out


def blocks(r: CheckResult, strict: bool = False) -> bool:
    """Whether a result makes the launch not ready: a failing ``error`` check (with
    ``--strict``, a failing ``warning`` too). The verdict, the launch guard and every
    format decide "blocking" through this one rule."""
    return r.status is Status.FAIL and (r.severity is Severity.ERROR or (strict and r.severity is Severity.WARNING))


def verdict_of(results: list[CheckResult], plan: Plan, strict: bool = False) -> tuple[str, int]:
    """The verdict and exit code, exactly as the contract says.

    1 not-ready: a blocking result (see :func:`blocks`);
    3 unknown: an ``error`` check could not be evaluated and nothing failed;
    0 ready / ready-with-fallbacks (when the plan is not empty).
    """
    if any(blocks(r, strict) for r in results):
        return NOT_READY, 1
    if any(r.status is Status.UNKNOWN and r.severity is Severity.ERROR for r in results):
        return UNKNOWN, 3
    return (READY_WITH_FALLBACKS if plan else READY), 0
