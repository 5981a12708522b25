"""The ``flightcheck`` command line: a thin shell over collect / evaluate / render.

Bad input of any kind (a flag, a facts file, a model) prints one line and exits 2, never a
traceback. Exit codes otherwise are the verdict's: 0 ready, 1 not ready, 3 unknown.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from typing import Any, NoReturn

from ._errors import UsageError
from ._version import __version__

T0 = time.perf_counter()


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error in one line (exit 2)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}")


def _normalise(argv: list[str]) -> list[str]:
    """Accept vLLM's underscore spellings (``--tensor_parallel_size``) for our own flags."""
    out = []
    for i, tok in enumerate(argv):
        if tok == "--":
            return out + argv[i:]
        if tok.startswith("--") and "_" in tok.split("=", 1)[0]:
            name, eq, value = tok.partition("=")
            tok = name.replace("_", "-") + eq + value
        out.append(tok)
    return out


def add_intent_flags(p: argparse.ArgumentParser) -> None:
    """The deployment intent, spelled as vLLM spells it."""
    g = p.add_argument_group("deployment intent")
    g.add_argument("--engine", choices=("vllm", "sglang"), default=None, help="serving engine (default vllm)")
    g.add_argument("--model", help="model directory or Hugging Face repo id (resolved from the local cache only)")
    g.add_argument("--revision", help="revision of a repo id in the cache (branch, tag or commit)")
    g.add_argument("-tp", "--tensor-parallel-size", type=int, default=None, metavar="N")
    g.add_argument("-pp", "--pipeline-parallel-size", type=int, default=None, metavar="N")
    g.add_argument("-dp", "--data-parallel-size", type=int, default=None, metavar="N")
    g.add_argument("-ep", "--enable-expert-parallel", action="store_true", default=None)
    g.add_argument("--max-model-len", default=None, metavar="N", help="e.g. 131072, 128k, 1M, -1/auto")
    g.add_argument("--kv-cache-dtype", default=None)
    g.add_argument("--gpu-memory-utilization", type=float, default=None, metavar="F")
    g.add_argument("-q", "--quantization", default=None)
    g.add_argument("--python", default=None, metavar="PATH", help="the engine's interpreter")
    g.add_argument("--reserve-gib", type=float, default=None, metavar="GIB", help="per-GPU reserve for activations, CUDA graphs and buffers")
    g.add_argument("--nnodes", type=int, default=None, metavar="N", help="nodes the launch spans")
    g.add_argument("--download-dir", default=None)
    g.add_argument("--distributed-executor-backend", default=None, choices=("mp", "ray", "uni", "external_launcher"))


def add_collect_flags(p: argparse.ArgumentParser) -> None:
    """Where the facts come from."""
    g = p.add_argument_group("facts")
    g.add_argument("--facts", action="append", default=[], metavar="FILE", help="snapshot laid over the live collection (repeatable; whole sections replace)")
    g.add_argument("--example", default=None, metavar="NAME", help="evaluate a bundled example node (b300, b300-no-toolkit, ...)")
    g.add_argument("--deep", action="store_true", help="run the active probes: compile smoke test, multicast bind")


def add_output_flags(p: argparse.ArgumentParser) -> None:
    """How the report is written."""
    g = p.add_argument_group("output")
    g.add_argument("--format", default="text", choices=("text", "json", "junit", "prometheus"))
    g.add_argument("--output", "-o", default=None, metavar="FILE", help="write the report here (atomically) instead of stdout")
    g.add_argument("--strict", action="store_true", help="a failing warning counts as an error")
    g.add_argument("-v", "--verbose", action="store_true", help="list passes and skips too")


