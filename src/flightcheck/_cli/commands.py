"""The subcommands of ``flightcheck``: each handler takes the parsed arguments and returns
the exit code. The parser and the entry point are in :mod:`.main`; everything heavy is
imported inside the handler that needs it, so ``flightcheck rules`` never loads a collector.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from flightcheck._cli.options import T0, example_without_deep, intent_from_args
from flightcheck._vocabulary.errors import UsageError

#: The layout flags an example's defaults stand in for when none is given.
_LAYOUT_FLAGS = ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size", "nnodes")


def _engine_command(args: argparse.Namespace) -> list[str]:
    cmd = list(getattr(args, "engine_command", None) or [])
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    return cmd


def _stdin_bytes() -> bytes:
    """Standard input (``--k8s -``), bounded like a file."""
    import sys

    from flightcheck._collect.k8s_manifest import MAX_MANIFEST

    return sys.stdin.buffer.read(MAX_MANIFEST + 1)


def cmd_check(args: argparse.Namespace) -> int:
    """``flightcheck check``."""
    from flightcheck._examples import load_example
    from flightcheck._vocabulary.intent import Intent

    docs, example_fields = load_example(args.example)
    command = _engine_command(args)
    if getattr(args, "k8s", None):  # the pod's own launch, and its spec as the `pod` section
        from flightcheck._collect.k8s_manifest import read_manifest

        manifest = read_manifest(args.k8s, stdin=_stdin_bytes() if args.k8s == "-" else None)
        command = command or manifest.argv
        docs = [*docs, {"pod": manifest.pod}]
    elif getattr(args, "k8s_self", False):  # the pod's own spec, from the API server
        from flightcheck._collect.k8s_self import read_own_pod

        own = read_own_pod()
        if own.manifest is not None:
            command = command or own.manifest.argv
            docs = [*docs, {"pod": own.manifest.pod}]
        else:  # the FC9xx family is skipped with this one line
            docs = [*docs, {"pod": None, "unavailable": {"pod": own.reason or "the pod could not be read"}}]
    settle = None
    by_release = None
    if command:  # the intent of the engine command; the flags given win over it
        from flightcheck._launch import parse_command
        from flightcheck._launch.engine_ask import settle_reading, start_asking

        parsed = parse_command(command)
        if args.python:  # --python names the engine's interpreter: its parser is asked
            parsed.intent.python = intent_from_args(args, parsed.intent).python
        # the engine's own reading when its interpreter has it, asked in the background
        # while the facts are collected (see _launch/engine_ask.py)
        asking = start_asking(parsed, dict(os.environ))
        from flightcheck._launch.release_read import by_release as _by_release

        by_release = _by_release(parsed)  # the line read again with the installed release's options

        def settle(provisional: Intent) -> Intent:
            return intent_from_args(args, parsed.intent) if settle_reading(parsed, asking) else provisional

        base: Intent | None = parsed.intent
    else:  # the example's layout, unless the flags say otherwise
        base = Intent(**example_fields) if example_fields else None
    intent = example_without_deep(args, intent_from_args(args, base))
    if (
        example_fields
        and not command
        and all(getattr(args, name, None) is None for name in _LAYOUT_FLAGS if name in example_fields)
    ):
        intent.layout_from = "example"  # said in the headline and the JSON intent block
    # The model directory's read starts now, before the checks, the collectors and the
    # report are imported: its scan workers start while this process imports.
    from flightcheck._collect.checkpoint import start_reading

    early = start_reading(intent)
    from flightcheck._pipeline import assess
    from flightcheck._report import emit, render

    report = assess(
        intent, args.facts, facts_docs=docs, strict=args.strict, settle=settle, early=early, by_release=by_release
    )
    report.timings["total_s"] = round(time.perf_counter() - T0, 4)
    # colour follows stdout (a terminal); a file given with --output never gets ANSI codes
    emit(render(report, args.format, verbose=args.verbose, color=False if args.output else None), args.output)
    return report.exit_code


def cmd_collect(args: argparse.Namespace) -> int:
    """``flightcheck collect``."""
    from flightcheck._collect import collect
    from flightcheck._report import emit

    intent = intent_from_args(args)
    facts = collect(intent, args.facts, probes=["checkpoint"])
    output = args.output
    if output and "%N" in output:  # Slurm's node-name pattern: `srun flightcheck collect -o facts/%N.json`
        import socket

        output = output.replace("%N", os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0])
    emit(facts.to_json(), output)
    return 0


def cmd_rules(args: argparse.Namespace) -> int:
    """``flightcheck rules``."""
    import json

    from flightcheck._checks.framework import iter_checks
    from flightcheck._report import emit

    checks = list(iter_checks("node")) + list(iter_checks("cluster"))
    checks.sort(key=lambda c: c.code)
    if args.format == "json":
        rows = [{"code": c.code, "name": c.name, "severity": c.severity.value, "summary": c.summary} for c in checks]
        emit(json.dumps(rows, indent=2) + "\n", None)
    elif args.format == "markdown":
        emit(rules_markdown(checks), None)
    else:
        emit("".join(f"{c.code}  {c.name:<40} {c.severity.value:<8} {c.summary}\n" for c in checks), None)
    return 0


def rules_markdown(checks: list[Any]) -> str:
    """The catalogue as one Markdown page: a table, then each check's documentation."""
    from flightcheck._vocabulary.results import FAMILIES

    out = [
        "# flightcheck checks",
        "",
        (
            "Generated by `flightcheck rules --format markdown`; each section is what "
            "`flightcheck explain CODE` prints. Codes are stable: never renumbered, never reused."
        ),
        "",
        "| code | name | severity | summary |",
        "|---|---|---|---|",
    ]
    out += [
        f"| [{c.code}](#{c.code.lower()}) | {c.name} | {c.severity.value} | {c.summary.replace('|', '/')} |"
        for c in checks
    ]
    family = None
    for c in checks:
        if c.family != family:
            family = c.family
            out += ["", f"## {family}xx — {FAMILIES.get(family, '')}"]
        body = c.doc.split("\n", 1)[1].strip() if "\n" in c.doc else ""
        out += [
            "",
            f"### {c.code}",
            "",
            f"**{c.name}** ({c.severity.value}): {c.summary}",
            "",
            body.replace("## ", "#### "),
        ]
        if c.logs:
            out.append(log_lines(c, markdown=True).rstrip("\n"))
    from flightcheck._checks.retired import FORMER

    if FORMER:  # what a code or a name meant before (src/flightcheck/_checks/retired.py)
        out += ["", "## Former codes", "", "| code | name | now | when | why |", "|---|---|---|---|---|"]
        out += [f"| {f.code} | {f.name} | {f.now or 'retired'} | {f.when} | {f.why} |" for f in FORMER]
    return "\n".join(out) + "\n"


