"""The launch decision shared by ``flightcheck run`` and the vLLM plugin.

stop  — a failing blocking check (the verdict is not-ready), a fallback that is needed but
        refused (``--no-fallback``), or a fallback that cannot be applied to this command;
start — otherwise, with the plan applied. A check that could not be evaluated (verdict
        unknown) does not stop a launch on its own: flightcheck must never be the reason a
        healthy node cannot serve because some fact was unreadable; it is reported instead.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TextIO

from flightcheck._knowledge import engines as F
from flightcheck._launch.apply import Launch, apply_plan
from flightcheck._vocabulary.report import blocks
from flightcheck._vocabulary.results import Severity, Status

if TYPE_CHECKING:
    from flightcheck._launch.command import EngineCommand
    from flightcheck._vocabulary.report import Report
    from flightcheck._vocabulary.results import CheckResult


@dataclass
class Decision:
    """What to do with the launch, and the words to say it."""

    action: str  # "start" | "stop"
    report: Report
    launch: Launch
    reasons: list[str] = field(default_factory=list)  # why it stops
    warnings: list[str] = field(default_factory=list)  # said, but not stopping


def result_line(r: CheckResult) -> str:
    """``FC301 fabric-not-ready (gpu:0): message``."""
    subject = f" ({r.subject})" if r.subject != "host" else ""
    return f"{r.code} {r.name}{subject}: {r.message}"


def grouped_lines(results: list[CheckResult]) -> list[str]:
    """One line per check: ``FC301 fabric-not-ready (gpu:0, gpu:1, +6 more): message``."""
    by_code: dict[str, list[CheckResult]] = {}
    for r in results:
        by_code.setdefault(r.code, []).append(r)
    lines = []
    for group in by_code.values():
        if len(group) == 1:
            lines.append(result_line(group[0]))
            continue
        subjects = [r.subject for r in group]
        shown = ", ".join(subjects[:3]) + (f", +{len(subjects) - 3} more" if len(subjects) > 3 else "")
        lines.append(f"{group[0].code} {group[0].name} ({shown}): {group[0].message}")
    return lines


def decide(report: Report, cmd: EngineCommand, env: dict[str, str], *, no_fallback: bool = False) -> Decision:
    """Stop or start, and with which command and environment."""
    launch = apply_plan(report.plan, cmd, env)  # an empty plan: the command and environment as given
    d = Decision("start", report, launch)
    if report.intent.unparsed:
        d.warnings.append("could not read from the engine command: " + "; ".join(report.intent.unparsed))
    for r in report.checks:
        if r.status is Status.UNKNOWN and r.severity is Severity.ERROR:
            d.warnings.append(f"{r.code} {r.name} could not be evaluated: {r.message}")
    blocking = [r for r in report.failures if blocks(r, report.strict)]
    if blocking:
        d.reasons = grouped_lines(blocking)
    elif report.plan and no_fallback:
        d.reasons = [f"a fallback is needed ({', '.join(report.plan.reasons)}) and --no-fallback refuses it"]
        d.reasons += grouped_lines([r for r in report.failures if r.code in report.plan.reasons])
    elif launch.problems:
        d.reasons = [f"the fallback cannot be applied: {p}" for p in launch.problems]
    if d.reasons:
        d.action = "stop"
    return d


def say(stream: TextIO, text: str) -> None:
    """One or more lines prefixed ``flightcheck:``."""
    stream.writelines(f"flightcheck: {line}\n" for line in text.splitlines())
    stream.flush()


def print_stop(stream: TextIO, d: Decision, headline: str) -> None:
    """Why the engine is not started: ``headline``, then each reason on its own line."""
    say(stream, headline)
    stream.writelines(f"    {reason}\n" for reason in d.reasons)
    stream.flush()


def passed_line(report: Report) -> str:
    """The one line said when there is nothing else to say: ``ready: 61 checks passed in 0.21 s``."""
    n = sum(1 for r in report.checks if r.status is Status.PASS)
    return f"{report.verdict}: {n} checks passed in {report.timings.get('total_s', 0):.2f} s"


def print_changes(stream: TextIO, d: Decision) -> None:
    """Each change of the fallback plan, with its code and reason."""
    if not d.launch.changes:
        return
    say(stream, f"applying the fallback plan ({', '.join(d.report.plan.reasons)}):")
    width = max(len(c.what) for c in d.launch.changes)
    stream.writelines(f"    {c.what:<{width}}  # {c.code}: {c.why}\n" for c in d.launch.changes)
    stream.flush()


def shell_script(d: Decision, base_env: dict[str, str]) -> str:
    """The final launch as a POSIX shell script (``run --dry-run``): exports, then exec."""
    lines = [f"# flightcheck: {d.report.verdict}" + (f" ({', '.join(d.report.plan.reasons)})" if d.report.plan else "")]
    for name, value in sorted(d.launch.env.items()):
        if base_env.get(name) != value:
            lines.append(f"export {name}={shlex.quote(value)}")
    for name in sorted(set(base_env) - set(d.launch.env)):
        lines.append(f"unset {name}")
    argv = F.redact_argv(d.launch.argv)  # secrets are not printed
    copy = d.launch.config_copy
    if copy is None:
        lines.append("exec " + shlex.join(argv))
        return "\n".join(lines) + "\n"
    # the --config copy is written by the script itself, so the dry run leaves no file behind
    import yaml

    with open(copy, encoding="utf-8") as fh:
        config = yaml.safe_load(fh) or {}
    os.unlink(copy)
    from flightcheck._vocabulary.redaction import redact_deep

    # secret keys by name, secret-looking values whatever their key (the engine reads the real file)
    shown = {k: (F.REDACTED if F.is_secret(str(k)) else redact_deep(v)) for k, v in config.items()}
    content = yaml.safe_dump(shown, sort_keys=False)
    d.launch.config_copy = None
    fence = "FLIGHTCHECK_CONFIG"
    lines.append('config="$(mktemp "${TMPDIR:-/tmp}/flightcheck-config-XXXXXX")" || exit 1')
    lines.append(f"cat > \"$config\" <<'{fence}'\n{content.rstrip()}\n{fence}")
    words = ['"$config"' if w == copy else shlex.quote(w) for w in argv]
    lines.append("exec " + " ".join(words))
    return "\n".join(lines) + "\n"


def color_for(stream: TextIO) -> bool:
    """ANSI colour on a terminal, unless NO_COLOR is set (a closed stream is None)."""
    return stream is not None and stream.isatty() and "NO_COLOR" not in os.environ


def exec_engine(launch: Launch) -> int:
    """Replace this process with the engine (same PID; its exit code and signals are the
    engine's). Returns only when the engine cannot be started: 127 not found, 126 other."""
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:  # closed (`>&-`): the engine inherits it closed
            with contextlib.suppress(OSError):
                stream.flush()
    try:
        os.execvpe(launch.argv[0], launch.argv, launch.env)
    except OSError as exc:
        say(sys.stderr, f"cannot start {launch.argv[0]}: {exc.strerror or exc}")
        return 127 if isinstance(exc, FileNotFoundError) else 126
    return 126  # not reached: exec does not return
