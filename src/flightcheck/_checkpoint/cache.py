"""The scan cache: per-shard summaries (and the index's) so a second check is instant.

One file per model directory under ``$XDG_CACHE_HOME/flightcheck`` (default
``~/.cache/flightcheck``), msgpack, written atomically. An entry is reused only when its
file key — (real path, size, mtime_ns, inode, ctime_ns, device) — matches the file now;
ctime is in the key because ``touch -d`` can put an old mtime back but not an old ctime.
A cache file that does not decode, was written by another format version, or belongs to
another directory is ignored and rewritten, never trusted. ``FLIGHTCHECK_NO_CACHE=1``
turns the cache off. Nothing is ever written into the model directory.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

import msgspec

from flightcheck._checkpoint.problems import Kind
from flightcheck._checkpoint.shardio import read_small
from flightcheck._checkpoint.validate import ShardScan

#: Bump when ShardScan / IndexScan change meaning: older files are then ignored.
FORMAT = "flightcheck.ckpt-cache/4"  # 4: problems carry kinds, not check codes
MAX_CACHE = 256 << 20  # a 390k-tensor model's file is ~0.2 MB

FileKey = tuple[int, int, int, int, int]  # size, mtime_ns, inode, ctime_ns, device


class IndexScan(msgspec.Struct, array_like=True):
    """What the index says, reduced to what the cross-check needs."""

    total_size: int | None = None  # metadata.total_size, if an int
    files: dict[str, tuple[int, str]] = {}  # shard file -> (tensor count, names digest)
    problem: str | None = None  # the index itself is unreadable / not JSON / wrong shape


class _Entry(msgspec.Struct, array_like=True):
    key: FileKey
    scan: ShardScan


class _IndexEntry(msgspec.Struct, array_like=True):
    key: FileKey
    scan: IndexScan


class CacheFile(msgspec.Struct):
    """One model directory's cached scans, by real path of each file."""

    format: str
    model_dir: str
    shards: dict[str, _Entry] = {}
    index: _IndexEntry | None = None


def file_key(st: os.stat_result) -> FileKey:
    """The identity of a file's content as far as stat can tell."""
    return (st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns, st.st_dev)


def cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CACHE_HOME/flightcheck``, default ``~/.cache/flightcheck``."""
    env = os.environ if env is None else env
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "flightcheck"


def enabled(env: Mapping[str, str] | None = None) -> bool:
    """False when FLIGHTCHECK_NO_CACHE is set to a true value."""
    env = os.environ if env is None else env
    return (env.get("FLIGHTCHECK_NO_CACHE") or "").strip().lower() not in ("1", "true", "yes", "on")


class ScanCache:
    """Load once, look up per file, store back once (only when something changed)."""

    def __init__(self, model_dir: Path, *, env: Mapping[str, str] | None = None) -> None:
        self.model_dir = str(model_dir)
        self.enabled = enabled(env)
        digest = hashlib.blake2b(self.model_dir.encode("utf-8", "surrogatepass"), digest_size=10).hexdigest()
        self.path = cache_dir(env) / f"ckpt-{digest}.msgpack"
        self.data = CacheFile(FORMAT, self.model_dir)
        self.dirty = False
        self.hits = self.misses = 0
        if self.enabled:
            self._load()

    def _load(self) -> None:
        try:
            raw = read_small(self.path, MAX_CACHE)
        except FileNotFoundError:
            return
        except OSError:
            self.dirty = True  # a FIFO, a directory, absurdly large, unreadable: replace it
            return
        try:
            data = msgspec.msgpack.decode(raw, type=CacheFile)
        except (msgspec.MsgspecError, RecursionError):
            self.dirty = True  # corrupt: rewrite it
            return
        if data.format != FORMAT or data.model_dir != self.model_dir:
            self.dirty = True  # another version's, or another directory's (hash collision): ignore
            return
        self.data = data

    def shard(self, real: str, key: FileKey) -> ShardScan | None:
        """The cached scan of ``real`` if its key still matches."""
        entry = self.data.shards.get(real)
        if entry is not None and tuple(entry.key) == key:
            self.hits += 1
            return entry.scan
        self.misses += 1
        return None

    def put_shard(self, real: str, key: FileKey, scan: ShardScan) -> None:
        """Remember a fresh scan (problems included: a broken shard stays broken until it
        changes) — unless it could not be read (FC508): that may be a passing hiccup."""
        if any(p.kind == Kind.UNREADABLE for p in scan.problems):
            return
        self.data.shards[real] = _Entry(key, scan)
        self.dirty = True

    def index(self, key: FileKey) -> IndexScan | None:
        """The cached index summary if the index file is unchanged."""
        entry = self.data.index
        if entry is not None and tuple(entry.key) == key:
            return entry.scan
        return None

    def put_index(self, key: FileKey, scan: IndexScan) -> None:
        self.data.index = _IndexEntry(key, scan)
        self.dirty = True

    def prune(self, keep: set[str]) -> None:
        """Forget shards no longer part of the model (renamed, deleted)."""
        stale = [k for k in self.data.shards if k not in keep]
        for k in stale:
            del self.data.shards[k]
        self.dirty = self.dirty or bool(stale)

    def save(self) -> None:
        """Write atomically; a read-only or full home directory only costs the cache."""
        if not (self.enabled and self.dirty):
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd, tmp = tempfile.mkstemp(prefix=".ckpt-", suffix=".tmp", dir=self.path.parent)
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(msgspec.msgpack.encode(self.data))
                os.replace(tmp, self.path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except OSError:
            return
        self.dirty = False
