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
* vLLM 0.33.0: every multicast path of the installed wheel, its gate and how the plan
  covers it is listed in ``_knowledge/vllm/`` (``MULTICAST_PATHS``). Two have no switch
  and stop the launch with a layout that avoids them: Kimi-K3's latent MoE tail and Beam's
  all-reduce workspace (``VLLM_ENABLE_K3_LATENT_MOE_TAIL_FUSION`` of PR #50088 is honoured
  where the installed envs.py declares it; 0.33.0's does not).
* SGLang (``_knowledge/sglang/``, read in the wheels 0.5.5-0.5.23): the opt-in multicast
  flags are dropped; the FlashInfer all-reduce fusion binds multicast only from 0.5.14
  (mnnvl), where ``--flashinfer-allreduce-fusion-backend trtllm`` keeps it on CUDA IPC on
  one node and ``--enforce-disable-flashinfer-allreduce-fusion`` turns it off across nodes
  (trtllm raises there); no fusion flag is added where SGLang keeps the fusion off.

The cheapest switch that works, never the broadest (``cheapest.py`` tells which settings would
change something here): multicast off inside torch symmetric memory before symmetric memory
off (vLLM's switch only where its symm-mem all-reduce is on; no release read keeps its
two-shot without multicast, vLLM #50179); FlashInfer's trtllm backend on an NVSwitch node
(it keeps the fusion) but the fusion off where trtllm is the slower backend (PR #48075) or
raises (across nodes); NCCL_NVLS_ENABLE=0 unless every GPU reports the multicast attribute 0
(NCCL then builds no NVLS by itself); no variable at TP 1 that only the TP group reads, and
none that is off by default and not turned on. Each step carries its cost and source.

The table gives the first release after each change was merged. When the python collector
read the names the installed vLLM's envs.py declares (``python.engine_env_vars``), that list
decides instead of the table.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import msgspec

from flightcheck._checks.fabric.cheapest import all_attributes_off, env_on, fi_backend_mnnvl
from flightcheck._knowledge import engines, envread, flashinfer, nccl, sglang, vllm
from flightcheck._knowledge.derived import package
from flightcheck._knowledge.units import version
from flightcheck._knowledge.vllm import env as vllm_envs
from flightcheck._vocabulary.results import PlanStep
from flightcheck._vocabulary.version import at_least

if TYPE_CHECKING:
    from flightcheck._checks.framework import Context

TORCH_SYMM_MEM_SINCE = "2.5.0"  # pytorch #136577: TORCH_SYMM_MEM_DISABLE_MULTICAST


#: a dev or rc build has the release's features (``_vocabulary.version``)
_at_least = at_least


class Fallback(msgspec.Struct):
    """The steps that keep the launch off multicast, or why none can."""

    steps: list[PlanStep] = msgspec.field(default_factory=list)
    blocker: str | None = None
    notes: list[str] = msgspec.field(default_factory=list)


def engine_reads(ctx: Context, name: str) -> bool | None:
    """Whether the installed engine (or torch / NCCL) reads ``name``; None: cannot tell."""
    if name.startswith(vllm.ENV_PREFIX):
        declared = ctx.python.engine_env_vars
        collected = engines.find(ctx.python.engine)  # whose variables the facts list
        if declared is not None and (
            ctx.python.engine is None or (collected and name.startswith(collected.env_prefix))
        ):
            return name in declared
        since = vllm.SINCE.get(name)
        return _at_least(package(ctx.facts, "vllm"), since) if since else None
    if name == "TORCH_SYMM_MEM_DISABLE_MULTICAST":
        return _at_least(package(ctx.facts, "torch"), TORCH_SYMM_MEM_SINCE)
    return True  # NCCL_NVLS_ENABLE: every NCCL with NVLS reads it; older ones have no NVLS


def vllm_symm_mem_on(ctx: Context) -> bool:
    """vLLM's torch symmetric-memory all-reduce is on for this launch (by default or by env)."""
    env = ctx.facts.env or {}
    asked = envread.given(vllm_envs.DECLARED[vllm.ALLREDUCE_USE_SYMM_MEM], env)
    if asked is not None:
        return asked
    return bool(_at_least(package(ctx.facts, "vllm"), vllm.SYMM_MEM_DEFAULT_ON))


def _env_step(ctx: Context, name: str, value: str, why: str, fb: Fallback, cost: str = "") -> None:
    reads = engine_reads(ctx, name)
    if reads is False:
        return
    if reads is None:
        why += " (installed version unknown: set anyway, an unread variable is ignored)"
    fb.steps.append(PlanStep("env", name, value, why, cost=cost))


def nccl_version(ctx: Context) -> tuple[int, int] | None:
    """NCCL's major.minor from the nvidia-nccl wheel the engine's interpreter has."""
    for name in nccl.NCCL_PACKAGES:
        v = version(package(ctx.facts, name))
        if v is not None and len(v.release) >= 2:
            return (v.release[0], v.release[1])
    return None


def _nvls_step(ctx: Context, fb: Fallback, attribute_off: bool = False) -> None:
    """NCCL_NVLS_ENABLE=0: required from NCCL 2.29 (a failed NVLS bind fails communicator
    init: NVIDIA/nccl#2077); before it NCCL 2.28.9 fell back on slot exhaustion but 2.26.2
    aborted on a 401 (NVIDIA/nccl#1788), so it is set on a failed bind whatever the version.
    Not set where every GPU reports the multicast attribute 0 and nothing forces NVLS: NCCL
    follows the attribute (nvls.cc) and builds no NVLS by itself."""
    forced = ((ctx.facts.env or {}).get("NCCL_NVLS_ENABLE") or "").strip() == nccl.NVLS_FORCED_VALUE
    if attribute_off and not forced and all_attributes_off(ctx):
        return
    v = nccl_version(ctx)
    why = "NCCL does not build NVLS (multicast) channels"
    if v is None:
        why += "; required from NCCL 2.29 (a failed NVLS bind fails communicator init), NCCL version unknown"
    elif v >= nccl.NVLS_BIND_FATAL_SINCE:
        why += f"; required: NCCL {v[0]}.{v[1]} fails communicator init on a failed NVLS bind (NVIDIA/nccl#2077)"
    elif attribute_off:
        why += f"; NCCL {v[0]}.{v[1]} would follow the multicast attribute, which some GPUs still report"
    else:
        why += (
            f"; NCCL {v[0]}.{v[1]} falls back by itself only on some bind failures (2.28.9 on slot exhaustion: "
            "NVIDIA/nccl#2077; 2.26.2 aborted on a 401: NVIDIA/nccl#1788), so it is kept from trying"
        )
    _env_step(ctx, "NCCL_NVLS_ENABLE", "0", why, fb, cost=vllm.COST_NVLS_OFF)


def _rules_note(ctx: Context, fb: Fallback, name: str, newest: str, label: str) -> None:
    """An engine newer than the newest release read gets the newest rules, and says so."""
    note = vllm.beyond_read(package(ctx.facts, name), newest, label)
    if note:
        fb.notes.append(note)


def communicates(ctx: Context) -> bool:
    """More than one GPU talks to another in this launch (TP, PP, DP or EP groups): NCCL and
    the other collectives can then build multicast on an NVSwitch node, TP 1 included."""
    return ctx.intent.world_size > 1


def flag_values(ctx: Context) -> dict[str, str | None]:
    """The engine command's flags as the reader saw them: name -> value (None: bare flag),
    read once where the launch is read (``intent.option_values``)."""
    return dict(ctx.intent.option_values)


def _sm_majors(ctx: Context) -> set[str] | None:
    ccs = [g.compute_capability for g in ctx.gpus_used]
    if not ccs or any(not cc for cc in ccs):
        return None
    return {str(cc).split(".")[0] for cc in ccs}


def tp_spans_nodes(ctx: Context) -> bool:
    """The tensor-parallel group runs on more than one node (vLLM's ``_node_count(group) > 1``)."""
    i = ctx.intent
    return i.nnodes > 1 and i.tensor_parallel_size > i.gpus_per_node


def multicast_fallback(ctx: Context, attribute_off: bool = False) -> Fallback:
    """The plan steps that turn the multicast paths off for this engine and version.

    ``attribute_off``: a GPU reports no multicast support (FC303); paths that check the
    attribute on every rank (Beam's workspace) then step aside by themselves.
    """
    fb = Fallback()
    if engines.get(ctx.intent.engine).multicast.fallback == "flags":
        _rules_note(ctx, fb, sglang.NAME, sglang.FALLBACK_READ_IN, "SGLang")
        _sglang(ctx, fb, attribute_off)
        return fb
    _rules_note(ctx, fb, vllm.NAME, vllm.MULTICAST_PATHS_READ_IN, "vLLM")
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
    beam = None if attribute_off else beam_allreduce(ctx)
    if beam:
        fb.blocker = f"{fb.blocker} {beam}" if fb.blocker else beam
    _torch_symm_mem(ctx, fb)
    _flashinfer_allreduce(ctx, fb)
    _nvls_step(ctx, fb, attribute_off)
    if env_on(ctx, vllm.USE_NCCL_SYMM_MEM):  # off by default (envs.py 0.11.0-0.33.0): else nothing to change
        _env_step(ctx, vllm.USE_NCCL_SYMM_MEM, "0", "no NCCL symmetric-memory (NVLS window) all-reduce", fb)
    if _dcp(ctx):
        for name in (vllm.USE_DIRECT_DCP_Q_GATHER, vllm.USE_DIRECT_DCP_KV_GATHER):
            _env_step(ctx, name, "0", "decode context parallel gathers through NCCL, not NVLS multicast", fb)
    if kimi_k3(ctx):
        _env_step(ctx, vllm.KIMI_K3_GEMM_AR, "0", "Kimi-K3's fused GEMM + all-reduce uses multicast", fb)
    if (ctx.facts.env or {}).get(vllm.ENABLE_GEMM_RS) not in (None, "0"):
        _env_step(ctx, vllm.ENABLE_GEMM_RS, "0", "the fused GEMM + reduce-scatter binds multicast memory", fb)
    if set(model_config(ctx).get("architectures") or []) & vllm.INKLING_ARCHS:
        fb.steps.append(
            PlanStep(
                "env",
                vllm.INKLING_LAMPORT_SWITCH,
                "0",
                "Inkling's Lamport reduce-scatter + short conv uses multicast buffers; NCCL instead",
            )
        )
    _specialised_decode(ctx, fb)
    _all2all(ctx, fb)
    if ctx.intent.distributed_executor_backend == "ray":
        _ray(ctx, fb)
    return fb


def _torch_symm_mem(ctx: Context, fb: Fallback) -> None:
    """The torch symmetric-memory paths, cheapest switch first.

    Every vLLM user of torch symmetric memory runs in the tensor-parallel group (the symm-mem
    all-reduce and the custom all-reduce in cuda_communicator.py, the GEMM + reduce-scatter,
    the direct DCP gathers, Inkling's Lamport buffers: ``MULTICAST_PATHS``), so at TP 1 there
    is nothing to switch. TORCH_SYMM_MEM_DISABLE_MULTICAST=1 turns multicast off inside torch
    and keeps the rest; vLLM's own switch follows only where the symm-mem all-reduce is on."""
    if ctx.intent.tensor_parallel_size <= 1 and not _dcp(ctx):
        return
    torch_reads = engine_reads(ctx, "TORCH_SYMM_MEM_DISABLE_MULTICAST")
    _env_step(
        ctx,
        "TORCH_SYMM_MEM_DISABLE_MULTICAST",
        "1",
        "torch symmetric memory skips every multicast call (rendezvous gives multicast_ptr 0): "
        "vLLM's symm-mem all-reduce, CustomAllreduce's MNNVL buffers, direct DCP",
        fb,
        cost=vllm.COST_TORCH_MULTICAST_OFF,
    )
    if ctx.intent.tensor_parallel_size <= 1 or not vllm_symm_mem_on(ctx):
        return  # off by default before 0.11.0 (envs.py): nothing to turn off
    keeps_two_shot = vllm.SYMM_MEM_TWO_SHOT_WITHOUT_MULTICAST_SINCE
    if torch_reads is not False and keeps_two_shot and _at_least(package(ctx.facts, "vllm"), keeps_two_shot):
        return  # multicast off inside torch keeps its two-shot: the vLLM switch would only lose it
    _env_step(
        ctx,
        vllm.ALLREDUCE_USE_SYMM_MEM,
        "0",
        "vLLM's symmetric-memory all-reduce (multimem) is not created",
        fb,
        cost=vllm.COST_SYMM_MEM_ONLY_SWITCH if torch_reads is False else vllm.COST_SYMM_MEM_OFF,
    )


def _dcp(ctx: Context) -> bool:
    """Decode context parallel is on (-dcp > 1) or a direct DCP gather is forced by env."""
    flags = flag_values(ctx)
    env = ctx.facts.env or {}
    if any(
        envread.given(vllm_envs.DECLARED[n], env) for n in (vllm.USE_DIRECT_DCP_Q_GATHER, vllm.USE_DIRECT_DCP_KV_GATHER)
    ):
        return True
    for name in vllm.DCP_FLAGS:
        try:
            if int(flags.get(name) or 1) > 1:
                return True
        except ValueError:
            return True  # unreadable: assume on
    return False


def _flashinfer_allreduce(ctx: Context, fb: Fallback) -> None:
    """FlashInfer all-reduce (+RMSNorm fusion), the cheapest switch that avoids mnnvl:

    1. one node with NVSwitch: VLLM_FLASHINFER_ALLREDUCE_BACKEND=trtllm keeps the fusion
       over CUDA IPC, no slower than mnnvl there (PR #37756), and only where this vLLM
       would pick mnnvl (else the variable changes nothing);
    2. one node without NVSwitch (bridged NVLink, PCIe) or NVSwitch unknown: trtllm is the
       slower backend (259 ms against 25 ms ITL with the fusion off: PR #48075), so the fusion
       goes off instead;
    3. across nodes vLLM raises ValueError for trtllm (flashinfer_all_reduce.py): fusion off.

    Up to vLLM 0.16.x the fusion builds only CUDA IPC workspaces: nothing to change; at TP 1
    there is no FlashInfer all-reduce."""
    if _at_least(package(ctx.facts, "vllm"), vllm.FI_ALLREDUCE_MULTICAST_SINCE) is False:
        return
    if ctx.intent.tensor_parallel_size <= 1:
        return
    if not tp_spans_nodes(ctx):
        mnnvl = fi_backend_mnnvl(ctx)
        if mnnvl is False:
            return
        # trtllm's workspace is torch symmetric memory before FlashInfer 0.7.2.post1: off
        # multicast only with the torch switch, else it is no cheaper way out
        fi_clean = _at_least(package(ctx.facts, "flashinfer-python"), flashinfer.TRTLLM_WORKSPACE_NO_MULTICAST_SINCE)
        with_torch = engine_reads(ctx, "TORCH_SYMM_MEM_DISABLE_MULTICAST") is not False
        if ctx.fabric_manager.nvswitch_system is True and (fi_clean or with_torch):
            _env_step(
                ctx,
                vllm.FLASHINFER_ALLREDUCE_BACKEND,
                "trtllm",
                "FlashInfer all-reduce (and its RMSNorm fusion) uses trtllm's peer buffers instead of mnnvl multicast"
                + ("" if fi_clean else " (its workspace is torch symmetric memory here: with multicast off in torch)"),
                fb,
                cost=vllm.COST_TRTLLM_NVSWITCH,
            )
            return
    elif (ctx.facts.env or {}).get(vllm.FLASHINFER_ALLREDUCE_BACKEND) == "trtllm":
        _env_step(
            ctx,
            vllm.FLASHINFER_ALLREDUCE_BACKEND,
            "auto",
            "trtllm raises ValueError for a tensor-parallel group across nodes",
            fb,
        )
    ver = package(ctx.facts, "vllm")
    asked = envread.given(vllm_envs.DECLARED[vllm.ALLREDUCE_USE_FLASHINFER], ctx.facts.env or {})
    default = vllm.env_default(vllm.ALLREDUCE_USE_FLASHINFER, str(ver)) if ver else None
    if asked if asked is not None else (default != "0"):  # on by default from 0.29.0 (envs.py)
        _env_step(
            ctx,
            vllm.ALLREDUCE_USE_FLASHINFER,
            "0",
            "the standalone FlashInfer all-reduce (mnnvl) is not created",
            fb,
        )
    _fusion_pass_off(ctx, fb)


def _fusion_pass_off(ctx: Context, fb: Fallback) -> None:
    """Turn vLLM's all-reduce + RMSNorm fusion pass off, keeping the user's compilation config."""
    flags = flag_values(ctx)
    section, key = vllm.FUSE_ALLREDUCE_RMS_PATH
    why = (
        "the all-reduce + RMSNorm fusion pass is off (FlashInfer mnnvl binds multicast; trtllm raises across "
        "nodes and is the slower backend without NVSwitch)"
    )
    ver = package(ctx.facts, "vllm")
    field = next((name for since, name in vllm.FUSION_PASS_FIELDS if _at_least(ver, since)), None)
    if field is None:
        fb.notes.append(
            f"turn vLLM's all-reduce + RMSNorm fusion pass off in {vllm.COMPILATION_CONFIG_FLAG} "
            f"(this vLLM's version is unknown: its field name, {key} from 0.12.0, is not known)"
        )
        return
    key = field
    given = next((flags[f] for f in vllm.COMPILATION_CONFIG_FLAGS if flags.get(f)), None)
    if given is None:
        fb.steps.append(
            PlanStep(
                "add_arg", f"{vllm.COMPILATION_CONFIG_FLAG}.{section}.{key}", "false", why, cost=vllm.COST_FUSION_OFF
            )
        )
        return
    try:
        cfg = json.loads(given)
    except ValueError:
        cfg = None
    if not isinstance(cfg, dict):
        fb.notes.append(
            f'add "{section}": {{"{key}": false}} to {vllm.COMPILATION_CONFIG_FLAG} (flightcheck could not read it)'
        )
        return
    sub = cfg.get(section)
    cfg[section] = {**(sub if isinstance(sub, dict) else {}), key: False}
    fb.steps.append(PlanStep("add_arg", vllm.COMPILATION_CONFIG_FLAG, json.dumps(cfg), why, cost=vllm.COST_FUSION_OFF))


def _specialised_decode(ctx: Context, fb: Fallback) -> None:
    """A specialised decode (opt-in: Kimi-K3, DeepSeek-V4.1) maps multicast, and DeepSeek-V4.1's
    raises ValueError once multicast is off: back to the stock decode."""
    given = flag_values(ctx).get(vllm.ADDITIONAL_CONFIG_FLAG)
    if not given:
        return
    try:
        cfg = json.loads(given)
    except ValueError:
        return
    if not isinstance(cfg, dict) or cfg.get(vllm.DECODE_BACKEND_KEY) != vllm.SPECIALIZED_DECODE:
        return
    rest = {k: v for k, v in cfg.items() if k != vllm.DECODE_BACKEND_KEY}
    fb.steps.append(
        PlanStep(
            "add_arg",
            vllm.ADDITIONAL_CONFIG_FLAG,
            json.dumps(rest),
            "the specialised decode binds NVLS multicast (and refuses to start without it); the stock decode does not",
        )
    )


def _all2all(ctx: Context, fb: Fallback) -> None:
    backend = flag_values(ctx).get(vllm.ALL2ALL_BACKEND_FLAG)
    if backend in vllm.ALL2ALL_MULTICAST:
        fb.steps.append(
            PlanStep(
                "add_arg",
                vllm.ALL2ALL_BACKEND_FLAG,
                vllm.ALL2ALL_DEFAULT,
                f"{backend} requires NVSwitch multicast; {vllm.ALL2ALL_DEFAULT} runs on NCCL",
            )
        )
    elif backend in vllm.ALL2ALL_NVSHMEM:
        fb.steps.append(
            PlanStep("env", vllm.DISABLE_NVLS_NVSHMEM, "1", f"{backend} runs on NVSHMEM, which binds NVLS multicast")
        )


def _ray(ctx: Context, fb: Fallback) -> None:
    """Ray workers start from the raylet, not from this shell: name what vLLM must forward."""
    if _at_least(package(ctx.facts, "vllm"), vllm.RAY_COPIES_DRIVER_ENV_SINCE):
        # 0.33's Ray executor gives the workers the whole driver environment (setdefault)
        fb.notes.append(
            "the Ray executor copies this environment to its workers, but a variable already set in a "
            "worker node's raylet environment wins: do not set those there"
        )
        return
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


def _sglang(ctx: Context, fb: Fallback, attribute_off: bool = False) -> None:
    flags = flag_values(ctx)
    for flag, why in sglang.MULTICAST_FLAGS.items():
        if not flags or flag in flags:
            fb.steps.append(PlanStep("drop_arg", flag, None, why, cost=sglang.MULTICAST_FLAG_COSTS.get(flag, "")))
    _env_step(
        ctx,
        "TORCH_SYMM_MEM_DISABLE_MULTICAST",
        "1",
        "torch symmetric memory skips every multicast call",
        fb,
        cost=vllm.COST_TORCH_MULTICAST_OFF,
    )
    _nvls_step(ctx, fb, attribute_off)
    a2a = flags.get(sglang.MOE_A2A_BACKEND_FLAG)
    if a2a in sglang.NVSHMEM_A2A_BACKENDS:
        fb.steps.append(
            PlanStep("env", vllm.DISABLE_NVLS_NVSHMEM, "1", f"{a2a} runs on NVSHMEM, which binds NVLS multicast")
        )
    _sglang_fusion(ctx, fb, flags)


def sglang_fusion_auto(ctx: Context, flags: dict[str, str | None]) -> bool | None:
    """SGLang turns the FlashInfer all-reduce fusion on by itself for this launch (True), keeps
    it off (False), or flightcheck cannot tell (None): overrides.py's auto-enable gate."""
    i = ctx.intent
    majors = _sm_majors(ctx)
    if i.tensor_parallel_size <= 1 or (majors is not None and not majors <= set(sglang.FI_AUTO_SM_MAJORS)):
        return False
    if sglang.DP_ATTENTION_FLAG in flags or (flags.get(sglang.ATTN_DP_SIZE_FLAG) or "1") not in ("0", "1"):
        return False
    if flags.get(sglang.MOE_A2A_BACKEND_FLAG) not in (None, "none"):
        return False
    archs = model_config(ctx).get("architectures") or []
    if not archs or majors is None or not _at_least(package(ctx.facts, "sglang"), sglang.FI_AUTO_READ_IN):
        return None
    if archs[0] in sglang.FI_AUTO_OWN_RULES:
        return None
    return archs[0] in sglang.FI_AUTO_ARCHS


def _sglang_fusion(ctx: Context, fb: Fallback, flags: dict[str, str | None]) -> None:
    has_backend = _at_least(package(ctx.facts, "sglang"), sglang.FI_BACKEND_SINCE)
    if has_backend is None:
        fb.notes.append(
            f"SGLang's version is unknown: from 0.5.14 add {sglang.FI_FUSION_BACKEND_FLAG} {sglang.FI_SAFE_BACKEND} "
            f"on one node, {sglang.FI_FUSION_DISABLE_FLAG} across nodes"
        )
        return
    if not has_backend:
        return  # up to 0.5.13 the fusion only builds the trtllm (CUDA IPC) workspace
    off_why = "the FlashInfer all-reduce fusion is off (trtllm raises across nodes; mnnvl binds multicast)"
    if ctx.intent.nnodes > 1:
        fb.steps.append(PlanStep("add_arg", sglang.FI_FUSION_DISABLE_FLAG, None, off_why))
        return
    asked = flags.get(sglang.FI_FUSION_BACKEND_FLAG)
    if asked == sglang.FI_SAFE_BACKEND or sglang.FI_FUSION_DISABLE_FLAG in flags:
        return
    auto = True if (asked or sglang.FI_FUSION_ENABLE_FLAG in flags) else sglang_fusion_auto(ctx, flags)
    if auto is None:
        fb.steps.append(PlanStep("add_arg", sglang.FI_FUSION_DISABLE_FLAG, None, off_why))
    elif auto:
        fb.steps.append(
            PlanStep(
                "add_arg",
                sglang.FI_FUSION_BACKEND_FLAG,
                sglang.FI_SAFE_BACKEND,
                "the FlashInfer all-reduce fusion uses CUDA IPC instead of mnnvl multicast",
            )
        )


def model_config(ctx: Context) -> dict[str, Any]:
    """``config.json`` of ``--model`` as the checkpoint reader parsed it, which resolves the
    model (a directory, or a repo id in the local Hugging Face cache) for every check; ``{}``
    without a model or a readable config (FC5xx say why): the model is then unknown."""
    ck = ctx.checkpoint
    cfg = ck.config if ck is not None else None
    return cfg if isinstance(cfg, dict) else {}


def _text(cfg: dict[str, Any]) -> dict[str, Any]:
    raw = cfg.get("text_config")
    return raw if isinstance(raw, dict) else {}


def _cfg_get(cfg: dict[str, Any], key: str) -> Any:
    return cfg[key] if key in cfg else _text(cfg).get(key)


def kimi_k3(ctx: Context) -> bool:
    """The model is Kimi-K3 / Kimi-Linear (by its config.json architectures / model_type)."""
    cfg = model_config(ctx)
    archs = set(cfg.get("architectures") or [])
    return bool(archs & vllm.KIMI_K3_ARCHS) or cfg.get("model_type") in vllm.KIMI_K3_MODEL_TYPES


def _k3_up_proj_unquantised(ctx: Context) -> bool:
    """LatentMoERunner._use_fused_path: the routed up-projection's quant method is
    UnquantizedLinearMethod (no quantisation, or the layer is in the quantisation's ignore list)."""
    qc = _cfg_get(model_config(ctx), "quantization_config")
    if not isinstance(qc, dict):
        return ctx.intent.quantization is None
    skipped = [qc.get(k) for k in ("ignore", "ignored_layers", "modules_to_not_convert", "exclude_modules")]
    names = [str(x) for lst in skipped if isinstance(lst, list) for x in lst]
    return any(vllm.KIMI_K3_UP_PROJ in n for n in names)


def kimi_k3_tail(ctx: Context) -> str | None:
    """A message when this launch runs Kimi-K3's latent MoE tail (multicast, no off switch);
    ``"switchable"`` when the installed vLLM declares the switch; None when not concerned.
    The gates are LatentMoERunner's (vllm/models/kimi_k3/nvidia/latent_moe_runner.py)."""
    i = ctx.intent
    if not engines.get(i.engine).multicast.model_paths or not kimi_k3(ctx):
        return None
    # vllm/model_executor/layers/fused_moe/config.py: without EP the MoE TP group is TP x DP
    # (flatten_tp_across_dp_and_pcp); with EP its TP size is 1 and the fused path is not taken
    moe_tp = 1 if i.enable_expert_parallel else i.tensor_parallel_size * i.data_parallel_size
    if moe_tp not in vllm.KIMI_K3_TAIL_TP:
        return None
    ver = package(ctx.facts, "vllm")
    if not _at_least(ver, vllm.KIMI_K3_TAIL_SINCE):
        return None
    if _sm_majors(ctx) != {"10"}:
        return None  # is_device_capability_family(100)
    cfg = model_config(ctx)
    if _cfg_get(cfg, "routed_expert_hidden_size") is None or _cfg_get(cfg, "num_shared_experts") is None:
        return None  # no latent MoE (LatentMoERunner unused) / no shared expert to fuse
    if not _k3_up_proj_unquantised(ctx):
        return None
    if engine_reads(ctx, vllm.KIMI_K3_TAIL_SWITCH):  # declared by the installed vLLM's envs.py
        return "switchable"
    tp, pp, dp = i.tensor_parallel_size, i.pipeline_parallel_size, i.data_parallel_size
    return (
        f"vLLM {ver} runs Kimi-K3's latent MoE tail on SM100-family GPUs at MoE TP {moe_tp}: it maps NVLS "
        f"multicast while the model is built and has no switch to turn it off, so no setting avoids multicast "
        f"here. Expert parallel makes the MoE TP size 1 and the tail is not used: "
        f"`{vllm.layout(tp, pp, dp, ep=True)}` on the same GPUs"
    )


def beam_allreduce(ctx: Context) -> str | None:
    """A message when Beam's all-reduce workspace binds multicast (FlashInfer McastGPUBuffer,
    no switch, no try/except): vllm/models/beam/nvidia/allreduce.py BeamAllReduceWorkspace.create."""
    i = ctx.intent
    cfg = model_config(ctx)
    if not engines.get(i.engine).multicast.model_paths or not set(cfg.get("architectures") or []) & vllm.BEAM_ARCHS:
        return None
    if i.tensor_parallel_size not in vllm.BEAM_TP or not _at_least(package(ctx.facts, "vllm"), vllm.BEAM_SINCE):
        return None
    majors = _sm_majors(ctx)
    if majors is None or not majors <= set(vllm.BEAM_SM_MAJORS):
        return None
    hidden = _cfg_get(cfg, "hidden_size")
    if not isinstance(hidden, int) or hidden % vllm.BEAM_HIDDEN_STEP:
        return None
    if not vllm.BEAM_HIDDEN_MIN <= hidden <= vllm.BEAM_HIDDEN_MAX:
        return None
    dtype = flag_values(ctx).get(vllm.DTYPE_FLAG) or "auto"
    if dtype == "auto":
        dtype = str(_cfg_get(cfg, "dtype") or _cfg_get(cfg, "torch_dtype") or "bfloat16")
    if dtype not in ("bfloat16", "bf16"):
        return None
    tp, pp = i.tensor_parallel_size, i.pipeline_parallel_size
    return (
        f"Beam's all-reduce at TP {tp} binds NVLS multicast through FlashInfer's McastGPUBuffer while the model "
        f"is built, with no switch and no fallback. A layout whose TP is not 2, 4 or 8 avoids it: "
        f"`{vllm.layout(1, tp * pp)}` on the same GPUs (pipeline parallel; check the weights fit, FC401)"
    )


def multicast_paths(ctx: Context) -> list[str]:
    """The non-NCCL multicast paths this launch enables (FC305)."""
    env = ctx.facts.env or {}
    paths: list[str] = []
    flags = flag_values(ctx)
    tp = ctx.intent.tensor_parallel_size
    if engines.get(ctx.intent.engine).multicast.fallback == "flags":
        paths = [f for f in sglang.MULTICAST_FLAGS if f in flags and f != sglang.NCCL_NVLS_FLAG]
        if flags.get(sglang.MOE_A2A_BACKEND_FLAG) in sglang.NVSHMEM_A2A_BACKENDS:
            paths.append(f"NVSHMEM ({sglang.MOE_A2A_BACKEND_FLAG} {flags[sglang.MOE_A2A_BACKEND_FLAG]})")
        if _at_least(package(ctx.facts, "sglang"), sglang.FI_BACKEND_SINCE) and sglang_fusion_auto(ctx, flags):
            paths.append("FlashInfer all-reduce fusion (mnnvl on Blackwell)")
        return paths
    if env.get("TORCH_SYMM_MEM_DISABLE_MULTICAST") not in ("1", "true", "True"):
        if tp > 1 and vllm_symm_mem_on(ctx):
            paths.append(f"torch symmetric-memory all-reduce ({vllm.ALLREDUCE_USE_SYMM_MEM})")
        if tp > 1 and vllm.DISABLE_CUSTOM_AR_FLAG not in flags:
            paths.append("CustomAllreduce's MNNVL buffers (torch symmetric memory)")
    if tp > 1 and fi_backend_mnnvl(ctx):  # the backend the plan pins away from (cheapest.py)
        paths.append(f"FlashInfer mnnvl all-reduce ({vllm.FLASHINFER_ALLREDUCE_BACKEND})")
    a2a = flags.get(vllm.ALL2ALL_BACKEND_FLAG)
    if a2a in vllm.ALL2ALL_MULTICAST | vllm.ALL2ALL_NVSHMEM:
        paths.append(f"{vllm.ALL2ALL_BACKEND_FLAG} {a2a}")
    if kimi_k3_tail(ctx):
        paths.append("Kimi-K3 latent MoE tail")
    if beam_allreduce(ctx):
        paths.append("Beam all-reduce workspace (FlashInfer McastGPUBuffer)")
    return paths


def describe(steps: list[PlanStep], notes: list[str] | None = None) -> dict[str, Any]:
    """Evidence form of a fallback: what it sets and why."""
    return {
        "plan": [f"{s.kind} {s.name}" + (f"={s.value}" if s.value is not None else "") for s in steps],
        "notes": notes or [],
        "costs": {s.name: s.cost for s in steps if s.cost},
        "rules": next((n for n in notes or [] if n.startswith("rules of ")), None),
    }


def multicast_reach(ctx: Context) -> list[str]:
    """Every multicast path this launch takes on this node: the fallback plan's own list.

    The non-NCCL paths of :func:`multicast_paths` (by engine release, model and flags), the
    env-gated vLLM paths the plan turns off (NCCL symmetric memory, the direct DCP
    gathers, Kimi-K3's GEMM + all-reduce, the GEMM + reduce-scatter, Inkling's Lamport
    reduce-scatter), and NCCL's NVLS, which any NCCL group of NVSwitch GPUs builds (TP,
    EP, DP; ``MULTICAST_PATHS``) unless ``NCCL_NVLS_ENABLE=0``. Empty: a launch that runs
    one GPU, or whose every path is already off, never binds multicast memory."""
    if not communicates(ctx):
        return []
    env = ctx.facts.env or {}
    paths = multicast_paths(ctx)
    if env.get("NCCL_NVLS_ENABLE") != "0":
        paths.append("NCCL NVLS (NCCL_NVLS_ENABLE)")
    if engines.get(ctx.intent.engine).multicast.fallback == "flags":
        return paths
    on = ("1", "true", "True")
    if env.get(vllm.USE_NCCL_SYMM_MEM) in on:
        paths.append(f"NCCL symmetric memory ({vllm.USE_NCCL_SYMM_MEM})")
    if _dcp(ctx) and any(
        env.get(n) not in ("0", "false", "False") for n in (vllm.USE_DIRECT_DCP_Q_GATHER, vllm.USE_DIRECT_DCP_KV_GATHER)
    ):
        paths.append("direct DCP gathers")
    if kimi_k3(ctx) and env.get(vllm.KIMI_K3_GEMM_AR) not in ("0", "false", "False"):
        paths.append(f"Kimi-K3 GEMM + all-reduce ({vllm.KIMI_K3_GEMM_AR})")
    if env.get(vllm.ENABLE_GEMM_RS) not in (None, "0"):
        paths.append(f"GEMM + reduce-scatter ({vllm.ENABLE_GEMM_RS})")
    if set(model_config(ctx).get("architectures") or []) & vllm.INKLING_ARCHS and env.get(
        vllm.INKLING_LAMPORT_SWITCH
    ) not in ("0", "false", "False"):
        paths.append(f"Inkling Lamport reduce-scatter ({vllm.INKLING_LAMPORT_SWITCH})")
    return paths


#: NVLS multicast needs Hopper or newer (CUDA's multicast objects, NCCL's NVLS: SM90+).
NVLS_MIN_SM_MAJOR = 9


def probe_needed(ctx: Context, *, force: bool = False) -> str | None:
    """None when this launch will reach a multicast path that only a bind can prove works
    here (so the plugin probes), else why no probe is needed, said in the report (FC304's
    skip): one GPU, no driver, no NVSwitch (PCIe, NVLink bridge), GPUs without multicast
    (pre-Hopper, or the attribute 0: FC303 plans the fallback), or no multicast path on.
    ``force`` (``FLIGHTCHECK_PROBE=1``): whenever two GPUs of the launch are here."""
    if not communicates(ctx):
        return "one GPU: no collective, so no multicast path"
    if ctx.driver.loaded is not True:
        return "no NVIDIA driver: " + (ctx.driver.error or "NVML unavailable")
    used = ctx.gpus_used
    if len(used) < 2:
        return f"{len(used)} GPU of the launch on this node: a multicast team needs two"
    if force:
        return None
    if ctx.fabric_manager.nvswitch_system is False:
        return "no NVSwitch (PCIe or NVLink bridge): no NVLS multicast on this node"
    if any(g.multicast_supported is False for g in used):
        return "a GPU used reports no multicast support: FC303 plans the fallback without a probe"
    majors = [_major(g.compute_capability) for g in used]
    if all(m is not None and m < NVLS_MIN_SM_MAJOR for m in majors):
        return "these GPUs predate Hopper: no NVLS multicast"
    if used and all(g.fabric is not None and g.fabric.state == "not_supported" for g in used):
        return "these GPUs take part in no NVLink fabric: no NVLS multicast"
    if not multicast_reach(ctx):
        return "no multicast path is on for this launch (every one the fallback plan knows is off)"
    return None


def _major(cc: str | None) -> int | None:
    try:
        return int(str(cc).split(".")[0]) if cc else None
    except ValueError:
        return None
