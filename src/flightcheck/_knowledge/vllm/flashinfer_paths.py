"""vLLM's paths that need a FlashInfer API, and the helper that probes it.

vLLM decides whether FlashInfer has an API with the ``has_flashinfer_*`` helpers of
``vllm/utils/flashinfer.py``; which modules and names each helper requires is read per
release into the release atlas (``_knowledge/atlas.py``: ``flashinfer_probes``), and
which names each FlashInfer release has (``flashinfer_modules``). This module says which
command-line choice takes a path that needs a helper to be True.

Read in vLLM 0.33.0:

* ``--all2all-backend flashinfer_nvlink_two_sided`` (and its temporary alias
  ``flashinfer_all2allv``): ``vllm/distributed/device_communicators/cuda_communicator.py``
  creates ``FlashInferNVLinkTwoSidedManager`` (``all2all.py``), whose ``__init__`` asserts
  ``has_flashinfer_nvlink_two_sided()`` ("flashinfer all2all module not found"). It does
  so only when the EP group uses all2all: ``ParallelConfig.use_all2all``
  (``vllm/config/parallel.py``): ``data_parallel_size > 1``, or expert parallelism with
  ``prefill_context_parallel_size > 1`` (or sequence-parallel MoE, not judged here).
"""

from __future__ import annotations

#: the option whose value picks the path (vllm/config/parallel.py All2AllBackend)
ALL2ALL_DEST = "all2all_backend"
ALL2ALL_FLAG = "--all2all-backend"

#: (option dest, value) -> the helpers (any one the release has) whose False fails the start
PATHS: dict[tuple[str, str], tuple[str, ...]] = {
    (ALL2ALL_DEST, "flashinfer_nvlink_two_sided"): ("has_flashinfer_nvlink_two_sided", "has_flashinfer_all2all"),
    (ALL2ALL_DEST, "flashinfer_all2allv"): ("has_flashinfer_nvlink_two_sided", "has_flashinfer_all2all"),
}

#: the release these paths and their layout condition were read in
READ_IN = "0.33.0"
