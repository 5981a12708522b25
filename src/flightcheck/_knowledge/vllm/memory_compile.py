"""What vLLM's torch.compile changes in the profile run's activation peak, release by release:
the FP8 linear layers' activation quantization, traced into the MLP's Inductor graph.
"""

from __future__ import annotations

from flightcheck._knowledge.vllm._versions import _release
from flightcheck._knowledge.vllm.memory_gptoss import _cc

# ---- the FP8 activation quantization under Inductor ---------------------------------------
#
# An FP8 linear layer (per-tensor or per-token activation scales: ``--quantization fp8`` on a
# 16-bit checkpoint, an FP8 checkpoint without weight blocks, compressed-tensors / ModelOpt
# W8A8 FP8) quantizes its input through the ``QuantFP8`` CustomOp (registered "quant_fp8",
# vllm/model_executor/layers/quantization/input_quant_fp8.py): from 0.10.0 in
# quantization/utils/w8a8_utils.py ``Fp8LinearOp.apply`` (0.10.0 - 0.14.0), then in
# model_executor/kernels/linear/scaled_mm/ScaledMMLinearKernel.py
# ``FP8ScaledMMLinearKernel.apply_weights`` (0.18.0 - 0.33.0); read in the wheels of 0.10.0,
# 0.10.1.1, 0.10.2, 0.11.0, 0.12.0, 0.14.0, 0.18.0, 0.23.0 and 0.33.0. 0.9.2 has no QuantFP8:
# it calls ``ops.scaled_fp8_quant``, an opaque custom op, whose bf16 input must exist.
#
# When the V1 engine compiles the model (VLLM_COMPILE with the Inductor backend: the default,
# unless --enforce-eager, -O0 or TORCH_COMPILE_DISABLE=1), custom ops are off by default —
# model_executor/custom_op.py ``CustomOp.default_on`` (0.10.0 - 0.11.0: off at level PIECEWISE
# with Inductor) and config/vllm.py appending "none" to ``custom_ops`` (0.12.0 - 0.33.0) — so
# SiluAndMul and QuantFP8 run their ``forward_native``: ``silu(x[:d]) * x[d:]``, then an amax
# (per tensor or per token) and ``(x * 1/scale).clamp().to(fp8)``. Inductor inlines that
# silu-mul pointwise into both of its readers rather than storing it: on the GPU a pointwise
# node read by several users is realized only past ``realize_reads_threshold`` (4) reads or
# with a large inner function (torch/_inductor/ir.py ``StorageBox.should_realize_on_reuse``,
# torch 2.13.0 and 2.14.0 read; the CPU branch that realizes ``sigmoid`` does not apply), and a
# reduction does not ask for its input to be realized. So the MLP's activation exists only
# as FP8, one byte an element, beside the gate/up output: 2 x inter x dtype + inter bytes a
# token, where the 16-bit model (and an eager launch) holds 2 x inter x dtype + inter x dtype.
#
# Below compute capability 8.9 (Ampere, Turing) an FP8 checkpoint runs the Marlin kernel,
# weight-only FP8 (kernels/linear/scaled_mm/marlin.py ``MarlinFP8ScaledMMLinearKernel``: chosen
# below 89 or with VLLM_TEST_FORCE_FP8_MARLIN=1, 0.18.0 - 0.33.0; quantization/fp8.py
# ``use_marlin = not has_device_capability(89) or VLLM_TEST_FORCE_FP8_MARLIN`` in 0.10.0 - 0.14.0):
# the input is not quantized, and the activation stays 16-bit.
#
# Not here: block-scaled FP8 (``weight_block_size``, DeepSeek / Qwen3-FP8). config/vllm.py turns
# "+quant_fp8" on for blocked weights (``has_blocked_weights``, 0.12.0 - 0.33.0), and which
# fusion pass then runs depends on the release's pass list; the 16-bit figure is kept for it.
# Past 0.33.0: extrapolated.
INDUCTOR_ACT_QUANT_SINCE = "0.10.0"
#: the compute capability from which FP8 linear layers quantize their input (Marlin below it)
FP8_ACTIVATION_MIN_CC = (8, 9)
FORCE_FP8_MARLIN = "VLLM_TEST_FORCE_FP8_MARLIN"


def fp8_activation_stored_as_fp8(
    v: tuple[int, ...] | None,
    *,
    v0: bool,
    eager: bool,
    env: dict[str, str | None] | None = None,
    compile_flags: bool = False,
    compute_capability: str | None = None,
) -> bool | None:
    """Whether an FP8 (non-block) linear layer's MLP activation is held as FP8 in the profile
    run (:data:`INDUCTOR_ACT_QUANT_SINCE`): True when the V1 engine of 0.10.0 or later
    compiles the model, False when it does not (V0, --enforce-eager, TORCH_COMPILE_DISABLE=1,
    an older release, a GPU below cc 8.9 or VLLM_TEST_FORCE_FP8_MARLIN=1: Marlin's weight-only
    FP8), None when it cannot be decided (release or GPU unknown, or the launch sets ``-O`` /
    ``--compilation-config``, which may turn compilation or the custom ops off)."""
    env = env or {}
    if v0 or eager or env.get("TORCH_COMPILE_DISABLE") == "1" or env.get(FORCE_FP8_MARLIN) == "1":
        return False
    cc = _cc(compute_capability)
    if cc is not None and cc < FP8_ACTIVATION_MIN_CC:
        return False
    if v is not None and v < _release(INDUCTOR_ACT_QUANT_SINCE):
        return False
    if v is None or cc is None or compile_flags:
        return None
    return True


#: the canonical flag names (and their dotted forms' prefixes) that change vLLM's compilation:
#: ``-O`` / ``--optimization-level`` and ``--compilation-config`` / ``-cc``
#: (vllm/engine/arg_utils.py; the reader renders ``-O3`` as ``-O.level=3``).
COMPILE_FLAG_PREFIXES: tuple[str, ...] = ("-O", "--optimization-level", "--compilation-config", "-cc")


def compile_flags_given(flags: list[str]) -> bool:
    """Whether the launch's canonical flags (``--name[=value]``) set any compilation option."""
    for item in flags:
        name = item.partition("=")[0]
        if any(name == p or name.startswith(p + ".") for p in COMPILE_FLAG_PREFIXES):
            return True
        if name.startswith("-O") and not name.startswith("--"):
            return True  # -O3, -O.level
    return False
