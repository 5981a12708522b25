"""HTML report of a cluster (``flightcheck cluster --format html``): one self-contained page.

What it shows, top to bottom: the launch and the verdict over it; how many nodes are ready,
ready with fallbacks, not ready, unknown (and gave no facts / were not checked), as filter
buttons; a grid of nodes x check families (a glyph and a colour per cell, never colour
alone), failing nodes first, each row a ``<details>`` that opens on the node's findings and
their fixes; the cross-node findings (FC8xx); what differs between nodes (driver, CUDA,
engine, NCCL, GPUs ...); each distinct node finding once with the nodes it hit; the
fallback plan.

The page needs no network: the CSS and the few lines of script are inline, there is no
font, image or external reference, and a Content-Security-Policy allows only this page's
own style and script (by hash) and nothing to load, so even a string that escaped the
escaping could not run or fetch anything. Every string that comes from the facts files
(hostnames, file names, versions, check messages quoting them) is HTML-escaped, with its
control characters (terminal escape sequences) and bidirectional overrides written as
visible ``\\xNN`` / ``\\uNNNN``. Without script the page is complete (the filters stay
hidden); light and dark follow ``prefers-color-scheme``. A link to the page ending in
``#only=not-ready,unknown`` (node states, or ``across``) opens it filtered.
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
import time
from typing import TYPE_CHECKING

from flightcheck._checks.cluster.compare import software
from flightcheck._knowledge import engines
from flightcheck._knowledge.derived import visible_gpus
from flightcheck._report import no_surrogates
from flightcheck._report.text_format import family_kind, layout_text, line_kind
from flightcheck._vocabulary.results import FAMILIES, Status
from flightcheck._vocabulary.version import __version__

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from flightcheck._checks.cluster.evaluate import ClusterReport
    from flightcheck._vocabulary.facts import Facts
    from flightcheck._vocabulary.report import Report
    from flightcheck._vocabulary.results import CheckResult

#: glyph and word of a cell / line kind; the colour comes from the CSS class ``k-<kind>``
_GLYPH = {"fail": "✗", "warn": "!", "unknown": "?", "ok": "✓", "skip": "–", "info": "•", "none": "·"}
_WORD = {
    "fail": "fails",
    "warn": "warning",
    "unknown": "could not evaluate",
    "ok": "passes",
    "skip": "skipped",
    "info": "note",
    "none": "not evaluated",
}

#: node state -> (cell kind, label); the order is the grid's (failing first)
_STATES = {
    "not-ready": ("fail", "Not ready"),
    "unreachable": ("fail", "No facts"),
    "unknown": ("unknown", "Unknown"),
    "ready-with-fallbacks": ("warn", "Fallbacks"),
    "ready": ("ok", "Ready"),
    "skipped": ("skip", "Not checked"),
}
_RANK = {state: i for i, state in enumerate(_STATES)}

_SHORT = {
    "FC1": "Toolchain",
    "FC2": "GPUs",
    "FC3": "Fabric",
    "FC4": "Memory",
    "FC5": "Checkpoint",
    "FC6": "Host",
    "FC7": "Engine",
    "FC8": "Across",
    "FC9": "Orchestr.",
}

_VERDICT = {
    "ready": ("ok", "Ready", "no blocking problem found on any node"),
    "ready-with-fallbacks": (
        "warn",
        "Ready with fallbacks",
        "`flightcheck run` applies the fallback plan on each node",
    ),
    "not-ready": ("fail", "Not ready", "the launch would fail; fix the ✗ items"),
    "unknown": ("unknown", "Unknown", "a blocking check could not be evaluated (the ? items)"),
}

#: how many codes a grid row lists before "+N"
_ROW_CODES = 4

# C0 (but tab and newline), DEL, C1: ESC / CSI / OSC would be inert in HTML, but shown
# raw they hide what a hostile name says; bidi overrides and zero-width marks can make
# one name read as another
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_INVISIBLE = re.compile(r"[\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")


def esc(value: object) -> str:
    """``value`` as HTML text or attribute value: control and invisible characters
    written visibly, then ``& < > " '`` escaped."""
    text = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", str(value))
    text = _INVISIBLE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return html.escape(text, quote=True)


