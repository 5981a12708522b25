"""The ``flightcheck`` command line: the parser and the entry point; the subcommands
themselves (a thin shell over collect / evaluate / render) are in :mod:`.commands`.

Bad input of any kind (a flag, a facts file, a model) prints one line and exits 2, never a
traceback. Exit codes otherwise are the verdict's: 0 ready, 1 not ready, 3 unknown.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from flightcheck._vocabulary.engine import KNOWN_ENGINES
from flightcheck._vocabulary.errors import UsageError
from flightcheck._vocabulary.version import __version__


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error in one line (exit 2)."""

    def error(self, message: str) -> NoReturn:
        # main() prints "flightcheck: error: ": name only the subcommand, if any
        sub = self.prog.removeprefix("flightcheck").strip()
        raise UsageError(f"{sub}: {message}" if sub else message)


def _normalise(argv: list[str]) -> list[str]:
    """Accept vLLM's underscore spellings (``--tensor_parallel_size``) for our own flags.

    Token for token (the count never changes), so :func:`parse_args` can hand the engine
    command, which this also rewrites when no ``--`` precedes it, back as written.
    """
    out: list[str] = []
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
    # the registered engines (a list shared with the registry: one `engines.register` adds a name)
    g.add_argument("--engine", choices=KNOWN_ENGINES, default=None, help="serving engine (default vllm)")
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
    g.add_argument(
        "--reserve-gib",
        type=float,
        default=None,
        metavar="GIB",
        help="per-GPU reserve for activations, CUDA graphs and buffers",
    )
    g.add_argument("--nnodes", type=int, default=None, metavar="N", help="nodes the launch spans")
    g.add_argument("--download-dir", default=None)
    g.add_argument("--load-format", default=None, metavar="FORMAT", help="load format (auto; dummy: no weights)")
    g.add_argument("--distributed-executor-backend", default=None, choices=("mp", "ray", "uni", "external_launcher"))


def add_collect_flags(p: argparse.ArgumentParser) -> None:
    """Where the facts come from."""
    g = p.add_argument_group("facts")
    g.add_argument(
        "--facts",
        action="append",
        default=[],
        metavar="FILE",
        help="snapshot laid over the live collection (repeatable; whole sections replace)",
    )
    g.add_argument(
        "--example", default=None, metavar="NAME", help="evaluate a bundled example node (b300, b300-no-toolkit, ...)"
    )
    g.add_argument("--deep", action="store_true", help="run the active probes: compile smoke test, multicast bind")


def add_output_flags(
    p: argparse.ArgumentParser,
    formats: tuple[str, ...] = ("text", "json", "junit", "prometheus"),
    help: str | None = None,
) -> None:
    """How the report is written."""
    g = p.add_argument_group("output")
    g.add_argument("--format", default="text", choices=formats, help=help)
    g.add_argument(
        "--output", "-o", default=None, metavar="FILE", help="write the report here (atomically) instead of stdout"
    )
    g.add_argument("--strict", action="store_true", help="a failing warning counts as an error")
    g.add_argument("-v", "--verbose", action="store_true", help="list passes and skips too")


