"""GPU labels and report subjects shared by the GPU and fabric families."""

from __future__ import annotations

from collections.abc import Sequence

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
