"""Which settings turn the multicast paths off, per engine and version, and when none can.

Knowledge, not checks: FC303/FC304 call :func:`multicast_fallback` to build their plan
steps, FC305 uses the same tables to tell whether a non-NCCL multicast path is on.

Where each setting comes from (read in the projects' sources and pull requests):

* ``TORCH_SYMM_MEM_DISABLE_MULTICAST`` (torch >= 2.5: pytorch #136577, cherry-picked into
  release/2.5 as #136894): symmetric memory skips every multicast driver call.
* ``VLLM_ALLREDUCE_USE_SYMM_MEM`` (vLLM #20759, July 2025; on by default since #24111).
* ``VLLM_USE_NCCL_SYMM_MEM`` (vLLM #24532, September 2025; off by default).
* ``VLLM_FLASHINFER_ALLREDUCE_BACKEND`` (vLLM #34109, February 2026): ``trtllm`` uses CUDA
  IPC, ``mnnvl`` binds multicast; ``auto`` means mnnvl on one node since #47219 (July 2026).
* ``VLLM_RAY_EXTRA_ENV_VARS_TO_COPY`` (vLLM #34383, February 2026): the Ray executor then
  forwards ``VLLM_*``, ``NCCL_*``, ``HF_*``, ``UCX_*`` and ``LMCACHE_*`` plus the names
  listed; before it only vLLM's own variables reached Ray workers.
* ``NCCL_NVLS_ENABLE=0``: NCCL's NVLS only (2.17+); it does not touch torch or FlashInfer.
* Kimi-K3's latent MoE tail (``vllm/models/kimi_k3/nvidia/latent_moe_runner.py``, vLLM
  0.33+): on when the GPU is SM100-family and TP is 8 or 16; it raises "routed NVLS
  multicast mapping is unavailable" at model construction and has no switch in 0.33
  (``VLLM_ENABLE_K3_LATENT_MOE_TAIL_FUSION`` of PR #50088 is honoured where the installed
  envs.py declares it).
* SGLang: ``--enable-nccl-nvls``, ``--enable-symm-mem``, ``--enable-torch-symm-mem`` opt in
  to multicast; ``--flashinfer-allreduce-fusion-backend trtllm`` (sglang #12787, 0.5.6)
  keeps the auto-enabled all-reduce fusion off mnnvl.

The table gives the first release after each change was merged. When the python collector
read the names the installed vLLM's envs.py declares (``python.engine_env_vars``), that list
decides instead of the table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from flightcheck._knowledge import sglang, vllm
from flightcheck._knowledge.derived import package
from flightcheck._knowledge.units import version
from flightcheck._vocabulary.results import PlanStep

if TYPE_CHECKING:
    from flightcheck._checks.framework import Context

TORCH_SYMM_MEM_SINCE = "2.5.0"  # pytorch #136577: TORCH_SYMM_MEM_DISABLE_MULTICAST


def _at_least(text: str | None, since: str) -> bool | None:
    v, floor = version(text), version(since)
    if v is None:
        return None
    assert floor is not None  # since: one of the version constants above
    return v.release >= floor.release  # a dev or rc build has the release's features


@dataclass
class Fallback:
    """The steps that keep the launch off multicast, or why none can."""

    steps: list[PlanStep] = field(default_factory=list)
    blocker: str | None = None
    notes: list[str] = field(default_factory=list)


def engine_reads(ctx: Context, name: str) -> bool | None:
    """Whether the installed engine (or torch / NCCL) reads ``name``; None: cannot tell."""
    if name.startswith(vllm.ENV_PREFIX):
        declared = ctx.python.engine_env_vars
        if declared is not None and ctx.python.engine in (None, "vllm"):
            return name in declared
        since = vllm.SINCE.get(name)
        return _at_least(package(ctx.facts, "vllm"), since) if since else None
    if name == "TORCH_SYMM_MEM_DISABLE_MULTICAST":
        return _at_least(package(ctx.facts, "torch"), TORCH_SYMM_MEM_SINCE)
    return True  # NCCL_NVLS_ENABLE: every NCCL with NVLS reads it; older ones have no NVLS


def vllm_symm_mem_on(ctx: Context) -> bool:
    """vLLM's torch symmetric-memory all-reduce is on for this launch (by default or by env)."""
    env = ctx.facts.env or {}
    if env.get(vllm.ALLREDUCE_USE_SYMM_MEM) is not None:
        return env[vllm.ALLREDUCE_USE_SYMM_MEM] not in ("0", "false", "False")
    return bool(_at_least(package(ctx.facts, "vllm"), vllm.SYMM_MEM_DEFAULT_ON))


