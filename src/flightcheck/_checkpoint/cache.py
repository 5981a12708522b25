"""The scan cache: per-shard summaries (and the index's) so a second check is instant.

One file per model directory under ``$XDG_CACHE_HOME/flightcheck`` (default
``~/.cache/flightcheck``), msgpack, written atomically. The directory is used only when it
is the caller's (not a symbolic link, not writable by group or others; created 0700),
checked on a descriptor held open and used through it (no check-then-use window), and a
file only when the caller owns it: a scan planted by another user never turns a truncated
shard into "ready" (docs/security.md). An entry is reused only when its
file key — (real path, size, mtime_ns, inode, ctime_ns, device) — matches the file now;
ctime is in the key because ``touch -d`` can put an old mtime back but not an old ctime.
A cache file that does not decode, was written by another format version, or belongs to
another directory is ignored and rewritten, never trusted. ``FLIGHTCHECK_NO_CACHE=1``
turns the cache off. Nothing is ever written into the model directory.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Mapping
from pathlib import Path

import msgspec

from flightcheck._checkpoint.cachepath import cache_dir, cache_file, enabled
from flightcheck._checkpoint.problems import Kind
from flightcheck._checkpoint.shardio import pread_all
from flightcheck._checkpoint.validate import ShardScan

#: Bump when ShardScan / IndexScan change meaning: older files are then ignored.
FORMAT = "flightcheck.ckpt-cache/5"  # 5: safe_open's JSON rules (repeats, -0, null metadata)
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


_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)


def open_dir(path: Path, *, create: bool) -> tuple[int | None, str | None]:
    """The cache directory held open: (descriptor, None) when ``path`` is one flightcheck
    may trust — a real directory (not a symbolic link) owned by the caller and writable by
    nobody else — else (None, why not; ``"absent"`` when it is not there and ``create`` is
    False). ``create``: make it (and missing parents) 0700 first when absent.

    Checked on the descriptor (``fstat``), and every file of the cache is then opened,
    replaced and removed relative to it (``dir_fd``): once checked, swapping the path for a
    symbolic link changes nothing (no check-then-use window). The caller closes it."""
    for attempt in range(2):
        try:
            fd = os.open(path, _DIR_FLAGS)
            break
        except FileNotFoundError:
            if not create or attempt:
                return None, "absent"
            try:
                path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                os.mkdir(path, 0o700)
            except FileExistsError:
                pass  # another flightcheck made it meanwhile: checked below like any other
            except OSError as exc:
                return None, f"cannot create {path}: {exc.strerror or exc}"
        except OSError as exc:
            return None, _why_not_dir(path, exc)
    else:  # pragma: no cover - the loop breaks or returns
        return None, "absent"
    try:
        st = os.fstat(fd)
    except OSError as exc:
        os.close(fd)
        return None, f"{path}: {exc.strerror or exc}"
    why = None
    if not stat.S_ISDIR(st.st_mode):
        why = f"{path} is not a directory"
    elif st.st_uid != os.geteuid():
        why = f"{path} is owned by uid {st.st_uid}, not by you"
    elif st.st_mode & 0o022:
        why = f"{path} is writable by group or others"
    if why:
        os.close(fd)
        return None, why
    return fd, None


def _why_not_dir(path: Path, exc: OSError) -> str:
    """Why ``open(O_DIRECTORY|O_NOFOLLOW)`` refused ``path``: a link (ELOOP, or ENOTDIR for a
    link to a directory on some kernels), not a directory, or the error itself."""
    try:
        if stat.S_ISLNK(os.lstat(path).st_mode):
            return f"{path} is a symbolic link"
    except OSError:
        pass
    if exc.errno == errno.ELOOP:
        return f"{path} is a symbolic link"
    if exc.errno == errno.ENOTDIR:
        return f"{path} is not a directory"
    return f"{path}: {exc.strerror or exc}"


def usable_dir(path: Path, *, create: bool) -> str | None:
    """None when ``path`` is a cache directory flightcheck may trust (:func:`open_dir`), else
    why not. ``create``: make it 0700 when absent."""
    fd, why = open_dir(path, create=create)
    if fd is not None:
        os.close(fd)
    return why


def read_owned(path: Path, limit: int) -> tuple[bytes | None, str | None]:
    """A cache file's bytes, or (None, why it was ignored): only a regular file of at most
    ``limit`` bytes that the caller owns, in a usable cache directory, is read — opened
    relative to the directory held open, never through a symbolic link, never blocking (a
    FIFO or a device planted in its place is refused at once). (None, None): absent."""
    dfd, why = open_dir(path.parent, create=False)
    if why == "absent":
        return None, None
    if dfd is None:
        return None, f"cache not used: {why}"
    try:
        return _read_in(dfd, path, limit)
    finally:
        os.close(dfd)


def _read_in(dfd: int, path: Path, limit: int) -> tuple[bytes | None, str | None]:
    name = path.name
    try:
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"cache file ignored: {exc.strerror or exc}"
    if not stat.S_ISREG(st.st_mode):  # a link, a FIFO, a device: never opened
        return None, "cache file ignored: not a regular file"
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW, dir_fd=dfd)
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"cache file ignored: {exc.strerror or exc}"
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # swapped after the stat
            return None, "cache file ignored: not a regular file"
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
    orphaned temp files of writers that died; None, or why nothing was written. Every step
    is relative to the directory held open (:func:`open_dir`): the temp file is created
    there (``O_EXCL|O_NOFOLLOW``) and renamed over ``path.name`` there."""
    dfd, why = open_dir(path.parent, create=True)
    if dfd is None:
        return f"cache not written: {why}"
    try:
        _remove_orphans(dfd, prefix)
        return _write_in(dfd, path.name, data, prefix)
    finally:
        os.close(dfd)


def _write_in(dfd: int, name: str, data: bytes, prefix: str) -> str | None:
    import secrets

    tmp = f"{prefix}{secrets.token_hex(6)}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600, dir_fd=dfd)
    except OSError as exc:
        return f"cache not written: {exc.strerror or exc}"
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    except OSError as exc:
        _unlink_in(dfd, tmp)
        return f"cache not written: {exc.strerror or exc}"
    except BaseException:
        _unlink_in(dfd, tmp)
        raise
    return None


def _unlink_in(dfd: int, name: str) -> None:
    try:
        os.unlink(name, dir_fd=dfd)
    except OSError:
        pass


def _remove_orphans(dfd: int, prefix: str) -> None:
    """Remove ``prefix*.tmp`` files (ours, regular, older than :data:`ORPHAN_AGE`): what a
    flightcheck killed between the write and the rename left behind."""
    import time

    now = time.time()
    try:
        names = [n for n in os.listdir(dfd) if n.startswith(prefix) and n.endswith(".tmp")]
    except OSError:
        return
    for name in names:
        try:
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            if stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid() and now - st.st_mtime > ORPHAN_AGE:
                os.unlink(name, dir_fd=dfd)
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
        try:  # msgpack keeps UTF-8 strings only: a path with other bytes is read, not cached
            self.model_dir.encode("utf-8")
        except UnicodeEncodeError:
            self.enabled, self.note = False, "not cached: the directory's path is not UTF-8"
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
        try:
            blob = msgspec.msgpack.encode(self.data)
        except UnicodeEncodeError:  # a name that is not UTF-8 slipped in: only the cache is lost
            self.note = self.note or "not cached: a path is not UTF-8"
            return
        why = write_owned(self.path, blob, ".ckpt-")
        if why:
            self.note = self.note or why
            return
        self.dirty = False
