"""Reporters: one report, several formats. Each renderer is ``render(report) -> str``.

Formats: ``text`` (flutter-doctor look), ``json`` (``flightcheck.report/v1``), ``junit``
and ``prometheus`` (CI and fleets). ``emit`` writes a rendered report to stdout or to
``--output``, there with ``write_atomic``: a temp file + rename, so a textfile collector
never reads half a file.
"""

from __future__ import annotations

import importlib
import os
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from flightcheck._vocabulary.errors import UsageError

if TYPE_CHECKING:
    from flightcheck._vocabulary.report import Report

FORMATS = ("text", "json", "junit", "prometheus")


def render(report: Report, fmt: str = "text", *, verbose: bool = False, color: bool | None = None) -> str:
    """Render ``report`` in ``fmt``."""
    if fmt not in FORMATS:
        raise UsageError(f"--format {fmt!r}: expected one of {', '.join(FORMATS)}")
    module = importlib.import_module(f"{__name__}.{fmt}_format")
    if fmt == "text":
        return module.render(report, verbose=verbose, color=color)
    return module.render(report)


def emit(text: str, output: str | Path | None) -> None:
    """A rendered report (or snapshot) to ``--output`` (atomically), else to stdout."""
    if output:
        write_atomic(output, text)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()


def write_atomic(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temp file in the same directory + rename, so a
    reader never sees half a file. A symlink is followed (the link stays a link); a path
    that is not a regular file (``/dev/null``, ``/dev/stdout``, a FIFO) is written into,
    never replaced: a rename over it would swap a device for a file.

    Raises:
        UsageError: the directory is not writable, or the path cannot be written.
    """
    try:
        special = not stat.S_ISREG(os.stat(path).st_mode)
    except FileNotFoundError:
        special = False  # a new file (or a link to one)
    except OSError as exc:
        raise UsageError(f"--output {path}: {exc.strerror or exc}") from None
    if special:
        try:
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)
        except OSError as exc:
            raise UsageError(f"--output {path}: {exc.strerror or exc}") from None
        return
    import tempfile

    target = Path(os.path.realpath(path))
    directory = target.parent
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise UsageError(f"--output {path}: cannot write in {directory}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide the file from a textfile collector
        os.replace(tmp, target)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise UsageError(f"--output {path}: {exc.strerror or exc}") from None
