"""Driver / CUDA / architecture compatibility tables and fix texts for the FC2xx checks.

Pure data and pure functions; the checks in :mod:`.gpu` decide with them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ._derive import code_runs_on, major_minor

if TYPE_CHECKING:
    from .._facts import Gpu

#: CUDA toolkit -> the Linux driver its GA installer ships (cuda_<ver>_<driver>_linux.run):
#: the driver that runs everything that toolkit builds, PTX included.
CUDA_DRIVER: dict[tuple[int, int], str] = {
    (11, 8): "520.61.05", (12, 0): "525.60.13", (12, 1): "530.30.02", (12, 2): "535.54.03",
    (12, 3): "545.23.06", (12, 4): "550.54.14", (12, 5): "555.42.02", (12, 6): "560.28.03",
    (12, 8): "570.86.10", (12, 9): "575.51.03", (13, 0): "580.65.06", (13, 1): "590.44.01",
}
#: Minor-version compatibility: a driver of at least this branch runs every CUDA of the major.
MAJOR_FLOOR: dict[int, str] = {11: "450.80.02", 12: "525.60.13", 13: "580.65.06"}
#: The first CUDA able to build for a GPU major (sm_X0 cubins run on every X.y GPU).
MAJOR_MIN_CUDA: dict[int, tuple[int, int]] = {7: (9, 0), 8: (11, 0), 9: (11, 8), 10: (12, 8), 11: (13, 0), 12: (12, 8)}
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


def gpu_label(g: Gpu) -> str:
    """'GPU 3 (NVIDIA B300 SXM6 AC, sm_103)'."""
    cc = g.compute_capability.replace(".", "") if g.compute_capability else "?"
    return f"GPU {g.index} ({g.name or 'unknown model'}, sm_{cc})"


def subject(gpus: Sequence[Gpu]) -> str:
    """'gpu:3' for one GPU, 'gpus:0-7' or 'gpus:0,2,5' for several."""
    idx = sorted(g.index for g in gpus if g.index is not None)
    if len(idx) == 1:
        return f"gpu:{idx[0]}"
    if idx and idx == list(range(idx[0], idx[-1] + 1)):
        return f"gpus:{idx[0]}-{idx[-1]}"
    return "gpus:" + ",".join(map(str, idx))


def driver_fix(error: str, in_container: bool) -> str:
    """What to run when NVML cannot be initialised, by NVML's error text."""
    e = error.lower()
    if "library not found" in e or "shared library" in e:
        if in_container:
            return ("start the container with the NVIDIA container toolkit: `docker run --gpus all ...` "
                    "(or --runtime=nvidia); Kubernetes: request nvidia.com/gpu through the NVIDIA device plugin or GPU operator")
        return ("install the NVIDIA data-center driver (CUDA repository: `sudo apt-get install -y cuda-drivers`; "
                "Ubuntu: `sudo ubuntu-drivers install --gpgpu`) and reboot; on NVSwitch systems add nvidia-fabricmanager "
                "of the same version. If it is installed, `ldconfig -p | grep libnvidia-ml` must list libnvidia-ml.so.1")
    if "not loaded" in e:
        return ("load the kernel module: `sudo modprobe nvidia`, then read `sudo dmesg | grep -iE 'nvrm|nvidia'` "
                "(an unsigned module under Secure Boot or a kernel upgrade without a DKMS rebuild are the usual causes)")
    if "mismatch" in e:
        return ("the driver was upgraded but the old kernel module is still loaded: reboot, or stop every GPU process and "
                "`sudo rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia && sudo modprobe nvidia`")
    if "permission" in e:
        return "this user cannot open /dev/nvidia*: check `ls -l /dev/nvidia*`, the user's groups, or the container's device list"
    if "did not answer" in e:
        return "a GPU or the driver is hung: `sudo dmesg | grep -i xid` names it; reset it (`sudo nvidia-smi -r -i N`) or reboot"
    return "run `nvidia-smi` and read `sudo dmesg | grep -iE 'nvrm|xid'` for the driver's own error"
