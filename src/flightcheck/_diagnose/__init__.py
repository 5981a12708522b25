"""``flightcheck diagnose``: read a failed engine log, name the cause and its fix.

flightcheck's checks prevent the failures they know; when a launch fails anyway, its log
(``kubectl logs --previous``, a Slurm output file, a terminal) holds the root cause on one
line, far above the wrappers and interleaved across ranks. :func:`diagnose` reads the log
once, in bounded memory (:mod:`.lines`), judges each line against the log signatures the
checks declare (:mod:`.signatures`, :mod:`.scan`), and returns the diagnosis as the JSON
document of schema ``flightcheck.diagnosis/v1`` (``schema.json`` beside this module;
docs/diagnose.md). :func:`check_host` then runs ``check`` on this host for the launch the
log shows, to tell whether the cause is still here.

Every string of the document went through the redaction of engine-echoed secrets (an
``api_key`` in ``non-default args``, a token in a URL): the log is the engine's, the
report is ours.

Exit codes: 0 the log shows no failure, 1 a failure whose cause a check names, 3 a
failure no check names (the likely root line is given), 2 unreadable input.
"""

from __future__ import annotations

import io
import os
import sys
import time
from typing import Any, BinaryIO

from flightcheck._diagnose.lines import Source, iter_blocks, open_stream
from flightcheck._diagnose.scan import PHASES, Scan, scan
from flightcheck._vocabulary.errors import UsageError
from flightcheck._vocabulary.redaction import redact_assignments

SCHEMA = "flightcheck.diagnosis/v1"
EXIT_NO_FAILURE, EXIT_KNOWN, EXIT_USAGE, EXIT_UNKNOWN = 0, 1, 2, 3
#: characters of a log line a report carries
LINE_CHARS = 500

__all__ = ["PHASES", "SCHEMA", "check_host", "diagnose", "diagnose_stream"]


def _open(path: str) -> tuple[BinaryIO, str]:
    """The raw byte stream of ``path`` (``-``: stdin) and the name to print."""
    if path == "-":
        raw: Any = sys.stdin.buffer
        if not hasattr(raw, "peek"):
            raw = io.BufferedReader(raw)
        return raw, "<stdin>"
    try:
        if os.path.isdir(path):
            raise UsageError(f"diagnose: {path}: is a directory (give the log file, or - for stdin)")
        return open(path, "rb"), path
    except OSError as exc:
        raise UsageError(f"diagnose: cannot read {path}: {exc.strerror or exc}") from None


def diagnose(path: str) -> dict[str, Any]:
    """The diagnosis of the log at ``path`` (``-``: stdin), as its JSON document.

    Raises:
        UsageError: the log cannot be opened.
    """
    raw, name = _open(path)
    try:
        return diagnose_stream(raw, name)
    finally:
        if raw is not getattr(sys.stdin, "buffer", None):
            raw.close()


def diagnose_stream(raw: BinaryIO, name: str = "<stream>") -> dict[str, Any]:
    """The diagnosis of the bytes of ``raw`` (read to its end)."""
    t0 = time.perf_counter()
    source = Source()
    try:
        stream = open_stream(raw, source)
    except OSError as exc:
        raise UsageError(f"diagnose: cannot read {name}: {exc}") from None
    state = scan(iter_blocks(stream, source), source)
    return _document(state, source, name, time.perf_counter() - t0)


def _sections(doc: str) -> dict[str, str]:
    out: dict[str, str] = {}
    head = None
    buf: list[str] = []
    for line in doc.splitlines()[1:]:
        if line.startswith("## "):
            if head:
                out[head] = "\n".join(buf).strip()
            head, buf = line[3:].strip(), []
        else:
            buf.append(line)
    if head:
        out[head] = "\n".join(buf).strip()
    return out


def _first_paragraph(text: str, limit: int = 600) -> str:
    para = " ".join(text.split("\n\n", 1)[0].split())
    return para if len(para) <= limit else para[: limit - 1] + "…"


def _cut(line: str) -> str:
    line = redact_assignments(line)
    return line if len(line) <= LINE_CHARS else line[: LINE_CHARS - 1] + "…"


def _clean(value: Any) -> Any:
    """``value`` as JSON with every string redacted (a log's args hold any Python literal)."""
    if isinstance(value, str):
        return _cut(value)
    if isinstance(value, bool) or value is None or isinstance(value, (int, float)):
        return value
    if isinstance(value, dict):
        return {redact_assignments(str(k)): _clean(v) for k, v in list(value.items())[:256]}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_clean(v) for v in list(value)[:256]]
    return _cut(repr(value))