def build_parser() -> argparse.ArgumentParser:
    """The whole command line."""
    p = _Parser(prog="flightcheck", description="Will this LLM-serving launch work on this node? Checks before the load.")
    p.add_argument("--version", action="version", version=f"flightcheck {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    c = sub.add_parser("check", help="collect, evaluate every check, print the report; exit with the verdict")
    add_intent_flags(c)
    add_collect_flags(c)
    add_output_flags(c)
    c.add_argument("engine_command", nargs=argparse.REMAINDER, help="-- vllm serve MODEL ... : take the intent from the engine command")

    r = sub.add_parser("run", help="check the engine command, apply the fallback plan, then exec the engine")
    add_intent_flags(r)
    add_collect_flags(r)
    add_output_flags(r)
    r.add_argument("--no-fallback", action="store_true", help="a needed fallback stops the launch instead")
    r.add_argument("--dry-run", action="store_true", help="print the final command and environment, do not exec")
    r.add_argument("engine_command", nargs=argparse.REMAINDER, help="-- <engine command>")

    co = sub.add_parser("collect", help="write the facts snapshot (JSON, no secrets)")
    add_intent_flags(co)
    co.add_argument("--facts", action="append", default=[], metavar="FILE")
    co.add_argument("--deep", action="store_true")
    co.add_argument("--output", "-o", default=None, metavar="FILE", help="write the snapshot here; %%N is this node's name (Slurm's pattern)")

    ru = sub.add_parser("rules", help="list the check catalogue")
    ru.add_argument("--format", default="text", choices=("text", "json", "markdown"), help="markdown: every check's full documentation (docs/rules.md)")

    ex = sub.add_parser("explain", help="print a check's documentation")
    ex.add_argument("code", help="FC101 or nvcc-missing")

    pr = sub.add_parser("probe", help="run one active probe and print its result")
    pr.add_argument("which", choices=("multicast",))
    pr.add_argument("--devices", default=None, metavar="LIST", help="device ordinals, e.g. 0,1,2,3 (default: all)")
    pr.add_argument("--timeout", type=float, default=30.0, metavar="S")
    pr.add_argument("--handle-type", choices=("posix_fd", "fabric"), default=None)
    pr.add_argument("--format", default="text", choices=("text", "json"))

    cl = sub.add_parser("cluster", help="evaluate a set of node snapshots (or a Ray cluster) with cross-node checks")
    add_intent_flags(cl)
    add_output_flags(cl)
    cl.add_argument("--facts-dir", default=None, metavar="DIR", help="one *.json snapshot per node")
    cl.add_argument("--ray", nargs="?", const="auto", default=None, metavar="ADDRESS", help="collect from every alive Ray node")
    cl.add_argument("--timeout", type=float, default=60.0, metavar="S", help="per-node collection timeout (Ray)")
    return p


def intent_from_args(args: argparse.Namespace, base: Any = None) -> Any:
    """Build an Intent from flags; flags given override ``base`` (from an engine command)."""
    from ._intent import Intent, parse_len

    fields: dict[str, Any] = dict(base.__dict__) if base is not None else {}
    mapping = {
        "engine": "engine", "model": "model", "revision": "revision",
        "tensor_parallel_size": "tensor_parallel_size", "pipeline_parallel_size": "pipeline_parallel_size",
        "data_parallel_size": "data_parallel_size", "enable_expert_parallel": "enable_expert_parallel",
        "kv_cache_dtype": "kv_cache_dtype", "gpu_memory_utilization": "gpu_memory_utilization",
        "quantization": "quantization", "python": "python", "reserve_gib": "reserve_gib", "nnodes": "nnodes",
        "download_dir": "download_dir", "distributed_executor_backend": "distributed_executor_backend",
    }
    for arg, field in mapping.items():
        value = getattr(args, arg, None)
        if value is not None:
            fields[field] = value
    if getattr(args, "max_model_len", None) is not None:
        fields["max_model_len"] = parse_len(args.max_model_len)
    if getattr(args, "deep", False):
        fields["deep"] = True
    return Intent(**fields)


def _emit(text: str, output: str | None) -> None:
    if output:
        from ._report import write_atomic

        write_atomic(output, text)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()


def _engine_command(args: argparse.Namespace) -> list[str]:
    cmd = list(getattr(args, "engine_command", None) or [])
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    return cmd


def _example_docs(args: argparse.Namespace) -> tuple[list[dict[str, Any]], list[str]]:
    if not getattr(args, "example", None):
        return [], []
    from ._examples import load_example

    return load_example(args.example)


def cmd_check(args: argparse.Namespace, argv: list[str]) -> int:
    """``flightcheck check``."""
    from ._collect import collect
    from ._evaluate import evaluate
    from ._report import render

    docs, example_args = _example_docs(args)
    if example_args and not _engine_command(args):  # the example's layout, unless the user's flags (or engine command) say otherwise
        args = build_parser().parse_args(["check", *example_args, *argv[1:]])
    base = None
    command = _engine_command(args)
    if command:
        from ._launch import parse_command

        base = parse_command(command).intent
    intent = intent_from_args(args, base)
    t_collect = time.perf_counter()
    facts = collect(intent, args.facts, facts_docs=docs)
    collect_s = time.perf_counter() - t_collect
    report = evaluate(facts, intent, strict=args.strict)
    report.timings = {"collect_s": round(collect_s, 4), **report.timings, "total_s": round(time.perf_counter() - T0, 4)}
    _emit(render(report, args.format, verbose=args.verbose), args.output)
    return report.exit_code


def cmd_collect(args: argparse.Namespace) -> int:
    """``flightcheck collect``."""
    from ._collect import collect

    intent = intent_from_args(args)
    facts = collect(intent, args.facts, probes=["checkpoint"])
    output = args.output
    if output and "%N" in output:  # Slurm's node-name pattern: `srun flightcheck collect -o facts/%N.json`
        import socket

        output = output.replace("%N", os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0])
    _emit(facts.to_json(), output)
    return 0