def _env_step(ctx: Context, name: str, value: str, why: str, fb: Fallback) -> None:
    reads = engine_reads(ctx, name)
    if reads is False:
        return
    if reads is None:
        why += " (installed version unknown: set anyway, an unread variable is ignored)"
    fb.steps.append(PlanStep("env", name, value, why))


def multicast_fallback(ctx: Context) -> Fallback:
    """The plan steps that turn the multicast paths off for this engine and version."""
    fb = Fallback()
    if ctx.intent.engine == "sglang":
        _sglang(ctx, fb)
        return fb
    k3 = kimi_k3_tail(ctx)
    if k3 == "switchable":
        fb.steps.append(
            PlanStep(
                "env",
                vllm.KIMI_K3_TAIL_SWITCH,
                "0",
                "Kimi-K3's latent MoE tail maps NVLS multicast at model construction",
            )
        )
    elif k3:
        fb.blocker = k3
    _env_step(
        ctx,
        "TORCH_SYMM_MEM_DISABLE_MULTICAST",
        "1",
        "torch symmetric memory skips every multicast call (rendezvous gives multicast_ptr 0)",
        fb,
    )
    _env_step(ctx, vllm.ALLREDUCE_USE_SYMM_MEM, "0", "vLLM's symmetric-memory all-reduce (multimem) is not created", fb)
    _env_step(
        ctx,
        vllm.FLASHINFER_ALLREDUCE_BACKEND,
        "trtllm",
        "FlashInfer all-reduce (and its RMSNorm fusion) uses CUDA IPC instead of mnnvl multicast",
        fb,
    )
    _env_step(ctx, "NCCL_NVLS_ENABLE", "0", "NCCL does not build NVLS (multicast) channels", fb)
    _env_step(ctx, vllm.USE_NCCL_SYMM_MEM, "0", "no NCCL symmetric-memory (NVLS window) all-reduce", fb)
    if kimi_k3(ctx):
        _env_step(ctx, vllm.KIMI_K3_GEMM_AR, "0", "Kimi-K3's fused GEMM + all-reduce uses multicast", fb)
    if ctx.intent.distributed_executor_backend == "ray":
        _ray(ctx, fb)
    return fb


def _ray(ctx: Context, fb: Fallback) -> None:
    """Ray workers start from the raylet, not from this shell: name what vLLM must forward."""
    extra = [s.name for s in fb.steps if s.kind == "env" and not s.name.startswith((vllm.ENV_PREFIX, "NCCL_"))]
    if engine_reads(ctx, vllm.RAY_EXTRA_ENV_VARS_TO_COPY) is False:
        names = extra + [s.name for s in fb.steps if s.name.startswith("NCCL_")]
        if names:
            fb.notes.append(
                "this vLLM forwards only its own VLLM_* variables to Ray workers: "
                f"also export {', '.join(names)} before `ray start` on every node"
            )
        return
    if not extra:
        return
    existing = [n for n in ((ctx.facts.env or {}).get(vllm.RAY_EXTRA_ENV_VARS_TO_COPY) or "").split(",") if n.strip()]
    value = ",".join(dict.fromkeys([*existing, *extra]))
    _env_step(
        ctx,
        vllm.RAY_EXTRA_ENV_VARS_TO_COPY,
        value,
        f"the Ray executor forwards only VLLM_/NCCL_/HF_ variables unless told: {', '.join(extra)}",
        fb,
    )


def _sglang(ctx: Context, fb: Fallback) -> None:
    flags = set(ctx.intent.engine_flags)
    for flag, why in sglang.MULTICAST_FLAGS.items():
        if not flags or flag in flags:
            fb.steps.append(PlanStep("drop_arg", flag, None, why))
    _env_step(ctx, "TORCH_SYMM_MEM_DISABLE_MULTICAST", "1", "torch symmetric memory skips every multicast call", fb)
    _env_step(ctx, "NCCL_NVLS_ENABLE", "0", "NCCL does not build NVLS (multicast) channels", fb)
    have = _at_least(package(ctx.facts, "sglang"), sglang.FI_BACKEND_SINCE)
    if have:
        fb.steps.append(
            PlanStep(
                "add_arg",
                sglang.FI_FUSION_BACKEND_FLAG,
                "trtllm",
                "the auto-enabled FlashInfer all-reduce fusion uses CUDA IPC instead of mnnvl multicast",
            )
        )
    else:
        fb.notes.append(
            f"this SGLang has no {sglang.FI_FUSION_BACKEND_FLAG}: add {sglang.FI_FUSION_DISABLE_FLAG} if it accepts it"
        )


