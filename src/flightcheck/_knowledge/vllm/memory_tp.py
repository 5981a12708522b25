"""vLLM's non-torch memory at TP >= 2 that lands after the worker's baseline snapshot (so inside
the KV budget), release by release, and the terms of the budget's [low, high] bound that the
launch's inputs do not decide.

What ``memory_profiling`` counts (vllm/utils/mem_utils.py, 0.19.0 and 0.33.0; vllm/utils/__init__.py
in 0.10.x): ``non_torch_increase`` is the growth of ``(total - free) - torch.cuda.memory_reserved()``
from the snapshot ``Worker.init_device`` takes (v1/worker/gpu_worker.py) to the end of the profile
run, so only memory allocated *outside* torch's caching allocator after that snapshot enters the
budget. Where each TP communicator's memory falls, read in the 0.10.1.1, 0.11.0, 0.19.0 and 0.33.0
wheels; re-checked in every wheel on disk 0.10.0 - 0.33.0: ``init_device`` snapshots before
``init_worker_distributed_environment`` in 0.10.0 - 0.10.2 and after it from 0.11.0 (all 37),
``CudaCommunicator.__init__`` makes ``CustomAllreduce`` (0.10.0 on) and ``SymmMemCommunicator``
(0.10.2 on; ``VLLM_ALLREDUCE_USE_SYMM_MEM`` "0" in 0.10.2, "1" from 0.11.0), and
``PyNcclCommunicator.__init__`` runs its warmup all-reduce, in 0.10.0, 0.10.2, 0.11.0, 0.12.0, 0.14.0,
0.16.0, 0.17.0, 0.19.0, 0.20.0, 0.22.0, 0.24.0, 0.26.0, 0.28.0, 0.30.0, 0.32.0 and 0.33.0:

- **NCCL (pynccl) communicator** of the TP group (distributed/device_communicators/cuda_communicator.py
  ``CudaCommunicator.__init__``), made in ``init_worker_distributed_environment``: before the
  snapshot from 0.11.0 (inside the budget before it: ``memory.SNAPSHOT_AFTER_DISTRIBUTED_SINCE``).
  With cuMem on (NCCL's default, which vLLM stops overriding in 0.10.2: ``NCCL_CUMEM_OFF_UNTIL``)
  its ring / tree / NVLS connections are made when a collective first needs them — after the
  snapshot (``bound.bound_terms``' ``nccl_after_snapshot``; sizes in ``flightcheck._knowledge.nccl``).
  ``PyNcclCommunicator.__init__`` (distributed/device_communicators/pynccl.py, read in 0.10.1.1,
  0.11.0, 0.19.0 and 0.33.0) runs a one-element all-reduce right after ``ncclCommInitRank`` ("A
  small all_reduce for warmup"; 0.33.0 defers it on ROCm only, ``defer_comm_warmup_on_rocm``), so
  with cuMem on the connections of the algorithm NCCL's tuner picks for 4 bytes are made at init —
  before the snapshot from 0.11.0 — and the others (a larger all-reduce's ring, tree or NVLS) during
  the profile, inside. Which algorithm the tuner picks is not derived (src/graph/tuning.cc, not
  read), so the bound keeps the whole communicator on the after-snapshot side
  (``PYNCCL_WARMUP_AT_INIT``). Before 0.11.0 the warmup changes nothing: every connection is
  inside the budget, and before 0.10.2 all are made by ``ncclCommInitRank`` anyway (cuMem off).
- **torch's NCCL communicator** of the TP device group (distributed/parallel_state.py
  ``GroupCoordinator.__init__``: ``torch.distributed.new_group(ranks, backend=...)``, 0.10.1.1 -
  0.33.0) is created by torch at the group's first collective — the profile run's logits gather,
  inside the budget. 0.33.0's opt-in ``VLLM_DISTRIBUTED_USE_SPLIT_GROUP`` (default off) splits it
  eagerly from a device-bound default group instead; with cuMem on its connections are still made
  on first use, so the bound is the same.
- **across nodes** the TP group's connections go over NCCL's network transport:
  ``flightcheck._knowledge.nccl.multinode_communicator_bytes`` (src/transport/net.cc) — device
  memory only with GPUDirect RDMA, up to MAXCHANNELS channels: a range from 0. Custom all-reduce
  is off across nodes in 0.10.1.1 and 0.19.0 (custom_all_reduce.py ``CustomAllreduce.__init__``:
  "Custom allreduce is disabled because this process group spans across nodes"); 0.33.0 keeps it
  over a multi-node NVLink fabric (``mnnvl_only``), made before the snapshot (not the budget's).
- **custom all-reduce** (custom_all_reduce.py ``CustomAllreduce.__init__``: two IPC buffers of
  ``meta_size() + max_size`` and ``max_size``, ``max_size`` 8 MiB, a ``cudaMalloc`` in the C++ op;
  ``rank_data`` 8 MiB a torch tensor) and **torch symmetric memory** (symm_mem.py
  ``SymmMemCommunicator.__init__``: ``torch_symm_mem.empty``, default on from 0.11.0,
  ``VLLM_ALLREDUCE_USE_SYMM_MEM``): both in ``CudaCommunicator.__init__``, before the snapshot from
  0.11.0 — FC406's slack, not the budget. The graph buffers custom all-reduce registers after CUDA
  graph capture (``register_graph_buffers``) only open IPC handles of the peers' memory.
- **FlashInfer's all-reduce + RMSNorm fusion workspace** (below): made when the compilation pass is
  built (the first compile, in the profile run) or, from 0.29.0, by the standalone FlashInfer
  all-reduce at the first all-reduce it takes (``FlashInferAllReduce._ensure_workspace``, lazily:
  ``CudaCommunicator.__init__`` only sizes it) — after the snapshot, inside the budget. Read in
  distributed/device_communicators/flashinfer_all_reduce.py and compilation/passes/fusion/
  allreduce_rms_fusion.py of every release 0.17.0 - 0.33.0 (0.21.0 included).
- cuBLAS / cuBLASLt workspaces come from torch's allocator (torch memory, in the activation peak or
  the weights), not non-torch.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from flightcheck._knowledge.vllm._versions import _release

MiB = 1 << 20

# ---- FlashInfer's all-reduce fusion workspace, by release --------------------------------------
#
# Read in the wheel of every release 0.11.0 - 0.33.0 (0.21.0 included): config/vllm.py
# ``enable_allreduce_rms_fusion`` and the optimization levels' ``fuse_allreduce_rms``,
# config/compilation.py (``enable_fi_allreduce_fusion``, ``flashinfer_max_size``,
# ``FI_SUPPORTED_WORLD_SIZES``), the pass module's ``FI_ALLREDUCE_FUSION_MAX_SIZE_MB``
# (compilation/collective_fusion.py until 0.15.1, compilation/passes/fusion/allreduce_rms_fusion.py
# from 0.16.0), ``AllReduceFusionPass.__init__``, distributed/device_communicators/
# flashinfer_all_reduce.py (the backend, ``_resolve_fi_ar_backend``), envs.py
# (``VLLM_FLASHINFER_ALLREDUCE_BACKEND``, ``VLLM_ALLREDUCE_USE_FLASHINFER``) and the FlashInfer
# each wheel pins (METADATA ``Requires-Dist: flashinfer-python==``). By span:
#
# - 0.11.0 - 0.11.2: ``enable_fi_allreduce_fusion: bool = False``; 0.12.0 - 0.16.0: every
#   optimization level O0 - O3 sets ``"fuse_allreduce_rms": False`` (config/vllm.py): off unless asked.
# - 0.17.0 - 0.18.1: O2 / O3 (O2 the default) take ``enable_allreduce_rms_fusion``: TP > 1, CUDA,
#   FlashInfer importable (a hard dependency from 0.11.1), ``is_device_capability(100)`` or (90) —
#   exactly 10.0 or 9.0 — DP 1 and PP 1 (vLLM issues 34458, 35426). Backend: the env default "trtllm".
# - 0.19.0 - 0.20.2: the 10.x family (``is_device_capability_family(100)``); "auto" -> "trtllm" on
#   one node (``_resolve_fi_ar_backend``: mnnvl's CUDA-graph issue 35772).
# - 0.22.0 - 0.28.0: no DP / PP condition, except 0.23.0 (PP 1: "concurrent independent warmup of
#   multiple TP subgroups ... deadlock"); ROCm only with AITER. From 0.25.0 "auto" picks "mnnvl" on one
#   node and falls back to "trtllm" where mnnvl cannot make its workspace (no NVSwitch multicast).
# - 0.29.0 - 0.33.0: off under ``VLLM_BATCH_INVARIANT``; and the standalone FlashInfer all-reduce is
#   on by default (``VLLM_ALLREDUCE_USE_FLASHINFER`` "1"; "0" before), so the workspace is made at the
#   first eligible all-reduce even without the pass (``--enforce-eager``, PP > 1), sized
#   ``table MiB // (hidden x dtype)`` tokens (``FlashInferAllReduce``: not capped by the batch), or the
#   Blackwell mnnvl tuning (``FI_MNNVL_ALLREDUCE_MAX_SIZE_MB``, all_reduce_utils.py), which also
#   raises the pass's workspace (``get_fi_ar_workspace``: ``max(max_token_num, tuned)``).
# - 0.21.0 (the only 0.21 release): 0.22.0's conditions (config/vllm.py ``enable_allreduce_rms_fusion``
#   has no DP / PP clause; the pass module and flashinfer_all_reduce.py differ from 0.22.0's only in
#   the PDL launch flags) with 0.20.x's FlashInfer pin, 0.6.8.post1: the trtllm workspace through
#   ``SymmDeviceMemory``, which needs multicast (read in the 0.21.0 wheel, diffed against 0.20.0 / 0.22.0).
# - a TP group across nodes: trtllm cannot (its IPC handles are one node's; vLLM refuses it from
#   0.25.0, ``_node_count(group) > 1``), so only mnnvl can make a workspace — "auto" picks it across
#   nodes from 0.19.0, and from 0.32.0 only on 10.0 and up (``has_device_capability(100)``; "MNNVL
#   requires Blackwell-class GPUs"). Whether the nodes share an NVLink fabric (NVL72) decides if it is
#   made: the point takes none, the high end the mnnvl workspace.
#
# The pass sizes its workspace ``max_token_num = min(flashinfer_max_size(tp) // (hidden x dtype
# bytes), max_num_batched_tokens)`` (identical in every release read) from the size table below.
# Workspace layouts (FlashInfer):
#
# - "trtllm" (flashinfer/comm/trtllm_ar.py ``trtllm_create_ipc_workspace_for_all_reduce_fusion``):
#   three buffers — ``tp x tokens x hidden x 2`` (data), ``tp x BarrierFlagCount x 4`` (flags),
#   3 x ``min(tp x tokens x hidden x 2, MAX_COMM_SIZE)`` (Lamport); allocated, by FlashInfer release:
#   0.6.1 - 0.6.8.post1 (read in 0.6.1, 0.6.3, 0.6.4, 0.6.6, 0.6.8.post1) ``SymmDeviceMemory``
#   (comm/mnnvl.py), which raises without CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED and rounds each
#   buffer up to the multicast granularity even with ``enable_multicast=False``; 0.6.11.post2 - 0.6.14
#   (read in each) torch symmetric memory (comm/torch_symmetric_memory.py ``_alloc_symm_buffer_bytes``:
#   ``symm_mem.empty`` — torch's own cuMem allocator, outside its caching allocator: at pytorch main
#   029e4735, torch/csrc/distributed/c10d/symm_mem/CUDASymmetricMemory.cu
#   ``CUDASymmetricMemoryAllocator::alloc`` rounds to CU_MEM_ALLOC_GRANULARITY_RECOMMENDED only and
#   makes the multicast object the same size, skipping it where that fails — the point; the torch
#   2.11.0 these releases pin is not read, so the high end keeps the multicast rounding);
#   0.6.15 on (read in 0.6.15, 0.6.16.post3, 0.6.18rc7 and 0.7.2.post1) ``SymmDeviceMemory`` again,
#   which now rounds to the multicast granularity only ``if self._enable_multicast`` (False here).
# - "mnnvl" (flashinfer/comm/trtllm_mnnvl_ar.py ``MNNVLAllReduceFusionWorkspace``): ONE allocation of
#   3 x max(one-shot, two-shot) bytes — one-shot ``min(MNNVL_ONE_SHOT_THRESHOLD // (tp x elem x
#   hidden), tokens) x hidden x tp x elem``, two-shot ``2 x ceil(tokens / tp) x tp x hidden x elem``;
#   0.6.13 / 0.6.14 through torch symmetric memory, 0.6.16.post3 on (read there, 0.6.18rc7,
#   0.7.2.post1) through ``McastGPUBuffer`` -> ``SymmDeviceMemory(enable_multicast=True)``: rounded to
#   the multicast granularity, and vLLM (0.27.0 on: ``mc_ptr``) drops it without multicast.
#
# The pinned FlashInfer of each release (wheel METADATA): 0.11.1 - 0.11.2 0.5.2; 0.12.0 - 0.14.1
# 0.5.3; 0.15.x 0.6.1; 0.16.0 0.6.3; 0.17.x 0.6.4; 0.18.x - 0.19.x 0.6.6; 0.20.x 0.6.8.post1; 0.21.0 0.6.8.post1;
# 0.22.x 0.6.11.post2; 0.23.0 - 0.24.0 0.6.12; 0.25.x 0.6.13; 0.26.0 0.6.14; 0.27.0 - 0.28.0 0.6.16.post3;
# 0.29.0 0.6.18; 0.30.0 0.6.18.post1; 0.31.0 - 0.32.0 0.7.0.post1; 0.33.0 0.7.2.post1. Read from
# FlashInfer's git tags (flashinfer-ai/flashinfer) and the 0.6.6 / 0.7.2.post1 wheels; 0.6.18,
# 0.6.18.post1 and 0.7.0.post1 have no tag there: their comm/mnnvl.py is taken to be the one of
# 0.6.16rc1 - 0.6.18rc7 and 0.7.2.post1 (the same rounding in all of them).
#
# CU_MULTICAST_GRANULARITY_RECOMMENDED is the driver's, in no source: 2 MiB at the least (the
# allocation granularity it starts from); ``MC_GRANULARITY_INFERRED`` (512 MiB) is what the public
# 8 x H100 0.19 breakdowns imply (about 1.85 GiB more non-torch at TP 2 and 4 than at TP 1, whatever
# the model: three buffers of 512 MiB plus NCCL's lazy connections). No public statement of the value
# was found (tests/fixtures/memory/SEARCHES.md).

Alloc = Literal["symm-mc", "torch-symm", "symm", "mcast"]


class FusionRelease(NamedTuple):
    """One span of releases with one fusion rule (see above)."""

    since: str
    default_on: bool
    cc_family: bool = True  # 10.x family (else exactly 10.0) besides 9.0
    dp_pp_one: bool = False  # needs DP 1 and PP 1
    pp_one: bool = False  # needs PP 1
    table: str = "0.19.0"  # key of FI_FUSION_MAX_SIZE_MB
    mnnvl_first: bool = False  # "auto" picks mnnvl on one node, trtllm as the fallback
    standalone: bool = False  # VLLM_ALLREDUCE_USE_FLASHINFER on by default
    trtllm_alloc: Alloc = "symm-mc"
    mnnvl_alloc: Alloc = "mcast"
    tuned: str | None = None  # key of FI_MNNVL_TUNED_MB


#: the fusion rule by release, newest first (``since`` the first release of its span)
FUSION_BY_RELEASE: tuple[FusionRelease, ...] = (
    FusionRelease(
        "0.33.0", True, table="0.29.0", mnnvl_first=True, standalone=True, trtllm_alloc="symm", tuned="0.33.0"
    ),
    # 0.32.0: as 0.29.0, but mnnvl across nodes only on 10.0 and up (FI_MNNVL_ACROSS_NODES_BLACKWELL_SINCE)
    FusionRelease(
        "0.32.0", True, table="0.29.0", mnnvl_first=True, standalone=True, trtllm_alloc="symm", tuned="0.29.0"
    ),
    FusionRelease(
        "0.29.0", True, table="0.29.0", mnnvl_first=True, standalone=True, trtllm_alloc="symm", tuned="0.29.0"
    ),
    FusionRelease("0.27.0", True, table="0.27.0", mnnvl_first=True, trtllm_alloc="symm"),
    FusionRelease(
        "0.25.0", True, table="0.25.0", mnnvl_first=True, trtllm_alloc="torch-symm", mnnvl_alloc="torch-symm"
    ),
    FusionRelease("0.24.0", True, trtllm_alloc="torch-symm"),
    FusionRelease("0.23.0", True, pp_one=True, trtllm_alloc="torch-symm"),
    FusionRelease("0.22.0", True, trtllm_alloc="torch-symm"),
    FusionRelease("0.21.0", True),
    FusionRelease("0.19.0", True, dp_pp_one=True),
    FusionRelease("0.17.0", True, cc_family=False, dp_pp_one=True, table="0.17.0"),
    FusionRelease("0.0", False),
)
#: releases read, by rule: {release: default on}
FI_FUSION_DEFAULT_ON = {
    "0.11.0": False,
    "0.12.0": False,
    "0.16.0": False,
    "0.17.0": True,
    "0.19.0": True,
    "0.21.0": True,
    "0.22.0": True,
    "0.33.0": True,
}
#: the releases whose ``PyNcclCommunicator.__init__`` was read to run the warmup all-reduce at
#: init (see above); the bound does not narrow on it (the tuner's choice is not derived)
PYNCCL_WARMUP_AT_INIT = (
    "0.10.0",
    "0.10.1.1",
    "0.10.2",
    "0.11.0",
    "0.12.0",
    "0.14.0",
    "0.16.0",
    "0.17.0",
    "0.19.0",
    "0.20.0",
    "0.22.0",
    "0.24.0",
    "0.26.0",
    "0.28.0",
    "0.30.0",
    "0.32.0",
    "0.33.0",
)
#: ``FI_ALLREDUCE_FUSION_MAX_SIZE_MB`` (what config/compilation.py ``flashinfer_max_size`` reads,
#: keyed by ``capability.to_int()``: a capability without an entry runs no fusion): MiB by compute
#: capability and TP, keyed by the first release of each table — 0.11.1 - 0.18.1 "0.17.0",
#: 0.19.0 - 0.24.0 "0.19.0" (+ 10.3), 0.25.0 - 0.26.0 "0.25.0" (+ TP 16, with
#: ``FI_SUPPORTED_WORLD_SIZES`` [2, 4, 8, 16]), 0.27.0 - 0.28.0 "0.27.0" (+ 10.7), 0.29.0 - 0.33.0
#: "0.29.0" (10.3 at TP 8: 4)
FI_FUSION_MAX_SIZE_MB: dict[str, dict[int, dict[int, float]]] = {
    "0.17.0": {90: {2: 64, 4: 2, 8: 0.5}, 100: {2: 64, 4: 32, 8: 1}},
    "0.19.0": {90: {2: 64, 4: 2, 8: 0.5}, 100: {2: 64, 4: 32, 8: 1}, 103: {2: 64, 4: 64, 8: 2}},
    "0.25.0": {
        90: {2: 64, 4: 2, 8: 0.5},
        100: {2: 64, 4: 32, 8: 1, 16: 64},
        103: {2: 64, 4: 64, 8: 2, 16: 64},
    },
    "0.27.0": {
        90: {2: 64, 4: 2, 8: 0.5},
        100: {2: 64, 4: 32, 8: 1, 16: 64},
        103: {2: 64, 4: 64, 8: 2, 16: 64},
        107: {2: 64, 4: 64, 8: 2},
    },
    "0.29.0": {
        90: {2: 64, 4: 2, 8: 0.5},
        100: {2: 64, 4: 32, 8: 1, 16: 64},
        103: {2: 64, 4: 64, 8: 4, 16: 64},
        107: {2: 64, 4: 64, 8: 2},
    },
}
FI_FUSION_MAX_SIZE_MB["0.33.0"] = FI_FUSION_MAX_SIZE_MB["0.29.0"]  # the newest release's (conformance)
#: all_reduce_utils.py ``FI_MNNVL_ALLREDUCE_MAX_SIZE_MB``: MiB by (capability, TP, nodes), the
#: standalone mnnvl all-reduce's tuning (0.29.0 - 0.32.0 and 0.33.0)
FI_MNNVL_TUNED_MB: dict[str, dict[tuple[int, int, int], float]] = {
    "0.29.0": {(103, 4, 1): 80, (103, 8, 1): 64, (103, 8, 2): 64, (103, 16, 4): 8},
    "0.33.0": {
        (100, 8, 1): 128,
        (100, 8, 2): 128,
        (103, 4, 1): 80,
        (103, 8, 1): 128,
        (103, 8, 2): 128,
        (103, 16, 4): 8,
    },
}
#: across nodes "auto" picks mnnvl from 0.19.0 (0.17.x / 0.18.x: the env default trtllm), and from
#: 0.32.0 only on 10.0 and up (flashinfer_all_reduce.py ``_resolve_fi_ar_backend``, read in each)
FI_MNNVL_ACROSS_NODES_SINCE = "0.19.0"
FI_MNNVL_ACROSS_NODES_BLACKWELL_SINCE = "0.32.0"
#: 0.17.0 - 0.20.2's ``enable_allreduce_rms_fusion`` also needs DP 1 and PP 1; 0.22.0 on does not
FI_FUSION_DP_PP_ANY_SINCE = "0.22.0"
#: the first release whose pinned FlashInfer no longer rounds the trtllm workspace to the multicast
#: granularity (0.20.x pins 0.6.8.post1, which does; 0.22.0 pins 0.6.11.post2: torch symmetric memory)
FI_MULTICAST_ROUNDING_UNTIL = "0.22.0"
#: flashinfer/comm/trtllm_ar.py ``BarrierFlagCount`` and ``MAX_COMM_SIZE`` (MAX_INT32 rounded down
#: to 2 MiB), the same in every FlashInfer read
FI_BARRIER_FLAGS = 256
FI_MAX_COMM_SIZE = 2147483647 & ~((1 << 21) - 1)
#: flashinfer/comm/trtllm_mnnvl_ar.py ``MNNVL_ONE_SHOT_THRESHOLD`` (0.6.13, 0.7.2.post1)
FI_MNNVL_ONE_SHOT = 64 * 1024 * 8 * 2
#: flashinfer/comm/mnnvl.py ``SIGNAL_PAD_SIZE`` (0.6.6 - 0.7.2.post1): ``SymmDeviceMemory`` sizes each
#: allocation ``round_up(buf_size + SIGNAL_PAD_SIZE, granularity)``
FI_SIGNAL_PAD = 2048
ALLOC_GRANULARITY = 2 * MiB
#: CU_MULTICAST_GRANULARITY_RECOMMENDED on an H100 / H200 (a driver value: inferred, not read; see
#: above). The bound's low end takes ``ALLOC_GRANULARITY`` instead.
MC_GRANULARITY_INFERRED = 512 * MiB


def _round(n: int, g: int) -> int:
    return -(-n // g) * g


def _cc_key(compute_capability: str | None) -> int | None:
    try:
        major, minor = (int(x) for x in (compute_capability or "").split(".")[:2])
    except ValueError:
        return None
    return major * 10 + minor


def fusion_release(v: tuple[int, ...]) -> FusionRelease:
    """The rule of release ``v`` (``FUSION_BY_RELEASE``; a release past 0.33.0 takes 0.33.0's:
    extrapolated)."""
    return next(r for r in FUSION_BY_RELEASE if v >= _release(r.since))


def fusion_rule(v: tuple[int, ...] | None) -> bool | None:
    """Whether this release turns the all-reduce fusion on by default where it can (None: the
    release is unknown)."""
    if v is None:
        return None
    return fusion_release(v).default_on


def _alloc_bytes(sizes: tuple[int, ...], alloc: Alloc) -> tuple[int, int]:
    """(low, high) bytes of FlashInfer allocations of ``sizes`` made by ``alloc`` (see above)."""
    small = sum(_round(s + FI_SIGNAL_PAD, ALLOC_GRANULARITY) for s in sizes)
    big = sum(_round(_round(s + FI_SIGNAL_PAD, ALLOC_GRANULARITY), MC_GRANULARITY_INFERRED) for s in sizes)
    if alloc == "symm":
        return small, small
    if alloc == "torch-symm":
        return small, big  # torch's own rounding is not read
    return small, big  # symm-mc / mcast: the multicast granularity (inferred at the high end)


def _one_release(
    r: FusionRelease,
    *,
    tp: int,
    pp: int,
    dp: int,
    key: int,
    hidden: int,
    dtype_bytes: int,
    batched_tokens: int,
    eager: bool,
    multicast: bool | None,
    nodes: int = 1,
) -> tuple[int, int, int]:
    """(low, point, high) of one release span's workspace (see ``fusion_workspace``)."""
    if not r.default_on:
        return 0, 0, 0
    cc_ok = key == 90 or (key // 10 == 10 if r.cc_family else key == 100)
    pass_runs = not eager and cc_ok and not (r.dp_pp_one and (pp != 1 or dp != 1)) and not (r.pp_one and pp != 1)
    max_mb = FI_FUSION_MAX_SIZE_MB[r.table].get(key, {}).get(tp)
    if max_mb is None or not (pass_runs or r.standalone):
        return 0, 0, 0
    table_tokens = int(max_mb * MiB) // (hidden * dtype_bytes)
    tuned_mb = FI_MNNVL_TUNED_MB.get(r.tuned or "", {}).get((key, tp, nodes))
    tuned = int(tuned_mb * MiB) // (hidden * dtype_bytes) if tuned_mb else 0
    tokens = min(table_tokens, batched_tokens) if pass_runs else table_tokens
    elem = dtype_bytes

    def trtllm(tok: int) -> tuple[int, int, int]:
        data = tp * tok * hidden * 2
        lo, hi = _alloc_bytes((data, tp * FI_BARRIER_FLAGS * 4, 3 * min(data, FI_MAX_COMM_SIZE)), r.trtllm_alloc)
        if r.trtllm_alloc == "symm-mc":
            # SymmDeviceMemory raises without multicast: no workspace, the fusion is off
            return (
                (lo if multicast else 0),
                (hi if multicast is not False else 0),
                (hi if multicast is not False else 0),
            )
        return lo, lo, hi  # the allocation granularity (torch's rounding, not read: up to hi)

    def mnnvl(tok: int) -> tuple[int, int, int]:
        one = min(FI_MNNVL_ONE_SHOT // (tp * elem * hidden), tok) * hidden * tp * elem
        two = 2 * -(-tok // tp) * tp * hidden * elem
        lo, hi = _alloc_bytes((3 * max(one, two),), r.mnnvl_alloc)
        return lo, (hi if r.mnnvl_alloc == "mcast" else lo), hi

    if nodes > 1:
        # only mnnvl across nodes, and only over an NVLink fabric (see above): none at the point
        if _release(r.since) < _release(FI_MNNVL_ACROSS_NODES_SINCE) or (
            _release(r.since) >= _release(FI_MNNVL_ACROSS_NODES_BLACKWELL_SINCE) and key < 100
        ):
            return 0, 0, 0
        return 0, 0, mnnvl(max(tokens, tuned))[2]
    if not r.mnnvl_first:
        return trtllm(tokens)
    tok = max(tokens, tuned)
    m, t = mnnvl(tok), trtllm(tok)
    if r.mnnvl_alloc == "torch-symm":
        return m  # 0.25.x / 0.26.0: vLLM keeps the mnnvl workspace without checking multicast
    if multicast is True:
        return m
    if multicast is False:
        return t  # no multicast: the trtllm fallback
    # multicast unknown: either; the point takes mnnvl (NVSwitch nodes, the public logs' case)
    return min(m[0], t[0]), m[1], max(m[2], t[2])


def fusion_workspace(
    v: tuple[int, ...] | None,
    *,
    tp: int,
    pp: int = 1,
    dp: int = 1,
    compute_capability: str | None,
    hidden: int,
    dtype_bytes: int,
    batched_tokens: int,
    eager: bool,
    multicast: bool | None,
    nodes: int | None = None,
) -> tuple[int, int, int]:
    """(low, point, high) bytes of FlashInfer's all-reduce fusion workspace on one rank of a
    TP group over ``nodes`` nodes (None: one), inside the KV budget (see above). 0 where no release's rule makes one;
    where the inputs leave it open (the release unknown, multicast support unknown,
    the driver's granularity) low and high span the cases. An unknown release keeps the point of
    the releases before the fusion (0: the corpus's unknown-release logs are of those) and reaches
    the largest workspace any release read makes."""
    key = _cc_key(compute_capability)
    if tp <= 1 or key is None or not hidden:
        return 0, 0, 0
    args = {
        "tp": tp,
        "pp": pp,
        "dp": dp,
        "key": key,
        "hidden": hidden,
        "dtype_bytes": dtype_bytes or 2,
        "batched_tokens": batched_tokens,
        "eager": eager,
        "multicast": multicast,
        "nodes": nodes or 1,
    }
    if v is not None:
        return _one_release(fusion_release(v), **args)  # type: ignore[arg-type]
    each = [_one_release(r, **args) for r in FUSION_BY_RELEASE]  # type: ignore[arg-type]
    return 0, 0, max(h for _, _, h in each)


# ---- an unknown release: may it be the V0 engine? ----------------------------------------------
#
# The V0 engine runs in every release before 0.8.0 (unless VLLM_USE_V1=1 from 0.6.4) and, as a
# fallback, in 0.8.0 - 0.10.1 on a GPU below compute capability 8.0 (``memory_v0.runs_v0``).
# Those releases pin torch 2.4.0 - 2.6.0 (wheel METADATA ``Requires-Dist: torch==``: 0.6.1 2.4.0,
# 0.6.4.post1 and 0.7.3 2.5.1, 0.8.4 2.6.0), whose
# CUDA 12.1 - 12.6 builds carry no sm_100 / sm_120 kernels (Blackwell arrives with torch 2.7's CUDA
# 12.8 build, which 0.10.0 pins as 2.7.1: ``memory.TORCH_BY_RELEASE``). So a launch whose release is
# unknown may run V0 on a GPU below 10.0 (or one whose capability is unknown), not on a Blackwell.
#: the torch pins read (release -> torch) behind the rule above
V0_TORCH_PINS = {"0.6.1": "2.4.0", "0.6.4.post1": "2.5.1", "0.7.3": "2.5.1", "0.8.4": "2.6.0"}
V0_CC_BELOW = (10, 0)


def unknown_release_may_run_v0(compute_capability: str | None) -> bool:
    """Whether a launch of an unknown release may run the V0 engine on this GPU (see above)."""
    key = _cc_key(compute_capability)
    return key is None or key < V0_CC_BELOW[0] * 10 + V0_CC_BELOW[1]


#: V1's logits gather (``LogitsProcessor._gather_logits`` with ``use_all_gather``, V1) goes
#: through ``GroupCoordinator.all_gather`` -> ``DeviceCommunicatorBase.all_gather`` ->
#: ``torch.distributed.all_gather_into_tensor(group=device_group)``: torch's own NCCL
#: communicator, used first by the profile run's dummy sampler, after the worker's snapshot
#: from 0.11.0 (``memory.SNAPSHOT_AFTER_DISTRIBUTED_SINCE``). ``CudaCommunicator`` does not
#: override ``all_gather`` in any release 0.8.5 - 0.24.0 and does from 0.25.0, routing it
#: through pynccl (device_communicators/cuda_communicator.py, grepped in every wheel 0.8.5 -
#: 0.33.0; base_device_communicator.py read in 0.11.0, 0.12.0, 0.20.0). From 0.25.0 the gather
#: rides pynccl's communicator, whose warm-up may connect it before the snapshot: not counted.
LOGITS_ALLGATHER_TORCH_GROUP = ("0.10.0", "0.25.0")
#: V0 gathers the logits to the driver with ``torch.distributed.gather`` over the TP device group
#: (logits_processor.py ``_gather_logits``, parallel_state.py ``GroupCoordinator.gather``, read
#: in 0.6.1, 0.7.3 and 0.8.4; ``use_all_gather`` only on TPU, with VLLM_USE_V1 or the external
#: launcher): NCCL P2P operations, whose connections (``nccl.gather_bytes``) the profile makes.
#: Only the last PP stage computes logits (worker/model_runner.py ``execute_model`` returns
#: before ``compute_logits`` unless ``get_pp_group().is_last_rank``, 0.8.3), so with PP > 1 the
#: gather's root is that stage's first TP rank — still the rank the cache is sized by.
V0_LOGITS_GATHER_P2P = True


def logits_allgather_torch_group(v: tuple[int, ...] | None) -> bool:
    """Whether a V1 release gathers its logits over torch's device-group communicator
    (``LOGITS_ALLGATHER_TORCH_GROUP``); False for an unknown release."""
    lo, hi = LOGITS_ALLGATHER_TORCH_GROUP
    return v is not None and _release(lo) <= v < _release(hi)