def _redact_args(args: dict[str, Any]) -> dict[str, Any]:
    from flightcheck._knowledge.engines import REDACTED, is_secret

    return {k: (REDACTED if is_secret(k) and v not in (None, "", False) else v) for k, v in args.items()}


def _document(state: Scan, source: Source, name: str, seconds: float) -> dict[str, Any]:
    from flightcheck._checks import load_all
    from flightcheck._checks.framework import REGISTRY

    load_all()
    causes = []
    for c in state.ordered_causes():
        chk = REGISTRY.get(c.code)
        sections = _sections(chk.doc) if chk else {}
        causes.append(
            {
                "code": c.code,
                "name": c.name,
                "severity": c.severity,
                "summary": chk.summary if chk else "",
                "line_number": c.line_number,
                "line": _cut(c.line),
                "matched": _cut(c.matched),
                "note": c.note or None,
                "rank": c.rank,
                "ranks": c.ranks,
                "occurrences": c.occurrences,
                "phase": c.phase,
                "elapsed_s": c.elapsed_s,
                "why": _first_paragraph(sections.get("Why the launch dies", "")),
                "fix": sections.get("How to fix", ""),
            }
        )
    root = state.root()
    failed = root is not None
    exit_code = EXIT_NO_FAILURE if not failed else (EXIT_KNOWN if causes else EXIT_UNKNOWN)
    launch = state.launch
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "input": {
            "name": name,
            "bytes": source.bytes,
            "lines": source.lines,
            "gzip": source.gzip,
            "long_lines": source.long_lines,
            "problem": source.problem,
        },
        "failed": failed,
        "exit_code": exit_code,
        "root": None
        if root is None
        else {
            "line_number": root.line_number,
            "line": _cut(root.line),
            "rank": root.rank,
            "phase": root.phase,
            "elapsed_s": root.elapsed_s,
            "known": root.known,
            "code": causes[0]["code"] if causes else None,
        },
        "causes": causes,
        "launch": {
            "engine": launch.engine,
            "version": launch.version,
            "args": _clean(_redact_args(launch.args)),
            "args_line": launch.args_line,
            "gpus": sorted(set(launch.gpus)),
            "gpu_count": len(launch.gpus) or None,
            "starts": launch.starts,
        },
        "check": None,
        "timings": {"total_s": round(seconds, 4)},
    }
    return doc


def check_host(doc: dict[str, Any], facts_files: list[str] | None = None) -> dict[str, Any]:
    """Run ``check`` on this host for the launch ``doc`` shows; say for each cause
    whether its check still fails here (``still-here``), passes (``fixed``) or could not
    tell (``not-evaluated``). The result is stored in ``doc["check"]`` and returned."""
    from flightcheck._diagnose.launch import intent_of
    from flightcheck._pipeline import assess

    intent, notes = intent_of(doc["launch"])
    report = assess(intent, facts_files or [])
    by_code: dict[str, list[Any]] = {}
    for r in report.checks:
        by_code.setdefault(r.code, []).append(r)
    causes = []
    for c in doc["causes"]:
        results = by_code.get(c["code"], [])
        statuses = {r.status.value for r in results}
        if "fail" in statuses:
            state, message = "still-here", next(r.message for r in results if r.status.value == "fail")
        elif statuses and statuses <= {"pass"}:
            state, message = "fixed", "the check passes on this host now"
        else:
            why = next((r.message for r in results if r.message), "") if results else "not evaluated for this launch"
            state, message = "not-evaluated", why
        causes.append({"code": c["code"], "state": state, "message": _cut(message)})
    failing = [
        {"code": r.code, "name": r.name, "severity": r.severity.value, "message": _cut(r.message)}
        for r in report.checks
        if r.status.value == "fail" and r.severity.value == "error"
    ]
    doc["check"] = {
        "verdict": str(report.verdict),
        "exit_code": report.exit_code,
        "intent": {
            "engine": intent.engine,
            "model": _cut(intent.model) if intent.model else None,
            "tensor_parallel_size": intent.tensor_parallel_size,
            "pipeline_parallel_size": intent.pipeline_parallel_size,
            "data_parallel_size": intent.data_parallel_size,
            "max_model_len": intent.max_model_len,
        },
        "notes": notes,
        "causes": causes,
        "failing": failing,
    }
    return doc["check"]
