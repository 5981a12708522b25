"""FC4xx, continued: what the model itself refuses, whatever the GPU memory — a parallel
layout that does not divide it (FC404), a max_model_len past its window (FC405). Imported
by ``memory`` so the family registers as one.
"""

from __future__ import annotations

from collections.abc import Iterator

from flightcheck._checks.framework import Context, Outcome, Skip, check, fail, ok
from flightcheck._checks.memory.fit import _model, _window
from flightcheck._vocabulary.intent import AUTO
from flightcheck._vocabulary.results import ERROR


@check(
    "FC404",
    "parallel-layout-invalid",
    ERROR,
    logs=(
        r"Total number of attention heads \(\d+\) must be divisible by tensor parallel size",
        "is not divisible by (?:the )?(?:tensor|pipeline) parallel size",
        "must be divisible by tp_size",
        "(?:weight|output_size|input_size).* is not divisible by (?:weight quantization )?block_(?:n|k)",
    ),
)
def parallel_layout_invalid(ctx: Context) -> Iterator[Outcome]:
    """The parallel layout does not divide the model.

    ## What it checks
    Attention heads divide by TP (and KV heads by TP, or TP by them); the MoE intermediate
    size per rank (and a block-FP8 dense one) is a multiple of the quantization block —
    128 for block FP8, the group size (32) for MXFP4 / INT4, 16 for NVFP4; with expert
    parallelism at least one expert per rank; no more PP stages than layers.

    ## Why the launch dies
    vLLM asserts these while building the model ("Total number of attention heads must be
    divisible by tensor parallel size", "... is not divisible by weight quantization
    block_n"), in every worker, sometimes only after the weights start loading.

    ## How to fix
    Use a TP the model divides by, or ``--enable-expert-parallel`` so experts stay whole;
    the fix lists the valid choices.
    """
    from msgspec.structs import replace

    from flightcheck._memory.layout import problems
    from flightcheck._memory.suggest import TP_CANDIDATES, flag

    m = _model(ctx)
    found = problems(m.cfg, m.layout)
    if not found:
        yield ok(
            f"{m.layout.describe(m.engine)} divides the model ({m.cfg.heads} heads"
            + (f", {m.cfg.experts} experts" if m.cfg.experts else "")
            + ")"
        )
        return
    base = m.layout
    valid = [t for t in TP_CANDIDATES if not problems(m.cfg, replace(base, tp=t))]
    alt = []
    if m.cfg.moe and not base.ep and not problems(m.cfg, replace(base, ep=True)):
        alt.append(replace(base, ep=True).describe(m.engine))
    if valid:
        alt.append(f"{flag('tp', m.engine)} one of {', '.join(map(str, valid))}")
    for p in found:
        yield fail(
            p + f" ({m.layout.describe(m.engine)})",
            fix="\n".join(alt) or "no power-of-two TP divides this model",
            evidence={"valid_tp": valid},
        )


@check(
    "FC405",
    "max-model-len-over-model-limit",
    ERROR,
    logs=(r"User-specified max_model_len \(\d+\) is greater than the derived max_model_len",),
)
def max_model_len_over_limit(ctx: Context) -> Iterator[Outcome]:
    """--max-model-len is longer than the model's context window.

    ## What it checks
    A given ``--max-model-len`` against the model's window as the engine derives it from
    config.json after the launch's ``--hf-overrides`` / ``--json-model-override-args``
    (vLLM 0.33.0: the smallest of every length key, ``model_max_length`` replacing it,
    times the rope factor of rope types other than llama3 / yarn / longrope; SGLang: the
    first length key, times the rope factor), unless ``VLLM_ALLOW_LONG_MAX_MODEL_LEN=1``
    (vLLM) or ``SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1`` (SGLang) is set.

    ## Why the launch dies
    vLLM refuses it at start-up ("User-specified max_model_len ... is greater than the
    derived max_model_len"); SGLang likewise. With the override set, positions past the
    trained window produce degraded output rather than an error.

    ## How to fix
    Use a length up to the model's window, or set the override if the model really
    supports longer contexts (e.g. with a rope scaling you configure).
    """
    from flightcheck._memory.suggest import flag

    m = _model(ctx)
    req, opt = m.requested_len, flag("max_len", m.engine)
    if req is None or req == AUTO:
        raise Skip(f"no explicit {opt}")
    limit, var, allowed = _window(ctx, m)
    if limit is None:
        raise Skip("the model states no max_position_embeddings")
    if req > limit:
        if allowed:
            yield ok(f"{opt} {req:,} exceeds the model's {limit:,} but {var}=1 allows it")
        else:
            yield fail(
                f"{opt} {req:,} exceeds the model's context window of {limit:,} tokens",
                fix=f"{opt} {limit}\n(or, if the model really supports it: export {var}=1)",
                evidence={"limit": limit},
            )
    else:
        yield ok(f"{opt} {req:,} within the model's {limit:,}")
