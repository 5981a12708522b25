"""The fallback plan: the engine settings that avoid a failing feature, with reasons.

Checks attach :class:`PlanStep` items to their failures (FC303/FC304 switch the multicast
paths off); the plan is their union, in check order. ``flightcheck run`` and the vLLM plugin
apply it; ``check`` only reports it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from flightcheck._vocabulary.results import CheckResult, PlanStep, Status


@dataclass
class Plan:
    """Environment to set and engine arguments to add or drop."""

    env: dict[str, str] = field(default_factory=dict)
    add_args: list[str] = field(default_factory=list)
    drop_args: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    steps: list[PlanStep] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.env or self.add_args or self.drop_args)

    def to_dict(self) -> dict[str, Any]:
        """The report's ``plan`` block."""
        return {
            "env": dict(self.env),
            "args": list(self.add_args),
            "drop_args": list(self.drop_args),
            "reasons": list(self.reasons),
            "steps": [
                {"kind": s.kind, "name": s.name, "value": s.value, "code": s.code, "why": s.why, "cost": s.cost}
                for s in self.steps
            ],
        }


def build_plan(results: Iterable[CheckResult]) -> Plan:
    """Union of the plan steps of every failing result, first writer wins per setting."""
    plan = Plan()
    for r in results:
        if r.status is not Status.FAIL or not r.plan:
            continue
        if r.code not in plan.reasons:
            plan.reasons.append(r.code)
        for step in r.plan:
            if step.kind == "env":
                if step.name in plan.env:
                    continue
                plan.env[step.name] = step.value or ""
            elif step.kind == "add_arg":
                flag = [step.name] + ([step.value] if step.value is not None else [])
                if step.name in plan.add_args:
                    continue
                plan.add_args.extend(flag)
            elif step.kind == "drop_arg":
                if step.name in plan.drop_args:
                    continue
                plan.drop_args.append(step.name)
            else:
                raise ValueError(f"unknown plan step kind {step.kind!r}")
            plan.steps.append(step)
    return plan
