"""FC4xx — memory fit: per-rank weights, one max-length sequence of KV cache, the reserve.

Every number comes from ``ctx.memory`` (``flightcheck._memory``): the checkpoint's headers
and config.json against the memory of the smallest GPU used. Suggestions are computed by
re-running the model on other layouts, KV dtypes and lengths, never guessed. FC401–FC403
here; what the model itself refuses whatever the memory (FC404 layout, FC405 length) in
:mod:`.layout`; the package imports both so the family registers as one.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from flightcheck._checks.framework import Context, Log, Outcome, Skip, check, fail, ok, summary, unknown
from flightcheck._knowledge import engines, envread, sglang
from flightcheck._knowledge.units import gib as _gib
from flightcheck._vocabulary.intent import AUTO
from flightcheck._vocabulary.results import ERROR, WARNING

if TYPE_CHECKING:
    from flightcheck._memory.fit import Fit


def _model(ctx: Context) -> Any:
    m = ctx.memory
    if m is None:
        raise Skip("no --model given")
    if m.crash:
        raise RuntimeError(m.error)
    if m.error:
        raise Skip(f"needs the checkpoint: {m.error}")
    return m


def _window(ctx: Context, m: Any) -> tuple[int | None, str, bool]:
    """(the model's context window, the override variable, whether it is set)."""
    # SGLang: configs/model_config.py _derive_context_length (``_knowledge.sglang.context_length``)
    rules = engines.get(m.engine).memory
    limit = m.cfg.derived_context if rules.derived_context else m.cfg.context_window
    var = rules.allow_long_var
    return limit, var, bool(envread.enabled(engines.get(m.engine).env_vars[var], ctx.facts.env))


def _gpu(m: Any) -> str:
    return f"a {m.gpu_name.removeprefix('NVIDIA ')} ({_gib(m.total)})" if m.gpu_name else f"a {_gib(m.total)} GPU"


@summary("FC4")
def _headline(ctx: Context) -> str:
    m = ctx.memory
    if m is None:
        return "no --model given"
    if m.error:
        return m.error
    f = m.fit()
    if f is None:
        return f"weights {_gib(m.weights())} per GPU; GPU memory unknown"
    length = f"{f.max_model_len:,} tokens" if f.max_model_len else "auto length"
    line = (
        f"weights {_gib(f.weights)} + KV {_gib(f.kv_need)} ({length}) "
        f"+ reserve {_gib(f.reserve)}{_length_part(f, ' + ')} of {_gib(f.usable)} usable per GPU"
    ) + (f" ({m.weights_source})" if m.weights_source else "")
    cap = m.capacity(f) if f.fits else None
    if cap is not None and cap.tokens > 0:
        line += f"; KV cache {cap.tokens:,} tokens, max concurrency {cap.concurrency:.2f}x at max_model_len"
    return line


def _where(lf: Any) -> str:
    nodes = f", {-(-lf.gpus // 8)} nodes of 8" if lf.gpus > 8 else ""
    return f"{lf.gpus} GPUs{nodes}; {_gib(lf.weights)} of weights per GPU"


def _terms(m: Any) -> str:
    """The bound's terms in words (``bound.bound_terms``)."""
    said = []
    for name, t in m.bound_terms().items():
        if t.below:
            said.append(f"{name.replace('_', ' ')} up to {_gib(t.below)} less")
        if t.above:
            said.append(f"{name.replace('_', ' ')} up to {_gib(t.above)} more")
    return ", ".join(said) or "no undecided terms"


def _fitting_layouts(m: Any) -> tuple[list[str], str]:
    """(flags of the smallest layouts where the weights and one max-length sequence fit —
    the fewest GPUs, and TP alone when that differs — and a sentence saying so; no flags
    when none up to TP 64 x PP 8 does)."""
    from flightcheck._memory.suggest import smallest_layout

    best, tp_only = smallest_layout(m), smallest_layout(m, vary_pp=False)
    # the launch's own layout is never a fix (SGLang: it fits before the pool is rounded to pages)
    found = [lf for lf in (best, tp_only) if lf is not None and lf.layout != m.layout]
    if not found:
        return [], "no layout up to TP 64 x PP 8 fits the weights and the KV cache on this GPU model"
    if len(found) == 2 and found[0].layout == found[1].layout:
        found.pop()
    flags = [lf.layout.describe(m.engine) for lf in found]
    return flags, " or ".join(f"{fl} fits ({_where(lf)})" for fl, lf in zip(flags, found, strict=False))


def _weights_layout(m: Any) -> tuple[list[str], str]:
    """FC401's fallback when no layout fits the KV cache too: the smallest that holds the
    weights (it fixes FC401; FC402 then speaks for the KV cache)."""
    from flightcheck._memory.suggest import smallest_layout

    lf = smallest_layout(m, need_len=False)
    if lf is None:
        return (
            [],
            "no layout up to TP 64 x PP 8 holds these weights on this GPU model: use a smaller (quantized) checkpoint",
        )
    flag = lf.layout.describe(m.engine)
    room = (
        f"up to {lf.max_len_fit:,} tokens of context fit there"
        if lf.max_len_fit > 0
        else "no room is left there for the KV cache"
    )
    return [flag], f"{flag} holds the weights ({_where(lf)}), but not the KV cache for this max_model_len: {room}"


def _length_part(f: Fit, joint: str) -> str:
    """What the engine holds per request at this max_model_len besides the reserve (the V2
    runner's token ids, ``Fit.length_bytes``), for a message; empty where it holds none."""
    if not f.length_bytes:
        return ""
    return f"{joint}{_gib(f.length_bytes)} of per-request token ids at this length"


@check(
    "FC401",
    "weights-exceed-gpu-memory",
    ERROR,
    logs=(
        "No available memory for the cache blocks",
        # SGLang's pool_configurator.py (0.5.23); the flag's spelling lives in _knowledge/sglang
        r"Not enough memory\. Please try to increase \S*mem-fraction-static",
        Log(
            r"(?:torch\\.)?(?:cuda\\.)?OutOfMemoryError: CUDA out of memory",
            phases=("load",),
            note="a CUDA OOM while the weights load: they do not fit",
        ),
        Log("CUDA out of memory", phases=("load",), note="a CUDA OOM while the weights load: they do not fit"),
    ),
)
def weights_exceed_gpu_memory(ctx: Context) -> Iterator[Outcome]:
    """The weights one rank holds exceed what the engine may use on a GPU.

    ## What it checks
    Per-rank weights — every tensor classed as replicated, split by TP (vocabulary padded
    to 64), or an expert split by TP or owned by an EP rank; MTP layers skipped unless
    vLLM drafts with them; MXFP4 padding and MLA's bf16 copies added; on the last PP stage
    a speculative draft (MTP layers, or a separate EAGLE / EAGLE-3 / draft-model checkpoint
    at its draft TP, less what it shares with the target); the largest PP stage — against
    ``memory_total x gpu_memory_utilization`` minus the reserve, on the smallest GPU used.

    ## Why the launch dies
    The engine allocates weights as it loads them and runs out of memory part-way through
    (``torch.OutOfMemoryError``), after reading much of the checkpoint.

    ## How to fix
    Spread the model over more GPUs: the message names the smallest layout that fits —
    fewest GPUs (more TP, or pipeline stages, which also split the KV cache), and the
    smallest TP alone when that differs; with or without expert parallelism — computed for
    this checkpoint; or use a quantized checkpoint.
    """
    m = _model(ctx)
    f = m.fit()
    if f is None:
        yield unknown(
            f"cannot evaluate: GPU memory unknown ({m.gpu_error})", evidence={"weights_bytes": int(m.weights())}
        )
        return
    ev = {"weights_bytes": int(f.weights), "usable_bytes": f.usable, "reserve_bytes": f.reserve}
    if f.below or f.above:
        ev.update(kv_budget_low_bytes=int(f.kv_budget_low), kv_budget_high_bytes=int(f.kv_budget_high))
    if f.weights_fit_high and not f.weights_fit_low:
        # the facts not known before the launch decide it: a warning naming the margin
        margin = f.weights - (f.usable - f.reserve)
        yield fail(
            f"weights need {_gib(f.weights)} per GPU at {m.layout.describe(m.engine)}: "
            + (f"over the estimate by {_gib(margin)}" if margin > 0 else f"{_gib(-margin)} under the estimate")
            + f", but what is left after them is between {_gib(f.kv_budget_low)} and {_gib(f.kv_budget_high)} "
            f"({_terms(m)}): the engine may load them or run out of memory",
            severity=WARNING,
            evidence=ev,
        )
        return
    if not f.weights_fit_high:
        flags, hint = _fitting_layouts(m)
        if not flags:
            flags, hint = _weights_layout(m)
        yield fail(
            f"weights need {_gib(f.weights)} per GPU at "
            f"{m.layout.describe(m.engine)} but {_gpu(m)} has {_gib(f.usable)} usable "
            f"at gpu_memory_utilization {f.utilization:g} minus a {_gib(f.reserve)} reserve; {hint}",
            fix="\n".join(flags) or hint,
            evidence=ev,
        )
    else:
        yield ok(
            f"weights {_gib(f.weights)} per GPU of {_gib(f.usable)} usable ({100 * f.weights / f.usable:.0f}%)"
            + (f"; {m.weights_source}" if m.weights_source else ""),
            evidence=ev,
        )


@check(
    "FC402",
    "kv-cache-too-small",
    ERROR,
    logs=(
        "To serve at least one request with the models?'?s? max seq len",
        r"The model's max seq len \(\d+\) is larger than the maximum number of tokens that can be stored in KV cache",
        r"max_total_num_tokens=\d+.*(?:is smaller|too small)|The context length .* is larger than the KV cache",
    ),
)
def kv_cache_too_small(ctx: Context) -> Iterator[Outcome]:
    """The KV cache for one sequence of max_model_len does not fit in what is left.

    ## What it checks
    KV bytes per token on one rank — standard attention ``2 x max(1, kv_heads/TP) x
    head_dim x bytes`` per layer; MLA ``(kv_lora_rank + qk_rope_head_dim) x bytes`` per
    layer on every rank; sliding-window layers capped at their window; linear-attention
    layers a fixed state; with vLLM speculative decoding the draft's attention layers too
    (they share the target's KV pages) — times max_model_len (the model's
    ``max_position_embeddings`` unless given) against ``usable - weights - reserve``. The reserve defaults to an
    estimate of vLLM's profiling peak at 8192 batched tokens and 1024 sequences (layer
    temporaries + fp32 logits; for a vision model, the encoder run on a batch of maximal
    images and its outputs held through the pass, unless ``--skip-mm-profiling`` /
    ``--language-model-only`` / ``--limit-mm-per-prompt`` 0 turn it off) + 0.5 GiB CUDA graphs
    + 0.25 GiB non-torch + 0.5 GiB communication buffers with several ranks; ``--reserve-gib``
    replaces it.

    ## Why the launch dies
    vLLM loads every weight, profiles, then refuses to start: "To serve at least one
    request with the model's max seq len (...), (... GiB KV cache is needed, which is
    larger than the available KV cache memory".

    A shortfall no larger than 0.25 GiB is within this estimate's measured error (median
    0.10 GiB on public startup logs; the same launch has logged both sides of its need):
    a warning, since vLLM may start.

    SGLang 0.5.23 sizes its pool as ``mem_fraction_static x free memory before loading -
    weights`` (mem_cache/kv_cache_configurator.py ``_profile_available_bytes``) and refuses
    to start only when that is <= 0 ("Loaded weights leave no GPU memory for the KV cache";
    pool_configurator.py "Not enough memory" at 0 tokens): an error. A pool shorter than
    the context length (its ``--context-length``, else SGLang's derived length) starts:
    managers/tp_worker.py ``get_worker_info`` warns and caps a request at
    ``min(context - 1, pool tokens - 1)`` tokens — a warning naming that length. Its
    request-to-token table (int32, ``(max_running_requests + 1) x context``,
    mem_cache/memory_pool.py ``ReqToTokenPool``) is allocated afterwards out of the ``(1 -
    mem_fraction_static)`` slack: a warning when it is larger than all of it.

    ## How to fix
    Any one of the options the message lists, each computed for this launch: a smaller
    ``--max-model-len`` (the largest that fits is given), ``--kv-cache-dtype fp8``, a higher
    ``--gpu-memory-utilization``, or more GPUs.
    """
    m = _model(ctx)
    f = m.fit()
    if f is None:
        yield unknown(f"cannot evaluate: GPU memory unknown ({m.gpu_error})")
        return
    if not f.weights_fit_high:
        raise Skip("the weights alone do not fit (FC401)")
    # the bytes a token of the KV vLLM checks: the whole model's with PP on vLLM 0.14 - 0.16
    per_tok = m.kv_checked(stage=f.stage).per_token
    ev = {
        "kv_bytes_per_token": int(per_tok),
        "kv_budget_bytes": int(f.kv_budget),
        "max_model_len_fit": f.max_model_len_fit,
    }
    if f.below or f.above:
        ev.update(kv_budget_low_bytes=int(f.kv_budget_low), kv_budget_high_bytes=int(f.kv_budget_high))
    checked = m.kv_checked(stage=f.stage)
    if m.requested_len == AUTO:
        if f.max_model_len_fit <= 0 and f.longest(checked, f.kv_budget_high) > 0:
            yield fail(
                f"no room for any KV cache at the estimate ({_gib(f.kv_budget)} left after weights and "
                f"reserve), but the budget may be up to {_gib(f.kv_budget_high)} ({_terms(m)}): "
                "the engine may start with a short context or refuse",
                severity=WARNING,
                evidence=ev,
            )
        elif f.max_model_len_fit <= 0:
            flags, hint = _fitting_layouts(m)
            yield fail(
                f"no room for any KV cache: {_gib(f.kv_budget)} left after weights and reserve; {hint}",
                fix="\n".join(flags) or hint,
                evidence=ev,
            )
        else:
            yield ok(f"{engines.flag(m.engine, 'max_len')} auto: up to {f.max_model_len_fit:,} tokens fit", evidence=ev)
        return
    if f.max_model_len is None:
        yield unknown(
            "the model sets no max_position_embeddings: "
            f"pass {engines.flag(m.engine, 'max_len')} to evaluate the KV cache"
        )
        return
    pool = m.sglang_pool(f)
    if pool is not None:
        ev.update(pool)
    # SGLang's pool is whole pages (pool_configurator.py ``calculate_pool_sizes``): the
    # unrounded fit can hold the context while the pool, up to a page smaller, does not
    pages_short = pool is not None and pool["kv_tokens"] < f.max_model_len
    if pool is None and f.kv_fits and f.max_model_len_fit > 0 and f.kv_need > f.kv_budget_low:
        # fits at the estimate, not at the bound's low end: the margin, as a warning
        low_fit = f.longest(checked, f.kv_budget_low)
        ev["kv_shortfall_low_bytes"] = int(f.kv_need - f.kv_budget_low)
        yield fail(
            f"KV for {f.max_model_len:,} tokens needs {_gib(f.kv_need)}: it fits the estimated "
            f"{_gib(f.kv_budget)}, but the budget may be as low as {_gib(f.kv_budget_low)} ({_terms(m)}), "
            f"short by {_gib(f.kv_need - f.kv_budget_low)} there"
            + (f"; up to {low_fit:,} tokens fit even then" if low_fit > 0 else ""),
            severity=WARNING,
            fix=f"{engines.flag(m.engine, 'max_len')} {low_fit}" if low_fit > 0 else "",
            evidence=ev,
        )
        return
    if f.kv_fits and f.max_model_len_fit > 0 and not pages_short:
        table = _sglang_request_table(m, f, pool, ev) if pool is not None else None
        if table is not None:
            yield table
            return
        yield ok(
            f"KV for {f.max_model_len:,} tokens: "
            f"{_gib(f.kv_need)} of {_gib(f.kv_budget)} left (up to {f.max_model_len_fit:,} fit)",
            evidence=ev,
        )
        return
    from flightcheck._memory.budget import NEAR_MISS
    from flightcheck._memory.suggest import flag, fp8_kv, utilization_that_fits

    dtype = (
        "fp8"
        if m.kv_cache_dtype.startswith("fp8")
        else m.cfg.dtype_name
        if m.kv_cache_dtype == "auto"
        else m.kv_cache_dtype
    )
    limit, _var, allowed = _window(ctx, m)
    # the length that fits even the bound's low end (bound.bound_terms): a fix leaves no warning
    low_fit = min(f.max_model_len_fit, f.longest(checked, f.kv_budget_low)) if f.below else f.max_model_len_fit
    if low_fit <= 0:
        low_fit = f.max_model_len_fit
    suggest = low_fit if (limit is None or allowed) else min(low_fit, limit // 16 * 16)
    if pool is not None:  # what SGLang's pool of whole pages holds
        suggest = min(suggest, pool["kv_tokens"])
    options = [f"{flag('max_len', m.engine)} {suggest}"]
    said = [f"the largest max_model_len that fits is {suggest if pool is not None else f.max_model_len_fit:,}"]
    if m.kv_checked_whole():
        said.append(
            f"vLLM {m.engine_version} checks the KV of every pipeline stage's layers against one GPU's "
            "budget (from 0.17.0 each stage is checked on its own layers)"
        )
    fp8 = fp8_kv(m)
    if fp8 is not None:
        if fp8[0]:
            options.append(flag("kv_fp8", m.engine))
            said.append(f"an fp8 KV cache would fit (up to {fp8[1]:,} tokens)")
        else:
            said.append(f"an fp8 KV cache would not fit either (up to {fp8[1]:,} tokens)")
    util = utilization_that_fits(m)
    if util is not None:
        options.append(f"{flag('util', m.engine)} {util:.2f}")
    flags, hint = _fitting_layouts(m)  # only layouts where it fits: each fix line must fix it
    if flags:
        options.extend(flags)
        said.append(hint)
    if f.max_model_len_fit <= 0:
        options.pop(0)
    if pool is not None:
        yield _sglang_short_pool(m, f, pool, options, hint, said, ev)
        return
    shortfall = f.kv_need - f.kv_budget
    ev["kv_shortfall_bytes"] = int(shortfall)
    if f.above and f.kv_need - f.kv_budget_high <= NEAR_MISS:
        # short at the estimate, but a fact not known before the launch may make it fit: an
        # error only when even the bound's high end does not hold it
        yield fail(
            f"one sequence of {f.max_model_len:,} tokens needs {_gib(f.kv_need)} of KV cache "
            f"({int(per_tok):,} B/token, {dtype}); the budget per GPU is between "
            f"{_gib(max(0.0, f.kv_budget_low))} and {_gib(f.kv_budget_high)} ({_terms(m)}): short by "
            f"{_gib(shortfall)} at the estimate, so vLLM may start or may refuse after loading; " + "; ".join(said),
            severity=WARNING,
            fix="\n".join(options) if options else hint,
            evidence=ev,
        )
        return
    if shortfall <= NEAR_MISS:
        # within the estimate's measured error: vLLM may well start (a warning, never a stop)
        yield fail(
            f"one sequence of {f.max_model_len:,} tokens needs {_gib(f.kv_need)} of KV cache "
            f"({int(per_tok):,} B/token, {dtype}) and about {_gib(max(0.0, f.kv_budget))} is left per GPU: "
            f"short by {_gib(shortfall)}, within this estimate's error ({_gib(NEAR_MISS)}), so vLLM may "
            "start or may refuse after loading; " + "; ".join(said),
            severity=WARNING,
            fix="\n".join(options) if options else hint,
            evidence=ev,
        )
        return
    yield fail(
        f"one sequence of {f.max_model_len:,} tokens needs "
        f"{_gib(f.kv_need)} of KV cache ({int(per_tok):,} B/token, {dtype}) "
        f"but {_gib(max(0.0, f.kv_budget))} is left per GPU after "
        f"{_gib(f.weights)} of weights and a {_gib(f.reserve)} reserve{_length_part(f, ' and ')}; " + "; ".join(said),
        fix="\n".join(options) if options else hint,
        evidence=ev,
    )  # each fix line alone makes it fit


def _sglang_request_table(m: Any, f: Any, pool: dict[str, int], ev: dict[str, Any]) -> Outcome | None:
    """SGLang allocates the request-to-token table (mem_cache/memory_pool.py
    ``ReqToTokenPool``: int32, (max_running_requests + 1) x context) after sizing the pool,
    out of the ``(1 - f) x free`` left outside it: a table larger than all of that cannot be
    allocated (a warning: the slack is an estimate). None when it fits."""
    slack = (1 - f.utilization) * (m.free_before_load() or 0)
    table, context = pool["req_to_token_bytes"], pool["context_length"]
    if table <= slack:
        return None
    fits = int(slack // (context * sglang.REQ_TO_TOKEN_BYTES)) - 1
    return fail(
        f"SGLang's request-to-token table for {pool['max_running_requests']:,} requests x {context:,} tokens "
        f"is {_gib(table)}, allocated outside mem_fraction_static {f.utilization:g}, where only about "
        f"{_gib(slack)} is left: the allocation runs out of memory at startup",
        severity=WARNING,
        fix=f"{sglang.MAX_RUNNING_FLAG} {fits}" if fits > 0 else f"a smaller {engines.flag(m.engine, 'max_len')}",
        evidence=ev,
    )


def _sglang_short_pool(
    m: Any, f: Any, pool: dict[str, int], options: list[str], hint: str, said: list[str], ev: dict[str, Any]
) -> Outcome:
    """SGLang 0.5.23 stops only when no KV pool is left: kv_cache_configurator.py
    ``_profile_available_bytes`` raises ValueError when ``free_after_load - free_before_load x
    (1 - f)`` is <= 0, pool_configurator.py ``MemoryPoolConfig`` RuntimeError ("Not enough
    memory") at 0 tokens. A pool shorter than the context length is served:
    tp_worker.py ``get_worker_info`` warns and caps a request at ``min(context - 1, tokens -
    1)`` tokens."""
    tokens = pool["kv_tokens"]
    if f.kv_budget <= 0 or tokens <= 0:
        return fail(
            f"SGLang refuses to start: after {_gib(f.weights)} of weights no KV pool is left in "
            f"mem_fraction_static {f.utilization:g} x {_gib(m.free_before_load() or 0)} free before loading "
            f'("Loaded weights leave no GPU memory for the KV cache" / "Not enough memory"); ' + "; ".join(said),
            fix="\n".join(options) if options else hint,
            evidence=ev,
        )
    return fail(
        f"SGLang will serve with a shorter context: its KV pool holds {tokens:,} tokens "
        f"({_gib(f.kv_budget)} after {_gib(f.weights)} of weights), fewer than the context length "
        f"{f.max_model_len:,}; SGLang warns and caps a request at {pool['max_request_len']:,} tokens "
        f"(inputs at {max(0, pool['max_request_len'] - 5):,}); " + "; ".join(said),
        severity=WARNING,
        fix="\n".join(options) or hint,
        evidence=ev,
    )


@check("FC403", "memory-headroom-low", WARNING)
def memory_headroom_low(ctx: Context) -> Iterator[Outcome]:
    """It fits, with under 5% of usable GPU memory to spare.

    ## What it checks
    What is left of ``memory_total x gpu_memory_utilization`` after the weights, the
    reserve and the KV cache of one max-length sequence, against 5% of it.

    ## Why the launch dies
    The reserve is an estimate; a larger activation peak (long prompts, a bigger
    ``--max-num-batched-tokens``, another attention backend) or memory taken by another
    process at start-up tips a tight fit into "not enough KV cache" or an OOM under load.

    ## How to fix
    Lower ``--max-model-len`` to the value in the fix (which leaves 5%), or raise
    ``--gpu-memory-utilization`` if the GPUs hold nothing else.
    """
    from flightcheck._memory.budget import HEADROOM_MIN
    from flightcheck._memory.suggest import flag

    m = _model(ctx)
    f = m.fit()
    if f is None:
        raise Skip("GPU memory unknown")
    if not f.fits or f.max_model_len is None:
        raise Skip("does not fit, or the length is automatic: FC401/FC402 speak")
    spare = f.spare
    if spare < HEADROOM_MIN * f.usable:
        safer = f.longest(f.shape, f.kv_budget - HEADROOM_MIN * f.usable)
        yield fail(
            f"only {_gib(spare)} ({100 * spare / f.usable:.1f}%) "
            f"of usable memory is left after weights, reserve and one {f.max_model_len:,}-token sequence",
            fix=f"{flag('max_len', m.engine)} {safer}" if safer > 0 else f"more GPUs (a larger {flag('tp', m.engine)})",
            evidence={"spare_bytes": int(spare)},
        )
    else:
        yield ok(f"{_gib(spare)} ({100 * spare / f.usable:.0f}%) of usable memory to spare")