def _glyph(kind: str, title: str, cls: str = "c") -> str:
    return f'<span class="{cls} k-{kind}" title="{esc(title)}">{_GLYPH[kind]}</span>'


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _names(names: list[str], limit: int = 4) -> str:
    """'a, b' or 'a, b, c, d and 12 more' (all of them in a details) — escaped."""
    shown = ", ".join(esc(n) for n in names[:limit])
    if len(names) <= limit:
        return shown
    every = ", ".join(esc(n) for n in names)
    return f'{shown} <details class="more"><summary>and {len(names) - limit} more</summary>{every}</details>'


def _fix(fix: str | None) -> str:
    if not fix:
        return ""
    return f'<pre class="fix"><span class="fl">fix</span> {esc(fix)}</pre>'


def _finding(r: CheckResult, kind: str, where: str = "", extra: str = "", also: list[CheckResult] | None = None) -> str:
    """One result: glyph, code, name, where, message, and its fix underneath. ``also``:
    more checks that could not be evaluated for the same reason, shown on this one line."""
    if also:
        codes = " ".join(esc(x.code) for x in [r, *also])
        head = f'<b>{codes}</b> <span class="nm">({len(also) + 1} checks)</span>'
    else:
        head = f'<b>{esc(r.code)}</b> <span class="nm">{esc(r.name)}</span>'
    return f'<div class="f">{_glyph(kind, _WORD[kind], "g")} {head}{where}: {esc(r.message)}{_fix(r.fix)}{extra}</div>'


def _merged(
    items: Iterable[tuple[CheckResult, str, tuple[str, ...]]],
) -> list[tuple[CheckResult, str, tuple[str, ...], list[CheckResult]]]:
    """(result, kind, nodes) in order, the checks that could not be evaluated for one same
    reason on the same nodes (a section nobody read makes a dozen of them) folded into the
    first: (first, kind, nodes, the others)."""
    out: list[tuple[CheckResult, str, tuple[str, ...], list[CheckResult]]] = []
    folded: dict[tuple, list[CheckResult]] = {}
    for r, kind, names in items:
        if kind != "unknown":
            out.append((r, kind, names, []))
            continue
        key = (r.subject, r.message, r.fix, names)
        if key in folded:
            folded[key].append(r)
            continue
        folded[key] = []
        out.append((r, kind, names, folded[key]))
    return out


# ------------------------------------------------------------------ what each node shows


class _Row:
    """One node of the grid: its state, a cell per family, its findings."""

    def __init__(self, name: str, state: str, cells: dict[str, tuple[str, list[str]]], findings: list[str]) -> None:
        self.name = name
        self.state = state
        self.cells = cells  # family prefix -> (kind, codes that made it)
        self.findings = findings  # rendered finding lines (node's own, then cross-node)
        self.codes: dict[str, str] = {}  # code -> its worst line kind, the worst first
        self.across = "none"
        self.meta = ""
        self.note = ""

    @property
    def key(self) -> tuple[int, str]:
        """Failing first: a node the cross-node checks single out sorts with the nodes of
        that state (FC801 on a node ready on its own: with the not-ready ones)."""
        across = {"fail": "not-ready", "unknown": "unknown", "warn": "ready-with-fallbacks"}.get(self.across)
        return (min(_RANK[self.state], _RANK[across] if across else len(_RANK)), self.name)


def _families(report: ClusterReport) -> list[str]:
    """The grid's columns: every family some node evaluated (not only skipped), and FC8.
    Without ``--model`` the memory and checkpoint families skip on every node: no column."""
    seen = {r.code[:3] for rep in report.nodes.values() for r in rep.checks if r.status is not Status.SKIP}
    seen.add("FC8")
    return [p for p in FAMILIES if p in seen]


