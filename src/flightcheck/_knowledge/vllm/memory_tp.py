"""vLLM's non-torch memory at TP >= 2 that lands after the worker's baseline snapshot (so inside
the KV budget), release by release, and the terms of the budget's [low, high] bound that the
launch's inputs do not decide.

What ``memory_profiling`` counts (vllm/utils/mem_utils.py, 0.19.0 and 0.33.0; vllm/utils/__init__.py
in 0.10.x): ``non_torch_increase`` is the growth of ``(total - free) - torch.cuda.memory_reserved()``
from the snapshot ``Worker.init_device`` takes (v1/worker/gpu_worker.py) to the end of the profile
run, so only memory allocated *outside* torch's caching allocator after that snapshot enters the
budget. Where each TP communicator's memory falls, read in the 0.10.1.1, 0.11.0, 0.19.0 and 0.33.0
wheels:

- **NCCL (pynccl) communicator** of the TP group (distributed/device_communicators/cuda_communicator.py
  ``CudaCommunicator.__init__``), made in ``init_worker_distributed_environment``: before the
  snapshot from 0.11.0 (inside the budget before it: ``memory.SNAPSHOT_AFTER_DISTRIBUTED_SINCE``).
  With cuMem on (NCCL's default, which vLLM stops overriding in 0.10.2: ``NCCL_CUMEM_OFF_UNTIL``)
  its ring / tree / NVLS connections are made when a collective first needs them — after the
  snapshot (``budget.bound_terms``' ``nccl_after_snapshot``; sizes in ``flightcheck._knowledge.nccl``).
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
  built, during the model load / first compile — after the snapshot, inside the budget.
- cuBLAS / cuBLASLt workspaces come from torch's allocator (torch memory, in the activation peak or
  the weights), not non-torch.
"""

from __future__ import annotations

from flightcheck._knowledge.vllm._versions import _release

MiB = 1 << 20

# ---- FlashInfer's all-reduce fusion workspace ------------------------------------------------
#
# vllm/config/vllm.py ``enable_allreduce_rms_fusion`` (0.19.0, 0.33.0): the optimization levels
# O2 / O3 (O2 the default, ``optimization_level``) turn ``PassConfig.fuse_allreduce_rms`` on when
# TP > 1, on CUDA, FlashInfer importable (``has_flashinfer``; flashinfer-python is a hard
# dependency of the 0.19.0 and 0.33.0 wheels — ``Requires-Dist: flashinfer-python==0.6.6`` /
# ``==0.7.2.post1`` — an extra in 0.11.0), compute capability 9.0 or the 10.x family, and in
# 0.19.0 DP 1 and PP 1. O0 (``--enforce-eager``'s compilation mode NONE) runs no pass. 0.11.0 has
# ``enable_fi_allreduce_fusion: bool = False`` (config/compilation.py), off unless asked; the
# releases 0.12 - 0.18 were not read (their rule is unknown: the bound spans both).
#
# compilation/passes/fusion/allreduce_rms_fusion.py ``AllReduceFusionPass.__init__`` (0.19.0):
# ``max_token_num = min(flashinfer_max_size(tp) // (hidden x dtype bytes), max_num_batched_tokens)``
# with ``flashinfer_max_size`` (config/compilation.py) from the pass module's
# ``FI_ALLREDUCE_FUSION_MAX_SIZE_MB`` (below), then ``get_fi_ar_workspace``
# (distributed/device_communicators/flashinfer_all_reduce.py;
# backend "trtllm" on one node, ``_resolve_fi_ar_backend``) ->
# flashinfer/comm/trtllm_ar.py ``trtllm_create_ipc_workspace_for_all_reduce_fusion``: three
# buffers per rank — ``tp x tokens x hidden x 2`` (the data), ``tp x BarrierFlagCount x 4`` (flags)
# and three Lamport copies of ``tp x tokens x hidden x 2`` — each a ``SymmDeviceMemory``
# (flashinfer/comm/mnnvl.py) allocated with ``cuMemCreate`` outside torch's allocator. The quant
# workspace reuses it (same "trtllm" backend).
#
# How each buffer is rounded, by the FlashInfer the release pins:
# - 0.6.6 (vLLM 0.19.0): ``SymmDeviceMemory`` needs CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED (else it
#   raises, ``_create_workspace`` returns None and the fusion is off: no workspace) and rounds every
#   buffer up to ``cuMulticastGetGranularity(..., CU_MULTICAST_GRANULARITY_RECOMMENDED)`` even with
#   ``enable_multicast=False``. That granularity is the driver's, not in the code: 2 MiB at the
#   least (the allocation granularity it starts from); ``MC_GRANULARITY_INFERRED`` (512 MiB) is
#   what the public 8 x H100 0.19 breakdowns imply (about 1.85 GiB more non-torch at TP 2 and 4
#   than at TP 1, whatever the model: three buffers of 512 MiB plus NCCL's lazy connections).
# - 0.7.2.post1 (vLLM 0.33.0): rounds to the allocation granularity (2 MiB) only; the multicast
#   rounding is under ``if self._enable_multicast`` (False here), and the buffers need no
#   multicast support.
#: the releases whose ``PyNcclCommunicator.__init__`` was read to run the warmup all-reduce at
#: init (see above); the bound does not narrow on it (the tuner's choice is not derived)
PYNCCL_WARMUP_AT_INIT = ("0.10.1.1", "0.11.0", "0.19.0", "0.33.0")
FI_FUSION_DEFAULT_ON = {"0.11.0": False, "0.19.0": True, "0.33.0": True}  # releases read
#: the first and last release of the span whose rule was not read (the bound spans both sides)
FI_FUSION_UNREAD = ("0.12.0", "0.19.0")
#: compilation/passes/fusion/allreduce_rms_fusion.py ``FI_ALLREDUCE_FUSION_MAX_SIZE_MB`` (what
#: config/compilation.py ``flashinfer_max_size`` reads, keyed by ``capability.to_int()``: a
#: capability without an entry runs no fusion): MiB by compute capability and TP, by release read
FI_FUSION_MAX_SIZE_MB: dict[str, dict[int, dict[int, float]]] = {
    "0.19.0": {90: {2: 64, 4: 2, 8: 0.5}, 100: {2: 64, 4: 32, 8: 1}, 103: {2: 64, 4: 64, 8: 2}},
    "0.33.0": {
        90: {2: 64, 4: 2, 8: 0.5},
        100: {2: 64, 4: 32, 8: 1, 16: 64},
        103: {2: 64, 4: 64, 8: 4, 16: 64},
        107: {2: 64, 4: 64, 8: 2},
    },
}
#: 0.19.0's ``enable_allreduce_rms_fusion`` also needs DP 1 and PP 1 (vLLM issues 34458, 35426);
#: 0.33.0's does not
FI_FUSION_DP_PP_ANY_SINCE = "0.33.0"
#: the FlashInfer each release pins (the wheel's metadata) and whether it rounds the workspace's
#: buffers to the multicast granularity (see above)
FI_MULTICAST_ROUNDING_UNTIL = "0.20.0"  # 0.19.0 pins 0.6.6 (rounds), 0.33.0 pins 0.7.2.post1 (not)
#: flashinfer/comm/trtllm_ar.py ``BarrierFlagCount``
FI_BARRIER_FLAGS = 256
#: flashinfer/comm/mnnvl.py ``SIGNAL_PAD_SIZE`` (0.6.6, 0.7.2.post1): ``SymmDeviceMemory`` sizes each
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


