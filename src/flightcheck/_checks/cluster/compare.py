"""Cross-node comparisons behind FC801 (software versions) and FC805 (NVLink domain).

Pure functions of the nodes' facts; the check declarations in ``_checks/cluster/checks.py`` turn
their findings into outcomes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from flightcheck._checks.cluster.context import groups, names_text
from flightcheck._checks.framework import Outcome, Skip, fail, ok, unknown
from flightcheck._fixes.fabric import imex_channel
from flightcheck._knowledge.derived import multi_node_nvlink_member, nvlink_domain, package
from flightcheck._knowledge.units import major_minor
from flightcheck._vocabulary.results import ERROR, WARNING

if TYPE_CHECKING:
    from flightcheck._checks.cluster.context import ClusterContext
    from flightcheck._vocabulary.facts import Facts

#: A compared component: (label in messages, pip distribution or None, value of one node).
Component = tuple[str, "str | None", Callable[["Facts"], "str | None"]]

_NCCL = ("nvidia-nccl-cu13", "nvidia-nccl-cu12")


def _driver(f: Facts) -> str | None:
    return f.driver.version if f.driver else None


def _torch_cuda(f: Facts) -> str | None:
    return f.python.torch_cuda if f.python else None


def _python(f: Facts) -> str | None:
    # Ray and pickled objects care about major.minor; a patch release does not break a launch
    mm = major_minor(f.python.version if f.python else None)
    return f"{mm[0]}.{mm[1]}" if mm else None


def _nccl(f: Facts) -> str | None:
    found = [f"{d} {v}" for d in _NCCL if (v := package(f, d))]
    return " + ".join(found) or None


def _pkg(dist: str) -> Callable[[Facts], str | None]:
    return lambda f: package(f, dist)


def software(engine: str) -> list[Component]:
    """What FC801 compares, in report order."""
    return [
        ("driver", None, _driver),
        ("CUDA (torch build)", None, _torch_cuda),
        ("Python", None, _python),
        ("torch", "torch", _pkg("torch")),
        (engine, engine, _pkg(engine)),
        ("flashinfer-python", "flashinfer-python", _pkg("flashinfer-python")),
        ("NCCL", None, _nccl),
    ]


def _requirement(label: str, dist: str | None, version: str) -> list[str]:
    """pip requirement strings that install ``version`` of a component."""
    if label == "NCCL":  # "nvidia-nccl-cu13 2.28.9 + nvidia-nccl-cu12 2.27.3"
        return [f"{name}=={ver}" for name, _, ver in (p.partition(" ") for p in version.split(" + "))]
    return [f"{dist}=={version}"] if dist else []


def software_fix(facts: Facts, diffs: list[tuple[str, str]], components: list[Component]) -> str:
    """The commands that bring one node to the reference versions ``diffs`` [(label, version)]."""
    dists = {label: dist for label, dist, _ in components}
    python = (facts.python.executable if facts.python else None) or "python3"
    lines: list[str] = []
    reqs: list[str] = []
    labels = {label for label, _ in diffs}
    for label, ref in diffs:
        if label == "driver":
            lines.append(
                f"install NVIDIA driver {ref} (and the same nvidia-fabricmanager "
                "/ nvidia-imex version where used), then reboot"
            )
        elif label == "Python":
            lines.append(
                f"rebuild the engine environment on Python {ref} (e.g. `uv venv --python {ref}`) "
                "and reinstall the same packages"
            )
        elif label == "CUDA (torch build)":
            if "torch" not in labels:  # otherwise the torch requirement below carries the CUDA build
                torch = package(facts, "torch") or ""
                pin = f"=={torch.split('+', 1)[0]}" if torch else ""
                lines.append(
                    f"{python} -m pip install --force-reinstall 'torch{pin}' --index-url "
                    f"https://download.pytorch.org/whl/cu{ref.replace('.', '')}"
                )
        else:
            reqs.extend(_requirement(label, dists.get(label), ref))
    if reqs:
        quoted = " ".join(f"'{r}'" for r in reqs)
        cmd = f"{python} -m pip install {quoted}"
        cu = next((r.split("+cu", 1)[1] for r in reqs if r.startswith("torch==") and "+cu" in r), None)
        if cu:  # local CUDA builds of torch live on PyTorch's index, not PyPI
            cmd += f" --extra-index-url https://download.pytorch.org/whl/cu{cu}"
        lines.append(cmd)
    return "\n".join(lines)


# ---------------------------------------------------------------- FC805: NVLink domain


def _domains(ctx: ClusterContext, name: str) -> set[tuple[str, int | None]]:
    """(cluster UUID, clique) of each GPU used with a completed fabric and a real UUID."""
    return {d for g in ctx.node(name).gpus_used if (d := nvlink_domain(g)) is not None}


def _domain_text(key: tuple[str, int | None]) -> str:
    return f"cluster UUID {key[0]}" + (f" clique {key[1]}" if key[1] is not None else "")


def _imex_fix(facts: Facts) -> str:
    return imex_channel(facts.imex.service if facts.imex else None, facts.driver.version if facts.driver else None)


def nvlink_domain_findings(ctx: ClusterContext) -> Iterator[Outcome]:
    """FC805's findings: nodes outside the domain the others share, nodes without IMEX."""
    doms = {name: _domains(ctx, name) for name in ctx.nodes}
    if not any(doms[n] and multi_node_nvlink_member(ctx.nodes[n]) for n in ctx.nodes):
        raise Skip("no multi-node NVLink domain: each node has its own NVLink fabric and they talk over the network")
    intent = ctx.intent
    group = intent.tensor_parallel_size * (intent.data_parallel_size if intent.enable_expert_parallel else 1)
    spans = group > intent.gpus_per_node
    severity = ERROR if spans else WARNING
    why = (
        f"the {'expert' if intent.enable_expert_parallel else 'tensor'}-parallel group of {group} GPUs spans nodes"
        if spans
        else "only pipeline stages cross nodes, so their traffic falls back to the network"
    )
    single = {n: next(iter(k)) for n, k in doms.items() if len(k) == 1}
    ranked = groups(single)
    found = False
    ref, ref_nodes = ranked[0] if ranked else (None, [])
    for name, keys in doms.items():
        if name in ref_nodes:
            continue
        found = True
        if ctx.nodes[name].gpus is None:
            yield unknown(
                f"{name}: GPUs were not recorded ({ctx.nodes[name].reason('gpus') or 'no gpus section'})",
                subject=f"node:{name}",
            )
            continue
        if not keys:
            what = "reports no multi-node NVLink fabric (fabric not completed, or a zero cluster UUID)"
        elif len(keys) > 1:
            what = "has GPUs in " + " and ".join(_domain_text(k) for k in sorted(keys, key=str))
        else:
            what = "is in " + _domain_text(next(iter(keys)))
        others = (
            f"{names_text(ref_nodes)} {'is' if len(ref_nodes) == 1 else 'are'} in {_domain_text(ref)}"
            if ref
            else "no two nodes agree"
        )
        yield fail(
            f"{name} {what}; {others}: {why}",
            fix=f"launch only on nodes of one NVLink partition (on {name}: `nvidia-smi -q | grep -A4 Fabric` shows "
            "its ClusterUUID and CliqueId), or fix the partition in the fabric manager / NVLink switch "
            "configuration",
            subject=f"node:{name}",
            severity=severity,
            evidence={
                "domains": sorted([list(k) for k in keys], key=str),
                "reference": list(ref) if ref else None,
                "reference_nodes": ref_nodes,
            },
        )
    for name, facts in ctx.nodes.items():
        channels = facts.imex.channels if facts.imex else None
        if channels is None:
            found = True
            yield unknown(
                f"{name}: IMEX channels were not recorded ({facts.reason('imex') or 'no imex section'})",
                subject=f"node:{name}",
            )
        elif not channels:
            found = True
            service = facts.imex.service if facts.imex else None
            yield fail(
                f"{name} has no IMEX channel (/dev/nvidia-caps-imex-channels is empty; "
                f"nvidia-imex {service or 'state unknown'}), "
                "so it cannot get fabric memory handles for multi-node NVLink",
                fix=_imex_fix(facts),
                subject=f"node:{name}",
                evidence={"imex_service": service, "channels": []},
            )
    if not found and ref:
        yield ok(f"{len(ctx.nodes)} nodes share {_domain_text(ref)}, each with an IMEX channel", subject="cluster")
