"""How tilelang finds the CUDA toolkit it compiles with, read from its own source as text
(tilelang 0.1.12, the version the vLLM 0.33 image installs, and 0.1.15 from PyPI).

* ``tilelang/env.py`` ``_find_cuda_home``: ``CUDA_HOME or CUDA_PATH`` (an empty CUDA_HOME
  falls through to CUDA_PATH); unset: the ``nvcc`` on PATH (its directory's parent; 0.1.15
  resolves symlinks when that prefix has no ``include/cuda_runtime.h``), then the ``nvcc`` file
  of the pip package ``nvidia-cuda-nvcc`` (``importlib.metadata.files``; installed without
  one: ``AssertionError: `nvidia-cuda-nvcc` installed but no `nvcc` found``), then
  ``/usr/local/cuda``, then ``/opt/nvidia/hpc_sdk/Linux_x86_64``. A result that does not
  exist becomes "" (no CUDA). Unlike FlashInfer (``jit/cpp_ext.py`` ``get_cuda_path``:
  CUDA_HOME/CUDA_PATH, ``which nvcc``, ``/usr/local/cuda``), pip's nvcc comes before
  ``/usr/local/cuda``: the two can compile with different toolkits.
* ``tilelang/contrib/nvcc.py`` ``get_nvcc_compiler``: ``<that home>/bin/nvcc``;
  ``find_cuda_path`` raises "Failed to automatically detect CUDA installation. Please set the
  CUDA_HOME environment variable manually" when the home is "".
* ``tilelang/cuda/execution_backend.py``: the ``auto`` execution backend on CUDA is the first
  available, ``tvm_ffi`` (device code compiled with that nvcc); ``TILELANG_EXECUTION_BACKEND``
  picks another (``nvrtc`` and ``cutedsl`` do not run nvcc).
"""

from __future__ import annotations

#: the pip distribution whose ``nvcc`` tilelang's third guess uses.
PIP_NVCC = "nvidia-cuda-nvcc"
DEFAULT_HOMES = ("/usr/local/cuda", "/opt/nvidia/hpc_sdk/Linux_x86_64")
#: from this release a PATH nvcc whose prefix lacks include/cuda_runtime.h (a pip shim) is
#: followed through its symlink (read in 0.1.15; 0.1.12 takes the prefix as it is; the
#: releases between were not read and are taken as 0.1.12).
RESOLVES_NVCC_SYMLINK_SINCE = "0.1.15"
EXECUTION_BACKEND = "TILELANG_EXECUTION_BACKEND"
#: execution backends that do not compile with nvcc.
NO_NVCC_BACKENDS = frozenset({"nvrtc", "cutedsl"})
NOT_FOUND = "Failed to automatically detect CUDA installation"