def fusion_rule(v: tuple[int, ...] | None) -> bool | None:
    """Whether this release turns the all-reduce fusion on by default where it can (None: the
    rule is not known — an unknown release, or one of the releases not read)."""
    if v is None:
        return None
    lo, hi = FI_FUSION_UNREAD
    if _release(lo) <= v < _release(hi):
        return None
    return v >= _release(hi)


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
) -> tuple[int, int, int]:
    """(low, point, high) bytes of FlashInfer's all-reduce fusion workspace on one rank, inside
    the KV budget (see above). 0 where the pass does not run; where the inputs leave it open
    (the release's rule unknown, multicast support unknown, the driver's granularity) low and
    high span the cases."""
    new = v is None or v >= _release(FI_FUSION_DP_PP_ANY_SINCE)
    if tp <= 1 or eager or (not new and (pp != 1 or dp != 1)):
        return 0, 0, 0
    table = FI_FUSION_MAX_SIZE_MB["0.33.0" if new else "0.19.0"]
    key = _cc_key(compute_capability)
    if key not in table:
        return 0, 0, 0
    max_mb = table[key].get(tp)
    if max_mb is None or not hidden:
        return 0, 0, 0
    tokens = min(int(max_mb * MiB) // (hidden * dtype_bytes), batched_tokens)
    data = tp * tokens * hidden * 2
    sizes = (data, tp * FI_BARRIER_FLAGS * 4, 3 * data)
    small = sum(_round(s + FI_SIGNAL_PAD, ALLOC_GRANULARITY) for s in sizes)
    rule = fusion_rule(v)
    rounding = v is None or v < _release(FI_MULTICAST_ROUNDING_UNTIL)
    if rounding:
        # 0.6.6: no workspace without multicast; with it, rounded to the driver's granularity
        big = sum(_round(_round(s + FI_SIGNAL_PAD, ALLOC_GRANULARITY), MC_GRANULARITY_INFERRED) for s in sizes)
        point = big if multicast is not False else 0
        low = 0 if multicast is not True else small
        high = big if multicast is not False else 0
    else:
        point = low = high = small
    if rule is None:
        # the release's default is not known (not read, or no release): the point keeps the
        # rule of the releases before the fusion (off), the bound reaches the workspace
        return 0, 0, max(high, small)
    if not rule:
        return 0, 0, 0
    return low, point, high
