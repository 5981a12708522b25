"""torch's cuBLAS and cuBLASLt workspaces: device memory from torch's caching allocator that
the first matrix multiply on a stream allocates and keeps.

Read in aten/src/ATen/cuda/CublasHandlePool.cpp (pytorch/pytorch, the version with
``c10::utils::get_env`` and ``TORCH_CUBLASLT_UNIFIED_WORKSPACE``; torch 2.14.0's
libtorch_cuda.so, the torch vLLM 0.33.0 pins, carries the same warnings: "Could not parse
CUBLAS_WORKSPACE_CONFIG", "invalid CUBLASLT_WORKSPACE_SIZE", the unified-workspace one):

- ``getCurrentCUDABlasHandle`` calls ``setWorkspaceForHandle``, which allocates one workspace a
  (handle, stream) through ``CUDACachingAllocator`` and keeps it in
  ``cublas_handle_stream_to_workspace``: ``parseChosenWorkspaceSize`` —
  ``CUBLAS_WORKSPACE_CONFIG``'s ``:SIZE:COUNT`` pairs (KiB x count, summed), else
  4096 KiB x 8 = 32 MiB on compute capability exactly 9.0 ("32MiB for Hopper") and
  4096 KiB x 2 + 16 KiB x 8 (8.125 MiB) on every other GPU.
- ``getCUDABlasLtWorkspace`` keeps a second one (``cublaslt_handle_stream_to_workspace``)
  unless ``TORCH_CUBLASLT_UNIFIED_WORKSPACE`` is set true: ``CUBLASLT_WORKSPACE_SIZE`` KiB,
  default 1024 (1 MiB), capped at the cuBLAS workspace's size.

vLLM takes its baseline before any matrix multiply and weighs the model by the memory it
loads, so both workspaces appear first in the profile run and stay: they are part of the
"torch peak memory increase" it logs (the 0.19.0 sweep on H100: 33 MiB of the logged peak
that the sampler and forward pass do not hold). One stream is counted.

Which torch releases: the source above is one recent version (its commit is not in the index:
it uses ``c10::utils::get_env``); 2.14.0 is checked by its strings (the conformance suite). The torch
pins of vLLM 0.6 - 0.9 (2.4 - 2.7: ``vllm.TORCH_PINS``) are not read — the same sizes are
applied to them as an extrapolation; the breakdowns of 0.19.0, 0.11.0 and 0.7.x points 114 and
117 - 120 fit them to within 0.01 GiB (tests/fixtures/memory).
"""

from __future__ import annotations

import re

KiB = 1 << 10
#: parseChosenWorkspaceSize's defaults: ":4096:8" on cc 9.0, ":4096:2:16:8" elsewhere
CUBLAS_DEFAULT_SM90 = 4096 * KiB * 8
CUBLAS_DEFAULT = 4096 * KiB * 2 + 16 * KiB * 8
#: parseCUDABlasLtWorkspaceSize's default, KiB ("default size in KiB according to #73328")
CUBLASLT_DEFAULT_KIB = 1024

_PAIR = re.compile(r":([0-9]+):([0-9]+)")


def cublas_workspace_bytes(compute_capability: str | None, env: dict[str, str | None] | None = None) -> int:
    """The cuBLAS workspace one stream's handle keeps (see above); an unparsable
    ``CUBLAS_WORKSPACE_CONFIG`` falls back to the default, as torch does."""
    default = CUBLAS_DEFAULT_SM90 if (compute_capability or "").strip() == "9.0" else CUBLAS_DEFAULT
    val = (env or {}).get("CUBLAS_WORKSPACE_CONFIG")
    if not val:
        return default
    pairs = _PAIR.findall(val)
    if not pairs:
        return default
    return sum(int(size) * KiB * int(count) for size, count in pairs)


def _true(val: str | None) -> bool:
    # c10::utils::check_env (c10/util/env.cpp): "1" is true, "0" false, anything else ignored
    return val == "1"


def blas_workspaces_bytes(compute_capability: str | None, env: dict[str, str | None] | None = None) -> int:
    """Both workspaces the first GPU matrix multiply leaves allocated on one stream: cuBLAS's
    and, unless unified, cuBLASLt's (capped at cuBLAS's size)."""
    cublas = cublas_workspace_bytes(compute_capability, env)
    e = env or {}
    if _true(e.get("TORCH_CUBLASLT_UNIFIED_WORKSPACE")):
        return cublas
    # std::stoi: leading digits (after blanks, an optional sign) parse, anything else keeps the default
    m = re.match(r"\s*\+?([0-9]+)", e.get("CUBLASLT_WORKSPACE_SIZE") or "")
    kib = int(m.group(1)) if m else CUBLASLT_DEFAULT_KIB
    return cublas + min(kib * KiB, cublas)
