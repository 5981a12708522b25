"""Scan many shard headers at once: cache first, then this process plus worker processes.

A worker is ``python -I -S`` importing ``validate``, ``groups``, ``problems`` and ``shardio`` from this
directory as top-level modules (stdlib + msgspec only), so it starts in ~20 ms and never
imports flightcheck, torch or anything CUDA. Workers only pay
when there is enough header to parse: a handful of shards is scanned in this process.
Work is split by header length (read first, 8 bytes a shard) so the processes finish
together; this process takes a share too, after the extra work it was given (the index).
A worker that dies or times out costs only its own shards, which are rescanned here (a
timeout marks them unreadable instead: the filesystem is hanging). Every worker is waited
for before the scan returns or raises, and killed first if its results are not wanted.
"""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from flightcheck._checkpoint import validate
from flightcheck._checkpoint.problems import Kind
from flightcheck._checkpoint.shardio import MAX_HEADER, read_header
from flightcheck._checkpoint.validate import Problem, ShardScan

#: Below this much header to parse (bytes), workers cost more than they save.
PARALLEL_MIN_BYTES = 6 << 20
#: What starting one worker costs, in header bytes parsed meanwhile (~25 ms).
WORKER_START_BYTES = 3 << 20
MAX_WORKERS = 16
TIMEOUT_S = 120.0
REAP_S = 2.0  # after SIGKILL: a process stuck in the kernel (dead NFS) is left to the OS

# this directory first: the site-packages that holds msgspec may hold a `validate` of its
# own (configobj installs one), which would make every worker fail
_BOOT = "import sys;sys.path[:0]=[{here!r},{msgspec_dir!r}];import validate;sys.exit(validate.main())"


def cpus() -> int:
    """CPUs this process may run on (affinity and container limits included where visible)."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    return max(1, n)


@dataclass
class ScanStats:
    """How a scan went, for the report's evidence and the benchmark."""

    shards: int = 0
    cached: int = 0
    scanned: int = 0
    workers: int = 0
    fallbacks: int = 0  # shards a worker failed to return, rescanned here
    seconds: float = 0.0


def header_length(path: str) -> int:
    """The 8-byte header length of a shard (0 when unreadable: it costs nothing to parse)."""
    try:
        _size, head = read_header(path, body=False)
    except OSError:
        return 0
    n = int.from_bytes(head, "little")
    return n if n <= MAX_HEADER else 0


def _partition(costs: list[tuple[int, int]], bins: list[int]) -> list[list[int]]:
    """Longest-processing-time-first: indices of ``costs`` into bins with starting loads."""
    loads = list(bins)
    out: list[list[int]] = [[] for _ in bins]
    for i, cost in sorted(costs, key=lambda c: -c[1]):
        b = loads.index(min(loads))
        out[b].append(i)
        loads[b] += cost
    return out


def _spawn(paths: list[str], sha: bool) -> subprocess.Popen[bytes]:
    boot = _BOOT.format(
        msgspec_dir=os.path.dirname(os.path.dirname(msgspec.__file__)),
        here=os.path.dirname(os.path.abspath(validate.__file__)),
    )
    proc = subprocess.Popen(
        [sys.executable, "-I", "-S", "-c", boot],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own process group: a timeout kills it whole
    )
    assert proc.stdin is not None
    try:
        proc.stdin.write(msgspec.msgpack.encode([paths, sha]))
        proc.stdin.close()
    except OSError:  # it died before reading its work: reap it, the caller does the share
        _kill(proc)
        raise
    proc.stdin = None  # written and closed: communicate() must not touch it again
    return proc


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """Kill a worker's process group and reap it (waiting at most REAP_S)."""
    if proc.stdin is not None:
        try:
            proc.stdin.close()
        except OSError:
            pass
        proc.stdin = None
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    try:
        proc.communicate(timeout=REAP_S)
    except subprocess.TimeoutExpired:
        pass  # uninterruptible (D state): Popen reaps it on a later call once it can die


def _collect(proc: subprocess.Popen[bytes], n: int, deadline: float) -> list[ShardScan] | None:
    """A worker's results, or None (died, garbled, or past the deadline: then killed)."""
    try:
        out, _ = proc.communicate(timeout=max(0.1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        _kill(proc)
        return None
    if proc.returncode != 0:
        return None
    try:
        scans = msgspec.msgpack.decode(out, type=list[ShardScan])
    except (msgspec.MsgspecError, RecursionError):
        return None
    return scans if len(scans) == n else None


def scan_paths(
    paths: list[str],
    *,
    parent_extra: int = 0,
    parent_work: Callable[[], Any] | None = None,
    workers: int | None = None,
    timeout: float = TIMEOUT_S,
    sha: bool = False,
) -> tuple[list[ShardScan], ScanStats]:
    """Scan every path (a shard file) and return their scans in order.

    ``parent_work`` (e.g. parsing the index) runs in this process while the workers scan;
    ``parent_extra`` is its cost in header bytes, so the split accounts for it. ``workers``
    forces the number of worker processes (0: none); ``sha`` also hashes each header.
    """
    t0 = time.perf_counter()
    stats = ScanStats(shards=len(paths), scanned=len(paths))
    results: list[ShardScan | None] = [None] * len(paths)
    costs = [(i, header_length(p)) for i, p in enumerate(paths)] if paths else []
    total = sum(c for _, c in costs)
    penalty = 0  # forced worker counts get an even split (tests, benchmarks)
    if workers is None:
        workers, penalty = 0, WORKER_START_BYTES
        if total >= PARALLEL_MIN_BYTES and len(paths) > 1:
            workers = min(MAX_WORKERS, len(paths) - 1, max(1, cpus() - 1), max(1, total // (2 * WORKER_START_BYTES)))
    procs: list[tuple[subprocess.Popen[bytes], list[int]]] = []
    collected = 0  # procs[:collected] have been waited for
    mine = list(range(len(paths)))
    was_enabled = gc.isenabled()
    error: BaseException | None = None
    try:
        if workers > 0:
            bins = _partition(costs, [parent_extra] + [penalty] * workers)
            mine = bins[0]
            for share in bins[1:]:
                if not share:
                    continue
                try:
                    procs.append((_spawn([paths[i] for i in share], sha), share))
                except OSError:
                    mine.extend(share)  # cannot start a process here: do it ourselves
        stats.workers = len(procs)
        deadline = time.monotonic() + timeout
        gc.disable()  # header parsing makes many containers and no cycles
        if parent_work is not None:
            try:
                parent_work()
            except Exception as exc:  # noqa: BLE001 - collect the workers first, then re-raise it
                error = exc
        for i in mine:
            results[i] = validate.scan_file(paths[i], sha)
        for proc, share in procs:
            got = _collect(proc, len(share), deadline)
            collected += 1
            for j, i in enumerate(share):
                if got is not None:
                    results[i] = got[j]
                elif time.monotonic() >= deadline:
                    results[i] = ShardScan(
                        problems=[
                            Problem(
                                Kind.UNREADABLE,
                                f"reading the header took over {timeout:.0f} s (a hung or very slow filesystem?)",
                            )
                        ]
                    )
                else:
                    stats.fallbacks += 1
                    results[i] = validate.scan_file(paths[i], sha)  # the worker died: do it here
    finally:
        if was_enabled:
            gc.enable()
        for proc, _share in procs[collected:]:  # interrupted (^C, a bug): leave no orphan behind
            _kill(proc)
    if error is not None:
        raise error
    stats.seconds = time.perf_counter() - t0
    return [
        r if r is not None else ShardScan(problems=[Problem(Kind.UNREADABLE, "not scanned")]) for r in results
    ], stats
