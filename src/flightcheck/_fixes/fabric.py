"""Fix texts for the fabric and multicast checks: the reset sequence and per-error hints.

Kept apart from the checks so ``flightcheck probe multicast`` prints the same advice as
FC304. Every text is something a person can paste on the node.
"""

from __future__ import annotations

from typing import Any

#: The NVIDIA fabric manager guide's procedure (H100 and later) for a fabric that came up
#: wrong: the GPUs must be reset while the fabric manager is stopped. Restarting the fabric
#: manager alone leaves stale NVSwitch state behind (NCCL #1488, gpu-driver-container #909).
RESET_STEPS = (
    (
        "stop every CUDA process on the node (the engine, notebooks, monitoring agents); "
        "`sudo fuser -v /dev/nvidia*` lists them"
    ),
    "sudo systemctl stop nvidia-dcgm dcgm 2>/dev/null  # DCGM holds the GPUs",
    "sudo systemctl stop nvidia-fabricmanager",
    "sudo nvidia-smi -r  # resets every GPU; it refuses while a process still uses one",
    "sudo systemctl start nvidia-fabricmanager",
    "nvidia-smi -q | grep -A 3 -i '^ *fabric'  # wait for State: Completed, Status: Success",
)


def reset_sequence(*, virtualized: bool = False, container: bool = False, nvl72: bool = False) -> str:
    """The numbered reset sequence, with the caveats that apply to this host."""
    lines = [f"{i}. {step}" for i, step in enumerate(RESET_STEPS, 1)]
    notes = ["(validated on bare metal)"]
    if container:
        notes.append("run these on the host, not inside the container")
    if virtualized:
        notes.append("in a VM the GPUs and NVSwitches are reset from the hypervisor: ask its operator")
    if nvl72:
        notes.append("on GB200/GB300 NVL72 the fabric manager runs on the NVLink switch trays, not this node")
    return "\n".join(lines + [" ".join(notes)])


#: CUDA error -> what it means for multicast and what to do first.
ERROR_HINTS: dict[int, str] = {
    401: (
        "CUDA_ERROR_ILLEGAL_STATE: the NVSwitch multicast state is not initialised although the fabric "
        "may report Completed (typical after a warm reboot or a fabric manager restart without a GPU reset)"
    ),
    802: (
        "CUDA_ERROR_SYSTEM_NOT_READY: the fabric manager (and on HGX B200/B300 the NVLink subnet manager "
        "nvlsm) is not running or not done: "
        "`systemctl status nvidia-fabricmanager`, `journalctl -u nvidia-fabricmanager -n 50`"
    ),
    919: "CUDA_ERROR_FABRIC_NOT_READY: the fabric manager has not finished bringing up the fabric",
    800: (
        "CUDA_ERROR_NOT_PERMITTED: fabric handles need an IMEX channel: "
        "`ls /dev/nvidia-caps-imex-channels` (containers: NVIDIA_IMEX_CHANNELS=0)"
    ),
    47: (
        "CUDA_ERROR_MULTICAST_RESOURCE_FULL: the NVSwitch multicast slots are used up, usually by processes "
        "that still hold multicast objects (another engine?): stop them; if none remain, reset"
    ),
    101: (
        "CUDA_ERROR_INVALID_DEVICE at add_device: the GPUs are not in one NVLink clique "
        "(`nvidia-smi -q | grep -i clique`)"
    ),
    2: "CUDA_ERROR_OUT_OF_MEMORY: the GPUs are full (see FC206) or the switch has no room for the team",
    1: "CUDA_ERROR_INVALID_VALUE: older drivers report a bad fabric state this way (NCCL #1488)",
}


def probe_hint(probe: dict[str, Any] | Any, **host: bool) -> str:
    """What to do about a failed probe: the error's meaning, then the reset sequence."""
    get = probe.get if isinstance(probe, dict) else (lambda k: getattr(probe, k, None))
    code, stage = get("cuda_error"), get("stage")
    if stage == "timeout":
        first = (
            f"the probe hung ({get('detail')}): a bind that never returns is how a broken NVSwitch "
            "multicast team shows; reset the fabric"
        )
    elif stage == "attribute" and code is None:
        first = (
            f"multicast is unavailable on these GPUs ({get('detail')}): nothing to reset; "
            "the fallback plan keeps the engine off the multicast paths"
        )
        return first
    else:
        fallback = f"{get('cuda_error_name') or get('detail')}: reset the fabric"
        first = ERROR_HINTS.get(code, fallback) if code is not None else fallback
    return first + "\nTo restore multicast:\n" + reset_sequence(**host)


def fabric_manager_install(driver_version: str) -> str:
    """How to install the fabric manager of the driver's exact version (Ubuntu, and RHEL)."""
    branch = driver_version.split(".")[0]
    return (
        f"sudo apt-get install nvidia-fabricmanager-{branch}={driver_version}-*  "
        f"(RHEL: `sudo dnf install nvidia-fabric-manager-{driver_version}`; HGX B200/B300 also need nvlsm)"
    )


def imex_channel(service: str | None, driver_version: str | None) -> str:
    """Create IMEX channel 0 and make the IMEX service run (installed for the driver's branch
    when it is missing); containers get the channel from the runtime instead."""
    lines = [
        "major=$(awk '$2==\"nvidia-caps-imex-channels\" {print $1}' /proc/devices)",
        "sudo mkdir -p /dev/nvidia-caps-imex-channels && sudo mknod /dev/nvidia-caps-imex-channels/channel0 c $major 0",
    ]
    if service == "not-installed":
        branch = (driver_version or "").split(".")[0] or "<driver branch>"
        lines.append(
            f"sudo apt-get install -y nvidia-imex-{branch} && sudo systemctl enable --now nvidia-imex"
            "   # the IMEX package of the node's driver branch; /etc/nvidia-imex/nodes_config.cfg lists every node's IP"
        )
    elif service == "active":
        lines.append("sudo systemctl restart nvidia-imex  # it picks up the new channel")
    else:
        lines.append(
            "sudo systemctl enable --now nvidia-imex && sudo systemctl restart nvidia-imex"
            "  # /etc/nvidia-imex/nodes_config.cfg lists every node's IP"
        )
    lines.append("containers: NVIDIA_IMEX_CHANNELS=0 (or the CDI device nvidia.com/imex-channel=0)")
    return "\n".join(lines)
