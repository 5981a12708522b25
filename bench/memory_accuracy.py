"""The memory model's KV budget against real vLLM startup logs.

    python bench/memory_accuracy.py

Prints, per point of tests/fixtures/memory/vllm_startup_logs.jsonl, the "Available KV cache
memory" vLLM logged and the one flightcheck predicts (from the logged weights per rank, the
GPU's CUDA-visible total, the launch's utilization and batch limits, and the engine
version's rules), the KV tokens logged, predicted and converted from the logged budget
(the conversion alone: block rounding, null block, hybrid pages), the outcome and FC402's verdict; then the error
distribution. Excluded points say why.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from support.memory_accuracy import RESIDUALS, evaluate, summary


def _f(x: float | None, fmt: str = "{:7.2f}") -> str:
    return fmt.format(x) if x is not None else "      -"


def main() -> int:
    rows = evaluate()
    head = f"{'#':>2} {'model':34} {'version':10} {'logged':>7} {'pred':>7} {'err':>6}"
    print(f"{head} {'tok log':>9} {'tok pred':>9} {'tok conv':>9}  outcome / FC402")
    for r in rows:
        if r.excluded:
            print(f"{r.index:>2} {r.model[:34]:34} {str(r.version)[:10]:10}  excluded: {r.excluded}")
            continue
        verdict = "FC402 stop" if r.predicted_stop else "FC402 warn" if r.predicted_fail else "fits"
        mark = "" if r.within is None else (" ok" if r.within else " OFF")
        print(
            f"{r.index:>2} {r.model[:34]:34} {str(r.version)[:10]:10} {_f(r.logged_gib)} {_f(r.predicted_gib)} "
            f"{_f(r.error_gib, '{:+6.2f}')} {r.logged_tokens or '-':>9} {r.predicted_tokens or '-':>9} "
            f"{r.tokens_from_logged or '-':>9}  "
            f"{r.outcome} / {verdict}{mark}"
        )
    s = summary(rows)
    off = [r for r in rows if r.within is False]
    if off:
        print("\nresiduals (outside max(3%, 0.5 GiB)), and why:")
    for r in off:
        print(f"{r.index:>2} {r.error_gib:+.2f} GiB: {RESIDUALS.get(r.index, 'no reason recorded')}")
    comm = [r for r in rows if r.comm_gib is not None]
    if comm:
        print("\nNCCL communicators + custom all-reduce inside the budget (derived, flightcheck._knowledge.nccl):")
    for r in comm:
        lo, hi = r.comm_gib or (0.0, 0.0)
        print(
            f"{r.index:>2} {lo:.2f} GiB counted (certain); {hi:.2f} GiB at the high end (NVLS, network): "
            f"error {_f(r.error_gib, '{:+.2f}')} GiB -> {_f((r.error_gib or 0) - (hi - lo), '{:+.2f}')} GiB"
        )
    broken = [r for r in rows if r.excluded is None and r.terms]
    if broken:
        print("\nper-term error where the log breaks the profile down (predicted - logged, GiB):")
    for r in broken:
        cells = " · ".join(f"{k} {pr:.2f} - {lg:.2f} = {pr - lg:+.2f}" for k, (pr, lg) in (r.terms or {}).items())
        print(f"{r.index:>2} {r.model[:30]:30} {cells}")
    outside = [r for r in rows if r.excluded is None and r.inside is False]
    if outside:
        print("\nlogged budget outside the reported [low, high] bound, and the bound's terms (below, above GiB):")
    for r in outside:
        cells = ", ".join(f"{k} -{b:.2f}/+{a:.2f}" for k, (b, a) in (r.bound_terms or {}).items())
        print(f"{r.index:>2} logged {r.logged_gib:.2f} not in [{r.low_gib:.2f}, {r.high_gib:.2f}] GiB: {cells}")
    for name, part in (("corpus", False), ("held-out", True)):
        t = summary(rows, held_out=part)
        if not t["scored"]:
            print(f"\n{name}: no scored points")
            continue
        print(
            f"\n{name}: {t['scored']} scored; within max(3%, 0.5 GiB) {t['within']}, within max(5%, 0.5 GiB) "
            f"{t['within5']}; logged inside the bound {t['inside']} of {t['bounded']} "
            f"({100 * t['inside'] / max(1, t['bounded']):.1f}%), widened by max(3%, 0.5 GiB) {t['inside_tolerance']}; "
            f"median bound width {t['median_width_gib']:.2f} GiB"
        )
    print(
        f"\n{s['scored']} of {s['points']} points scored; {s['within']} ({100 * s['share_within']:.1f}%) within "
        f"max(3%, 0.5 GiB); median |error| {s['median_abs_error_gib']:.2f} GiB, max {s['max_abs_error_gib']:.2f} GiB; "
        f"KV tokens: median |error| {100 * s['median_token_error']:.1f}%"
    )
    print(
        f"KV tokens from the logged budget ('tok conv', the conversion alone): {s['conversion_within_3pct']} of "
        f"{s['conversion_points']} within 3%, max |error| {100 * s['max_conversion_error']:.2f}%"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
