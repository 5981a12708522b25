"""Reporters: one report, several formats. Each renderer is ``render(report) -> str``.

Formats: ``text`` (flutter-doctor look), ``json`` (``flightcheck.report/v1``), ``junit``
and ``prometheus`` (CI and fleets); a cluster report also as one HTML page
(``cluster_html``). ``emit`` writes a rendered report to stdout or to ``--output``, there
with ``write_atomic``: a temp file + rename, so a textfile collector never reads half a
file.
"""

from __future__ import annotations

import contextlib
import errno
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
        return no_surrogates(module.render(report, verbose=verbose, color=color))
    return no_surrogates(module.render(report))


def no_surrogates(text: str, *, json: bool = False) -> str:
    """``text`` with every lone surrogate (a file name's undecodable byte, as Python holds
    it) written as ``\\xNN`` (escaped once more inside JSON strings): a report is always
    valid UTF-8, and the byte stays readable."""
    from flightcheck._vocabulary.inputs import escape_surrogates

    return escape_surrogates(text, json=json)


def emit(text: str, output: str | Path | None) -> None:
    """A rendered report (or snapshot) to ``--output`` (atomically), else to stdout.

    Raises:
        UsageError: the output cannot be written (``/dev/full``, a closed pipe's sibling
            errors, a closed stdout, a refused path): one line, exit 2.
    """
    if output:
        write_atomic(output, text)
        return
    if sys.stdout is None:  # `flightcheck ... >&-`: Python starts with no sys.stdout
        raise UsageError("cannot write to stdout: it is closed")
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except OSError as exc:
        _drop_stdout()
        raise UsageError(f"cannot write to stdout: {exc.strerror or exc}") from None


def _drop_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush of what could not be
    written does not fail again (and exit 120) after the one-line error."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


#: how long a FIFO given as --output may go without a reader
FIFO_WAIT_S = 5.0

#: the longest chain of symbolic links followed at the end of an output path
_MAX_HOPS = 40


def _shown(path: str | Path) -> str:
    """A path for a one-line message: undecodable bytes as escapes, never a crash."""
    return os.fsdecode(os.fsencode(path)).encode("utf-8", "backslashreplace").decode("utf-8")


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def _open_parent(path: str) -> tuple[int, str, bool]:
    """The directory that holds ``path``'s final entry, opened, and that entry's name:
    walked from ``/`` one component at a time, each directory opened relative to the last
    (``O_NOFOLLOW``), so a directory swapped for a link after it was checked is never gone
    through. A symbolic link on the way (or at the end) is followed only when the caller
    or root owns it; another user's could point anywhere the caller may write (a root-only
    directory, ``/etc/cron.d``). The third value: the final entry is a trusted link to a
    device, FIFO or socket that must be opened through the link (``/dev/stdout`` ends in
    ``/proc``'s ``pipe:[n]``, which no walk can name).

    Raises:
        UsageError: a link refused, too many links, a missing directory, a path swapped
            while being walked.
    """
    me = os.geteuid()
    pending = list(Path(os.path.abspath(path)).parts[1:])
    dfd = os.open("/", _DIR_FLAGS)
    hops = 0
    try:
        while pending:
            name = pending.pop(0)
            if name in ("", "."):
                continue
            try:
                st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            except FileNotFoundError:
                if pending:
                    raise UsageError(f"--output {_shown(path)}: no such directory: {_shown(name)}") from None
                return dfd, name, False  # a new file
            if stat.S_ISLNK(st.st_mode):
                if st.st_uid not in (me, 0):
                    raise UsageError(
                        f"--output {_shown(path)}: {_shown(name)} is a symbolic link owned by uid {st.st_uid},"
                        " not by you: not following it"
                    )
                hops += 1
                if hops > _MAX_HOPS:
                    raise UsageError(f"--output {_shown(path)}: too many levels of symbolic links")
                if not pending:
                    try:
                        end = os.stat(name, dir_fd=dfd)
                    except OSError:
                        end = None
                    if end is not None and not (stat.S_ISREG(end.st_mode) or stat.S_ISDIR(end.st_mode)):
                        return dfd, name, True
                target = Path(os.readlink(name, dir_fd=dfd))
                if target.is_absolute():
                    os.close(dfd)
                    dfd = os.open("/", _DIR_FLAGS)
                    pending = list(target.parts[1:]) + pending
                else:
                    pending = list(target.parts) + pending
                continue
            if not pending:
                return dfd, name, False
            nxt = os.open(name, _DIR_FLAGS, dir_fd=dfd)  # ELOOP / ENOTDIR when swapped since the stat
            os.close(dfd)
            dfd = nxt
        raise UsageError(f"--output {_shown(path)}: is a directory")
    except OSError as exc:
        os.close(dfd)
        raise UsageError(f"--output {_shown(path)}: {exc.strerror or exc}") from None
    except BaseException:
        os.close(dfd)
        raise


