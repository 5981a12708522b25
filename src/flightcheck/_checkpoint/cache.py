"""The scan cache: per-shard summaries (and the index's) so a second check is instant.

One file per model directory under ``$XDG_CACHE_HOME/flightcheck`` (default
``~/.cache/flightcheck``), msgpack, written atomically. The directory is used only when it
is the caller's (not a symbolic link, not writable by group or others; created 0700) and a
file only when the caller owns it: a scan planted by another user never turns a truncated
shard into "ready" (docs/security.md). An entry is reused only when its
file key — (real path, size, mtime_ns, inode, ctime_ns, device) — matches the file now;
ctime is in the key because ``touch -d`` can put an old mtime back but not an old ctime.
A cache file that does not decode, was written by another format version, or belongs to
another directory is ignored and rewritten, never trusted. ``FLIGHTCHECK_NO_CACHE=1``
turns the cache off. Nothing is ever written into the model directory.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

import msgspec

from flightcheck._checkpoint.cachepath import cache_dir, cache_file, enabled
from flightcheck._checkpoint.problems import Kind
from flightcheck._checkpoint.shardio import open_regular, pread_all
from flightcheck._checkpoint.validate import ShardScan

#: Bump when ShardScan / IndexScan change meaning: older files are then ignored.
FORMAT = "flightcheck.ckpt-cache/4"  # 4: problems carry kinds, not check codes
MAX_CACHE = 256 << 20  # a 390k-tensor model's file is ~0.2 MB

__all__ = [
    "FORMAT",
    "CacheFile",
    "FileKey",
    "IndexScan",
    "ScanCache",
    "cache_dir",  # (from .cachepath: the reader of the compile smoke test's cache uses it)
    "enabled",
    "file_key",
    "read_owned",
    "usable_dir",
    "write_owned",
]

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


def usable_dir(path: Path, *, create: bool) -> str | None:
    """None when ``path`` is a cache directory flightcheck may trust: a real directory
    (not a symbolic link) owned by the caller and writable by nobody else; else why not.
    ``create``: make it (and missing parents) 0700 when absent."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        if not create:
            return "absent"
        try:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass  # another flightcheck made it meanwhile: checked below like any other
        except OSError as exc:
            return f"cannot create {path}: {exc.strerror or exc}"
        try:
            st = os.lstat(path)
        except OSError as exc:
            return f"{path}: {exc.strerror or exc}"
    except OSError as exc:
        return f"{path}: {exc.strerror or exc}"
    if stat.S_ISLNK(st.st_mode):
        return f"{path} is a symbolic link"
    if not stat.S_ISDIR(st.st_mode):
        return f"{path} is not a directory"
    if st.st_uid != os.geteuid():
        return f"{path} is owned by uid {st.st_uid}, not by you"
    if st.st_mode & 0o022:
        return f"{path} is writable by group or others"
    return None


def read_owned(path: Path, limit: int) -> tuple[bytes | None, str | None]:
    """A cache file's bytes, or (None, why it was ignored): only a regular file of at most
    ``limit`` bytes that the caller owns, in a usable cache directory, is read (never
    blocking: a FIFO or a device planted in its place is refused). (None, None): absent."""
    why = usable_dir(path.parent, create=False)
    if why == "absent":
        return None, None
    if why:
        return None, f"cache not used: {why}"
    try:
        fd = open_regular(path)
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"cache file ignored: {exc.strerror or exc}"
    try:
        st = os.fstat(fd)
        if st.st_uid != os.geteuid():
            return None, f"cache file {path} ignored: owned by uid {st.st_uid}, not by you"
        if st.st_size > limit:
            return None, f"cache file ignored: {st.st_size:,} bytes"
        data = pread_all(fd, limit + 1, 0)
    except OSError as exc:
        return None, f"cache file ignored: {exc.strerror or exc}"
    finally:
        os.close(fd)
    if len(data) > limit:
        return None, f"cache file ignored: over {limit:,} bytes"
    return data, None


#: a temp file of a writer that died is removed once it is this old (seconds)
ORPHAN_AGE = 3600.0


def write_owned(path: Path, data: bytes, prefix: str) -> str | None:
    """Write a cache file atomically (0600, in a usable directory created 0700), removing
    orphaned temp files of writers that died; None, or why nothing was written."""
    why = usable_dir(path.parent, create=True)
    if why:
        return f"cache not written: {why}"
    _remove_orphans(path.parent, prefix)
    try:
        import tempfile  # only when writing (a warm run writes nothing)

        fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=path.parent)
    except OSError as exc:
        return f"cache not written: {exc.strerror or exc}"
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        return f"cache not written: {exc.strerror or exc}"
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return None


def _remove_orphans(directory: Path, prefix: str) -> None:
    """Remove ``prefix*.tmp`` files (ours, regular, older than :data:`ORPHAN_AGE`): what a
    flightcheck killed between the write and the rename left behind."""
    import time

    now = time.time()
    try:
        names = [n for n in os.listdir(directory) if n.startswith(prefix) and n.endswith(".tmp")]
    except OSError:
        return
    for name in names:
        p = directory / name
        try:
            st = os.lstat(p)
            if stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid() and now - st.st_mtime > ORPHAN_AGE:
                p.unlink()
        except OSError:
            continue


class ScanCache:
    """Load once, look up per file, store back once (only when something changed)."""

    def __init__(self, model_dir: Path, *, env: Mapping[str, str] | None = None) -> None:
        self.model_dir = str(model_dir)
        self.path = cache_file(self.model_dir, env)
        self.enabled = self.path is not None
        #: why a cache file or directory was not used (said in the checkpoint's evidence)
        self.note: str | None = None
        self.data = CacheFile(FORMAT, self.model_dir)
        self.dirty = False
        self.hits = self.misses = 0
        if self.enabled:
            self._load()

    def _load(self) -> None:
        assert self.path is not None
        raw, self.note = read_owned(self.path, MAX_CACHE)
        if raw is None:
            self.dirty = self.note is not None and "ignored" in self.note  # replace what we may not trust
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
        """Write atomically; a read-only or full home directory, or a cache directory that
        is not the caller's, only costs the cache."""
        if not (self.enabled and self.dirty and self.path is not None):
            return
        why = write_owned(self.path, msgspec.msgpack.encode(self.data), ".ckpt-")
        if why:
            self.note = self.note or why
            return
        self.dirty = False
