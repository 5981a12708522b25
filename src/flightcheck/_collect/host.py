"""Host collector: OS, kernel, VM / container, RAM, /dev/shm, ulimits.

Command line equivalents: ``systemd-detect-virt --vm``, ``df /dev/shm``, ``ulimit -l -n``.
"""

from __future__ import annotations

import os
import platform
from typing import Any

from flightcheck._collect import CollectContext, collector
from flightcheck._collect.proc import run

#: DMI vendor / product substrings -> systemd-detect-virt's names.
_DMI_VM = (
    ("amazon ec2", "amazon"),
    ("qemu", "qemu"),
    ("kvm", "kvm"),
    ("microsoft corporation", "microsoft"),
    ("vmware", "vmware"),
    ("virtualbox", "oracle"),
    ("xen", "xen"),
    ("google", "google"),
    ("openstack", "kvm"),
    ("alibaba cloud", "alibaba"),
)


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


BOOT_ID = "/proc/sys/kernel/random/boot_id"


def boot_id(path: str = BOOT_ID) -> str | None:
    """This boot's random id (the kernel draws a new one every boot; a container reads the
    host's): a warm reboot changes it, which is what the cached multicast verdict keys on."""
    text = (_read(path) or "").strip()
    return text if 0 < len(text) <= 64 and all(c in "0123456789abcdef-" for c in text) else None


def os_name() -> str | None:
    """PRETTY_NAME from /etc/os-release."""
    text = _read("/etc/os-release") or _read("/usr/lib/os-release")
    for line in (text or "").splitlines():
        if line.startswith("PRETTY_NAME="):
            return line.split("=", 1)[1].strip().strip('"')
    return None


def virtualization(timeout: float = 2.0) -> tuple[str | None, str | None]:
    """(name, why-unavailable). systemd-detect-virt --vm, else DMI, else the cpuinfo flag."""
    proc = run(["systemd-detect-virt", "--vm"], timeout=timeout)
    if proc.error is None and not proc.timed_out:
        name = proc.out.strip()
        if proc.rc == 0 and name:
            return name, None
        if name == "none":
            return "none", None
    dmi = " ".join(filter(None, (_read(f"/sys/class/dmi/id/{f}") for f in ("sys_vendor", "product_name")))).lower()
    for needle, name in _DMI_VM:
        if needle in dmi:
            return name, None
    cpuinfo = _read("/proc/cpuinfo")
    if cpuinfo is not None:
        for line in cpuinfo.splitlines():
            if line.startswith("flags"):
                return ("vm" if " hypervisor" in line else "none"), None
        return "none", None
    return None, "no systemd-detect-virt, DMI or /proc/cpuinfo to tell"


def container(env: dict[str, str]) -> str:
    """docker | podman | kubernetes | containerd | lxc | none."""
    if env.get("KUBERNETES_SERVICE_HOST"):
        return "kubernetes"
    cgroup = (_read("/proc/1/cgroup") or "") + (_read("/proc/self/cgroup") or "")
    if "kubepods" in cgroup:
        return "kubernetes"
    if os.path.exists("/run/.containerenv"):
        return "podman"
    if os.path.exists("/.dockerenv") or "docker" in cgroup:
        return "docker"
    if "containerd" in cgroup:
        return "containerd"
    if "lxc" in cgroup:
        return "lxc"
    init_env = _read("/proc/1/environ") or ""
    if "container=" in init_env:
        value = init_env.split("container=", 1)[1].split("\0", 1)[0]
        return value or "unknown"
    return "none"


def meminfo() -> dict[str, int]:
    """MemTotal / MemAvailable in bytes."""
    out: dict[str, int] = {}
    for line in (_read("/proc/meminfo") or "").splitlines():
        key, _, rest = line.partition(":")
        if key in ("MemTotal", "MemAvailable"):
            out[key] = int(rest.split()[0]) * 1024
    return out


def _limit(name: str) -> int | str | None:
    import resource  # (here: a run on recorded facts never collects the host)

    soft, _hard = resource.getrlimit(getattr(resource, name))
    return "unlimited" if soft == resource.RLIM_INFINITY else int(soft)


@collector("host", sections=("host",), timeout=5.0)
def collect_host(cctx: CollectContext) -> dict[str, Any]:
    """The ``host`` section."""
    import socket  # (here: a run on recorded facts never collects the host)

    unavailable: dict[str, str] = {}
    virt, why = virtualization()
    if why:
        unavailable["host.virtualization"] = why
    mem = meminfo()
    try:
        st = os.statvfs("/dev/shm")
        shm: int | None = st.f_blocks * st.f_frsize
    except OSError as exc:
        shm = None
        unavailable["host.shm_bytes"] = f"/dev/shm: {exc.strerror}"
    host = {
        "hostname": socket.gethostname(),
        "os": os_name(),
        "kernel": platform.release(),
        "machine": platform.machine(),
        "virtualization": virt,
        "container": container(cctx.env),
        "cpu_count": os.cpu_count(),
        "ram_total_bytes": mem.get("MemTotal"),
        "ram_available_bytes": mem.get("MemAvailable"),
        "shm_bytes": shm,
        "ulimit_memlock": _limit("RLIMIT_MEMLOCK"),
        "ulimit_nofile": _limit("RLIMIT_NOFILE"),
        "boot_id": boot_id(),
    }
    for key in ("os", "ram_total_bytes", "ram_available_bytes", "boot_id"):
        if host[key] is None:
            unavailable[f"host.{key}"] = "not readable on this system"
    return {"host": host, "unavailable": unavailable}
