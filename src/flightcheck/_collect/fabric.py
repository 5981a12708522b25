"""Fabric manager, IMEX and NVSwitch detection from the host side (no NVML, no CUDA).

Command line equivalents: ``systemctl is-active nvidia-fabricmanager``,
``nv-fabricmanager --version``, ``ls /dev/nvidia-caps-imex-channels``,
``ls /proc/driver/nvidia-nvswitch/devices``. The NVML collector (:mod:`.nvml`) combines
these with what the GPUs report (NVLink remote device type, fabric state) into the
``fabric_manager`` and ``imex`` sections; this module only reads, it decides nothing.

Every path is taken under ``root`` so tests run the real code against a fake tree.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

from flightcheck._collect.proc import run

FM_UNIT, FM_BINARY = "nvidia-fabricmanager", "nv-fabricmanager"
FM_PIDFILE = "var/run/nvidia-fabricmanager/nv-fabricmanager.pid"
IMEX_UNIT, IMEX_BINARY = "nvidia-imex", "nvidia-imex"
IMEX_CHANNELS = "dev/nvidia-caps-imex-channels"
NVSWITCH_PROC = "proc/driver/nvidia-nvswitch/devices"
#: systemd ActiveState -> the facts vocabulary.
_ACTIVE = {
    "active": "active",
    "reloading": "active",
    "activating": "inactive",
    "deactivating": "inactive",
    "inactive": "inactive",
    "failed": "failed",
}
_VERSION = re.compile(r"(\d+\.\d+(?:\.\d+)?)")


def _systemd_state(unit: str, timeout: float) -> str | None:
    """The unit's state per systemd, or None when systemd cannot be asked (containers)."""
    if shutil.which("systemctl") is None:
        return None
    proc = run(["systemctl", "show", unit, "-p", "LoadState", "-p", "ActiveState", "--no-pager"], timeout=timeout)
    if not proc.ok:
        return None  # "System has not been booted with systemd" and friends
    props = dict(line.split("=", 1) for line in proc.out.splitlines() if "=" in line)
    if props.get("LoadState") == "not-found":
        return "not-installed"
    return _ACTIVE.get(props.get("ActiveState", ""), None)


def _process_running(root: Path, comm: str) -> bool:
    """A process named ``comm`` in /proc (sees the host's only when sharing its PID namespace)."""
    try:
        entries = os.listdir(root / "proc")
    except OSError:
        return False
    for pid in entries:
        if not pid.isdigit():
            continue
        try:
            if (root / "proc" / pid / "comm").read_text().strip() == comm:
                return True
        except OSError:
            continue
    return False


def _pidfile_alive(root: Path, rel: str) -> bool | None:
    try:
        pid = (root / rel).read_text().strip()
    except OSError:
        return None
    return pid.isdigit() and (root / "proc" / pid).exists()


def _binary(root: Path, name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for d in ("usr/bin", "usr/sbin", "usr/local/bin"):
        if (root / d / name).is_file():
            return str(root / d / name)
    return None


def service_state(
    root: Path, unit: str, binary: str, pidfile: str | None, in_container: bool, timeout: float = 2.0
) -> tuple[str, str]:
    """(active | inactive | failed | not-installed | unknown, how it was learnt)."""
    state = _systemd_state(unit, timeout)
    if state is not None:
        return state, "systemctl"
    if _process_running(root, binary):
        return "active", "process list"
    alive = _pidfile_alive(root, pidfile) if pidfile else None
    if alive:
        return "active", "pid file"
    if _binary(root, binary) is not None or alive is False:
        return "inactive", "binary present, not running"
    # inside a container the service lives on the host, out of sight
    return (
        ("unknown", "container: the host's services are not visible")
        if in_container
        else ("not-installed", "no unit, binary or process")
    )


def fabric_manager_version(root: Path, timeout: float = 2.0) -> tuple[str | None, str | None]:
    """(version, why-unavailable) from ``nv-fabricmanager --version`` or the package manager."""
    exe = _binary(root, FM_BINARY)
    if exe:
        proc = run([exe, "--version"], timeout=timeout)
        m = _VERSION.search(proc.out + proc.err)
        if proc.ok and m:
            return m.group(1), None
    if shutil.which("dpkg-query"):
        proc = run(["dpkg-query", "-W", "-f", "${Package} ${Version}\\n", "nvidia-fabricmanager*"], timeout=timeout)
        for line in proc.out.splitlines():
            name, _, ver = line.partition(" ")
            if name.startswith("nvidia-fabricmanager") and ver and "dev" not in name:
                return _debian_upstream(ver), None
    if shutil.which("rpm"):
        proc = run(["rpm", "-qa", "--qf", "%{NAME} %{VERSION}\\n", "nvidia-fabric*manager*"], timeout=timeout)
        for line in proc.out.splitlines():
            name, _, ver = line.partition(" ")
            if "fabric" in name and ver and "devel" not in name:
                return ver.strip(), None
    return None, "no nv-fabricmanager binary or fabric manager package found"


def _debian_upstream(ver: str) -> str:
    """'1:590.44.01-1ubuntu1' -> '590.44.01'."""
    ver = ver.split(":", 1)[-1]
    return ver.rsplit("-", 1)[0] if "-" in ver else ver


def imex_channels(root: Path) -> list[str] | None:
    """Channel device names under /dev/nvidia-caps-imex-channels ([] when the directory is absent)."""
    d = root / IMEX_CHANNELS
    if not d.exists():
        return []
    try:
        return sorted(n for n in os.listdir(d) if n.startswith("channel"))
    except OSError:
        return None


def host_nvswitch_evidence(root: Path) -> list[str]:
    """NVSwitches the host itself shows: the nvswitch driver's devices (A100/H100/H200 HGX),
    or, on HGX B200/B300 where the switches hide behind a ConnectX-7 bridge, a Mellanox
    function whose VPD carries ``SW_MNG`` (the test nvidia-fabricmanager-start.sh uses)."""
    found: list[str] = []
    try:
        n = len(os.listdir(root / NVSWITCH_PROC))
        if n:
            found.append(f"{n} NVSwitch device(s) in /{NVSWITCH_PROC}")
    except OSError:
        pass
    pci = root / "sys/bus/pci/devices"
    try:
        devices = sorted(os.listdir(pci))
    except OSError:
        devices = []
    for dev in devices:
        try:
            if (pci / dev / "vendor").read_text().strip() != "0x15b3":
                continue
            with open(pci / dev / "vpd", "rb") as fh:  # root-only on most kernels
                if b"SW_MNG" in fh.read(4096):
                    found.append(f"NVSwitch management bridge (CX7, VPD SW_MNG) at {dev}")
                    break
        except OSError:
            continue
    return found


def collect_host_side(root: Path, in_container: bool) -> dict[str, Any]:
    """Service states, version, IMEX channels and host NVSwitch evidence, with reasons."""
    unavailable: dict[str, str] = {}
    fm_state, fm_how = service_state(root, FM_UNIT, FM_BINARY, FM_PIDFILE, in_container)
    version, why = fabric_manager_version(root)
    if version is None:
        unavailable["fabric_manager.version"] = why or "unknown"
    imex_state, _ = service_state(root, IMEX_UNIT, IMEX_BINARY, None, in_container)
    channels = imex_channels(root)
    if channels is None:
        unavailable["imex.channels"] = f"/{IMEX_CHANNELS} is not readable"
    return {
        "fabric_manager": {"service": fm_state, "service_how": fm_how, "version": version},
        "imex": {"channels": channels, "service": imex_state},
        "evidence": host_nvswitch_evidence(root),
        "unavailable": unavailable,
    }
