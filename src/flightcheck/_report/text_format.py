"""Text reporter, in the look of ``flutter doctor``: one line per check family with
[✓] / [!] / [✗] / [?], every problem under it with its code, message and exact fix, then
the memory table, the fallback plan, and the verdict last."""

from __future__ import annotations

import io
import os
import sys
from typing import TYPE_CHECKING

from flightcheck._vocabulary.report import blocks
from flightcheck._vocabulary.results import FAMILIES, CheckResult, Severity, Status
from flightcheck._vocabulary.version import __version__

if TYPE_CHECKING:
    from rich.console import Console

    from flightcheck._vocabulary.intent import Intent
    from flightcheck._vocabulary.plan import Plan
    from flightcheck._vocabulary.report import Report

_MARK = {
    "fail": ("✗", "red"),
    "warn": ("!", "yellow"),
    "unknown": ("?", "blue"),
    "ok": ("✓", "green"),
    "skip": ("-", "dim"),
    "info": ("•", "cyan"),
}

_VERDICT_TEXT = {
    "ready": "ready: no blocking problem found",
    "ready-with-fallbacks": "ready with fallbacks: `flightcheck run` applies the plan above",
    "not-ready": "not ready: the launch would fail; fix the ✗ items above",
    "unknown": "unknown: a blocking check could not be evaluated (the ? items above)",
}


def line_kind(r: CheckResult, strict: bool) -> str | None:
    """How a result is shown under its family: fail / warn / info / unknown, or None (quiet)."""
    if r.status is Status.FAIL:
        if blocks(r, strict):
            return "fail"
        return "warn" if r.severity is Severity.WARNING else "info"
    if r.status is Status.UNKNOWN:
        return "unknown"
    return None


def family_kind(results: list[CheckResult], strict: bool) -> str:
    """The marker of a family's headline: the worst of its results."""
    kinds = {line_kind(r, strict) for r in results}
    if "fail" in kinds:
        return "fail"
    if "warn" in kinds:
        return "warn"
    if any(r.status is Status.UNKNOWN and r.severity is not Severity.INFO for r in results):
        return "unknown"
    if results and all(r.status is Status.SKIP for r in results):
        return "skip"
    return "ok"


def layout_text(i: Intent) -> str:
    """'TP 8 x PP 2 + EP over 2 nodes'."""
    layout = f"TP {i.tensor_parallel_size}"
    if i.pipeline_parallel_size > 1:
        layout += f" x PP {i.pipeline_parallel_size}"
    if i.data_parallel_size > 1:
        layout += f" x DP {i.data_parallel_size}"
    if i.enable_expert_parallel:
        layout += " + EP"
    if i.nnodes > 1:
        layout += f" over {i.nnodes} nodes"
    return layout


def _intent_line(report: Report) -> str:
    i = report.intent
    layout = layout_text(i)
    if i.layout_from == "example":
        layout += " (the example's layout; the engine's default is TP 1)"
    parts = [i.engine, layout] + ([i.model] if i.model else [])
    host = report.facts.host.hostname if report.facts.host else None
    return f"flightcheck {__version__}" + (f" on {host}" if host else "") + ": " + ", ".join(parts)


def open_console(color: bool | None) -> tuple[Console, io.StringIO]:
    """A rich console writing into a buffer; ANSI colour when ``color`` (default: a terminal)."""
    from rich.console import Console

    if color is None:
        color = sys.stdout is not None and sys.stdout.isatty() and "NO_COLOR" not in os.environ
    buf = io.StringIO()
    return Console(file=buf, force_terminal=color, no_color=not color, highlight=False, soft_wrap=True, width=100), buf


def mark(kind: str) -> str:
    """The coloured marker (rich markup) of a line kind."""
    sym, style = _MARK[kind]
    return f"[{style}]{sym}[/{style}]"


