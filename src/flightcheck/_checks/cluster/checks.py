"""FC8xx — across nodes: the same software, the same checkpoint, every node answering, the
same GPUs, one NVLink domain.

These checks read a :class:`flightcheck._checks.cluster.context.ClusterContext` (every node's
facts and the intent), not one node's ``Context``; ``flightcheck cluster`` runs them after
each node's own checks (``evaluate()`` runs node checks only). A finding about one node has
the subject ``node:<name>``; one about the whole set has ``cluster``. When nodes split into
equal camps, the camp holding the alphabetically first node is the reference and the
message names both sides: nothing in the facts says which side is right.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from flightcheck._checks.cluster.checkpoint import checkpoint_findings
from flightcheck._checks.cluster.compare import nvlink_domain_findings, software, software_fix
from flightcheck._checks.cluster.context import names_text, outliers
from flightcheck._checks.framework import Context, Outcome, Skip, check, fail, ok, unknown
from flightcheck._vocabulary.results import ERROR, WARNING

if TYPE_CHECKING:
    from flightcheck._checks.cluster.context import ClusterContext
    from flightcheck._vocabulary.facts import Facts


def _need_two(ctx: ClusterContext) -> None:
    if len(ctx.nodes) < 2:
        raise Skip("fewer than two nodes gave facts: nothing to compare")


@check("FC801", "software-skew", ERROR, scope="cluster")
def software_skew(ctx: ClusterContext) -> Iterator[Outcome]:
    """Nodes run different driver, CUDA, Python, torch, engine, FlashInfer or NCCL versions.

    ## What it checks
    Across the nodes that gave facts: the NVIDIA driver version, the CUDA version torch was
    built for, the engine interpreter's Python (major.minor), and the installed torch, vLLM
    or SGLang (the engine launched), flashinfer-python and NCCL (nvidia-nccl-cu12/cu13)
    versions. Each node that is not on the most common version is named with both versions.

    ## Why the launch dies
    Ranks on different nodes must agree. NCCL refuses to bootstrap across versions or hangs
    in its first collective; Ray refuses workers whose Python differs from the head's; torch
    and the engine exchange pickled objects and compiled graphs whose format changes between
    releases; FlashInfer's JIT and autotuned kernels differ; IMEX and multi-node NVLink need
    one driver version across the domain. Each of these shows up only after every rank has
    loaded its weights.

    ## How to fix
    Install the same versions everywhere: the driver (and its fabric manager) on the named
    node, then ``<engine python> -m pip install 'torch==X' 'vllm==Y' ...`` in the engine's
    environment there (the fix line has the exact command). Building every node from one
    image or lock file prevents it.
    """
    _need_two(ctx)
    components = software(ctx.intent.engine)
    odd: dict[str, list[tuple[str, str, str, list[str]]]] = {}
    compared = []
    for label, _dist, value_of in components:

        def of_node(node: Context, value_of: Callable[[Facts], str | None] = value_of) -> str | None:
            return value_of(node.facts)

        values = ctx.values(of_node)
        if len(values) < 2:
            continue
        compared.append(label)
        ref_value, ref_nodes, others = outliers(values)
        assert ref_value is not None  # two or more values: there is a most common one
        for name, value in others:
            odd.setdefault(name, []).append((label, value, ref_value, ref_nodes))
    if not compared:
        yield unknown("no two nodes recorded driver or package versions", subject="cluster")
        return
    if not odd:
        yield ok(f"{len(ctx.nodes)} nodes agree on {', '.join(compared)}", subject="cluster")
        return
    for name, diffs in odd.items():
        parts = [f"{label} {mine} ({ref} on {names_text(ref_nodes)})" for label, mine, ref, ref_nodes in diffs]
        yield fail(
            f"{name} runs " + "; ".join(parts),
            fix=software_fix(ctx.nodes[name], [(label, ref) for label, _mine, ref, _nodes in diffs], components),
            subject=f"node:{name}",
            evidence={
                label: {"node": mine, "reference": ref, "reference_nodes": nodes} for label, mine, ref, nodes in diffs
            },
        )


@check("FC802", "checkpoint-differs", ERROR, scope="cluster")
def checkpoint_differs(ctx: ClusterContext) -> Iterator[Outcome]:
    """A node's copy of the model differs: a shard missing, of another size or another header.

    ## What it checks
    The ``checkpoint`` section each node recorded with ``flightcheck collect --model M``
    (file names, sizes, and a sha256 of each shard's 8-byte length + JSON header) is
    compared file by file across nodes. A file missing on a node, extra on it, or whose size
    or header differs from what most nodes hold, is named with the node. With ``--model``, a
    node without a checkpoint section cannot be compared (status unknown), and a node that
    could not read the model at all fails.

    ## Why the launch dies
    Every rank loads its slice of the weights from its own node's disk. A shard missing on
    one node fails that node's load after the others have spent minutes loading theirs; a
    truncated shard (another size) fails its read; a shard with another header (another
    revision or quantization) loads tensors of the wrong shape or dtype, or silently serves
    other weights on one pipeline stage.

    ## How to fix
    Copy the named files from a node whose copy agrees with the rest, on the named node:
    ``rsync -a --checksum good-node:/models/M/model-00007-of-00096.safetensors
    /models/M/model-00007-of-00096.safetensors`` (the fix line has the exact paths), then
    collect again.
    """
    _need_two(ctx)
    findings = checkpoint_findings(ctx)
    if findings is None:
        raise Skip("no node recorded a checkpoint section (collect with --model to compare the copies)")
    yield from findings


@check("FC803", "node-unreachable", ERROR, scope="cluster")
def node_unreachable(ctx: ClusterContext) -> Iterator[Outcome]:
    """A node the launch needs gave no facts in time.

    ## What it checks
    Every alive Ray node answered its collection task within ``--timeout``; with a facts
    directory, there are ``--nnodes`` snapshots (more than that is a warning: a stale file
    from another job would be judged as part of this launch).

    ## Why the launch dies
    A node that cannot answer a few seconds of collection (a hung NVML call, a dead raylet,
    a full disk, flightcheck missing from its environment) will not start its engine ranks
    either: the launch waits for the missing ranks until its own timeout, after every other
    node has loaded its weights.

    ## How to fix
    Look at the named node: ``ray status`` on the head, ``flightcheck collect`` run by hand
    on the node (it names the collector that hangs), ``pip install flightcheck`` into the
    environment its Ray workers use. For a facts directory, re-run the ``srun ... flightcheck
    collect`` step for the missing node and read the job's error output.
    """
    n = len(ctx.nodes)
    if n == 0 and not ctx.unreachable:  # nothing answered and nothing to name: never "ready"
        yield fail(
            "no node gave facts",
            fix="check that the cluster has GPU nodes (`ray status`) or that the facts directory holds their snapshots",
            subject="cluster",
        )
        return
    for name, why in ctx.unreachable.items():
        if ctx.source == "ray":
            fix = (
                f"on {name}: run `flightcheck collect` by hand to see what hangs or "
                "fails (`ray status` on the head shows whether the node is alive)"
            )
        else:
            fix = f"collect again on {name}: srun -w {name} flightcheck collect -o <dir>/{name}.json"
        yield fail(f"{name} gave no facts: {why}", fix=fix, subject=f"node:{name}", evidence={"reason": why})
    if ctx.expected is not None and n + len(ctx.unreachable) < ctx.expected:
        if ctx.source == "ray":
            fix = (
                "join the missing GPU nodes to the Ray cluster "
                "(`ray start --address=<head>:6379` on each) and check `ray status`"
            )
        else:
            fix = (
                "collect on the nodes without a snapshot (compare the "
                'directory with `scontrol show hostnames "$SLURM_JOB_NODELIST"`)'
            )
        yield fail(
            f"{ctx.expected} nodes expected (--nnodes), {n} gave facts ({names_text(ctx.names, 6) or 'none'})",
            fix=fix,
            subject="cluster",
            evidence={"expected": ctx.expected, "answered": ctx.names},
        )
    elif ctx.expected is not None and n > ctx.expected:
        yield fail(
            f"{n} snapshots for --nnodes {ctx.expected}: "
            "a snapshot from another job or node would be judged as part of this launch",
            fix="empty the facts directory before each collection (rm -f facts/*.json), "
            "or pass the real node count to --nnodes",
            subject="cluster",
            severity=WARNING,
            evidence={"expected": ctx.expected, "answered": ctx.names},
        )
    elif not ctx.unreachable:
        yield ok(f"{n} node{'s' if n != 1 else ''} gave facts", subject="cluster")


def _shape(node: Context) -> tuple[int, str] | None:
    if node.facts.gpus is None:
        return None
    models = sorted({g.name or "unknown GPU" for g in node.visible_gpus})
    return len(node.visible_gpus), " + ".join(models)


def _shape_text(shape: tuple[int, str]) -> str:
    return f"{shape[0]}x {shape[1]}" if shape[0] else "no visible GPU"


@check("FC804", "node-shape-differs", WARNING, scope="cluster")
def node_shape_differs(ctx: ClusterContext) -> Iterator[Outcome]:
    """Nodes differ in GPU model or in how many GPUs the engine sees.

    ## What it checks
    The number and model of the GPUs the engine will see on each node (CUDA_VISIBLE_DEVICES
    applied) are the same on every node.

    ## Why the launch dies
    vLLM and SGLang place the same number of ranks on every node and size the KV cache by
    the smallest GPU: a node with fewer GPUs leaves a Ray placement group pending (the launch
    waits for resources that never come), and a smaller or older GPU model shrinks the cache
    for every rank or needs kernels the other nodes' builds lack.

    ## How to fix
    Launch on nodes of one shape (Slurm: ``--constraint`` / ``--gres=gpu:8``; Ray: start
    every node with the same ``--num-gpus``), or make CUDA_VISIBLE_DEVICES agree on every node.
    """
    _need_two(ctx)
    shapes = ctx.values(_shape)
    if len(shapes) < 2:
        yield unknown("fewer than two nodes recorded their GPUs", subject="cluster")
        return
    ref, ref_nodes, others = outliers(shapes)
    assert ref is not None  # two or more shapes: there is a most common one
    if not others:
        yield ok(f"{len(shapes)} nodes with {_shape_text(ref)} each", subject="cluster")
        return
    per_node = ctx.intent.gpus_per_node
    verb = "has" if len(ref_nodes) == 1 else "have"
    for name, shape in others:
        yield fail(
            f"{name} has {_shape_text(shape)}; {names_text(ref_nodes)} {verb} {_shape_text(ref)}",
            fix=f"launch on nodes of one shape ({per_node} GPU{'s' if per_node != 1 else ''} of one model per node), "
            f"or set CUDA_VISIBLE_DEVICES on {name} to match the others",
            subject=f"node:{name}",
            evidence={
                "gpus": shape[0],
                "models": shape[1],
                "reference": {"gpus": ref[0], "models": ref[1], "nodes": ref_nodes},
            },
        )


@check("FC805", "nvlink-domain-split", ERROR, scope="cluster")
def nvlink_domain_split(ctx: ClusterContext) -> Iterator[Outcome]:
    """Nodes meant to share one multi-node NVLink domain are split, or one has no IMEX channel.

    ## What it checks
    When the nodes form a multi-node NVLink system (GB200/GB300 NVL72-style: a node whose
    fabric completed with a non-zero cluster UUID has IMEX provisioned, or runs no local
    fabric manager because the NVLink switch trays manage the fabric), every GPU used on
    every node must report the same cluster UUID and clique, and every node must have an
    IMEX channel. A split is an error when the tensor-parallel (or expert-parallel) group
    spans nodes; when only pipeline stages cross it, a warning. Nodes that are separate
    NVLink islands (HGX: a local fabric manager, no IMEX) are skipped.

    ## Why the launch dies
    Multi-node NVLink (NCCL MNNVL, FlashInfer's mnnvl all-reduce, torch symmetric memory
    with fabric handles) needs every rank in one NVLink partition and fabric memory handles,
    which the driver hands out only through an IMEX channel. A tray in another partition, or
    one whose channel vanished on reboot (channels do not persist), fails with
    CUDA_ERROR_NOT_PERMITTED (800) or "Check the IMEX channel configuration" when the
    communicators are set up, or drops the group to the network at a fraction of the speed.

    ## How to fix
    On a node without a channel: ``sudo mknod /dev/nvidia-caps-imex-channels/channel0 c
    $(grep nvidia-caps-imex-channels /proc/devices | cut -d' ' -f1) 0`` and ``sudo systemctl
    restart nvidia-imex`` (containers: ``NVIDIA_IMEX_CHANNELS=0``). For a split, launch only
    on trays of one NVLink partition (``nvidia-smi -q | grep -A4 Fabric`` shows ClusterUUID
    and CliqueId), or fix the partition in the fabric manager configuration.
    """
    _need_two(ctx)
    yield from nvlink_domain_findings(ctx)
