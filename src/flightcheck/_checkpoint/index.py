"""``model.safetensors.index.json``: read it fast, and cross-check it against the headers.

The index of a 390k-tensor checkpoint is ~40 MB of JSON; decoding its ``weight_map`` is
the largest single cost of a cold scan, so it is decoded once with the shard names known
to exist as a ``Literal`` type (msgspec then returns the interned name instead of
allocating 390k strings) and reduced to (tensor count, names digest) per shard, which the
cache keeps. Names are only materialised again when a digest disagrees, to say exactly
which tensor is missing where.
"""

from __future__ import annotations

import posixpath
from itertools import groupby
from pathlib import Path
from typing import Any, Literal

import msgspec

from flightcheck._checkpoint.cache import IndexScan
from flightcheck._checkpoint.shardio import NotRegular, TooLarge, read_header, read_small
from flightcheck._checkpoint.validate import _HEADER, names_digest

INDEX_NAME = "model.safetensors.index.json"
MAX_INDEX = 1 << 30  # a 1 GiB index would be 10M tensors: refuse rather than exhaust memory


class _IndexStr(msgspec.Struct):
    weight_map: dict[str, str]
    metadata: dict[str, Any] | None = None


def read_bytes(path: Path) -> tuple[bytes | None, str | None]:
    """The index bytes, or why not (not a regular file, too large, unreadable)."""
    try:
        return read_small(path, MAX_INDEX), None
    except (NotRegular, TooLarge) as exc:
        return None, f"is {exc.strerror}"
    except OSError as exc:
        return None, f"cannot be read: {exc.strerror or exc}"


def parse(raw: bytes, on_disk: list[str]) -> IndexScan:
    """Reduce an index to per-shard (count, digest), total_size, or a problem."""
    weight_map: dict[str, str] | None = None
    metadata: dict[str, Any] | None = None
    if on_disk:
        fast = msgspec.defstruct(
            "_IndexFast",
            [
                # a Literal built at run time (mypy cannot read it): msgspec rejects a shard not on disk
                ("weight_map", dict[str, Literal[tuple(on_disk)]]),  # type: ignore[misc]
                ("metadata", dict[str, Any] | None, None),
            ],
        )
        try:
            doc = msgspec.json.decode(raw, type=fast)
            weight_map, metadata = doc.weight_map, doc.metadata  # type: ignore[attr-defined]
        except (msgspec.MsgspecError, RecursionError):
            weight_map = None  # a name not on disk, or worse: the slow path says which
    if weight_map is None:
        try:
            doc2 = msgspec.json.decode(raw, type=_IndexStr)
        except (msgspec.DecodeError, RecursionError) as exc:
            return IndexScan(problem=f"is not valid JSON: {str(exc)[:200]}")
        except msgspec.ValidationError as exc:
            return IndexScan(
                problem=f"does not have the index's shape ({{'weight_map': {{tensor: file}}}}): {str(exc)[:200]}"
            )
        weight_map, metadata = doc2.weight_map, doc2.metadata
    files = {f: (len(names), names_digest(sorted(names))) for f, names in _by_file(weight_map).items()}
    total = (metadata or {}).get("total_size")
    return IndexScan(total_size=total if isinstance(total, int) and not isinstance(total, bool) else None, files=files)


def _by_file(weight_map: dict[str, str]) -> dict[str, list[str]]:
    """file -> its tensor names, in C-level passes: an index lists names sorted, so one
    shard's names come in a few long runs (one Python step a run, not a tensor).

    ``groupby`` finds the runs in C (identical strings compare by identity first) and
    ``len(list(run))`` sizes each without a Python step per name."""
    names = list(weight_map)
    out: dict[str, list[str]] = {}
    a = 0
    for file, run in groupby(weight_map.values()):
        b = a + len(list(run))
        got = out.get(file)
        if got is None:
            out[file] = names[a:b]
        else:
            got += names[a:b]
        a = b
    return out


def names_by_file(raw: bytes) -> dict[str, list[str]]:
    """file -> sorted tensor names the index maps to it (slow path: a digest disagreed)."""
    try:
        doc = msgspec.json.decode(raw, type=_IndexStr)
    except (msgspec.MsgspecError, RecursionError):
        return {}
    out: dict[str, list[str]] = {}
    for name, file in doc.weight_map.items():
        out.setdefault(file, []).append(name)
    for names in out.values():
        names.sort()
    return out


def header_names(path: str) -> list[str] | None:
    """Tensor names in a shard's header (slow path), or None when it cannot be read."""
    try:
        _size, buf = read_header(path)
        header = _HEADER.decode(buf[8:])  # only the 8 bytes (no usable header): empty, invalid
    except (OSError, msgspec.MsgspecError, RecursionError):
        return None
    header.pop("__metadata__", None)
    return sorted(header)


def escapes(name: str) -> bool:
    """Does an index file name leave the model directory lexically (absolute, ``..``)?"""
    if not name or "\x00" in name or name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        return True
    norm = posixpath.normpath(name.replace("\\", "/"))
    return norm == ".." or norm.startswith("../") or norm == "."


def diff_names(expected: list[str], actual: list[str], limit: int = 5) -> tuple[list[str], list[str], int, int]:
    """(first missing, first extra, #missing, #extra) between two sorted name lists."""
    exp, act = set(expected), set(actual)
    missing = sorted(exp - act)
    extra = sorted(act - exp)
    return missing[:limit], extra[:limit], len(missing), len(extra)
