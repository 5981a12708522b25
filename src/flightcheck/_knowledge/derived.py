"""Facts read together: the GPUs the engine will see, installed versions, NVLink domains.

Pure functions of a facts snapshot, shared by the checks, the memory model and the
collectors' summaries.
"""

from __future__ import annotations

from flightcheck._vocabulary.facts import Facts, Gpu


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


def mig_instances(facts: Facts) -> list[str]:
    """The ``MIG-<uuid>`` entries of CUDA_VISIBLE_DEVICES that name no GPU NVML listed:
    MIG instances (CUDA accepts their UUIDs; the facts record whole GPUs only)."""
    spec = facts.visible_devices
    if not spec:
        return []
    uuids = [g.uuid for g in facts.gpus or [] if g.uuid]
    return [
        t
        for t in (t.strip() for t in spec.split(","))
        if t.startswith("MIG-") and not any(u.startswith(t) for u in uuids)
    ]


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
