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


def sm_arch(cc_major: int, cc_minor: int) -> str:
    """``sm_arch_from_capability`` (``backends/nvidia/compiler.py``): ``sm_103a`` for 10.3,
    ``sm_90a`` for 9.0, plain ``sm_89`` below 9.0."""
    cap = cc_major * 10 + cc_minor
    return f"sm_{cap}" + ("a" if cap >= 90 else "")


def ptx_version(release: str) -> str | None:
    """The PTX ISA version Triton emits for a ptxas of this CUDA release: ``ptx_get_version``
    capped at 9.0 by ``get_features`` (``backends/nvidia/compiler.py``): 12.8 -> 8.7, 13.x -> 9.0."""
    try:
        major, minor = (int(x) for x in release.split(".")[:2])
    except ValueError:
        return None
    if major == 12:
        v = 80 + minor - (1 if minor >= 6 else 0)
    elif major == 11:
        v = 70 + minor
    elif major >= 13:
        v = 90 + (major - 13) * 10 + minor
    else:
        return None
    v = min(90, v)
    return f"{v // 10}.{v % 10}"


def bundled_ptxas(triton_dir: str, cc_major: int) -> str:
    """Triton's own ptxas for a GPU of this major (``backends/nvidia/bin/ptxas[-blackwell]``)."""
    name = "ptxas-blackwell" if cc_major >= 10 else "ptxas"
    return os.path.join(triton_dir, "backends", "nvidia", "bin", name)


#: The smallest kernel worth assembling: what Triton hands ptxas, minus the work.
PTX_TEMPLATE = """\
.version {version}
.target {sm}
.address_size 64
.visible .entry flightcheck_k(.param .u64 p)
{{
  .reg .b64 %rd<2>;
  ld.param.u64 %rd1, [p];
  ret;
}}
"""


#: ``libcuda_dirs``: the ldconfig Triton runs (absolute; missing -> FileNotFoundError) and
#: the file it looks for.
LDCONFIG = "/sbin/ldconfig"
LIBCUDA = "libcuda.so.1"
#: where drivers put libcuda.so.1 (for the fix only; Triton never looks there itself).
LIBCUDA_DIRS = (
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/local/nvidia/lib64",
    "/usr/lib/wsl/lib",
)
