"""Driver / CUDA / architecture compatibility tables.

Pure data and pure functions; the FC2xx checks decide with them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from flightcheck._knowledge.gpus import code_runs_on
from flightcheck._knowledge.units import major_minor

#: CUDA toolkit -> the Linux driver its GA installer ships (cuda_<ver>_<driver>_linux.run):
#: the driver that runs everything that toolkit builds, PTX included.
CUDA_DRIVER: dict[tuple[int, int], str] = {
    (11, 8): "520.61.05",
    (12, 0): "525.60.13",
    (12, 1): "530.30.02",
    (12, 2): "535.54.03",
    (12, 3): "545.23.06",
    (12, 4): "550.54.14",
    (12, 5): "555.42.02",
    (12, 6): "560.28.03",
    (12, 8): "570.86.10",
    (12, 9): "575.51.03",
    (13, 0): "580.65.06",
    (13, 1): "590.44.01",
}


#: Minor-version compatibility: a driver of at least this branch runs every CUDA of the major.
MAJOR_FLOOR: dict[int, str] = {11: "450.80.02", 12: "525.60.13", 13: "580.65.06"}


#: The first CUDA able to build for a GPU major (sm_X0 cubins run on every X.y GPU).
MAJOR_MIN_CUDA: dict[int, tuple[int, int]] = {7: (9, 0), 8: (11, 0), 9: (11, 8), 10: (12, 8), 11: (13, 0), 12: (12, 8)}


#: PTX ISA version -> the first CUDA release that emits it, whose driver is the oldest whose
#: JIT accepts it: an older driver refuses the PTX with CUDA_ERROR_UNSUPPORTED_PTX_VERSION
#: (222). NVIDIA's PTX ISA release history
#: (docs.nvidia.com/cuda/parallel-thread-execution/#release-notes, read at PTX ISA 9.1), the
#: table cuda-python's ``cuda/bindings/utils/_ptx_utils.py`` (13.x) carries. CUDA 12.6
#: emits 8.5 and 12.7 emits 8.6; nvcc 13.0 (V13.0.88) emits ``.version 9.0`` (checked here).
PTX_ISA_CUDA: dict[tuple[int, int], tuple[int, int]] = {
    (7, 0): (11, 0),
    (7, 1): (11, 1),
    (7, 2): (11, 2),
    (7, 3): (11, 3),
    (7, 4): (11, 4),
    (7, 5): (11, 5),
    (7, 6): (11, 6),
    (7, 7): (11, 7),
    (7, 8): (11, 8),
    (8, 0): (12, 0),
    (8, 1): (12, 1),
    (8, 2): (12, 2),
    (8, 3): (12, 3),
    (8, 4): (12, 4),
    (8, 5): (12, 5),
    (8, 6): (12, 7),
    (8, 7): (12, 8),
    (8, 8): (12, 9),
    (9, 0): (13, 0),
    (9, 1): (13, 1),
}


def ptx_needs_cuda(isa: tuple[int, int]) -> tuple[tuple[int, int], bool]:
    """What a driver must support to JIT PTX of ISA ``isa``: ``(cuda, True)``, a driver of
    at least CUDA ``cuda`` (:data:`PTX_ISA_CUDA`); or ``(cuda, False)`` for an ISA the table
    does not list (newer than its newest, or between two entries), a driver of a CUDA
    *newer than* ``cuda``: a driver accepts the ISAs up to its own CUDA's, so one of CUDA
    ``cuda`` or older refuses it for certain, and past that it is extrapolation. An ISA
    older than the table's (before CUDA 11) needs ``(0, 0)``: any driver."""
    if isa in PTX_ISA_CUDA:
        return PTX_ISA_CUDA[isa], True
    older = [k for k in PTX_ISA_CUDA if k < isa]
    if not older:
        return (0, 0), True
    return PTX_ISA_CUDA[max(older)], False


def ptx_accepted(isa: tuple[int, int], driver_cuda: tuple[int, int]) -> bool | None:
    """Whether a driver of CUDA ``driver_cuda`` JIT-compiles PTX of ISA ``isa`` (a driver
    accepts the ISAs up to its own CUDA's): None where the table cannot tell (an unlisted
    ISA on a driver newer than every listed ISA below it and older than any listed above)."""
    if isa in PTX_ISA_CUDA:
        return driver_cuda >= PTX_ISA_CUDA[isa]
    below = [k for k in PTX_ISA_CUDA if k < isa]
    above = [k for k in PTX_ISA_CUDA if k > isa]
    if not below:
        return True
    if driver_cuda <= PTX_ISA_CUDA[max(below)]:
        return False
    if above and driver_cuda >= PTX_ISA_CUDA[min(above)]:
        return True
    return None


#: PyTorch wheel index tag for a CUDA runtime.
TORCH_INDEX = "https://download.pytorch.org/whl/cu{0}{1}"


_ARCH = re.compile(r"^(sm|compute)_(\d+)(\d)([af]?)$")


def driver_for(cuda: tuple[int, int]) -> str | None:
    """The driver a CUDA (major, minor) ships with; the next listed one when unlisted."""
    if cuda in CUDA_DRIVER:
        return CUDA_DRIVER[cuda]
    later = sorted(k for k in CUDA_DRIVER if k > cuda)
    return CUDA_DRIVER[later[0]] if later else None


def runs_on(cc: str, arch_list: Sequence[str]) -> str | None:
    """The torch arch-list entry (``sm_100``, ``compute_90``) whose code runs on a GPU of
    compute capability ``cc`` (:func:`code_runs_on`), or None."""
    mm = major_minor(cc)
    if mm is None:
        return None
    for entry in arch_list:
        m = _ARCH.match(entry.strip())
        if m and code_runs_on((int(m.group(2)), int(m.group(3)), m.group(4), m.group(1) == "compute"), mm):
            return entry
    return None


def torch_cuda_can_build(cc: str, torch_cuda: tuple[int, int]) -> bool | None:
    """Whether a torch built with ``torch_cuda`` can contain kernels for ``cc`` at all."""
    try:
        major, minor = (int(p) for p in cc.split("."))
    except ValueError:
        return None
    if torch_cuda[0] >= 13 and (major, minor) < (7, 5):
        return False  # CUDA 13 dropped Maxwell, Pascal and Volta
    need = MAJOR_MIN_CUDA.get(major)
    return None if need is None else torch_cuda >= need


# ---- nvcc's host-compiler bounds (``$CUDA_HOME/include/crt/host_config.h``) ----------------

#: nvcc flags that lift the host-compiler bound, and the variables nvcc reads extra flags from.
ALLOW_UNSUPPORTED = "-allow-unsupported-compiler"
NVCC_FLAG_VARS = ("NVCC_APPEND_FLAGS", "NVCC_PREPEND_FLAGS")


def host_compiler_bounds(text: str) -> dict[str, int]:
    """``crt/host_config.h`` as text -> ``{"gcc_max": 15, "clang_below": 21}``: the newest
    GCC major nvcc accepts (``#if __GNUC__ > 15`` ... ``#error -- unsupported GNU version!``)
    and the first clang major it rejects (``#if (__clang_major__ >= 21) ...``), as the
    header of the installed toolkit spells them (13.0: gcc <= 15, clang < 21)."""
    out: dict[str, int] = {}
    gcc = re.search(r"#if\s+__GNUC__\s*>\s*(\d+)", text)
    if gcc:
        out["gcc_max"] = int(gcc.group(1))
    clang = re.findall(r"__clang_major__\s*>=\s*(\d+)\)", text)
    if clang:
        out["clang_below"] = max(int(c) for c in clang)
    return out
