"""``--deep``: how fast does this node read the checkpoint? (FC510's expected load time)

About 1 GiB is read in 16 MiB chunks spread over the shards, bypassing the page cache
where the filesystem allows (``O_DIRECT`` into a page-aligned buffer; otherwise
``posix_fadvise(DONTNEED)`` first, which drops only this file range's clean pages). Holes
of sparse files are skipped (they read as free zeros and would flatter the result).

It runs in a child process with a timeout, as a script of the standard library only: a
hung network filesystem costs the timeout, not the run.
"""

from __future__ import annotations

import errno
import json
import mmap
import os
import stat
import sys
import time
from collections.abc import Sequence
from typing import Any

SAMPLE_BYTES = 1 << 30
CHUNK = 16 << 20
TIME_CAP_S = 8.0
TIMEOUT_S = 20.0
ALIGN = 4096
SCRIPT = os.path.abspath(__file__)  # the child runs this file as a script


def _plan(sizes: list[int], budget: int = SAMPLE_BYTES, chunk: int = CHUNK) -> list[tuple[int, int, int]]:
    """(file index, offset, length) chunks spread evenly over the files' bytes."""
    total = sum(sizes)
    if total <= 0:
        return []
    n = max(1, -(-min(budget, total) // chunk))
    out = []
    for k in range(n):
        pos = int((k + 0.5) * total / n)  # the middle of the k-th n-th of all bytes
        for i, size in enumerate(sizes):
            if pos < size:
                off = max(0, min(pos, size - chunk)) // ALIGN * ALIGN
                out.append((i, off, min(chunk, size - off)))
                break
            pos -= size
    return out


def _read(paths: list[str], plan: list[tuple[int, int, int]]) -> dict[str, Any]:
    buf = mmap.mmap(-1, CHUNK)  # anonymous memory is page-aligned, as O_DIRECT requires
    read = holes = 0
    methods: set[str] = set()
    t0 = time.perf_counter()
    busy = 0.0
    for i, off, length in plan:
        if time.perf_counter() - t0 > TIME_CAP_S:
            break
        fd, method = _open(paths[i])
        try:
            if _is_hole(fd, off):
                holes += 1
                continue
            if method == "fadvise":
                os.posix_fadvise(fd, off, length, os.POSIX_FADV_DONTNEED)
            view = memoryview(buf)[: (length + ALIGN - 1) // ALIGN * ALIGN if method == "O_DIRECT" else length]
            t = time.perf_counter()
            try:
                got = os.preadv(fd, [view], off)
            except OSError:
                if method != "O_DIRECT":
                    raise
                os.close(fd)
                fd, method = os.open(paths[i], os.O_RDONLY), "fadvise"  # O_DIRECT refused this read
                os.posix_fadvise(fd, off, length, os.POSIX_FADV_DONTNEED)
                t = time.perf_counter()
                got = os.preadv(fd, [memoryview(buf)[:length]], off)
            busy += time.perf_counter() - t
            read += min(got, length)
            methods.add(method)
        finally:
            os.close(fd)
    return {
        "bytes": read,
        "seconds": round(busy, 4),
        "bytes_per_s": (read / busy) if busy > 0 else None,
        "chunks": len(plan),
        "holes": holes,
        "method": "+".join(sorted(methods)) or None,
    }


def _open(path: str) -> tuple[int, str]:
    flag = getattr(os, "O_DIRECT", 0)
    if flag:
        try:
            return os.open(path, os.O_RDONLY | flag), "O_DIRECT"
        except OSError:
            pass  # tmpfs, some FUSE and network filesystems refuse O_DIRECT
    return os.open(path, os.O_RDONLY), "fadvise"


def _is_hole(fd: int, off: int) -> bool:
    """Is ``off`` in a hole? (no SEEK_DATA support: assume data)"""
    try:
        return os.lseek(fd, off, os.SEEK_DATA) != off
    except AttributeError:
        return False
    except OSError as exc:
        return exc.errno == errno.ENXIO  # no data at or after ``off``: a hole up to the end


def measure(paths: Sequence[os.PathLike[str] | str], *, timeout: float = TIMEOUT_S) -> dict[str, Any] | None:
    """Run the measurement in a child; None-free: a failure is a dict with ``error``."""
    from flightcheck._collect.proc import run

    args = json.dumps([os.fspath(p) for p in paths])
    # the shared runner kills the child's whole group at the timeout and never waits
    # unboundedly for a child stuck in an uninterruptible read
    proc = run([sys.executable, "-I", "-S", SCRIPT], stdin=args, timeout=timeout)
    if proc.timed_out:
        return {"error": f"reading took over {timeout:.0f} s (a hung or very slow filesystem?)"}
    if proc.error:
        return {"error": f"could not start the measurement: {proc.error}"}
    try:
        return json.loads(proc.out)
    except ValueError:
        tail = (proc.err or "").strip().splitlines()[-1:] or ["no output"]
        return {"error": f"the measurement failed: {tail[0][:200]}"}


def main() -> int:
    """Child: paths as JSON on stdin, the result as JSON on stdout."""
    paths = json.loads(sys.stdin.read())
    sizes = []
    for p in paths:
        try:
            st = os.stat(p)
            sizes.append(st.st_size if stat.S_ISREG(st.st_mode) else 0)  # never open a FIFO or a device
        except OSError:
            sizes.append(0)
    try:
        result = _read(paths, _plan(sizes))
    except OSError as exc:
        result = {"error": f"read failed: {exc.strerror or exc}"}
    sys.stdout.write(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