def _meta(facts: Facts, file: str | None) -> str:
    """The node in one line: GPUs, driver, engine's packages, the snapshot file."""
    parts = []
    shape = _shape(facts)
    if shape:
        parts.append(shape)
    if facts.driver and facts.driver.version:
        parts.append(f"driver {facts.driver.version}")
    if facts.python and facts.python.packages:
        for dist in ("torch", *engines.names()):  # an engine's distribution is named as the engine
            if facts.python.packages.get(dist):
                parts.append(f"{dist} {facts.python.packages[dist]}")
    if facts.collected_at:
        parts.append(f"collected {facts.collected_at}")
    if file:
        parts.append(f"file {file}")
    return " · ".join(esc(p) for p in parts)


def _row(name: str, rep: Report, cross: list[CheckResult], families: list[str], report: ClusterReport) -> _Row:
    strict = report.strict
    cells: dict[str, tuple[str, list[str]]] = {}
    for prefix in families:
        if prefix == "FC8":
            if cross:
                kind = family_kind(cross, strict)
            else:
                ran = any(r.status in (Status.PASS, Status.FAIL) for r in report.checks)
                kind = "ok" if ran else "skip"
            results = cross
        else:
            results = [r for r in rep.checks if r.code.startswith(prefix)]
            kind = family_kind(results, strict) if results else "none"
        cells[prefix] = (kind, _codes(results, strict))
    found = [(r, k) for r in [*rep.checks, *cross] if (k := line_kind(r, strict)) is not None]
    found.sort(key=lambda t: (_ORDER[t[1]], t[0].code))
    lines = []
    for r, kind, _n, also in _merged((r, k, ()) for r, k in found):
        where = f' <span class="subj">({esc(r.subject)})</span>' if r.subject not in ("host", f"node:{name}") else ""
        lines.append(_finding(r, kind, where, also=also))
    row = _Row(name, rep.verdict, cells, lines)
    for r, kind in found:  # sorted worst first: a code's first kind is its worst
        row.codes.setdefault(r.code, kind)
    row.across = cells["FC8"][0] if "FC8" in cells else "none"
    files = report.source.get("files") or {}
    row.meta = _meta(rep.facts, files.get(name))
    passed = sum(r.status is Status.PASS for r in rep.checks)
    skipped = sum(r.status is Status.SKIP for r in rep.checks)
    row.note = f"{passed} passed, {skipped} skipped"
    return row


_ORDER = {"fail": 0, "unknown": 1, "warn": 2, "info": 3}


def _unique(codes: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(codes))


def _codes(results: list[CheckResult], strict: bool) -> list[str]:
    return _unique(r.code for r in results if line_kind(r, strict) in ("fail", "warn", "unknown"))


def _rows(report: ClusterReport, families: list[str]) -> list[_Row]:
    rows = []
    for name, rep in report.nodes.items():
        cross = [r for r in report.checks if r.subject == f"node:{name}"]
        rows.append(_row(name, rep, cross, families, report))
    for name, why in report.unreachable.items():
        row = _Row(name, "unreachable", dict.fromkeys(families, ("none", [])), [])
        cross = [r for r in report.checks if r.subject == f"node:{name}"]
        row.findings = [_finding(r, k) for r in cross if (k := line_kind(r, report.strict))]
        row.codes = {r.code: "fail" for r in cross if line_kind(r, report.strict) == "fail"} or {"FC803": "fail"}
        if "FC8" in row.cells:
            row.cells["FC8"] = ("fail", list(row.codes))
        row.across = "fail"
        row.note = f"gave no facts: {why}"
        rows.append(row)
    for name, why in report.skipped.items():
        row = _Row(name, "skipped", dict.fromkeys(families, ("skip", [])), [])
        row.note = f"not checked: {why}"
        rows.append(row)
    return sorted(rows, key=lambda r: r.key)


