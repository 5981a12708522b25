"""Read files of a model directory that nobody vouches for, without ever blocking on them.

Everything flightcheck reads there (shard headers, the index, config.json, the cache's
size records) goes through here: a file is opened only when ``stat`` says it is a regular
file (a FIFO would block the open forever, a device may never end or have side effects),
with ``O_NONBLOCK`` in case one is swapped in between, and checked again with ``fstat``;
reads are bounded (a header by safetensors' limit, other files by the caller's).

Part of the scan worker (stdlib only, loaded there as a top-level module, like
``validate`` and ``groups``).
"""

from __future__ import annotations

import os
import stat

MAX_HEADER = 100_000_000  # safetensors' MAX_HEADER_SIZE
_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_NONBLOCK", 0)


class NotRegular(OSError):
    """The path is a FIFO, a socket, a device or a directory: never read."""

    def __init__(self, path: str) -> None:
        super().__init__(0, "not a regular file", path)


class TooLarge(OSError):
    """The file is over the caller's limit (``size``: what it holds, at least)."""

    def __init__(self, path: str, size: int, limit: int) -> None:
        super().__init__(0, f"{size:,} bytes, over the {limit:,}-byte limit flightcheck reads", path)
        self.size = size


def open_regular(path: str | os.PathLike[str]) -> int:
    """A read-only descriptor of a regular file. Raises OSError (NotRegular included)."""
    return _open_regular(path)[0]


def _open_regular(path: str | os.PathLike[str]) -> tuple[int, os.stat_result]:
    """(descriptor, its fstat): each file operation may be a network round trip."""
    if not stat.S_ISREG(os.stat(path).st_mode):
        raise NotRegular(os.fspath(path))
    fd = os.open(path, _FLAGS)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # swapped after the stat: refuse all the same
            raise NotRegular(os.fspath(path))
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def pread_all(fd: int, size: int, offset: int, expect: int | None = None) -> bytes:
    """Up to ``size`` bytes from ``offset`` (fewer only at the end of the file).

    ``expect``: the bytes the file is known to hold (its fstat): the first read asks for
    one more, so one short read proves the end without a second round trip."""
    parts = []
    while size > 0:
        want = min(size, 1 << 26) if expect is None else min(size, expect + 1 - offset, 1 << 26)
        chunk = os.pread(fd, max(1, want), offset)
        if not chunk:
            break
        parts.append(chunk)
        size -= len(chunk)
        offset += len(chunk)
        if expect is not None:
            if len(chunk) < want:
                break  # short: the end of the file
            expect = None  # it grew since: read on until the end or ``size``
    return b"".join(parts)


def read_small(path: str | os.PathLike[str], limit: int) -> bytes:
    """The whole of a regular file of at most ``limit`` bytes. Raises OSError (NotRegular,
    TooLarge included)."""
    fd, st = _open_regular(path)
    try:
        size = st.st_size
        if size > limit:
            raise TooLarge(os.fspath(path), size, limit)
        data = pread_all(fd, limit + 1, 0, expect=size)  # it may have grown since the fstat
    finally:
        os.close(fd)
    if len(data) > limit:
        raise TooLarge(os.fspath(path), len(data), limit)
    return data


def read_header(path: str | os.PathLike[str], *, body: bool = True) -> tuple[int, bytes]:
    """(file size, the 8-byte header length + the header) of a safetensors file.

    Only the 8 bytes come back when the length is over ``MAX_HEADER``, points past the end
    of the file, or ``body`` is False; fewer when the file is shorter than that. Raises
    OSError (NotRegular included).
    """
    fd, st = _open_regular(path)
    try:
        size = st.st_size
        head = pread_all(fd, 8, 0)
        n = int.from_bytes(head, "little")
        if not body or len(head) < 8 or n > MAX_HEADER or 8 + n > size:
            return size, head
        # the length and the header in one buffer, read at once: ``head + body`` would copy
        # every header (51 MB on a 96-shard MoE) into fresh, page-faulting memory
        whole = pread_all(fd, 8 + n, 0)
        if whole[:8] == head:
            return size, whole
        return size, head + pread_all(fd, n, 8)  # rewritten meanwhile: as read in two steps
    finally:
        os.close(fd)
