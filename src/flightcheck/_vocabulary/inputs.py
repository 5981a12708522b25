"""Reading a file the user named (``--facts``, ``--config``) without hanging or exhausting
memory on what it turns out to be: a regular file up to a size limit, or a pipe (``<(...)``,
a FIFO with a writer) read until EOF within a deadline; never a device (``/dev/zero``
would grow without end) and never a blocking open (a FIFO nobody writes).
"""

from __future__ import annotations

import os
import re
import select
import stat
import time

from flightcheck._vocabulary.errors import UsageError

#: how long a pipe given as input may take to deliver its whole content
PIPE_DEADLINE_S = 10.0
#: how long a pipe may take to deliver its first byte (a FIFO nobody writes)
NO_WRITER_S = 3.0
_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)


def shown(path: str | os.PathLike[str]) -> str:
    """A path for a one-line message: undecodable bytes as escapes, never a crash."""
    return os.fsdecode(os.fsencode(path)).encode("utf-8", "backslashreplace").decode("utf-8")


_SURROGATE = re.compile("[\ud800-\udfff]")


def escape_surrogates(text: str, *, json: bool = False) -> str:
    """``text`` with every lone surrogate written as ``\\xNN`` (an undecodable byte of a
    file name, as Python holds it) or ``\\uNNNN``; ``json``: for text inside JSON
    strings, where the backslash itself must be escaped. The result encodes as UTF-8."""

    def escape(m: re.Match[str]) -> str:
        code = ord(m.group())
        shown = f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"
        return shown.replace("\\", "\\\\") if json else shown

    return _SURROGATE.sub(escape, text)


def read_bounded(path: str | os.PathLike[str], limit: int, what: str) -> bytes:
    """The content of ``path`` (at most ``limit`` bytes).

    Raises:
        UsageError: cannot be read, not a regular file or pipe, over the limit, or a pipe
            that did not reach EOF within :data:`PIPE_DEADLINE_S`. ``what`` starts the message.
    """
    name = f"{what} {shown(path)}"
    try:
        fd = os.open(path, _FLAGS)
    except OSError as exc:
        raise UsageError(f"{name}: cannot read: {exc.strerror or exc}") from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISREG(mode):
            os.set_blocking(fd, True)
            data = _read_upto(fd, limit, name)
        elif stat.S_ISFIFO(mode):
            data = _read_pipe(fd, limit, name)
        elif stat.S_ISDIR(mode):
            raise UsageError(f"{name}: is a directory")
        else:
            raise UsageError(f"{name}: not a regular file (a device or socket): not reading it")
    except OSError as exc:
        raise UsageError(f"{name}: cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    return data


def _too_large(name: str, limit: int) -> UsageError:
    return UsageError(f"{name}: over the {limit >> 20} MiB flightcheck reads")


def _read_upto(fd: int, limit: int, name: str) -> bytes:
    parts: list[bytes] = []
    got = 0
    while True:
        chunk = os.read(fd, min(1 << 20, limit + 1 - got))
        if not chunk:
            return b"".join(parts)
        parts.append(chunk)
        got += len(chunk)
        if got > limit:
            raise _too_large(name, limit)


def _read_pipe(fd: int, limit: int, name: str) -> bytes:
    """A pipe until EOF; a FIFO with no writer yet is waited for until the deadline."""
    start = time.monotonic()
    deadline = start + PIPE_DEADLINE_S
    parts: list[bytes] = []
    got = 0
    seen_data = False
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise UsageError(f"{name}: a pipe that did not finish within {PIPE_DEADLINE_S:g}s")
        ready, _, _ = select.select([fd], [], [], min(left, 0.1))
        if not ready:
            if not seen_data and time.monotonic() - start > NO_WRITER_S:
                raise UsageError(f"{name}: a FIFO with no writer (nothing within {NO_WRITER_S:g}s)")
            continue
        try:
            chunk = os.read(fd, min(1 << 20, limit + 1 - got))
        except BlockingIOError:
            continue
        if not chunk:
            if seen_data:
                return b"".join(parts)
            # EOF with nothing read: no writer has opened it (yet), or it wrote nothing
            if time.monotonic() - start > NO_WRITER_S:
                raise UsageError(f"{name}: a FIFO with no writer (nothing within {NO_WRITER_S:g}s)")
            time.sleep(0.02)
            continue
        seen_data = True
        parts.append(chunk)
        got += len(chunk)
        if got > limit:
            raise _too_large(name, limit)
