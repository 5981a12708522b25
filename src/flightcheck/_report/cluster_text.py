"""Text report of a cluster: one line per node (verdict and failing codes), the cross-node
findings with their fixes, each distinct node finding once with the nodes it hit, the
fallback plan, and the verdict over the whole launch."""

from __future__ import annotations

from typing import TYPE_CHECKING

from flightcheck._checks.cluster.context import names_text
from flightcheck._report.text_format import (
    family_kind,
    layout_text,
    line_kind,
    mark,
    open_console,
    print_finding,
    print_plan,
    print_verdict,
)
from flightcheck._vocabulary.results import CheckResult, Severity, Status
from flightcheck._vocabulary.version import __version__

if TYPE_CHECKING:
    from flightcheck._checks.cluster.evaluate import ClusterReport

_NODE_KIND = {"ready": "ok", "ready-with-fallbacks": "warn", "not-ready": "fail", "unknown": "unknown"}


def _headline(report: ClusterReport) -> str:
    i = report.intent
    layout = layout_text(i) + (" over 1 node" if i.nnodes == 1 else "")
    parts = [i.engine, layout] + ([i.model] if i.model else [])
    src = report.source
    where = f"Ray cluster {src.get('address')}" if src.get("kind") == "ray" else f"snapshots in {src.get('path')}"
    return f"flightcheck {__version__} cluster: {', '.join(parts)} ({where})"


def _codes_by_kind(results: list[CheckResult], strict: bool) -> dict[str, list[str]]:
    """Line kind (fail / warn / info / unknown) -> the codes of that kind, each once, in order.
    Unknown counts only for error checks: those are what make a verdict unknown."""
    out: dict[str, list[str]] = {"fail": [], "warn": [], "info": [], "unknown": []}
    for r in results:
        kind = line_kind(r, strict)
        if kind == "unknown" and r.severity is not Severity.ERROR:
            continue
        if kind is not None and r.code not in out[kind]:
            out[kind].append(r.code)
    return out


def render(report: ClusterReport, *, verbose: bool = False, color: bool | None = None) -> str:
    """The cluster report as text; ANSI colour when ``color`` (default: stdout is a terminal)."""
    from rich.markup import escape

    con, buf = open_console(color)

    con.print(escape(_headline(report)), style="bold")
    con.print()
    width = max([len(n) for n in [*report.nodes, *report.unreachable, *report.skipped]] + [4])
    con.print("[bold]Nodes[/bold]")
    for name, rep in report.nodes.items():
        kinds = _codes_by_kind(rep.checks, report.strict)
        blocking, other = kinds["fail"], [c for c in kinds["warn"] + kinds["info"] if c not in kinds["fail"]]
        unknown = [c for c in kinds["unknown"] if c not in blocking]
        tail = (" " + " ".join(blocking) if blocking else "") + (
            f" [dim](non-blocking: {' '.join(other)})[/dim]" if other else ""
        )
        tail += f" [dim](could not evaluate: {' '.join(unknown)})[/dim]" if unknown else ""
        con.print(f"  \\[{mark(_NODE_KIND[rep.verdict])}] {escape(name):<{width}}  {rep.verdict}{tail}")
    for name, why in report.unreachable.items():
        con.print(f"  \\[{mark('fail')}] {escape(name):<{width}}  gave no facts (FC803): {escape(why)}")
    for name, why in report.skipped.items():
        con.print(f"  \\[{mark('skip')}] {escape(name):<{width}}  [dim]not checked: {escape(why)}[/dim]")
    con.print()

    kind = family_kind(report.checks, report.strict)
    con.print(
        f"\\[{mark(kind)}] [bold]Across nodes[/bold] — {len(report.nodes)} "
        f"node{'s' if len(report.nodes) != 1 else ''} compared"
    )
    problems = int(kind in ("fail", "warn", "unknown"))
    for r in report.checks:
        line = line_kind(r, report.strict)
        if line is None:
            if verbose and r.status in (Status.PASS, Status.SKIP) and r.message:
                con.print(
                    f"    {mark('ok' if r.status is Status.PASS else 'skip')} [dim]{r.code}[/dim] {escape(r.message)}"
                )
            continue
        where = f" [dim]({escape(r.subject)})[/dim]" if r.subject != "cluster" else ""
        print_finding(con, r, line, where)

    # each distinct node finding once, with the nodes it hit: 16 nodes with one cause read as one
    seen: dict[tuple, tuple[CheckResult, str, list[str]]] = {}
    for name, rep in report.nodes.items():
        for r in rep.checks:
            line = line_kind(r, report.strict)
            if line is not None:
                seen.setdefault((r.code, r.subject, r.message, r.fix, line), (r, line, []))[2].append(name)
    if seen:
        problems += any(line != "info" for _r, line, _n in seen.values())
        con.print()
        con.print("[bold]Node findings[/bold]")
        order = {"fail": 0, "unknown": 1, "warn": 2, "info": 3}
        for r, line, names in sorted(seen.values(), key=lambda v: (order[v[1]], v[0].code, v[2])):
            subject = f", {r.subject}" if r.subject != "host" else ""
            print_finding(con, r, line, f" [dim](on {escape(names_text(names, 4))}{escape(subject)})[/dim]")

    if report.plan:
        con.print()
        print_plan(con, report.plan, "`flightcheck run` and the vLLM plugin on each node")
    con.print()
    con.print(f"{mark('warn')} found issues." if problems else f"{mark('info')} no issues found.")
    print_verdict(con, report.verdict, report.exit_code)
    return buf.getvalue()