def _grid(rows: list[_Row], families: list[str]) -> str:
    head = "".join(
        f'<span class="h" title="{esc(p)}xx: {esc(FAMILIES[p])}">{esc(_SHORT.get(p, p))}</span>' for p in families
    )
    out = [
        '<div class="grid" id="grid">',
        (
            f'<div class="hd"><span class="h">Node</span><span class="h">Verdict</span>{head}'
            '<span class="h">Findings</span></div>'
        ),
    ]
    for row in rows:
        kind, label = _STATES[row.state]
        cells = "".join(
            _glyph(k, f"{FAMILIES[p]}: {_WORD[k]}" + (f" ({', '.join(codes)})" if codes else ""))
            for p, (k, codes) in row.cells.items()
        )
        codes = list(row.codes.items())
        badges = " ".join(
            f'<span class="code k-{k}" title="{esc(c)}: {_WORD[k]}">{esc(c)}</span>' for c, k in codes[:_ROW_CODES]
        )
        if len(codes) > _ROW_CODES:
            badges += f' <span class="muted">+{len(codes) - _ROW_CODES}</span>'
        search = " ".join([row.name, row.state, *row.codes]).lower()
        body = "".join(row.findings) or f'<div class="f">{_glyph("ok", "passes", "g")} every check passed</div>'
        note = f'<div class="meta">{row.meta}{" · " if row.meta else ""}{esc(row.note)}</div>'
        out.append(
            f'<details class="node s-{row.state}" data-state="{row.state}" data-across="{row.across}" '
            f'data-search="{esc(search)}"><summary><span class="n" title="{esc(row.name)}">{esc(row.name)}</span>'
            f'<span class="v k-{kind}">{_GLYPH[kind]} {label}</span>{cells}<span class="codes">{badges}</span>'
            f'</summary><div class="body">{note}{body}</div></details>'
        )
    out.append("</div>")
    return "\n".join(out)


# ------------------------------------------------------------------ skew between nodes


def _shape(facts: Facts) -> str | None:
    if facts.gpus is None:
        return None
    gpus = visible_gpus(facts)
    models = " + ".join(sorted({g.name or "unknown GPU" for g in gpus}))
    return f"{len(gpus)}x {models}" if gpus else "no visible GPU"


def _nvcc(facts: Facts) -> str | None:
    tc = facts.toolchain
    if tc is None:
        return None
    if tc.nvcc is None or not tc.nvcc.path:
        return "none found"  # the collector looked: no nvcc is a value, not a gap
    return tc.nvcc.version or "version unread"


def _components(engine: str) -> list[tuple[str, Callable[[Facts], str | None]]]:
    """What the skew table compares: FC801's components (one definition), then the shape
    (FC804) and what else tells nodes apart when a launch differs between them."""
    comps: list[tuple[str, Callable[[Facts], str | None]]] = [(label, fn) for label, _d, fn in software(engine)]
    comps.insert(1, ("GPUs (visible)", _shape))
    comps += [
        ("fabric manager", lambda f: f.fabric_manager.version if f.fabric_manager else None),
        ("nvcc", _nvcc),
        ("kernel", lambda f: f.host.kernel if f.host else None),
        ("OS", lambda f: f.host.os if f.host else None),
    ]
    return comps


def _skew(report: ClusterReport) -> str:
    """A row per component: each distinct value with its nodes, differing rows first."""
    if not report.nodes:
        return '<p class="muted">No node gave facts.</p>'
    rows = []
    for label, fn in _components(report.intent.engine):
        by_value: dict[str, list[str]] = {}
        for name, rep in report.nodes.items():
            try:
                value = fn(rep.facts)
            except Exception:  # noqa: BLE001 - a malformed section must not lose the page
                value = None
            by_value.setdefault(value if value else "", []).append(name)
        known = {v: n for v, n in by_value.items() if v}
        ranked = sorted(known.items(), key=lambda kv: (-len(kv[1]), kv[1][0]))
        if "" in by_value:
            ranked.append(("", by_value[""]))
        differs = len(known) > 1
        if not known:
            kind, status = "none", "not recorded"
        elif differs:
            kind, status = "warn", f"{len(known)} values"
        elif "" in by_value:
            kind, status = "unknown", "same where recorded"
        else:
            kind, status = "ok", f"same on all {len(report.nodes)}"
        cells = []
        for value, names in ranked:
            shown = esc(value) if value else '<span class="muted">not recorded</span>'
            where = (
                f"all {len(names)} nodes"
                if len(names) == len(report.nodes)
                else f"{_plural(len(names), 'node')}: {_names(names, 3)}"
            )
            cells.append(f'<div class="val"><code>{shown}</code> <span class="muted">on {where}</span></div>')
        rows.append(
            (
                not differs,
                (
                    f'<tr class="{"differs" if differs else "same"}"><th scope="row">{esc(label)}</th>'
                    f'<td class="st">{_glyph(kind, status, "g")} {esc(status)}</td><td>{"".join(cells)}</td></tr>'
                ),
            )
        )
    body = "\n".join(r for _same, r in sorted(rows, key=lambda t: t[0]))
    return (
        '<table class="skew"><thead><tr><th>Component</th><th>Across nodes</th><th>Values (most common first)</th>'
        f"</tr></thead><tbody>\n{body}\n</tbody></table>"
    )


