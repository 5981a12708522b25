"""Scan many shard headers at once: cache first, then this process plus worker processes.

A worker is ``python -I -S`` importing ``validate``, ``groups``, ``problems`` and ``shardio`` from this
directory as top-level modules (stdlib + msgspec only), so it starts in ~20 ms and never
imports flightcheck, torch or anything CUDA. Workers only pay
when there is enough header to parse: a handful of shards is scanned in this process.
Work is split by header length (read first, 8 bytes a shard) so the processes finish
together; this process takes a share too, after the extra work it was given (the index).
Nothing here waits on the filesystem without a deadline: every process reads its headers
on threads (concurrently: latency-bound storage costs a few round trips, not one per
shard), a worker sends each shard's scan as soon as it is done, and a shard that has not
answered by the deadline is unreadable ("did not answer within N s") while the rest are
kept. A worker that dies costs only the shards it had not sent, which are rescanned here
(still under the deadline). Every worker is killed and waited for before the scan
returns or raises.
"""

from __future__ import annotations

import gc
import os
import subprocess
import threading
import time
from collections.abc import Callable
from queue import Empty, SimpleQueue
from typing import Any

import msgspec

from flightcheck._checkpoint import validate
from flightcheck._checkpoint import workers as _workers
from flightcheck._checkpoint.bounded import Hung, imap
from flightcheck._checkpoint.model import TIMEOUT_S, ScanStats
from flightcheck._checkpoint.shardio import MAX_HEADER, read_header
from flightcheck._checkpoint.validate import ShardScan, scan_many, scan_read
from flightcheck._checkpoint.workers import (
    BOOT,
    how_many,
    kill,
    popen,
)

# (the worker processes themselves: .workers, which starts them before this is imported)
_BOOT = BOOT
_kill = kill


def header_length(path: str) -> int:
    """The 8-byte header length of a shard (0 when unreadable: it costs nothing to parse)."""
    try:
        _size, head = read_header(path, body=False)
    except OSError:
        return 0
    n = int.from_bytes(head, "little")
    return n if n <= MAX_HEADER else 0


def header_lengths(paths: list[str], deadline: float) -> list[int]:
    """:func:`header_length` of every path, concurrently, for balancing the split only: a
    length not read by ``deadline`` counts as the largest one read (it may be slow)."""
    out: list[int | None] = [None] * len(paths)
    for i, n in imap(header_length, paths, deadline=deadline):
        if isinstance(n, int):
            out[i] = n
    known = [n for n in out if n is not None]
    guess = max(known) if known else 1
    return [guess if n is None else n for n in out]


def _partition(costs: list[tuple[int, int]], bins: list[int]) -> list[list[int]]:
    """Longest-processing-time-first: indices of ``costs`` into bins with starting loads."""
    loads = list(bins)
    out: list[list[int]] = [[] for _ in bins]
    for i, cost in sorted(costs, key=lambda c: -c[1]):
        b = loads.index(min(loads))
        out[b].append(i)
        loads[b] += cost
    return out


def _spawn(paths: list[str], sha: bool, seconds: float = TIMEOUT_S) -> subprocess.Popen[bytes]:
    boot = _BOOT.format(
        msgspec_dir=os.path.dirname(os.path.dirname(msgspec.__file__)),
        here=os.path.dirname(os.path.abspath(validate.__file__)),
    )
    return _send(popen(boot), paths, sha, seconds)


def _send(proc: subprocess.Popen[bytes], paths: list[str], sha: bool, seconds: float) -> subprocess.Popen[bytes]:
    """Give a started worker its work (it reads stdin to the end, then scans)."""
    if proc.stdin is None:  # killed meanwhile (its reader gave up at the deadline)
        raise OSError("the worker was stopped")
    try:
        # the paths as bytes: a Linux path need not be UTF-8 (msgpack strings must be)
        proc.stdin.write(msgspec.msgpack.encode([list(map(os.fsencode, paths)), sha, seconds]))
        proc.stdin.close()
    except OSError:  # it died before reading its work: reap it, the caller does the share
        _kill(proc)
        raise
    proc.stdin = None  # written and closed: must not be touched again
    return proc


_DONE = -1  # a worker's stream ended (all sent, died, or garbled)


def _pump(w: int, proc: subprocess.Popen[bytes], share: list[int], sink: SimpleQueue[tuple[int, int, Any]]) -> None:
    """Forward a worker's frames to ``sink`` as (worker, index into paths, scan) until its
    stream ends, then (worker, _DONE, None). Runs on a daemon thread."""
    out = proc.stdout
    assert out is not None
    dec = msgspec.msgpack.Decoder(tuple[int, ShardScan])
    try:
        while True:
            head = out.read(4)
            if len(head) < 4:
                break
            frame = out.read(int.from_bytes(head, "little"))
            j, scan = dec.decode(frame)
            sink.put((w, share[j], scan))
    except (OSError, ValueError, IndexError, msgspec.MsgspecError, RecursionError):
        pass  # garbled or closed: what it did not send is rescanned or marked
    sink.put((w, _DONE, None))


