"""What to run when the NVIDIA driver cannot be reached, by NVML's own error text."""

from __future__ import annotations


def driver_fix(error: str, in_container: bool) -> str:
    """What to run when NVML cannot be initialised, by NVML's error text."""
    e = error.lower()
    if "library not found" in e or "shared library" in e:
        if in_container:
            return (
                "start the container with the NVIDIA container toolkit: `docker run --gpus all ...` "
                "(or --runtime=nvidia); Kubernetes: "
                "request nvidia.com/gpu through the NVIDIA device plugin or GPU operator"
            )
        return (
            "install the NVIDIA data-center driver (CUDA repository: `sudo apt-get install -y cuda-drivers`; "
            "Ubuntu: `sudo ubuntu-drivers install --gpgpu`) and reboot; on NVSwitch systems add nvidia-fabricmanager "
            "of the same version. If it is installed, `ldconfig -p | grep libnvidia-ml` must list libnvidia-ml.so.1"
        )
    if "not loaded" in e:
        return (
            "load the kernel module: `sudo modprobe nvidia`, then read `sudo dmesg | grep -iE 'nvrm|nvidia'` "
            "(an unsigned module under Secure Boot or a kernel upgrade without a DKMS rebuild are the usual causes)"
        )
    if "mismatch" in e:
        return (
            "the driver was upgraded but the old kernel module is still loaded: reboot, or stop every GPU process and "
            "`sudo rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia && sudo modprobe nvidia`"
        )
    if "permission" in e:
        return (
            "this user cannot open /dev/nvidia*: check `ls -l /dev/nvidia*`, "
            "the user's groups, or the container's device list"
        )
    if "did not answer" in e:
        return (
            "a GPU or the driver is hung: `sudo dmesg | grep -i xid` names it; "
            "reset it (`sudo nvidia-smi -r -i N`) or reboot"
        )
    return "run `nvidia-smi` and read `sudo dmesg | grep -iE 'nvrm|xid'` for the driver's own error"
