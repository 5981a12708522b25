"""How humming (``humming-kernels``, vLLM 0.33's preferred mixed-precision / MoE kernels on
SM 9.0) finds NVRTC, read from its own source as text (humming-kernels 0.1.19).

* ``humming/jit/runtime.py`` ``_get_compiler``: ``HUMMING_COMPILER=nvcc|nvrtc`` decides;
  unset, NVRTC whenever ``from cuda.bindings import nvrtc`` imports (cuda-bindings
  installed), else nvcc.
* ``humming/utils/cuda.py`` ``find_all_cuda_paths``: the toolkits at ``/usr/local/cuda``,
  ``/usr/local/cuda-*`` (sorted), ``$CUDA_HOME``, ``$CUDA_PATH`` (directories, deduplicated
  by real path; version from version.json, version.txt, ``nvcc -V`` or the directory name),
  then for each ``sys.path`` entry's ``nvidia/`` a CUDA 12 pip root (when it holds
  ``cuda_runtime`` or ``cuda_nvcc``; includes ``nvidia/*/include``) and a CUDA 13 one
  (``nvidia/cu13`` with an ``include``).
* ``filter_cuda_paths(required_headers=["nvrtc.h"])``: the environments of
  ``torch.version.cuda``'s major with ``nvrtc.h`` in an include path, newest minor first;
  none: "No suitable CUDA <major> environment found. Try: pip install
  humming-kernels[cu<major>]".
* ``humming/utils/nvrtc.py`` ``_find_nvrtc_lib_dir``: in that one environment,
  ``libnvrtc.so`` or ``libnvrtc.so.*`` under ``lib64``, ``lib``, ``*/lib64``, ``*/lib``; none:
  "Could not locate the NVRTC library in CUDA path".
"""

from __future__ import annotations

from typing import Any

COMPILER_VAR = "HUMMING_COMPILER"
HEADER = "nvrtc.h"
LIB_SUBDIRS = ("lib64", "lib")
SYSTEM_ROOTS = ("/usr/local/cuda",)
SYSTEM_GLOB = "/usr/local/cuda-*"
NO_ENV = "No suitable CUDA {major} environment found. Try: pip install humming-kernels[cu{major}]"
NO_LIB = "Could not locate the NVRTC library in CUDA path"


def pick(envs: list[Any], major: int) -> Any | None:
    """The environment ``filter_cuda_paths`` returns for torch's CUDA ``major`` (``envs``
    are facts with ``major``, ``minor``, ``header``): same major, ``nvrtc.h`` present,
    newest minor first (unknown minors last, order otherwise kept)."""
    fit = [e for e in envs if e.major == major and e.header]
    fit.sort(key=lambda e: (e.minor is None, -(e.minor or 0)))
    return fit[0] if fit else None
