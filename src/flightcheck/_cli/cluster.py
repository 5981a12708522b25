"""``flightcheck cluster``: judge a multi-node launch from every node's facts.

Two ways to get the facts, one evaluation:

- ``--facts-dir DIR``: every ``*.json`` in DIR is one node's snapshot (Slurm:
  ``srun --ntasks-per-node=1 flightcheck collect --model M -o DIR/%N.json``);
- ``--ray [ADDRESS]``: one collection task per alive Ray node (``ray_fanout``).

Each node is evaluated as ``check`` would evaluate it, then the cross-node checks (FC8xx)
run over all of them, and the verdict and exit code cover the whole launch. Everything
heavy (Ray, rich) is imported only on the path that needs it.
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Any

from flightcheck._vocabulary.errors import UsageError

if TYPE_CHECKING:
    import argparse

    from flightcheck._checks.cluster.evaluate import ClusterReport

#: ``cluster --format``: the node report's formats, and one page for a fleet
FORMATS = ("text", "json", "junit", "prometheus", "html")


def render(report: ClusterReport, fmt: str = "text", *, verbose: bool = False, color: bool | None = None) -> str:
    """The cluster report in ``fmt`` (text, json, junit, prometheus, html)."""
    if fmt == "text":
        from flightcheck._report.cluster_text import render as render_text

        return render_text(report, verbose=verbose, color=color)
    if fmt == "html":
        from flightcheck._report.cluster_html import render as render_html

        return render_html(report)
    from flightcheck._report import cluster_formats as formats

    renderers = {"json": formats.render_json, "junit": formats.render_junit, "prometheus": formats.render_prometheus}
    if fmt not in renderers:
        raise UsageError(f"--format {fmt!r}: expected one of {', '.join(FORMATS)}")
    return renderers[fmt](report)


def main(args: argparse.Namespace) -> int:
    """Run ``flightcheck cluster`` from parsed arguments; return the exit code."""
    from flightcheck._checks.cluster.evaluate import evaluate_cluster
    from flightcheck._cli.options import T0, intent_from_args

    facts_dir, ray_address = getattr(args, "facts_dir", None), getattr(args, "ray", None)
    if facts_dir and ray_address:
        raise UsageError("cluster: --facts-dir and --ray are alternatives; give one")
    if not facts_dir and not ray_address:
        raise UsageError("cluster: give --facts-dir DIR (one snapshot per node) or --ray [ADDRESS]")
    if not args.timeout > 0:
        raise UsageError(f"--timeout {args.timeout:g}: must be positive")
    intent = intent_from_args(args)
    unreachable: dict[str, str] = {}
    skipped: dict[str, str] = {}
    source: dict[str, Any]
    t_collect = time.perf_counter()
    if facts_dir:
        from flightcheck._cluster.snapshots import load_dir

        loaded = load_dir(facts_dir)
        nodes = {name: facts for name, (facts, _path) in loaded.items()}
        source = {
            "kind": "facts-dir",
            "path": str(facts_dir),
            "files": {name: str(path) for name, (_f, path) in loaded.items()},
        }
    else:
        from flightcheck._cluster.ray_fanout import gather

        assert ray_address  # --facts-dir or --ray: checked above
        got = gather(ray_address, intent, args.timeout)
        nodes, unreachable, skipped = got.nodes, got.unreachable, got.skipped
        source = {"kind": "ray", "address": got.address, "timeout_s": args.timeout}
    collect_s = time.perf_counter() - t_collect
    if args.nnodes is None:  # the launch spans the nodes found; GPUs per node follow from it
        intent = dataclasses.replace(intent, nnodes=max(1, len(nodes) + len(unreachable)))
    report = evaluate_cluster(
        nodes,
        intent,
        unreachable=unreachable,
        expected=args.nnodes,
        skipped=skipped,
        source=source,
        strict=args.strict,
    )
    report.timings = {"collect_s": round(collect_s, 4), **report.timings, "total_s": round(time.perf_counter() - T0, 4)}
    from flightcheck._report import emit

    emit(render(report, args.format, verbose=args.verbose, color=False if args.output else None), args.output)
    return report.exit_code