def log_lines(chk: Any, markdown: bool = False) -> str:
    """The engine-log lines a check explains (``flightcheck diagnose`` names it for them)."""
    if not chk.logs:
        return ""
    head = "#### Log lines it explains" if markdown else "## Log lines it explains (flightcheck diagnose)"
    rows = []
    for log in chk.logs:
        where = f" (only {', '.join(log.phases)})" if log.phases else ""
        note = f": {log.note}" if log.note else ""
        rows.append(f"- `{log.pattern}`{where}{note}" if markdown else f"  {log.pattern}{where}{note}")
    return "\n" + head + "\n\n" + "\n".join(rows) + "\n"


def cmd_explain(args: argparse.Namespace) -> int:
    """``flightcheck explain CODE``."""
    from flightcheck._checks import load_all
    from flightcheck._checks.framework import REGISTRY

    load_all()
    key = args.code.strip()
    chk = REGISTRY.get(key.upper()) or next((c for c in REGISTRY.values() if c.name == key.lower()), None)
    if chk is None:
        from flightcheck._checks.retired import retired_code

        gone = retired_code(key.upper())
        if gone is not None:  # a code that once meant a check: say so, it is still no check
            raise UsageError(f"explain: {gone.code} is retired: it was {gone.name} ({gone.when}: {gone.why})")
        raise UsageError(f"explain: no check {key!r} (see `flightcheck rules`)")
    from flightcheck._checks.retired import FORMER
    from flightcheck._report import emit

    formerly = "".join(
        f"\nFormerly: {f.code} was {f.name} ({f.when}), now {f.now}.\n" for f in FORMER if f.code == chk.code
    )
    emit(
        f"{chk.code} {chk.name} ({chk.severity.value})\n\n{chk.doc}\n{log_lines(chk)}\nDefined in: {chk.source}\n"
        f"{formerly}",
        None,
    )
    return 0


def cmd_diagnose(args: argparse.Namespace) -> int:
    """``flightcheck diagnose [FILE|-]``: exit 0 no failure, 1 a known cause, 3 an unknown one."""
    from flightcheck._diagnose import check_host, diagnose
    from flightcheck._diagnose.render import as_json, text
    from flightcheck._report import emit

    if args.log == "-" and sys.stdin is not None and sys.stdin.isatty():
        raise UsageError(
            "diagnose: give the log file, or pipe it: kubectl logs --previous POD | flightcheck diagnose -"
        )
    doc = diagnose(args.log)
    if args.check:
        check_host(doc, args.facts)
    emit(as_json(doc) if args.format == "json" else text(doc), args.output)
    return int(doc["exit_code"])


def cmd_probe(args: argparse.Namespace) -> int:
    """``flightcheck probe multicast``."""
    from flightcheck._collect.multicast import main as probe_main
    from flightcheck._report import emit

    text, code = probe_main(args)
    emit(text, None)  # a closed or full stdout: one line, exit 2
    return code


def cmd_run(args: argparse.Namespace) -> int:
    """``flightcheck run -- <engine command>``."""
    from flightcheck._cli.run import main as run_main

    return run_main(args, _engine_command(args))


def cmd_prepare(args: argparse.Namespace) -> int:
    """``flightcheck prepare``."""
    from flightcheck._cli.prepare import cmd_prepare as prepare_main

    return prepare_main(args)


def cmd_prepare_install(args: argparse.Namespace) -> int:
    """``flightcheck prepare install``."""
    from flightcheck._cli.prepare import cmd_prepare_install as install_main

    return install_main(args)


def cmd_cluster(args: argparse.Namespace) -> int:
    """``flightcheck cluster``."""
    from flightcheck._cli.cluster import main as cluster_main

    return cluster_main(args)


HANDLERS = {
    "check": cmd_check,
    "collect": cmd_collect,
    "rules": cmd_rules,
    "explain": cmd_explain,
    "probe": cmd_probe,
    "run": cmd_run,
    "cluster": cmd_cluster,
    "diagnose": cmd_diagnose,
    "prepare": cmd_prepare,
    "prepare-install": cmd_prepare_install,
}
