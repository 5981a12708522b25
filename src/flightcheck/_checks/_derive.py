"""Derived facts shared by several check families (pure functions of the facts).

GPU archs in FlashInfer's naming, arch lists and which GPUs their code runs on, the GPUs
the engine will see, installed versions.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from packaging.version import InvalidVersion, Version

if TYPE_CHECKING:
    from .._facts import Facts, Gpu

GiB = 1 << 30

#: compute capability -> FlashInfer's arch name (compilation_context.py normalisation).
_ARCH_SUFFIX = {"12.0": "120f"}


def arch_of(cc: str | None) -> str | None:
    """FlashInfer's arch for a compute capability: 9.0 -> 90a, 10.3 -> 103a, 12.0 -> 120f.

    Majors below 9 have no arch-specific variant (8.0 -> 80).
    """
    if not cc or "." not in cc:
        return None
    if cc in _ARCH_SUFFIX:
        return _ARCH_SUFFIX[cc]
    major, _, minor = cc.partition(".")
    if not (major.isdigit() and minor.isdigit()):
        return None
    base = f"{int(major)}{int(minor)}"
    return base + "a" if int(major) >= 9 else base


def arch_to_cc(arch: str) -> str:
    """'103a' -> '10.3'; '120f' -> '12.0'; '80' -> '8.0'."""
    digits = arch.rstrip("af")
    return f"{digits[:-1]}.{digits[-1]}"


#: Code built for one arch: (major, minor, suffix "a" | "f" | "", PTX rather than a cubin).
ArchCode = tuple[int, int, str, bool]

_ARCH_TOKEN = re.compile(r"^(\d+)\.(\d+)([af]?)(\+PTX)?$")
#: Architecture names TORCH_CUDA_ARCH_LIST takes besides numbers.
_NAMED_ARCHS = {"Turing": ["7.5"], "Ampere": ["8.0", "8.6"], "Ada": ["8.9"], "Hopper": ["9.0"]}


def parse_arch_list(value: str, flashinfer: bool) -> tuple[list[ArchCode], list[str]]:
    """(codes, bad tokens) of an arch list. FlashInfer (FLASHINFER_CUDA_ARCH_LIST) splits
    on single spaces and compiles an unsuffixed token as :func:`arch_of` names it (9.0 ->
    ``a``, 12.0 -> ``f``); torch (TORCH_CUDA_ARCH_LIST) splits on spaces or semicolons and
    also takes ``+PTX`` and a few architecture names."""
    tokens = value.split(" ") if flashinfer else [t for t in re.split(r"[ ;]+", value.strip()) if t]
    codes: list[ArchCode] = []
    bad: list[str] = []
    for tok in tokens:
        for t in [tok] if flashinfer else _NAMED_ARCHS.get(tok, [tok]):
            m = _ARCH_TOKEN.match(t)
            if m is None or (flashinfer and m.group(4)):
                bad.append(tok or "''")
                continue
            major, minor, suffix = int(m.group(1)), int(m.group(2)), m.group(3)
            if flashinfer and not suffix:
                suffix = (arch_of(f"{major}.{minor}") or "").lstrip("0123456789")
            codes.append((major, minor, suffix, bool(m.group(4))))
    return codes, bad


def code_runs_on(code: ArchCode, cc: tuple[int, int]) -> bool:
    """Whether code built for ``code`` runs on a GPU of compute capability ``cc``: ``a``
    code only on exactly its arch, ``f`` (family) code and plain cubins on the same major
    at the same or a later minor, plain PTX on any GPU at least as new (the driver
    JIT-compiles it)."""
    major, minor, suffix, ptx = code
    if suffix == "a":
        return (major, minor) == cc
    if ptx and not suffix:
        return (major, minor) <= cc
    return major == cc[0] and minor <= cc[1]


def covers(codes: Iterable[ArchCode], cc: str | None) -> bool:
    """Whether any of ``codes`` runs on compute capability ``cc`` (``"10.3"``)."""
    mm = major_minor(cc)
    return mm is not None and any(code_runs_on(c, mm) for c in codes)


def version(text: str | None) -> Version | None:
    """A parsed version (local tags such as ``+cu130`` kept), or None when unparsable."""
    if not text:
        return None
    try:
        return Version(text)
    except InvalidVersion:
        return None


def major_minor(text: str | None) -> tuple[int, int] | None:
    """'13.1' / '13.1.2' / '12.8.93' -> (13, 1); None when unparsable."""
    if not text:
        return None
    parts = text.split(".")
    try:
        return int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    except ValueError:
        return None


def package(facts: Facts, name: str) -> str | None:
    """Installed version of a distribution in the engine's interpreter, or None."""
    if facts.python is None or facts.python.packages is None:
        return None
    return facts.python.packages.get(name)


def visible_gpus(facts: Facts) -> list[Gpu]:
    """The GPUs the engine sees, in CUDA order.

    CUDA_VISIBLE_DEVICES takes indices or (prefixes of) UUIDs; like the CUDA runtime, the
    list stops at the first entry that matches no device. Unset: every GPU, in index order.
    """
    gpus = sorted(facts.gpus or [], key=lambda g: g.index if g.index is not None else 1 << 30)
    spec = facts.visible_devices
    if spec is None:
        return gpus
    chosen: list[Gpu] = []
    for token in (t.strip() for t in spec.split(",")):
        match = None
        if token.lstrip("-").isdigit():
            match = next((g for g in gpus if g.index == int(token)), None)
        elif token.startswith(("GPU-", "MIG-")):
            match = next((g for g in gpus if g.uuid and g.uuid.startswith(token)), None)
        if match is None or match in chosen:
            break
        chosen.append(match)
    return chosen


def gpu_subject(gpu: Gpu) -> str:
    """The report subject for a GPU: ``gpu:3``."""
    return f"gpu:{gpu.index}"


#: The cluster UUID of a GPU that belongs to no multi-node NVLink domain.
ZERO_UUID = "00000000-0000-0000-0000-000000000000"


def nvlink_domain(gpu: Gpu) -> tuple[str, int | None] | None:
    """(cluster UUID, clique) of a GPU whose fabric has completed with a real cluster UUID
    (the NVLink domain it shares with other nodes' GPUs, if any), else None."""
    fab = gpu.fabric
    if fab and fab.state == "completed" and fab.cluster_uuid and fab.cluster_uuid != ZERO_UUID:
        return fab.cluster_uuid, fab.clique_id
    return None


def multi_node_nvlink_member(facts: Facts) -> bool:
    """Whether this node's GPUs belong to an NVLink domain that spans nodes.

    True when IMEX is provisioned here, or when no local fabric manager runs although the
    fabric is up (the NVLink switch trays manage it, as on GB200/GB300 NVL72 compute trays).
    An HGX node runs its own fabric manager and no IMEX: its domain is its own, whatever
    cluster UUID it reports, and several HGX nodes talk over the network, not NVLink.
    """
    imex = facts.imex
    if imex and (imex.channels or imex.service in ("active", "inactive", "failed")):
        return True
    fm = facts.fabric_manager
    return bool(fm and fm.service in ("not-installed", "inactive"))
