"""Text report of a cluster: one line per node (verdict and failing codes), the cross-node
findings with their fixes, each distinct node finding once with the nodes it hit, the
fallback plan, and the verdict over the whole launch."""

from __future__ import annotations

import io
import os
import sys
from typing import TYPE_CHECKING

from .._checks._framework import CheckResult, Severity, Status
from .._report.text_format import _MARK, _VERDICT_TEXT, _family_kind, _line_kind
from .._version import __version__
from .context import names_text

if TYPE_CHECKING:
    from .evaluate import ClusterReport

_NODE_KIND = {"ready": "ok", "ready-with-fallbacks": "warn", "not-ready": "fail", "unknown": "unknown"}


def _headline(report: ClusterReport) -> str:
    i = report.intent
    layout = f"TP {i.tensor_parallel_size}" + (f" x PP {i.pipeline_parallel_size}" if i.pipeline_parallel_size > 1 else "")
    if i.data_parallel_size > 1:
        layout += f" x DP {i.data_parallel_size}"
    layout += f" over {i.nnodes} node{'s' if i.nnodes != 1 else ''}"
    parts = [i.engine, layout] + ([i.model] if i.model else [])
    src = report.source
    where = f"Ray cluster {src.get('address')}" if src.get("kind") == "ray" else f"snapshots in {src.get('path')}"
    return f"flightcheck {__version__} cluster: {', '.join(parts)} ({where})"


def _codes_by_kind(results: list[CheckResult], strict: bool) -> dict[str, list[str]]:
    """Line kind (fail / warn / info / unknown) -> the codes of that kind, each once, in order.
    Unknown counts only for error checks: those are what make a verdict unknown."""
    out: dict[str, list[str]] = {"fail": [], "warn": [], "info": [], "unknown": []}
    for r in results:
        kind = _line_kind(r, strict)
        if kind == "unknown" and r.severity is not Severity.ERROR:
            continue
        if kind is not None and r.code not in out[kind]:
            out[kind].append(r.code)
    return out


def _finding_lines(con, r: CheckResult, kind: str, where: str, mark) -> None:  # noqa: ANN001 - rich objects
    from rich.markup import escape

    con.print(f"    {mark(kind)} [bold]{r.code}[/bold] {r.name}{where}: {escape(r.message)}")
    for i, line in enumerate((r.fix or "").splitlines()):
        con.print(f"        [dim]{'fix: ' if i == 0 else '     '}[/dim]{escape(line)}")


def render(report: ClusterReport, *, verbose: bool = False, color: bool | None = None) -> str:
    """The cluster report as text; ANSI colour when ``color`` (default: stdout is a terminal)."""
    from rich.console import Console
    from rich.markup import escape

    if color is None:
        color = sys.stdout.isatty() and "NO_COLOR" not in os.environ
    buf = io.StringIO()
    con = Console(file=buf, force_terminal=color, no_color=not color, highlight=False, soft_wrap=True, width=100)

    def mark(kind: str) -> str:
        sym, style = _MARK[kind]
        return f"[{style}]{sym}[/{style}]"

    con.print(escape(_headline(report)), style="bold")
    con.print()
    width = max([len(n) for n in [*report.nodes, *report.unreachable, *report.skipped]] + [4])
    con.print("[bold]Nodes[/bold]")
    for name, rep in report.nodes.items():
        kinds = _codes_by_kind(rep.checks, report.strict)
        blocking, other = kinds["fail"], [c for c in kinds["warn"] + kinds["info"] if c not in kinds["fail"]]
        unknown = [c for c in kinds["unknown"] if c not in blocking]
        tail = (" " + " ".join(blocking) if blocking else "") + (f" [dim](non-blocking: {' '.join(other)})[/dim]" if other else "")
        tail += f" [dim](could not evaluate: {' '.join(unknown)})[/dim]" if unknown else ""
        con.print(f"  \\[{mark(_NODE_KIND[rep.verdict])}] {escape(name):<{width}}  {rep.verdict}{tail}")
    for name, why in report.unreachable.items():
        con.print(f"  \\[{mark('fail')}] {escape(name):<{width}}  gave no facts (FC803): {escape(why)}")
    for name, why in report.skipped.items():
        con.print(f"  \\[{mark('skip')}] {escape(name):<{width}}  [dim]not checked: {escape(why)}[/dim]")
    con.print()

    kind = _family_kind(report.checks, report.strict)
    con.print(f"\\[{mark(kind)}] [bold]Across nodes[/bold] — {len(report.nodes)} node{'s' if len(report.nodes) != 1 else ''} compared")
    problems = int(kind in ("fail", "warn", "unknown"))
    for r in report.checks:
        line = _line_kind(r, report.strict)
        if line is None:
            if verbose and r.status in (Status.PASS, Status.SKIP) and r.message:
                con.print(f"    {mark('ok' if r.status is Status.PASS else 'skip')} [dim]{r.code}[/dim] {escape(r.message)}")
            continue
        where = f" [dim]({escape(r.subject)})[/dim]" if r.subject != "cluster" else ""
        _finding_lines(con, r, line, where, mark)

    # each distinct node finding once, with the nodes it hit: 16 nodes with one cause read as one
    seen: dict[tuple, tuple[CheckResult, str, list[str]]] = {}
    for name, rep in report.nodes.items():
        for r in rep.checks:
            line = _line_kind(r, report.strict)
            if line is not None:
                seen.setdefault((r.code, r.subject, r.message, r.fix, line), (r, line, []))[2].append(name)
    if seen:
        problems += any(line != "info" for _r, line, _n in seen.values())
        con.print()
        con.print("[bold]Node findings[/bold]")
        order = {"fail": 0, "unknown": 1, "warn": 2, "info": 3}
        for r, line, names in sorted(seen.values(), key=lambda v: (order[v[1]], v[0].code, v[2])):
            subject = f", {r.subject}" if r.subject != "host" else ""
            _finding_lines(con, r, line, f" [dim](on {escape(names_text(names, 4))}{escape(subject)})[/dim]", mark)

    if report.plan:
        con.print()
        con.print("[bold]Fallback plan[/bold] (applied by `flightcheck run` and the vLLM plugin on each node):")
        for step in report.plan.steps:
            what = f"export {step.name}={step.value}" if step.kind == "env" else f"{'add' if step.kind == 'add_arg' else 'drop'} {step.name}" + (f" {step.value}" if step.kind == "add_arg" and step.value is not None else "")
            con.print(f"    {escape(what):<48} [dim]{step.code}: {escape(step.why)}[/dim]")
    con.print()
    con.print(f"{mark('warn')} found issues." if problems else f"{mark('info')} no issues found.")
    style = {"ready": "green", "ready-with-fallbacks": "yellow", "not-ready": "red", "unknown": "blue"}[report.verdict]
    con.print(f"[bold {style}]Verdict: {escape(_VERDICT_TEXT[report.verdict])}[/bold {style}] (exit {report.exit_code})")
    return buf.getvalue()
