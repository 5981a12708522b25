"""GPU labels and report subjects shared by the GPU and fabric families."""

from __future__ import annotations

from collections.abc import Sequence

from flightcheck._checks.framework import Context, Skip
from flightcheck._vocabulary.facts import Gpu


def gpu_label(g: Gpu) -> str:
    """'GPU 3 (NVIDIA B300 SXM6 AC, sm_103)'."""
    cc = g.compute_capability.replace(".", "") if g.compute_capability else "?"
    return f"GPU {g.index} ({g.name or 'unknown model'}, sm_{cc})"


def subject(gpus: Sequence[Gpu]) -> str:
    """'gpu:3' for one GPU, 'gpus:0-7' or 'gpus:0,2,5' for several."""
    idx = sorted(g.index for g in gpus if g.index is not None)
    if len(idx) == 1:
        return f"gpu:{idx[0]}"
    if idx and idx == list(range(idx[0], idx[-1] + 1)):
        return f"gpus:{idx[0]}-{idx[-1]}"
    return "gpus:" + ",".join(map(str, idx))


def driver_ok(ctx: Context) -> None:
    """Skip a GPU check when FC201 already says there is no driver to ask."""
    if ctx.driver.loaded is False:
        raise Skip("no NVIDIA driver (FC201)")


def used_gpus(ctx: Context) -> list[Gpu]:
    """The GPUs used, or Skip when FC201/FC202 already explain why there are none (the GPU
    and fabric families share it)."""
    driver_ok(ctx)
    ctx.need(ctx.facts.gpus, "gpus")
    if not ctx.gpus_used:
        raise Skip("no GPU visible (FC202)")
    return ctx.gpus_used