def cmd_rules(args: argparse.Namespace) -> int:
    """``flightcheck rules``."""
    import json

    from ._checks._framework import REGISTRY, iter_checks

    checks = list(iter_checks("node")) + list(iter_checks("cluster"))
    checks.sort(key=lambda c: c.code)
    if args.format == "json":
        rows = [{"code": c.code, "name": c.name, "severity": c.severity.value, "summary": c.summary} for c in checks]
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return 0
    if args.format == "markdown":
        sys.stdout.write(rules_markdown(checks))
        return 0
    assert REGISTRY
    for c in checks:
        sys.stdout.write(f"{c.code}  {c.name:<40} {c.severity.value:<8} {c.summary}\n")
    return 0


def rules_markdown(checks: list[Any]) -> str:
    """The catalogue as one Markdown page: a table, then each check's documentation."""
    from ._checks._framework import FAMILIES

    out = ["# flightcheck checks", "", "Generated by `flightcheck rules --format markdown`; each section is what "
           "`flightcheck explain CODE` prints. Codes are stable: never renumbered, never reused.", "",
           "| code | name | severity | summary |", "|---|---|---|---|"]
    out += [f"| [{c.code}](#{c.code.lower()}) | {c.name} | {c.severity.value} | {c.summary.replace('|', '/')} |" for c in checks]
    family = None
    for c in checks:
        if c.family != family:
            family = c.family
            out += ["", f"## {family}xx — {FAMILIES.get(family, '')}"]
        body = c.doc.split("\n", 1)[1].strip() if "\n" in c.doc else ""
        out += ["", f"### {c.code}", "", f"**{c.name}** ({c.severity.value}): {c.summary}", "", body.replace("## ", "#### ")]
    return "\n".join(out) + "\n"


def cmd_explain(args: argparse.Namespace) -> int:
    """``flightcheck explain CODE``."""
    from ._checks._framework import REGISTRY
    from ._checks import load_all

    load_all()
    key = args.code.strip()
    chk = REGISTRY.get(key.upper()) or next((c for c in REGISTRY.values() if c.name == key.lower()), None)
    if chk is None:
        raise UsageError(f"explain: no check {key!r} (see `flightcheck rules`)")
    sys.stdout.write(f"{chk.code} {chk.name} ({chk.severity.value})\n\n{chk.doc}\n")
    return 0


def cmd_probe(args: argparse.Namespace) -> int:
    """``flightcheck probe multicast``."""
    from ._collect.multicast import main as probe_main

    return probe_main(args)


def cmd_run(args: argparse.Namespace) -> int:
    """``flightcheck run -- <engine command>``."""
    from ._launch import main as run_main

    return run_main(args, _engine_command(args))


def cmd_cluster(args: argparse.Namespace) -> int:
    """``flightcheck cluster``."""
    from ._cluster import main as cluster_main

    return cluster_main(args)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script."""
    argv = _normalise(list(sys.argv[1:] if argv is None else argv))
    try:
        args = build_parser().parse_args(argv)
        if args.command == "check":
            return cmd_check(args, argv)
        handlers = {"collect": cmd_collect, "rules": cmd_rules, "explain": cmd_explain, "probe": cmd_probe, "run": cmd_run, "cluster": cmd_cluster}
        return handlers[args.command](args)
    except UsageError as exc:
        sys.stderr.write(f"flightcheck: error: {exc}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("flightcheck: interrupted\n")
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:
        if os.environ.get("FLIGHTCHECK_DEBUG"):
            raise
        sys.stderr.write(f"flightcheck: internal error: {type(exc).__name__}: {exc} (FLIGHTCHECK_DEBUG=1 shows the traceback)\n")
        return 3


if __name__ == "__main__":
    sys.exit(main())
