"""What Triton's runtime reads from the host, read from Triton's own source (3.8.0, the
version torch 2.14 / vLLM 0.33 install; the same code since the ``knobs`` module, 3.4).

* ``triton/runtime/build.py`` ``_find_compiler("c")``: ``$CC`` used verbatim as argv[0]
  (a two-word ``CC="ccache gcc"`` is one file name that does not exist), else
  ``shutil.which("gcc")``, else ``shutil.which("clang")``; never ``cc``. Nothing found:
  ``RuntimeError: Failed to find C compiler``.
* ``triton/knobs.py`` ``env_nvidia_tool``: ``TRITON_PTXAS_PATH`` (archs < 100) and
  ``TRITON_PTXAS_BLACKWELL_PATH`` (archs >= 100, ``backends/nvidia/compiler.py``
  ``get_ptxas``) are tried before the bundled ``backends/nvidia/bin/ptxas``;
  ``NvidiaTool.from_path`` runs ``<path> --version`` and catches only CalledProcessError and
  FileNotFoundError, so a directory or a non-executable file raises PermissionError out of
  the first compile; a missing file falls back to the bundled one.
* ``triton/knobs.py`` ``cache_knobs``: ``TRITON_CACHE_DIR``, default
  ``$TRITON_HOME/.triton/cache`` with ``TRITON_HOME`` defaulting to ``~``.
* ``triton/backends/nvidia/driver.py`` ``libcuda_dirs``: ``TRITON_LIBCUDA_PATH``, else
  ``/sbin/ldconfig -p`` lines naming libcuda.so.1, else ``LD_LIBRARY_PATH`` entries holding
  it; none: ``AssertionError: libcuda.so cannot found!``.
"""

from __future__ import annotations

import os

#: the variables Triton's nvidia backend reads as tool paths, and the archs each serves.
PTXAS = "TRITON_PTXAS_PATH"
PTXAS_BLACKWELL = "TRITON_PTXAS_BLACKWELL_PATH"
CACHE_DIR = "TRITON_CACHE_DIR"
HOME_VAR = "TRITON_HOME"
LIBCUDA_PATH = "TRITON_LIBCUDA_PATH"
#: C compilers ``_find_compiler`` looks for on PATH when CC is unset, in its order.
C_COMPILERS = ("gcc", "clang")


def ptxas_var(cc_major: int) -> str:
    """The variable Triton's ``get_ptxas(arch)`` reads for a GPU of this major (arch >= 100:
    the Blackwell one)."""
    return PTXAS_BLACKWELL if cc_major >= 10 else PTXAS


def cache_dir(env: dict[str, str | None]) -> str | None:
    """The directory Triton caches compiled kernels in for this environment (None: HOME
    unknown)."""
    if env.get(CACHE_DIR):
        return env[CACHE_DIR]
    home = env.get(HOME_VAR) or env.get("HOME")
    return os.path.join(home, ".triton", "cache") if home else None
