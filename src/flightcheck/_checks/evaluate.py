"""Evaluation: facts + intent -> every check's results, the plan, the verdict.

Pure: nothing here touches the host, a cache or the clock. The checkpoint of ``--model``
is read before (``flightcheck._collect.checkpoint.read_checkpoint``) and handed in; the
pipeline that collects, reads and evaluates is ``flightcheck._pipeline.assess``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from flightcheck._checks.framework import SUMMARIES, Context, iter_checks, run_check
from flightcheck._vocabulary.facts import Facts
from flightcheck._vocabulary.intent import Intent
from flightcheck._vocabulary.plan import build_plan
from flightcheck._vocabulary.report import Report, verdict_of
from flightcheck._vocabulary.results import CheckResult

if TYPE_CHECKING:
    from flightcheck._checkpoint import Checkpoint


def evaluate(
    facts: Facts, intent: Intent | None = None, checkpoint: Checkpoint | None = None, *, strict: bool = False
) -> Report:
    """Run every node check on ``facts`` for ``intent`` (and the checkpoint read for its
    model) and decide the verdict."""
    intent = intent or Intent()
    ctx = Context(facts, intent, checkpoint)
    results: list[CheckResult] = []
    for chk in iter_checks("node"):
        results.extend(run_check(chk, ctx))
    plan = build_plan(results)
    verdict, code = verdict_of(results, plan, strict)
    summaries: dict[str, str] = {}
    for prefix, fn in SUMMARIES.items():
        try:
            summaries[prefix] = fn(ctx)
        except Exception as exc:  # noqa: BLE001 - a headline must never break the report
            summaries[prefix] = f"({type(exc).__name__})"
    memory = None
    if intent.model:
        try:
            model = ctx.memory
            memory = model.to_dict() if model is not None and hasattr(model, "to_dict") else None
        except Exception:  # noqa: BLE001 - FC4xx report the failure; the block is just absent
            memory = None
    return Report(
        verdict,
        code,
        intent,
        results,
        plan,
        facts,
        memory,
        summaries,
        {},
        strict,
    )
