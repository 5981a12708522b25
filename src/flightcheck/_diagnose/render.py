"""The diagnosis as text (what ``flightcheck diagnose`` prints) or JSON."""

from __future__ import annotations

import json
from typing import Any

_PHASE_WORDS = {
    "before-weights": "before the weights loaded",
    "load": "while the weights loaded",
    "profile": "in the profile run (after the load)",
    "warmup": "in the warm-up (after the load and the profile run)",
    "graph-capture": "in the CUDA graph capture (after the load)",
    "serving": "while serving",
}


def duration(seconds: float | None) -> str | None:
    """``754.0`` -> ``12m 34s``."""
    if seconds is None:
        return None
    s = round(seconds)
    if s < 60:
        return f"{seconds:.1f}s" if seconds < 10 else f"{s}s"
    h, rem = divmod(s, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h {m:02d}m {s:02d}s" if h else f"{m}m {s:02d}s"


def where(phase: str | None, elapsed: float | None) -> str:
    """``in the profile run (after the load), 14m 03s after the start``."""
    text = _PHASE_WORDS.get(phase or "", "at a point of the startup the log does not say")
    d = duration(elapsed)
    return f"{text}, {d} after the start" if d else text


def _launch_line(launch: dict[str, Any]) -> str:
    parts = []
    if launch.get("engine"):
        parts.append(f"{launch['engine']} {launch.get('version') or '(version not logged)'}")
    args = launch.get("args") or {}
    model = args.get("model") or args.get("model_tag") or args.get("model_path")
    if model:
        parts.append(str(model))
    tp = next((args[k] for k in ("tensor_parallel_size", "tp_size") if isinstance(args.get(k), int)), 1)
    pp = next((args[k] for k in ("pipeline_parallel_size", "pp_size") if isinstance(args.get(k), int)), 1)
    if (tp > 1 or pp > 1) and 0 < tp <= 4096 and 0 < pp <= 4096:
        from flightcheck._knowledge.engines import layout

        parts.append(layout(launch.get("engine") or "vllm", tp, pp))
    if launch.get("gpus"):
        parts.append(", ".join(launch["gpus"]))
    return "; ".join(parts)


def text(doc: dict[str, Any]) -> str:
    """The diagnosis for a terminal."""
    inp = doc["input"]
    out = [f"flightcheck diagnose: {inp['name']} ({inp['lines']:,} lines, {doc['timings']['total_s']:.2f} s)"]
    if inp.get("problem"):
        out.append(f"  ! {inp['problem']}")
    launch = _launch_line(doc["launch"])
    if launch:
        out.append(f"Launch: {launch}")
    root = doc["root"]
    if root is None:
        out += ["", "No failure found in this log (no traceback, no fatal error, no known failure line)."]
        out.append("Verdict: no failure (exit 0)")
        return "\n".join(out) + "\n"
    out.append(f"Died: {where(root['phase'], root['elapsed_s'])}")
    out.append("")
    causes = doc["causes"]
    for i, c in enumerate(causes):
        ranks = f"; {len(c['ranks'])} ranks" if len(c["ranks"]) > 1 else ""
        who = f" ({c['rank']}{ranks})" if c["rank"] else ""
        head = "root cause" if i == 0 else "then"
        out.append(f"✗ {c['code']} {c['name']} ({head}): {c['summary']}")
        out.append(f"    line {c['line_number']:,}{who}: {c['line']}")
        if c.get("note"):
            out.append(f"    note: {c['note']}")
        if i > 0 and c["phase"] != causes[0]["phase"]:
            out.append(f"    where: {where(c['phase'], c['elapsed_s'])}")
        if c["why"]:
            out.append(f"    why: {c['why']}")
        if c["fix"]:
            fix = c["fix"].splitlines()
            out.append(f"    fix: {fix[0]}")
            out += [f"         {line}" if line.strip() else "" for line in fix[1:]]
        out.append(f"    more: flightcheck explain {c['code']}")
    if not causes:
        out.append("? no check names this failure; the most likely root line:")
        who = f" ({root['rank']})" if root["rank"] else ""
        out.append(f"    line {root['line_number']:,}{who}: {root['line']}")
    chk = doc.get("check")
    if chk:
        out.append("")
        out.append(f"This host now (`flightcheck check` for this launch): {chk['verdict']} (exit {chk['exit_code']})")
        for note in chk["notes"]:
            out.append(f"    note: {note}")
        words = {"still-here": "still here", "fixed": "fixed since", "not-evaluated": "cannot tell"}
        for c in chk["causes"]:
            out.append(f"    {c['code']}: {words[c['state']]}: {c['message']}")
        others = [f for f in chk["failing"] if f["code"] not in {c["code"] for c in chk["causes"]}]
        for f in others:
            out.append(f"    also fails now: {f['code']} {f['name']}: {f['message']}")
    elif causes:
        out.append("")
        out.append("Is it still here? `flightcheck diagnose --check LOG` checks this host for this launch.")
    verdict = (
        f"Verdict: {len(causes)} known cause{'s' if len(causes) > 1 else ''} (exit 1)"
        if causes
        else "Verdict: failed, no known cause (exit 3)"
    )
    out.append(verdict)
    return "\n".join(out) + "\n"


def as_json(doc: dict[str, Any]) -> str:
    """The diagnosis as its JSON document (``flightcheck.diagnosis/v1``)."""
    return json.dumps(doc, indent=2, ensure_ascii=False, default=str) + "\n"