def write_atomic(path: str | Path, text: str, *, mode: int = 0o644) -> None:
    """Write ``text`` to ``path`` through a temp file in the same directory + rename, so a
    reader never sees half a file.

    Safe where another user prepares the ground (``/tmp``, a textfile-collector directory
    a service user owns), also as root:

    - a symbolic link (the final name, or a directory on the way) is followed only when
      the caller (or root) owns it; the path is walked once, each directory held open and
      the next opened relative to it (``O_NOFOLLOW``), and the temp file is created,
      renamed and removed relative to the final directory's descriptor (``dir_fd``): a
      directory swapped for a link during the write is never written through;
    - a block device is never written; a character device or FIFO (``/dev/null``,
      ``/dev/stdout``, a pipe with a reader) is written into, never replaced (a rename over
      it would swap a device for a file); a FIFO without a reader is an error, not a hang;
    - an existing file keeps its mode (and owner, as root); a new file is ``mode`` (0644:
      a textfile collector must read it; 0600 for anything holding secrets);
    - no temp file is left behind, whatever fails.

    Raises:
        UsageError: the path is refused, or cannot be written.
    """
    path = os.fspath(path)
    shown = _shown(path)
    dfd, name, through_link = _open_parent(path)
    try:
        if through_link:
            with contextlib.suppress(OSError):
                if stat.S_ISBLK(os.stat(name, dir_fd=dfd).st_mode):
                    raise UsageError(f"--output {shown}: a block device: not writing a report into it")
            _write_special(name, shown, text, dfd, follow=True)
            return
        try:
            st: os.stat_result | None = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            st = None  # a new file
        except OSError as exc:
            raise UsageError(f"--output {shown}: {exc.strerror or exc}") from None
        if st is not None and stat.S_ISLNK(st.st_mode):  # swapped in since the walk
            raise UsageError(f"--output {shown}: changed while being checked: not writing into it")
        if st is not None and stat.S_ISBLK(st.st_mode):
            raise UsageError(f"--output {shown}: a block device: not writing a report into it")
        if st is not None and stat.S_ISDIR(st.st_mode):
            raise UsageError(f"--output {shown}: is a directory")
        if st is not None and not stat.S_ISREG(st.st_mode):
            _write_special(name, shown, text, dfd, follow=False)
            return
        _replace_in(dfd, name, shown, text, st, mode)
    finally:
        os.close(dfd)


def _replace_in(dfd: int, name: str, shown: str, text: str, st: os.stat_result | None, mode: int) -> None:
    """Write ``text`` to a new temp file in the directory ``dfd`` and rename it over ``name``
    (both relative to ``dfd``); the temp file is removed on any failure."""
    import secrets

    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    tmp = ""
    for _ in range(100):
        tmp = f".{name}.{secrets.token_hex(4)}.tmp"
        try:
            fd = os.open(tmp, flags, 0o600, dir_fd=dfd)
            break
        except FileExistsError:
            continue
        except OSError as exc:
            raise UsageError(f"--output {shown}: cannot write in its directory: {exc.strerror or exc}") from None
    else:
        raise UsageError(f"--output {shown}: cannot create a temp file in its directory")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as fh:
            fh.write(text)
            if st is not None:
                os.fchmod(fh.fileno(), stat.S_IMODE(st.st_mode))
                if os.geteuid() == 0 and (st.st_uid, st.st_gid) != (0, 0):
                    os.fchown(fh.fileno(), st.st_uid, st.st_gid)
            else:
                os.fchmod(fh.fileno(), mode)  # O_CREAT's 0600 would hide the file from a textfile collector
        os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dfd)
        if isinstance(exc, OSError):
            raise UsageError(f"--output {shown}: {exc.strerror or exc}") from None
        raise


def _write_special(name: str, shown: str, text: str, dfd: int, *, follow: bool) -> None:
    """Write into a character device, FIFO or socket (``name`` in the directory ``dfd``;
    ``follow``: through a trusted link) without blocking on a FIFO that has no reader,
    and without writing into what was swapped in after the checks."""
    flags = os.O_WRONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    if not follow:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    import time

    deadline = time.monotonic() + FIFO_WAIT_S
    while True:
        try:
            fd = os.open(name, flags, dir_fd=dfd)
            break
        except OSError as exc:
            if exc.errno != errno.ENXIO:
                raise UsageError(f"--output {shown}: {exc.strerror or exc}") from None
            if time.monotonic() > deadline:  # a FIFO nobody reads: an error, not a hang
                raise UsageError(f"--output {shown}: a FIFO with no reader after {FIFO_WAIT_S:g}s") from None
            time.sleep(0.02)
    try:
        kind = os.fstat(fd).st_mode
        if stat.S_ISBLK(kind) or stat.S_ISREG(kind) or stat.S_ISDIR(kind):
            raise UsageError(f"--output {shown}: changed while being checked: not writing into it")
        os.set_blocking(fd, True)
        data = text.encode("utf-8", "backslashreplace")
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
    except OSError as exc:
        raise UsageError(f"--output {shown}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