def scan_paths(
    paths: list[str],
    *,
    parent_extra: int = 0,
    parent_work: Callable[[], Any] | None = None,
    workers: int | None = None,
    timeout: float = TIMEOUT_S,
    sha: bool = False,
    header_bytes: int | None = None,
    ready: list[subprocess.Popen[bytes]] | None = None,
) -> tuple[list[ShardScan], ScanStats]:
    """Scan every path (a shard file) and return their scans in order, within ``timeout``.

    ``parent_work`` (e.g. parsing the index) runs in this process while the workers scan;
    ``parent_extra`` is its cost in header bytes, so the split accounts for it. ``workers``
    forces the number of worker processes (0: none); ``sha`` also hashes each header.
    ``header_bytes``: the headers' total length when the caller can estimate it (from the
    index's size): then no header length is read up front, which on latency-bound
    storage costs a round trip per shard; the shards are split evenly instead.
    ``ready``: workers already started (:func:`.workers.start_early`), used first and
    taken out of the list; the caller kills those left in it.
    """
    t0 = time.perf_counter()
    deadline = time.monotonic() + timeout
    stats = ScanStats(shards=len(paths), scanned=len(paths))
    results: list[ShardScan | None] = [None] * len(paths)
    if header_bytes is not None and paths:
        per = max(1, header_bytes // len(paths))
        costs = [(i, per) for i in range(len(paths))]
    else:
        # the lengths only balance the split: a slow one must not eat the scan's time
        soon = min(deadline, time.monotonic() + min(2.0, timeout / 4))
        costs = list(enumerate(header_lengths(paths, soon))) if paths else []
    total = sum(c for _, c in costs)
    penalty = 0  # forced worker counts get an even split (tests, benchmarks)
    if workers is None:
        workers, penalty = 0, _workers.WORKER_START_BYTES
        workers = how_many(total, len(paths))
        if ready and workers:
            workers = max(workers, min(len(ready), len(paths) - 1))
            penalty = _workers.WORKER_START_BYTES // 2  # started already, maybe still starting
    procs: list[subprocess.Popen[bytes]] = []
    shares: list[list[int]] = []
    mine = list(range(len(paths)))
    was_enabled = gc.isenabled()
    error: BaseException | None = None
    sink: SimpleQueue[tuple[int, int, Any]] = SimpleQueue()
    try:
        if workers > 0:
            bins = _partition(costs, [parent_extra] + [penalty] * workers)
            mine = bins[0]
            for share in bins[1:]:
                if not share:
                    continue
                seconds = max(0.1, deadline - time.monotonic())
                try:
                    if ready:
                        proc = _send(ready.pop(), [paths[i] for i in share], sha, seconds)
                    else:
                        proc = _spawn([paths[i] for i in share], sha, seconds)
                except OSError:
                    mine.extend(share)  # cannot start a process here: do it ourselves
                    continue
                threading.Thread(target=_pump, args=(len(procs), proc, share, sink), daemon=True).start()
                procs.append(proc)
                shares.append(share)
        stats.workers = len(procs)
        gc.disable()  # header parsing makes many containers and no cycles
        mine_paths = [paths[i] for i in mine]
        # this process's reads start now, on threads, while it does the parent work
        local = scan_many(mine_paths, deadline, sha)
        if parent_work is not None:
            try:
                parent_work()
            except Exception as exc:  # noqa: BLE001 - collect the workers first, then re-raise it
                error = exc
        for j, scan in local:
            results[mine[j]] = scan
        open_streams = len(procs)
        while open_streams:
            try:
                _w, i, scan = sink.get(timeout=max(0.0, deadline - time.monotonic()))
            except Empty:
                break  # the deadline: what has not come is marked below
            if i == _DONE:
                open_streams -= 1
            else:
                results[i] = scan
        orphans = [i for share in shares for i in share if results[i] is None]
        if orphans and time.monotonic() < deadline:  # a worker died: redo its shards here
            stats.fallbacks = len(orphans)
            for j, scan in scan_many([paths[i] for i in orphans], deadline, sha):
                results[orphans[j]] = scan
    finally:
        if was_enabled:
            gc.enable()
        for proc in procs:  # done, past the deadline or interrupted (^C, a bug): no orphan left
            _kill(proc)
    if error is not None:
        raise error
    stats.seconds = time.perf_counter() - t0
    hung = scan_read(Hung(timeout))
    return [r if r is not None else hung for r in results], stats