def print_finding(con: Console, r: CheckResult, kind: str, where: str = "") -> None:
    """One problem line (code, name, where, message) and its fix underneath."""
    from rich.markup import escape

    con.print(f"    {mark(kind)} [bold]{r.code}[/bold] {r.name}{where}: {escape(r.message)}")
    for i, fix_line in enumerate((r.fix or "").splitlines()):
        con.print(f"        [dim]{'fix: ' if i == 0 else '     '}[/dim]{escape(fix_line)}")


def print_plan(con: Console, plan: Plan, applied_by: str) -> None:
    """The fallback plan, one change per line with the code and reason."""
    from rich.markup import escape

    con.print(f"[bold]Fallback plan[/bold] (applied by {applied_by}):")
    for step in plan.steps:
        if step.kind == "env":
            what = f"export {step.name}={step.value}"
        elif step.kind == "add_arg":
            what = f"add {step.name}" + (f" {step.value}" if step.value is not None else "")
        else:
            what = f"drop {step.name}"
        con.print(f"    {escape(what):<48} [dim]{step.code}: {escape(step.why)}[/dim]")
        if step.cost:  # what the switch gives up, with its source (the cheapest that works)
            con.print(f"    {'':<48} [dim]cost: {escape(step.cost)}[/dim]")


def print_verdict(con: Console, verdict: str, exit_code: int) -> None:
    """The last line: the verdict in words and the exit code."""
    from rich.markup import escape

    style = {"ready": "green", "ready-with-fallbacks": "yellow", "not-ready": "red", "unknown": "blue"}[verdict]
    con.print(f"[bold {style}]Verdict: {escape(_VERDICT_TEXT[verdict])}[/bold {style}] (exit {exit_code})")


def render(report: Report, *, verbose: bool = False, color: bool | None = None) -> str:
    """The report as text; ANSI colour when ``color`` (default: stdout is a terminal)."""
    from rich.markup import escape

    con, buf = open_console(color)
    con.print(escape(_intent_line(report)), style="bold")
    if report.intent.reader_note:  # which release's rules read the engine command
        con.print(f"note: {escape(report.intent.reader_note)}")
    for item in report.intent.unparsed:  # what `-- <engine command>` said that flightcheck could not read
        con.print(f"{mark('warn')} could not read from the engine command: {escape(item)}")
    con.print()
    by_family: dict[str, list[CheckResult]] = {}
    for r in report.checks:
        by_family.setdefault(r.code[:3], []).append(r)
    problems = 0
    for prefix, title in FAMILIES.items():
        results = by_family.get(prefix)
        if not results:
            continue
        kind = family_kind(results, report.strict)
        headline = report.summaries.get(prefix, "")
        if kind == "skip":
            headline = headline or results[0].message
        con.print(f"\\[{mark(kind)}] [bold]{escape(title)}[/bold]" + (f" — {escape(headline)}" if headline else ""))
        if kind in ("fail", "warn", "unknown"):
            problems += 1
        for r in results:
            line = line_kind(r, report.strict)
            if line is None:
                if verbose and r.status is Status.PASS and r.message:
                    con.print(f"    {mark('ok')} [dim]{r.code}[/dim] {escape(r.message)}")
                elif verbose and r.status is Status.SKIP:
                    con.print(f"    {mark('skip')} [dim]{r.code} {escape(r.message)}[/dim]")
                continue
            print_finding(con, r, line, f" [dim]({escape(r.subject)})[/dim]" if r.subject != "host" else "")
    if report.memory:
        from flightcheck._report.memory_text import render_memory

        con.print()
        render_memory(con, report.memory)
    if report.plan:
        con.print()
        print_plan(con, report.plan, "`flightcheck run` and the vLLM plugin")
    con.print()
    if problems:
        con.print(f"{mark('warn')} found issues in {problems} {'family' if problems == 1 else 'families'}.")
    else:
        con.print(f"{mark('info')} no issues found.")
    print_verdict(con, report.verdict, report.exit_code)
    return buf.getvalue()
