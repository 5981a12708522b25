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


def _systemd_props(unit: str, timeout: float) -> dict[str, str] | None:
    """The unit's load state, active state and when it last became active, per systemd; None
    when systemd cannot be asked (containers). One ``systemctl show`` in a child with a
    timeout: a wedged D-Bus costs ``timeout``, never a hang."""
    if shutil.which("systemctl") is None:
        return None
    proc = run(
        ["systemctl", "show", unit, "-p", "LoadState", "-p", "ActiveState", "-p", "ActiveEnterTimestampMonotonic"]
        + ["--no-pager"],
        timeout=timeout,
    )
    if not proc.ok:
        return None  # "System has not been booted with systemd" and friends
    return dict(line.split("=", 1) for line in proc.out.splitlines() if "=" in line)


_ASK: dict[str, str] = {}  # "ask systemd now" (an already-read answer may be passed instead)


def _systemd_state(unit: str, timeout: float, props: dict[str, str] | None = _ASK) -> str | None:
    """The unit's state per systemd, or None when systemd cannot be asked (containers)."""
    if props is _ASK:
        props = _systemd_props(unit, timeout)
    if props is None:
        return None
    if props.get("LoadState") == "not-found":
        return "not-installed"
    return _ACTIVE.get(props.get("ActiveState", ""), None)


def _find_process(root: Path, comm: str) -> str | None:
    """The pid of a process named ``comm`` in /proc (sees the host's only when sharing its
    PID namespace), or None."""
    try:
        entries = os.listdir(root / "proc")
    except OSError:
        return None
    for pid in entries:
        if not pid.isdigit():
            continue
        try:
            if (root / "proc" / pid / "comm").read_text().strip() == comm:
                return pid
        except OSError:
            continue
    return None


def _process_running(root: Path, comm: str) -> bool:
    """A process named ``comm`` in /proc (sees the host's only when sharing its PID namespace)."""
    return _find_process(root, comm) is not None


def _start_ticks(root: Path, pid: str) -> int | None:
    """Field 22 of /proc/<pid>/stat: the process's start, in clock ticks after boot (the
    fields are counted after the command name, which may hold spaces and parentheses)."""
    try:
        text = (root / "proc" / pid / "stat").read_text()
        return int(text.rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def fabric_manager_started(
    root: Path, in_container: bool, timeout: float = 2.0, props: dict[str, str] | None = _ASK
) -> tuple[str | None, float | None]:
    """When the fabric manager last started, as (a key, seconds after boot).

    The key is ``systemd:<ActiveEnterTimestampMonotonic in us>`` (0 when the unit never
    became active this boot), else ``proc:<start ticks>`` of the nv-fabricmanager process,
    ``none`` when this host has no fabric manager unit and no such process, and None
    (unknown) in a container without the host's systemd or PID namespace: a restart is
    then invisible here. A restart changes the key; a reboot changes it only together with
    the boot id, which is why both are in the multicast cache's key."""
    if props is _ASK:
        props = _systemd_props(FM_UNIT, timeout)
    if props is not None and props.get("LoadState") not in (None, "not-found"):
        raw = props.get("ActiveEnterTimestampMonotonic", "")
        if raw.isdigit():
            return f"systemd:{raw}", int(raw) / 1e6
    pid = _find_process(root, FM_BINARY)
    if pid is not None:
        ticks = _start_ticks(root, pid)
        if ticks is not None:
            hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
            return f"proc:{ticks}", ticks / float(hz or 100)
        return None, None
    if (props is not None and props.get("LoadState") == "not-found") or (props is None and not in_container):
        return "none", None  # systemd knows no such unit, or a host with no fabric manager running
    return None, None  # a unit without a start time, or a container that cannot see the host's


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
    root: Path,
    unit: str,
    binary: str,
    pidfile: str | None,
    in_container: bool,
    timeout: float = 2.0,
    props: dict[str, str] | None = _ASK,
) -> tuple[str, str]:
    """(active | inactive | failed | not-installed | unknown, how it was learnt)."""
    state = _systemd_state(unit, timeout, props)
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
    props = _systemd_props(FM_UNIT, 2.0)  # one systemctl call for the state and the start time
    fm_state, fm_how = service_state(root, FM_UNIT, FM_BINARY, FM_PIDFILE, in_container, props=props)
    _key, started = fabric_manager_started(root, in_container, props=props)
    version, why = fabric_manager_version(root)
    if version is None:
        unavailable["fabric_manager.version"] = why or "unknown"
    imex_state, _ = service_state(root, IMEX_UNIT, IMEX_BINARY, None, in_container)
    channels = imex_channels(root)
    if channels is None:
        unavailable["imex.channels"] = f"/{IMEX_CHANNELS} is not readable"
    return {
        "fabric_manager": {"service": fm_state, "service_how": fm_how, "version": version, "started_s": started},
        "imex": {"channels": channels, "service": imex_state},
        "evidence": host_nvswitch_evidence(root),
        "unavailable": unavailable,
    }
