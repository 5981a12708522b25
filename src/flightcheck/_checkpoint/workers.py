"""The scan's worker processes, started before the reader needs them.

A worker (``validate.main``) takes ~45 ms to start here (the interpreter, then msgspec).
``check`` starts reading a model directory before it imports anything else; when that
directory will be read cold (it has a big index and no cache file), its workers are
started right then, from this standard-library module, so that they have started by the
time the reader has listed and stat'ed the shards and has their work to send. A worker
waits for its work on stdin (:func:`.scan._send`) and is killed if none comes.
"""

from __future__ import annotations

import os
import stat
import sys
import time
from collections.abc import Mapping
from importlib.util import find_spec
from typing import TYPE_CHECKING

from flightcheck._checkpoint import bounded
from flightcheck._checkpoint.cachepath import cache_file

if TYPE_CHECKING:
    import subprocess

#: Below this much header to parse (bytes), workers cost more than they save.
PARALLEL_MIN_BYTES = 6 << 20
#: What starting one worker costs, in header bytes parsed meanwhile (~45 ms).
WORKER_START_BYTES = 5 << 20
MAX_WORKERS = 16
REAP_S = 2.0  # after SIGKILL: a process stuck in the kernel (dead NFS) is left to the OS
INDEX_NAME = "model.safetensors.index.json"
#: The shard headers hold ~1.35x the bytes of the index that lists their tensors.
HEADERS_PER_INDEX_BYTE = 4 / 3
EARLY_LOOK_S = 1.0  # the index's stat and the cache's, before any worker is started early

# this directory first: the site-packages that holds msgspec may hold a `validate` of its
# own (configobj installs one), which would make every worker fail
BOOT = "import sys;sys.path[:0]=[{here!r},{msgspec_dir!r}];import validate;sys.exit(validate.main())"


def cpus() -> int:
    """CPUs this process may run on (affinity and container limits included where visible)."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    return max(1, n)


def how_many(header_bytes: int, shards: int) -> int:
    """Worker processes worth starting for this much header to parse."""
    if header_bytes < PARALLEL_MIN_BYTES or shards < 2:
        return 0
    return min(MAX_WORKERS, shards - 1, max(1, cpus() - 1), max(1, header_bytes // (2 * WORKER_START_BYTES)))


def popen(boot: str) -> subprocess.Popen[bytes]:
    """A worker running ``boot`` (``BOOT`` filled in), waiting for its work on stdin."""
    import subprocess  # (here: a warm run starts none)

    return subprocess.Popen(
        [sys.executable, "-I", "-S", "-c", boot],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own process group: a timeout kills it whole
    )


def kill(proc: subprocess.Popen[bytes]) -> None:
    """Kill a worker's process group and reap it (waiting at most REAP_S)."""
    import signal
    import subprocess

    if proc.stdin is not None:
        try:
            proc.stdin.close()
        except OSError:
            pass
        proc.stdin = None
    if proc.returncode is None:  # (once reaped, its id may be another process's)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            proc.wait(timeout=REAP_S)
        except subprocess.TimeoutExpired:
            pass  # uninterruptible (D state): Popen reaps it on a later call once it can die
    if proc.stdout is not None:
        try:
            proc.stdout.close()
        except OSError:
            pass


def start_early(model: str, env: Mapping[str, str] | None = None) -> list[subprocess.Popen[bytes]]:
    """Start the workers a cold read of the directory ``model`` will want, now; [] when it
    will not (a small model, one CPU, a cache file already there: most likely a warm
    run) or when the filesystem does not answer within :data:`EARLY_LOOK_S`. The caller
    hands them to the reader and kills those left over."""
    return look_early(model, env)[0]


def look_early(model: str, env: Mapping[str, str] | None = None) -> tuple[list[subprocess.Popen[bytes]], bool]:
    """:func:`start_early`'s workers, and whether the directory has a big index and a scan
    cache file already (a warm read, most likely; then no worker is started)."""
    if cpus() < 2:
        return [], False
    try:
        n = bounded.call(_wanted, model, env, deadline=time.monotonic() + EARLY_LOOK_S)
    except (bounded.Hung, OSError, ValueError):
        return [], False
    if n < 0:
        return [], True
    spec = find_spec("msgspec")
    if not n or spec is None or spec.origin is None:
        return [], False
    boot = BOOT.format(
        msgspec_dir=os.path.dirname(os.path.dirname(spec.origin)), here=os.path.dirname(os.path.abspath(__file__))
    )
    procs = []
    for _ in range(n):
        try:
            procs.append(popen(boot))
        except OSError:
            break
    return procs, False


def _wanted(model: str, env: Mapping[str, str] | None) -> int:
    """Workers worth starting for a cold read of ``model`` (-1: it has a cache file)."""
    st = os.stat(os.path.join(model, INDEX_NAME))
    if not stat.S_ISREG(st.st_mode):
        return 0
    n = how_many(int(st.st_size * HEADERS_PER_INDEX_BYTE), MAX_WORKERS + 1)
    if n:
        cached = cache_file(os.path.realpath(model), env)
        if cached is not None and os.path.exists(cached):
            return -1  # read before: most shards are likely cached
    return n