def model_config(ctx: Context) -> dict[str, Any]:
    """``config.json`` of ``--model`` as the checkpoint reader parsed it, which resolves the
    model (a directory, or a repo id in the local Hugging Face cache) for every check; ``{}``
    without a model or a readable config (FC5xx say why): the model is then unknown."""
    ck = ctx.checkpoint
    cfg = ck.config if ck is not None else None
    return cfg if isinstance(cfg, dict) else {}


def kimi_k3(ctx: Context) -> bool:
    """The model is Kimi-K3 (by its config.json architectures / model_type)."""
    cfg = model_config(ctx)
    archs = set(cfg.get("architectures") or [])
    return bool(archs & vllm.KIMI_K3_ARCHS) or cfg.get("model_type") == vllm.KIMI_K3_MODEL_TYPE


def kimi_k3_tail(ctx: Context) -> str | None:
    """A message when this launch runs Kimi-K3's latent MoE tail (multicast, no off switch);
    ``"switchable"`` when the installed vLLM declares the switch; None when not concerned."""
    i = ctx.intent
    if i.engine != "vllm" or i.tensor_parallel_size not in vllm.KIMI_K3_TAIL_TP or not kimi_k3(ctx):
        return None
    ver = package(ctx.facts, "vllm")
    if not _at_least(ver, vllm.KIMI_K3_TAIL_SINCE):
        return None
    ccs = [g.compute_capability for g in ctx.gpus_used]
    if not ccs or any(not cc or not cc.startswith("10.") for cc in ccs):
        return None  # the runner's gate: is_device_capability_family(100)
    cfg = model_config(ctx)
    raw_text = cfg.get("text_config")
    text: dict[str, Any] = raw_text if isinstance(raw_text, dict) else {}
    shared = cfg.get("n_shared_experts", text.get("n_shared_experts"))
    if shared == 0:
        return None  # the tail fuses the shared expert; without one it is not used
    if engine_reads(ctx, vllm.KIMI_K3_TAIL_SWITCH):  # declared by the installed vLLM's envs.py
        return "switchable"
    tp, pp = i.tensor_parallel_size, i.pipeline_parallel_size
    alt_pp = max(1, tp * pp // 4)
    return (
        f"vLLM {ver} runs Kimi-K3's latent MoE tail on SM100-family GPUs at TP {tp}: it maps NVLS multicast "
        f"while the model is built and has no switch to turn it off, so no setting avoids multicast here. "
        f"Use a layout with TP other than 8 or 16: `{vllm.layout(4, alt_pp)}` on the same GPUs, or expert parallel "
        f"with data-parallel attention (`{vllm.layout(1, 1, tp * pp, ep=True)}`); check the weights fit (FC401)"
    )


def multicast_paths(ctx: Context) -> list[str]:
    """The non-NCCL multicast paths this launch enables (FC305)."""
    env = ctx.facts.env or {}
    paths: list[str] = []
    if ctx.intent.engine == "sglang":
        return [f for f in (sglang.TORCH_SYMM_MEM_FLAG,) if f in ctx.intent.engine_flags] + (
            ["FlashInfer all-reduce fusion (mnnvl on Blackwell)"]
            if _at_least(package(ctx.facts, "sglang"), sglang.FI_BACKEND_SINCE)
            else []
        )
    if env.get("TORCH_SYMM_MEM_DISABLE_MULTICAST") in ("1", "true", "True"):
        return []
    if vllm_symm_mem_on(ctx):
        paths.append(f"torch symmetric-memory all-reduce ({vllm.ALLREDUCE_USE_SYMM_MEM})")
    backend = env.get(vllm.FLASHINFER_ALLREDUCE_BACKEND)
    if backend == "mnnvl" or (
        backend in (None, "auto") and _at_least(package(ctx.facts, "vllm"), vllm.MNNVL_AUTO_SINGLE_NODE)
    ):
        paths.append(f"FlashInfer mnnvl all-reduce ({vllm.FLASHINFER_ALLREDUCE_BACKEND})")
    if kimi_k3_tail(ctx):
        paths.append("Kimi-K3 latent MoE tail")
    return paths


def describe(steps: list[PlanStep], notes: list[str] | None = None) -> dict[str, Any]:
    """Evidence form of a fallback: what it sets and why."""
    return {
        "plan": [f"{s.kind} {s.name}" + (f"={s.value}" if s.value is not None else "") for s in steps],
        "notes": notes or [],
    }