# ------------------------------------------------------------------ the other sections


def _across(report: ClusterReport) -> str:
    out = []
    quiet = []
    for r in report.checks:
        kind = line_kind(r, report.strict)
        if kind is None:
            k = "ok" if r.status is Status.PASS else "skip"
            quiet.append(f'<div class="f q">{_glyph(k, _WORD[k], "g")} <b>{esc(r.code)}</b> {esc(r.message)}</div>')
            continue
        where = f' <span class="subj">({esc(r.subject)})</span>' if r.subject != "cluster" else ""
        out.append(_finding(r, kind, where))
    if not out:
        out.append(f'<div class="f">{_glyph("ok", "passes", "g")} the nodes agree</div>')
    return "".join(out + quiet)


def _by_check(report: ClusterReport) -> str:
    """Each distinct node finding once, with the nodes it hit (16 nodes, one cause: one entry)."""
    seen: dict[tuple, tuple[CheckResult, str, list[str]]] = {}
    for name, rep in report.nodes.items():
        for r in rep.checks:
            kind = line_kind(r, report.strict)
            if kind is not None:
                seen.setdefault((r.code, r.subject, r.message, r.fix, kind), (r, kind, []))[2].append(name)
    if not seen:
        return f'<div class="f">{_glyph("ok", "passes", "g")} no node has a finding</div>'
    ranked = sorted(seen.values(), key=lambda v: (_ORDER[v[1]], v[0].code, v[2]))
    out = []
    for r, kind, names, also in _merged((r, k, tuple(n)) for r, k, n in ranked):
        subject = f", {esc(r.subject)}" if r.subject != "host" else ""
        where = f' <span class="subj">(on {_plural(len(names), "node")}{subject})</span>'
        out.append(_finding(r, kind, where, f'<div class="on">{_names(list(names), 6)}</div>', also))
    return "".join(out)


def _plan(report: ClusterReport) -> str:
    if not report.plan:
        return ""
    rows = []
    for step in report.plan.steps:
        if step.kind == "env":
            what = f"export {step.name}={step.value}"
        elif step.kind == "add_arg":
            what = f"add {step.name}" + (f" {step.value}" if step.value is not None else "")
        else:
            what = f"drop {step.name}"
        rows.append(f"<tr><td><code>{esc(what)}</code></td><td>{esc(step.code)}</td><td>{esc(step.why)}</td></tr>")
    return (
        '<section id="plan"><h2>Fallback plan</h2><p class="muted">applied by <code>flightcheck run</code> and the '
        'vLLM plugin on each node that needs it</p><table class="plan"><thead><tr><th>Change</th><th>Code</th>'
        f"<th>Why</th></tr></thead><tbody>{''.join(rows)}</tbody></table></section>"
    )


