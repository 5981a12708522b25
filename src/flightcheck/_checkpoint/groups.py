"""Group one shard's tensors for the memory model, in a few C-level passes.

Part of the scan worker (stdlib + msgspec only, loaded as a top-level module there).
A 390k-tensor MoE is ~98% routed-expert tensors: those of one layer collapse into one
block group; the rest (attention, norms, dense MLPs, embeddings) group by name pattern.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Mapping
from typing import Any

import msgspec

_DIGITS = str.maketrans("0123456789", "##########")


class Group(msgspec.Struct, array_like=True, frozen=True):
    """Tensors of one shard that the memory model treats alike.

    Either tensors sharing a name pattern (digits as ``#``), first index, dtype and shape,
    or a whole block of routed experts of one layer (``pattern`` ends in ``experts.#.*``,
    ``dtype`` is ``""``): ``per_item`` is then the number of tensors one expert has.
    """

    pattern: str  # "model.layers.#.self_attn.q_proj.weight" | "model.layers.#.mlp.experts.#.*"
    index: int  # the first integer in the name (the layer, when the pattern says so), or -1
    dtype: str
    shape: tuple[int, ...]  # of one member ("()" for an expert block)
    nbytes: int  # all members together
    count: int  # tensors
    per_item: int = 1  # tensors per expert (expert blocks)


def group_tensors(names: list[str], header: Mapping[str, Any], span_of: Mapping[str, int]) -> list[Group]:
    """Group a shard's tensors for the memory model, touching few names one by one.

    ``header`` maps each name to its entry (``dtype``, ``shape``), ``span_of`` to its bytes.
    ``names`` is sorted, so all tensors of one layer's routed experts
    (``model.layers.12.mlp.experts.*``, ~98% of a big MoE's names) are contiguous: one
    bisect finds the block and ``sum`` of a slice sizes it. The other names (attention,
    norms, dense MLPs, embeddings: a few dozen a shard) are grouped one by one.
    """
    out: dict[tuple[str, int, str, tuple[int, ...]], list[int]] = {}
    blocks: list[Group] = []
    i, n = 0, len(names)
    while i < n:
        name = names[i]
        k = name.find(".experts.")
        if k >= 0 and name[k + 9 : k + 10].isdigit():
            prefix = name[: k + 9]  # "...mlp.experts."
            j = bisect_left(names, prefix[:-1] + "/", i + 1)  # "/" sorts right after "."
            e_end = name.find(".", k + 9)
            one = name[: e_end + 1] if e_end > 0 else name
            per = bisect_left(names, one[:-1] + "/", i + 1) - i if e_end > 0 else 1
            m = _FIRST.search(prefix)
            blocks.append(
                Group(
                    _collapse(prefix.translate(_DIGITS)) + "#.*",
                    int(m.group()) if m else -1,
                    "",
                    (),
                    sum(map(span_of.__getitem__, names[i:j])),
                    j - i,
                    max(1, per),
                )
            )
            i = j
            continue
        m = _FIRST.search(name)
        e = header[name]
        key = (_collapse(name.translate(_DIGITS)), int(m.group()) if m else -1, e.dtype, tuple(e.shape))
        acc = out.get(key)
        if acc is None:
            out[key] = [span_of[name], 1]
        else:
            acc[0] += span_of[name]
            acc[1] += 1
        i += 1
    groups = [Group(p, x, d, sh, nb, c) for (p, x, d, sh), (nb, c) in out.items()]
    return sorted(groups + _merge_blocks(blocks), key=lambda g: (g.pattern, g.index, g.dtype))


def _merge_blocks(blocks: list[Group]) -> list[Group]:
    merged: dict[tuple[str, int], Group] = {}
    for b in blocks:
        key = (b.pattern, b.index)
        if key in merged:
            o = merged[key]
            merged[key] = Group(
                o.pattern, o.index, "", (), o.nbytes + b.nbytes, o.count + b.count, max(o.per_item, b.per_item)
            )
        else:
            merged[key] = b
    return list(merged.values())


def _collapse(pattern: str) -> str:
    while "##" in pattern:
        pattern = pattern.replace("##", "#")
    return pattern


_FIRST = re.compile(r"\d+")
