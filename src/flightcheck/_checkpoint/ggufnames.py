"""A Flint GGUF header as the memory model's tensor groups: names mapped as vLLM maps
them, bytes as vLLM allocates them.

vLLM 0.33 reads a Flint GGUF with ``gguf_nvfp4_weights_iterator``
(vllm/models/flint/gguf_nvfp4.py): a ``.scale`` tensor is never yielded on its own (it is
the F32 ``weight_scale_2`` of the NVFP4 tensor ``<base>.weight``); an NVFP4 tensor's base
name, any other tensor's whole name, goes through ``_map_name`` (the tables in
:mod:`flightcheck._knowledge.vllm`, ``FLINT_GGUF_*``); a name it cannot map, or a tensor
that is neither NVFP4 nor BF16/F32, is a ValueError there. The parameters that receive
them (vllm/models/flint/model.py, with ``ModelOptNvFp4Config``):

- NVFP4 linear layers keep the packed codes (half a byte a value) and one E4M3 scale per
  16 values: exactly the GGUF's 36 bytes per 64 values, plus the F32 scale;
- ``lm_head`` (``_GGUF_DEQUANTIZED``) is dequantized to BF16: 2 bytes a value;
- every other tensor lands in a BF16 parameter (Flint requires the bfloat16 model dtype),
  2 bytes a value whatever the GGUF stores (F32 norms halve), except the attention sinks,
  float32.

Stacked expert tensors (``blk.N.ffn_*_exps``, all experts of a layer in one tensor) become
one expert block per layer, as :mod:`.groups` makes of safetensors' per-expert tensors.
Anything that cannot be mapped gives no groups and the reason: the memory model then says
it did not count the weights, rather than guess; where vLLM's loader raises on it (a name
``_map_name`` refuses, a type it does not read, an NVFP4 tensor without its scale) the
reason is also the load's failure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NamedTuple

from flightcheck._checkpoint.gguf import GGML_TYPES, GGUFScan
from flightcheck._checkpoint.groups import Group, group_tensors
from flightcheck._knowledge import vllm

_LAYER = re.compile(r"blk\.(\d+)\.(.+)")
_EXPERT_BLOCK = "model.layers.#.mlp.experts.#.*"


def map_name(name: str) -> tuple[str, int | None, bool] | None:
    """(HF name, layer, stacked experts) of a GGUF tensor (base) name, as ``_map_name``
    maps it; None where it raises "Unexpected tensor in Flint GGUF"."""
    if name in vllm.FLINT_GGUF_GLOBAL:
        return vllm.FLINT_GGUF_GLOBAL[name], None, False
    m = _LAYER.fullmatch(name)
    if m is None:
        return None
    layer, rest = m.groups()
    prefix = f"model.layers.{layer}."
    if rest in vllm.FLINT_GGUF_EXPERTS:
        return prefix + "mlp.experts.{}." + vllm.FLINT_GGUF_EXPERTS[rest], int(layer), True
    if rest not in vllm.FLINT_GGUF_LAYER:
        return None
    return prefix + vllm.FLINT_GGUF_LAYER[rest], int(layer), False


@dataclass(frozen=True)
class FlintWeights:
    """What :func:`flint_groups` makes of a header: the groups, or why there are none and
    whether that reason fails the load itself (``refused``: vLLM's loader raises on it)."""

    groups: list[Group] | None
    why: str = ""
    refused: bool = False


def flint_groups(scan: GGUFScan) -> FlintWeights:
    """The memory model's groups for a GGUF header vLLM's Flint loader reads; none, and
    why, when a tensor cannot be mapped or sized as vLLM allocates it."""
    if not scan.ok:
        return FlintWeights(None, f"its header is broken ({scan.problems[0][1]})")
    by_name = {t.name: t for t in scan.tensors}
    plain: list[tuple[str, str, tuple[int, ...], int]] = []  # (HF name, dtype, shape, bytes)
    blocks: dict[int, list[int]] = {}  # layer -> [bytes, tensors, tensors per expert]
    for t in scan.tensors:
        if t.name.endswith(".scale"):
            continue  # the weight_scale_2 of the tensor it scales, counted there
        n = 1
        for d in t.dims:
            n *= d
        shape = tuple(reversed(t.dims))  # GGUF stores the fastest-varying dimension first
        if t.ggml_type == vllm.FLINT_GGUF_NVFP4:
            base = t.name.removesuffix(".weight")
            got = map_name(base)
            if got is None:
                return _unmapped(t.name)
            hf, layer, stacked = got
            scale = by_name.get(base + ".scale")
            if scale is None:  # the iterator looks it up: tensors[base + ".scale"]
                return FlintWeights(
                    None,
                    f"NVFP4 tensor {t.name!r} has no {base + '.scale'!r} (its scale): loading raises KeyError",
                    True,
                )
            extra = scale.nbytes if scale is not None else 0
            if hf in vllm.FLINT_GGUF_DEQUANTIZED:
                plain.append((hf + ".weight", "BF16", shape, 2 * n))  # its scale goes to the logits
            elif stacked and layer is not None:
                b = blocks.setdefault(layer, [0, 0, 0])
                experts = shape[0] if shape else 1
                b[0] += t.nbytes + extra
                b[1] += 3 * experts  # weight, weight_scale, weight_scale_2 of each expert
                b[2] += 3
            else:
                plain.append((hf + ".weight", "NVFP4", shape, t.nbytes + extra))
        elif t.ggml_type in vllm.FLINT_GGUF_PLAIN_TYPES:
            got = map_name(t.name)
            if got is None:
                return _unmapped(t.name)
            if got[2]:  # mapped to the experts' "{}" template, which no parameter matches
                return FlintWeights(None, f"tensor {t.name!r} is a stacked expert tensor that is not NVFP4")
            hf = got[0]
            fp32 = hf.endswith(vllm.FLINT_FP32_PARAMS)
            plain.append((hf, "F32" if fp32 else "BF16", shape, (4 if fp32 else 2) * n))
        else:
            kind = GGML_TYPES[t.ggml_type][0] if t.ggml_type in GGML_TYPES else str(t.ggml_type)
            return FlintWeights(
                None,
                f"tensor {t.name!r} is {kind}: vLLM's Flint loader reads NVFP4, BF16 and F32 tensors only "
                '(loading raises "Unsupported GGUF tensor type")',
                True,
            )
    plain.sort()
    # group_tensors reads a safetensors header's shape: each name's entry (.dtype, .shape)
    header = {name: _Entry(dtype, shape) for name, dtype, shape, _ in plain}
    groups = group_tensors([p[0] for p in plain], header, {p[0]: p[3] for p in plain})
    groups += [
        Group(_EXPERT_BLOCK, layer, "", (), nbytes, count, max(1, per))
        for layer, (nbytes, count, per) in sorted(blocks.items())
    ]
    return FlintWeights(groups)


class _Entry(NamedTuple):
    """A tensor's entry as :func:`~.groups.group_tensors` reads it from a header."""

    dtype: str
    shape: tuple[int, ...]


def _unmapped(name: str) -> FlintWeights:
    return FlintWeights(
        None,
        f'tensor {name!r} has no name vLLM\'s Flint loader maps (loading raises "Unexpected tensor in Flint GGUF")',
        True,
    )