def _summary(rows: list[_Row]) -> str:
    counts = {state: sum(r.state == state for r in rows) for state in _STATES}
    across = sum(r.across in ("fail", "warn", "unknown") for r in rows)
    chips = []
    for state in ("ready", "ready-with-fallbacks", "not-ready", "unknown", "unreachable", "skipped"):
        n = counts[state]
        if not n and state in ("unreachable", "skipped"):
            continue
        kind, label = _STATES[state]
        words = {"ready-with-fallbacks": "with fallbacks", "unreachable": "gave no facts", "skipped": "not checked"}
        chips.append(
            f'<button type="button" class="chip k-{kind if n else "none"}" data-filter="{state}" '
            f'aria-pressed="false" id="n-{state}">'
            f'<span class="g">{_GLYPH[kind]}</span> <b class="num">{n}</b> {words.get(state, label.lower())}</button>'
        )
    chips.append(
        f'<button type="button" class="chip k-{"warn" if across else "none"}" data-filter="across" '
        'aria-pressed="false" id="n-across">'
        f'<span class="g">⇄</span> <b class="num">{across}</b> singled out across nodes</button>'
    )
    return f'<div class="chips" id="summary" data-total="{len(rows)}">{"".join(chips)}</div>'


def _headline(report: ClusterReport) -> str:
    i = report.intent
    parts = [i.engine, layout_text(i) + (" over 1 node" if i.nnodes == 1 else "")] + ([i.model] if i.model else [])
    src = report.source
    where = f"Ray cluster {src.get('address')}" if src.get("kind") == "ray" else f"snapshots in {src.get('path')}"
    return f"{' · '.join(parts)} ({where})"


# ------------------------------------------------------------------ page, style, script

