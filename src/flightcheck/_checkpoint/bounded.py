"""Filesystem calls under a deadline, many at once: a dead mount must not hang the check.

A ``stat`` or ``open`` on a hung NFS or FUSE mount can block forever, and nothing can
interrupt it. So every touch of a model directory runs on a daemon thread, and the caller
waits only until its deadline: a call that has not answered by then is given up on
(:class:`Hung`) and its thread left blocked (a daemon thread does not keep the process
alive). Many calls run concurrently, so on storage with a per-operation latency (network
filesystems, object-store mounts) 96 shards cost a few round trips, not 96 of them.

Part of the scan worker (stdlib only, loaded there as a top-level module).
"""

from __future__ import annotations

import _thread
import time
from collections.abc import Callable, Iterator, Sequence
from queue import Empty, SimpleQueue
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

#: Concurrent calls at most: a 96-shard model's files all in one round trip (a thread
#: costs ~50 us to start and a few pages of memory).
THREADS = 128
#: Threads started at once; the rest start once GROW_S passes in which the threads took no
#: waiting call (all blocked: a slow or hung filesystem), or once the caller has waited
#: GROW_S in all for results (latency-bound storage), so local files do not pay for 96
#: thread starts.
FIRST_THREADS = 4
GROW_S = 0.01


class Hung(Exception):
    """A call did not answer before the deadline (a hung or very slow filesystem)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"did not answer within {seconds:.0f} s")
        self.seconds = seconds


def call(fn: Callable[..., R], *args: Any, deadline: float, budget: float | None = None) -> R:
    """``fn(*args)`` on a daemon thread; its result or exception, or :class:`Hung` once
    ``time.monotonic()`` passes ``deadline`` (``budget``: the seconds quoted)."""
    for _i, result in imap(lambda a: fn(*a), [args], deadline=deadline, threads=1, budget=budget):
        if isinstance(result, BaseException):
            raise result
        return result
    raise AssertionError("unreachable")  # pragma: no cover


def imap(
    fn: Callable[[T], R],
    items: Sequence[T],
    *,
    deadline: float,
    threads: int = THREADS,
    budget: float | None = None,
) -> Iterator[tuple[int, R | BaseException]]:
    """``(i, fn(items[i]))`` in the order the calls finish, an exception (a :class:`Hung`
    for each call still unanswered at ``deadline``) in place of a result. Every index is
    yielded exactly once. ``fn`` runs on up to ``threads`` daemon threads."""
    n = len(items)
    budget = budget if budget is not None else max(0.0, deadline - time.monotonic())
    work: SimpleQueue[int | None] = SimpleQueue()
    done: SimpleQueue[tuple[int, Any]] = SimpleQueue()
    for i in range(n):
        work.put(i)
    k = max(1, min(threads, n)) if n else 0

    def run() -> None:
        while True:
            i = work.get()
            if i is None:
                return
            try:
                r: Any = fn(items[i])
            except BaseException as exc:  # noqa: BLE001 - handed to the caller, who decides
                r = exc
            done.put((i, r))

    pool = _Pool(run, work, k)
    pool.start(min(k, FIRST_THREADS))  # started now, not at the first next(): the calls overlap the caller's work
    return _results(n, pool, done, deadline, budget)


class _Pool:
    """The daemon threads of one :func:`imap`: a few at first (a local file answers in
    microseconds, and 96 thread starts cost more than the calls), all of them when work
    has waited a whole :data:`GROW_S` with none of it taken (a network filesystem: each
    call a round trip; or a hung one) or the caller has waited that long for results."""

    def __init__(self, run: Callable[[], None], work: SimpleQueue[int | None], most: int) -> None:
        self.run, self.work, self.most = run, work, most
        self.started = 0
        self.lock = _thread.allocate_lock()

    def start(self, count: int) -> None:
        with self.lock:
            count = min(count, self.most - self.started)
            for _ in range(count):
                self.work.put(None)  # one stop mark a thread, behind the work
                # (_thread: no wait for each to start, and never joined at exit, like a daemon)
                _thread.start_new_thread(self.run, ())
            self.started += count
        if self.started < self.most:
            _thread.start_new_thread(self._grow_later, ())

    def _grow_later(self) -> None:
        # Work still waiting is not enough: a process busy elsewhere (parsing the headers
        # read, on the interpreter these threads need between their system calls) leaves
        # work waiting on local files too, and 96 threads then cost it ~10% more CPU
        # (all their buffers read ahead, each thread started). Only a GROW_S in which no
        # waiting call was taken says the threads are all blocked in the filesystem.
        waiting = self.work.qsize() - self.started  # (the queue holds a stop mark a thread)
        while True:
            time.sleep(GROW_S)
            with self.lock:
                if self.started >= self.most:  # stopped meanwhile
                    return
            left = self.work.qsize() - self.started
            if left <= 0:  # every call taken
                return
            if left >= waiting:  # none taken: blocked
                self.start(self.most)
                return
            waiting = left

    def stop(self) -> None:
        """Drop the work not taken yet: every thread ends after its call."""
        with self.lock:
            while True:
                try:
                    self.work.get_nowait()
                except Empty:
                    break
            for _ in range(self.started):
                self.work.put(None)
            self.most = self.started  # and no more start


def _results(
    n: int, pool: _Pool, done: SimpleQueue[tuple[int, Any]], deadline: float, budget: float
) -> Iterator[tuple[int, Any]]:
    seen = [False] * n
    left = n
    # The other way the calls show they are slow (latency-bound storage, where each thread
    # still takes a call every few ms): the caller, having nothing else to do, waits for
    # their results here. Waiting GROW_S in all starts the rest of the threads; a caller
    # that keeps finding results ready (local files) never does.
    waited = 0.0
    try:
        while left:
            now = time.monotonic()
            wait = deadline - now
            if wait <= 0:
                break
            patient = waited >= GROW_S or pool.started >= pool.most
            try:
                i, r = done.get(timeout=wait if patient else min(wait, GROW_S - waited))
            except Empty:
                if patient:
                    break
                waited += time.monotonic() - now
                if waited >= GROW_S:
                    pool.start(pool.most)
                continue
            if not patient:
                waited += time.monotonic() - now
                if waited >= GROW_S:
                    pool.start(pool.most)
            seen[i] = True
            left -= 1
            yield i, r
    finally:  # the deadline, or a caller that stopped early: the threads take no new work
        pool.stop()
    for i in range(n):
        if not seen[i]:
            yield i, Hung(budget)