def build_parser() -> argparse.ArgumentParser:
    """The whole command line."""
    p = _Parser(
        prog="flightcheck", description="Will this LLM-serving launch work on this node? Checks before the load."
    )
    p.add_argument("--version", action="version", version=f"flightcheck {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    c = sub.add_parser("check", help="collect, evaluate every check, print the report; exit with the verdict")
    add_intent_flags(c)
    add_collect_flags(c)
    add_output_flags(c)
    k8s = c.add_mutually_exclusive_group()
    k8s.add_argument(
        "--k8s",
        metavar="MANIFEST",
        help="a Pod / Deployment / StatefulSet / LeaderWorkerSet / KServe InferenceService (+ its ServingRuntime) "
        "manifest or helm template output (-: stdin): "
        "the launch from its vLLM container, and the FC9xx checks of the pod",
    )
    k8s.add_argument(
        "--k8s-self",
        action="store_true",
        help="in a pod (an init container): read this pod's own spec from the API server with its service "
        "account (`get` on `pods`; POD_NAME / POD_NAMESPACE from the downward API) for the FC9xx checks; "
        "where it cannot, the family is skipped with the reason",
    )
    c.add_argument(
        "engine_command",
        nargs=argparse.REMAINDER,
        help="-- vllm serve MODEL ... : take the intent from the engine command",
    )

    r = sub.add_parser("run", help="check the engine command, apply the fallback plan, then exec the engine")
    add_intent_flags(r)
    add_collect_flags(r)
    add_output_flags(r)
    r.add_argument("--no-fallback", action="store_true", help="a needed fallback stops the launch instead")
    r.add_argument("--dry-run", action="store_true", help="print the final command and environment, do not exec")
    r.add_argument("engine_command", nargs=argparse.REMAINDER, help="-- <engine command>")

    co = sub.add_parser("collect", help="write the facts snapshot (JSON, no secrets)")
    add_intent_flags(co)
    co.add_argument(
        "--facts",
        action="append",
        default=[],
        metavar="FILE",
        help="snapshot laid over the live collection (repeatable; whole sections replace)",
    )
    co.add_argument(
        "--deep", action="store_true", help="also run the active probes: compile smoke test, multicast bind"
    )
    co.add_argument(
        "--output",
        "-o",
        default=None,
        metavar="FILE",
        help="write the snapshot here; %%N is this node's name (Slurm's pattern)",
    )

    ru = sub.add_parser("rules", help="list the check catalogue")
    ru.add_argument(
        "--format",
        default="text",
        choices=("text", "json", "markdown"),
        help="markdown: every check's full documentation (docs/rules.md)",
    )

    ex = sub.add_parser("explain", help="print a check's documentation")
    ex.add_argument("code", help="FC101 or nvcc-missing")

    pr = sub.add_parser("probe", help="run one active probe and print its result")
    pr.add_argument("which", choices=("multicast",))
    pr.add_argument("--devices", default=None, metavar="LIST", help="device ordinals, e.g. 0,1,2,3 (default: all)")
    pr.add_argument("--timeout", type=float, default=30.0, metavar="S")
    pr.add_argument("--handle-type", choices=("posix_fd", "fabric"), default=None)
    pr.add_argument("--format", default="text", choices=("text", "json"))
    pr.add_argument(
        "--fresh", action="store_true", help="probe even when this boot's verdict is cached (and refresh the cache)"
    )

    dg = sub.add_parser("diagnose", help="read a failed engine log: the root cause, the check that names it, the fix")
    dg.add_argument("log", nargs="?", default="-", metavar="FILE|-", help="the log (gzip or plain; - or none: stdin)")
    dg.add_argument("--format", default="text", choices=("text", "json"))
    dg.add_argument("--output", "-o", default=None, metavar="FILE", help="write the diagnosis here (atomically)")
    dg.add_argument("--check", action="store_true", help="also run `check` on this host for the launch the log shows")
    dg.add_argument(
        "--facts",
        action="append",
        default=[],
        metavar="FILE",
        help="with --check: snapshot laid over the live collection (repeatable)",
    )

    cl = sub.add_parser("cluster", help="evaluate a set of node snapshots (or a Ray cluster) with cross-node checks")
    add_intent_flags(cl)
    from flightcheck._cli.cluster import FORMATS as CLUSTER_FORMATS

    add_output_flags(
        cl,
        CLUSTER_FORMATS,
        "html: one self-contained page for the fleet (nodes x check families, fixes, skew; no network), "
        "e.g. -o fleet.html",
    )
    cl.add_argument("--facts-dir", default=None, metavar="DIR", help="one *.json snapshot per node")
    cl.add_argument(
        "--ray", nargs="?", const="auto", default=None, metavar="ADDRESS", help="collect from every alive Ray node"
    )
    cl.add_argument("--timeout", type=float, default=60.0, metavar="S", help="per-node collection timeout (Ray)")

    from flightcheck._cli.prepare import add_parsers

    add_parsers(sub)
    return p


def parse_args(argv: list[str]) -> argparse.Namespace:
    """``argv`` parsed as the command line: our own flags in either spelling, the engine
    command (``check`` / ``run``) exactly as written.

    Raises:
        UsageError: a bad flag or value.
    """
    if argv[:2] == ["prepare", "install"]:  # a sub-subcommand that argparse's REMAINDER would swallow
        argv = ["prepare-install", *argv[2:]]
    args = build_parser().parse_args(_normalise(argv))
    command = getattr(args, "engine_command", None)
    if command:  # argparse's REMAINDER is argv's tail: give it back unnormalised
        args.engine_command = argv[len(argv) - len(command) :]
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script."""
    # A run is short and makes next to no reference cycles, but importing the checks,
    # collectors and msgspec's types allocates enough objects to set off some forty cyclic
    # collections (~4 ms of a ~0.1 s warm check): none while it runs, as before after it
    # (main() is also called in-process, by tests and by `run` before it execs the engine).
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        args = parse_args(list(sys.argv[1:] if argv is None else argv))
        from flightcheck._cli.commands import HANDLERS

        return HANDLERS[args.command](args)
    except UsageError as exc:
        from flightcheck._vocabulary.redaction import redact_text

        # argparse echoes what it refused: `--password=S` is not printed back
        sys.stderr.write(f"flightcheck: error: {redact_text(str(exc))}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("flightcheck: interrupted\n")
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:
        if os.environ.get("FLIGHTCHECK_DEBUG"):
            raise
        sys.stderr.write(
            f"flightcheck: internal error: {type(exc).__name__}: {exc} (FLIGHTCHECK_DEBUG=1 shows the traceback)\n"
        )
        return 3
    finally:
        if was_enabled:
            gc.enable()


if __name__ == "__main__":
    sys.exit(main())