_CSS = """
:root{color-scheme:light dark;--bg:#f6f7f9;--card:#fff;--fg:#1f2328;--mu:#59636e;--bd:#d1d9e0;--hover:#f0f3f6;
--ok:#1a7f37;--okb:#dafbe1;--fail:#cf222e;--failb:#ffebe9;--warn:#9a6700;--warnb:#fff8c5;--unk:#0969da;--unkb:#ddf4ff;
--skip:#6e7781;--skipb:#eff2f5;--info:#0e7490;--infob:#e0f2f7;--none:#afb8c1;--noneb:transparent;--code:#eff2f5}
@media (prefers-color-scheme:dark){:root{--bg:#0d1117;--card:#151b23;--fg:#e6edf3;--mu:#9198a1;--bd:#30363d;
--hover:#1c232c;--ok:#3fb950;--okb:#12261e;--fail:#f85149;--failb:#301416;--warn:#d29922;--warnb:#2b2111;
--unk:#58a6ff;--unkb:#0f2340;--skip:#8b949e;--skipb:#21262d;--info:#39c5cf;--infob:#0f2a2d;--none:#484f58;--code:#1f2630}}
*{box-sizing:border-box}[hidden]{display:none!important}
body{margin:0;background:var(--bg);color:var(--fg);font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,
"Helvetica Neue",Arial,sans-serif}
main{max-width:1360px;margin:0 auto;padding:18px 22px 40px}
code,pre,.n,.code,.num{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,"DejaVu Sans Mono",monospace}
h1{font-size:20px;margin:0 0 2px}h1 .ver{font-weight:400;color:var(--mu);font-size:14px}
h2{font-size:16px;margin:26px 0 8px}.sub{margin:0 0 12px;color:var(--mu);overflow-wrap:anywhere}
.muted{color:var(--mu)}nav a{color:var(--unk);margin-right:14px;text-decoration:none}
.verdict{display:flex;gap:10px;align-items:center;border:1px solid;border-radius:8px;padding:10px 14px;font-size:15px}
.verdict b{font-size:17px}.verdict .g{font-size:20px;font-weight:700}
.k-ok{color:var(--ok);background:var(--okb)}.k-fail{color:var(--fail);background:var(--failb)}
.k-warn{color:var(--warn);background:var(--warnb)}.k-unknown{color:var(--unk);background:var(--unkb)}
.k-skip{color:var(--skip);background:var(--skipb)}.k-info{color:var(--info);background:var(--infob)}
.k-none{color:var(--none);background:var(--noneb)}.chip.k-none{color:var(--mu)}
.chips{display:flex;flex-wrap:wrap;gap:8px;margin:12px 0 4px}
.chip{border:1px solid currentColor;border-radius:18px;padding:4px 12px;font:inherit;cursor:pointer}
.chip .num{font-size:15px}.chip[aria-pressed=true]{outline:2px solid currentColor;outline-offset:1px}
.chip:disabled{cursor:default}
.tools{display:flex;gap:8px;align-items:center;margin:8px 0}
.tools input{font:inherit;padding:4px 8px;border:1px solid var(--bd);border-radius:6px;background:var(--card);
color:var(--fg);width:280px}.tools button{font:inherit;padding:3px 10px;border:1px solid var(--bd);border-radius:6px;
background:var(--card);color:var(--fg);cursor:pointer}
.grid{background:var(--card);border:1px solid var(--bd);border-radius:8px}
.hd,.node>summary{display:grid;grid-template-columns:minmax(150px,230px) 118px repeat(@COLS@,minmax(58px,78px)) 1fr;
align-items:center;gap:0 4px;padding:0 10px}
.hd{position:sticky;top:0;background:var(--card);border-bottom:1px solid var(--bd);border-radius:8px 8px 0 0;
font-weight:600;font-size:12px;
color:var(--mu);z-index:1}.hd .h{padding:7px 2px;text-align:center}.hd .h:first-child,.hd .h:nth-child(2),
.hd .h:last-child{text-align:left}
.node{border-bottom:1px solid var(--bd)}.node:last-child{border-bottom:0}
.node>summary{list-style:none;cursor:pointer;min-height:27px}.node>summary::-webkit-details-marker{display:none}
.node>summary:hover{background:var(--hover)}.node[open]>summary{background:var(--hover)}
.n{overflow:hidden;text-overflow:ellipsis;white-space:nowrap;font-size:13px}
.n::before{content:"▸";display:inline-block;width:14px;color:var(--mu)}.node[open] .n::before{content:"▾"}
.v{font-weight:600;font-size:12px;border-radius:4px;padding:1px 6px;justify-self:start;white-space:nowrap}
.c{display:block;text-align:center;font-weight:700;border-radius:4px;margin:3px 4px;padding:0;font-size:15px;
line-height:20px}
.codes{overflow:hidden;white-space:nowrap;text-overflow:ellipsis}
.code{font-size:11.5px;border-radius:4px;padding:1px 5px;margin-right:3px}
.body{padding:6px 16px 12px 34px;border-top:1px dashed var(--bd)}
.meta{color:var(--mu);font-size:12.5px;margin:2px 0 6px;overflow-wrap:anywhere}
.f{margin:5px 0;overflow-wrap:anywhere}.f .g{display:inline-block;width:18px;text-align:center;font-weight:700;
border-radius:4px;margin-right:4px}.f.q{color:var(--mu);margin:2px 0}.nm{color:var(--mu)}.subj{color:var(--mu)}
.fix{margin:4px 0 2px 26px;padding:6px 10px;background:var(--code);border-radius:6px;white-space:pre-wrap;
overflow-wrap:anywhere;font-size:12.5px}.fl{color:var(--mu);user-select:none}
.on{margin-left:26px;color:var(--mu);font-size:12.5px}
.more{display:inline}.more>summary{display:inline;cursor:pointer;color:var(--unk)}.more[open]>summary{display:block}
.card{background:var(--card);border:1px solid var(--bd);border-radius:8px;padding:8px 14px}
table{border-collapse:collapse;width:100%;background:var(--card);border:1px solid var(--bd);border-radius:8px}
th,td{text-align:left;vertical-align:top;padding:5px 10px;border-bottom:1px solid var(--bd)}
thead th{font-size:12px;color:var(--mu)}tbody th{white-space:nowrap;font-weight:600}
td.st{white-space:nowrap;width:170px}.skew tbody th{width:190px}
.skew .g{display:inline-block;width:18px;text-align:center;font-weight:700;border-radius:4px}
tr.same{color:var(--mu)}tr.differs th{color:var(--fg)}.val{margin:1px 0}.val code{font-size:12.5px}
footer{margin-top:28px;color:var(--mu);font-size:12px}
"""

