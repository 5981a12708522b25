"""``flightcheck run [check options] [--no-fallback] [--dry-run] -- <engine command>``.

Check the real launch (the multicast probe always runs: it costs about a second next to a
15-minute load), then stop it, or apply the fallback plan and ``exec`` the engine. Only the
engine writes to stdout: flightcheck's own output goes to stderr (or ``--output FILE``),
except ``--dry-run``, which prints the final launch as a shell script on stdout.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import TYPE_CHECKING

from flightcheck._knowledge import vllm
from flightcheck._launch.guard import (
    Decision,
    color_for,
    decide,
    exec_engine,
    passed_line,
    print_changes,
    print_stop,
    say,
    shell_script,
)
from flightcheck._vocabulary.envvars import MARKER
from flightcheck._vocabulary.errors import UsageError

if TYPE_CHECKING:
    from flightcheck._vocabulary.intent import Intent
    from flightcheck._vocabulary.report import Report


def _report_out(args: argparse.Namespace, d: Decision) -> None:
    """The report: to --output in the chosen format; on stderr in full when there is
    anything to say (or -v), else one line."""
    from flightcheck._report import render, write_atomic

    report = d.report
    if args.output:
        write_atomic(args.output, render(report, args.format, verbose=args.verbose, color=False))
    elif args.format != "text":
        sys.stderr.write(render(report, args.format))
    noteworthy = d.action == "stop" or any(
        r.status.value in ("fail", "unknown") and r.severity.value != "info" for r in report.checks
    )
    if args.format == "text" and not args.output and (noteworthy or args.verbose):
        sys.stderr.write(render(report, "text", verbose=args.verbose, color=color_for(sys.stderr)))
    elif not noteworthy:
        say(sys.stderr, passed_line(report))
    sys.stderr.flush()


#: families that do not depend on which engine (and interpreter) the command starts
HOST_FAMILIES = ("FC2", "FC3", "FC6")


def host_only(report: Report) -> Report:
    """The report with engine-dependent checks skipped: for a command flightcheck cannot
    read, the toolchain / engine checks would judge an interpreter that may not be the
    engine's, and must not stop a launch they know nothing about."""
    from dataclasses import replace

    from flightcheck._vocabulary.plan import build_plan
    from flightcheck._vocabulary.report import verdict_of
    from flightcheck._vocabulary.results import Status

    why = "skipped: flightcheck could not read which engine this command starts (give --engine to check it)"
    checks = [
        r
        if r.code[:3] in HOST_FAMILIES or r.status is Status.SKIP
        else replace(r, status=Status.SKIP, message=why, fix=None, plan=())
        for r in report.checks
    ]
    plan = build_plan(checks)
    verdict, code = verdict_of(checks, plan, report.strict)
    return replace(report, checks=checks, plan=plan, verdict=verdict, exit_code=code)


def main(args: argparse.Namespace, command: list[str]) -> int:
    """Run the checks for ``command`` and exec it, or stop it. Returns an exit code only
    when the engine is not started (exec does not return)."""
    t0 = time.perf_counter()
    if not command:
        raise UsageError(
            f"run: give the engine command after --, e.g. flightcheck run -- vllm serve MODEL {vllm.layout(8)}"
        )
    from flightcheck._cli.options import example_without_deep, intent_from_args
    from flightcheck._examples import load_example
    from flightcheck._launch.command import parse_command
    from flightcheck._launch.engine_ask import settle_reading, start_asking
    from flightcheck._launch.release_read import by_release
    from flightcheck._pipeline import assess

    base_env = dict(os.environ)
    cmd = parse_command(command, base_env)
    if args.python:  # --python names the engine's interpreter: its parser is asked
        cmd.intent.python = intent_from_args(args, cmd.intent).python
    # the engine's own reading when its interpreter has it: asked now, in the background,
    # while the facts are collected and the checkpoint is read; awaited before evaluating
    asking = start_asking(cmd, base_env)

    def settle(provisional: Intent) -> Intent:
        return intent_from_args(args, cmd.intent) if settle_reading(cmd, asking) else provisional

    intent = example_without_deep(args, intent_from_args(args, cmd.intent))
    engine_env = cmd.engine_env(base_env)
    docs, _ = load_example(args.example)  # its snapshot; the launch is the command's
    report = assess(
        intent,
        args.facts,
        env=engine_env,
        python=intent.python,
        probes=["multicast"],
        facts_docs=docs,
        strict=args.strict,
        settle=settle,
        live_env=True,  # the engine runs with this environment, not a snapshot's
        by_release=by_release(cmd),
    )
    intent = report.intent
    if not cmd.recognised and args.engine is None:
        report = host_only(report)
    report.timings["total_s"] = round(time.perf_counter() - t0, 4)
    d = decide(report, cmd, base_env, no_fallback=args.no_fallback)
    _report_out(args, d)
    for w in d.warnings:
        say(sys.stderr, f"warning: {w}")
    if d.action == "stop":
        print_stop(sys.stderr, d, "not starting the engine:")
        return 1
    print_changes(sys.stderr, d)
    if args.dry_run:
        from flightcheck._report import emit

        emit(shell_script(d, base_env), None)
        return 0
    if intent.engine == "vllm" and cmd.recognised:
        # this launch is checked: the vLLM plugin inside the engine need not check it again
        d.launch.env[MARKER] = f"run:{os.getpid()}"
    return exec_engine(d.launch)