_JS = """
(function(){
var nodes=Array.prototype.slice.call(document.querySelectorAll('details.node'));
var q=document.getElementById('q'),shown=document.getElementById('shown'),on={};
function apply(){
 var t=q.value.trim().toLowerCase(),keys=Object.keys(on),n=0;
 nodes.forEach(function(d){
  var s=d.getAttribute('data-state'),x=d.getAttribute('data-across');
  var ok=(!keys.length||on[s]||(on.across&&x!=='ok'&&x!=='none'&&x!=='skip'))&&
   (!t||d.getAttribute('data-search').indexOf(t)>=0);
  d.hidden=!ok;if(ok)n++;});
 shown.textContent=n;}
Array.prototype.forEach.call(document.querySelectorAll('[data-filter]'),function(b){
 if(b.querySelector('.num').textContent==='0'){b.disabled=true;return;}
 b.addEventListener('click',function(){var f=b.getAttribute('data-filter');
  if(on[f])delete on[f];else on[f]=1;b.setAttribute('aria-pressed',on[f]?'true':'false');apply();});});
var m=/^#only=([a-z,-]+)$/.exec(location.hash);
if(m)m[1].split(',').forEach(function(f){var b=document.querySelector('[data-filter="'+f+'"]');
 if(b&&!b.disabled){on[f]=1;b.setAttribute('aria-pressed','true');}});
q.addEventListener('input',apply);
function all(open){nodes.forEach(function(d){if(!d.hidden)d.open=open;});}
document.getElementById('expand').addEventListener('click',function(){all(true);});
document.getElementById('collapse').addEventListener('click',function(){all(false);});
document.getElementById('tools').hidden=false;
document.documentElement.setAttribute('data-js','ready');
apply();
})();
"""


def _hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


def render(report: ClusterReport, now: float | None = None) -> str:
    """The whole page: UTF-8 HTML, no external reference of any kind."""
    families = _families(report)
    rows = _rows(report, families)
    css = _CSS.replace("@COLS@", str(len(families)))
    kind, title, words = _VERDICT[report.verdict]
    csp = f"default-src 'none'; style-src {_hash(css)}; script-src {_hash(_JS)}; img-src 'none'; form-action 'none'"
    total = len(rows)
    stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(time.time() if now is None else now))
    skew = _skew(report)
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{csp}">
<meta name="viewport" content="width=device-width,initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>flightcheck cluster: {esc(title)} ({_plural(total, "node")})</title>
<style>{css}</style></head>
<body><main>
<header><h1>flightcheck cluster <span class="ver">{esc(__version__)}</span></h1>
<p class="sub">{esc(_headline(report))}</p>
<div class="verdict k-{kind}" id="verdict" data-verdict="{esc(report.verdict)}"><span class="g">{_GLYPH[kind]}</span>
<b>{esc(title)}</b> <span>{esc(words)} (exit {report.exit_code})</span></div>
{_summary(rows)}
<nav><a href="#nodes">Nodes</a><a href="#skew">Skew</a><a href="#across">Across nodes</a>
<a href="#findings">Findings by check</a>{'<a href="#plan">Fallback plan</a>' if report.plan else ""}</nav>
</header>
<section id="nodes"><h2>Nodes <span class="muted">({_plural(total, "node")}, failing first)</span></h2>
<div class="tools" id="tools" hidden><input id="q" type="search" placeholder="filter: hostname, FC code, verdict"
aria-label="filter nodes"><button type="button" id="expand">expand all</button>
<button type="button" id="collapse">collapse all</button>
<span class="muted">showing <b id="shown">{total}</b> of {total}</span></div>
{_grid(rows, families)}
</section>
<section id="skew"><h2>Skew between nodes</h2>{skew}</section>
<section id="across"><h2>Across nodes <span class="muted">(FC8xx)</span></h2><div class="card">{_across(report)}</div>
</section>
<section id="findings"><h2>Findings by check <span class="muted">(each once, with the nodes it hit)</span></h2>
<div class="card">{_by_check(report)}</div></section>
{_plan(report)}
<footer>flightcheck {esc(__version__)} · generated {stamp} · self-contained page: nothing is loaded from
the network · <code>flightcheck explain FCnnn</code> documents a check</footer>
</main>
<script>{_JS}</script>
</body></html>
"""
    return no_surrogates(page)
