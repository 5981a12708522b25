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


class _IndexRaw(msgspec.Struct):
    weight_map: msgspec.Raw  # its bytes, checked as JSON but not decoded
    metadata: dict[str, Any] | None = None


_RAW = msgspec.json.Decoder(_IndexRaw)
#: The weight_map is decoded in pieces of about this many bytes (see :func:`_pieces`).
PIECE = 1 << 18
_SPACE = frozenset(b" \t\r\n")  # JSON's whitespace
_COMMA = ord(",")


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
    pieces = _pieces(raw, on_disk) if on_disk else None
    if pieces is not None:
        maps, metadata = pieces
    else:
        weight_map, metadata, problem = _whole(raw, on_disk)
        if weight_map is None:
            return IndexScan(problem=problem)
        maps = [weight_map]
    files = {f: (len(names), names_digest(sorted(names))) for f, names in _by_file(maps).items()}
    total = (metadata or {}).get("total_size")
    return IndexScan(total_size=total if isinstance(total, int) and not isinstance(total, bool) else None, files=files)


def _pieces(raw: bytes, on_disk: list[str]) -> tuple[list[dict[str, str]], dict[str, Any] | None] | None:
    """The weight_map of a pretty-printed index (one entry a line, as ``save_pretrained``
    writes it) decoded as many small dicts instead of one: a 390k-entry dict does not fit in
    the CPU's caches, and inserting into it costs a third more than decoding small ones
    (measured: 114 vs 154 ms for a 38 MB index). Exactly what :func:`_whole` gives, or
    None, and then :func:`_whole` decides (and says what is wrong):

    - the document is checked as JSON whole first (``_IndexRaw``), and the pieces are cut
      at newlines, which in JSON lie only between tokens, after an entry's comma: each piece
      is then an object's entries, and decoding them one by one is decoding the object,
      except for a key repeated in two pieces (a dict keeps it once, with its last value);
    - so the pieces' key ranges must not overlap (each piece's largest key below the next
      one's smallest, as in a sorted index); a key repeated within a piece is kept by its
      dict as by the whole one;
    - a piece that is not an object's entries (a newline inside a nested value, a
      comma-first layout) fails to decode: None.
    """
    if raw.count(b"\n", 0, 1 << 16) < 64:  # one line (or a few): one piece, no gain
        return None
    try:
        doc = _RAW.decode(raw)
    except (msgspec.MsgspecError, RecursionError):
        return None
    body = memoryview(doc.weight_map)  # (a view of ``raw``: no copy of 38 MB)
    n = len(body)
    if n < 2 or body[0] != ord("{") or body[-1] != ord("}"):
        return None
    # a Literal built at run time (mypy cannot read it): a shard not on disk fails the piece
    dec = msgspec.json.Decoder(dict[str, Literal[tuple(on_disk)]])  # type: ignore[misc]
    maps: list[dict[str, str]] = []
    pos, last = 1, n - 1
    try:
        while pos < last:
            end = _newline(body, pos + PIECE, last)
            cut = end  # the piece without the whitespace and the comma that end it
            while cut > pos and body[cut - 1] in _SPACE:
                cut -= 1
            if cut > pos and body[cut - 1] == _COMMA:
                cut -= 1
            got = dec.decode(b"".join((b"{", body[pos:cut], b"}")))  # (one copy of the piece)
            if got:
                if maps and max(maps[-1]) >= min(got):
                    return None  # unsorted, or a key in two pieces
                maps.append(got)
            pos = end
    except (msgspec.MsgspecError, RecursionError):
        return None
    return maps, doc.metadata


def _newline(body: memoryview, start: int, last: int) -> int:
    """The first newline of ``body`` at or after ``start`` (``last`` if none before it),
    looked for in small copies of the view."""
    step = 4096
    while start < last:
        i = bytes(body[start : min(start + step, last)]).find(b"\n")
        if i >= 0:
            return start + i
        start += step
    return last


def _whole(raw: bytes, on_disk: list[str]) -> tuple[dict[str, str] | None, dict[str, Any] | None, str | None]:
    """(weight_map, metadata, None), or (None, None, the problem): the index decoded whole."""
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
            return None, None, f"is not valid JSON: {str(exc)[:200]}"
        except msgspec.ValidationError as exc:
            return (
                None,
                None,
                f"does not have the index's shape ({{'weight_map': {{tensor: file}}}}): {str(exc)[:200]}",
            )
        weight_map, metadata = doc2.weight_map, doc2.metadata
    return weight_map, metadata, None


def _by_file(maps: list[dict[str, str]]) -> dict[str, list[str]]:
    """file -> its tensor names (the pieces of one weight_map, no key in two), in C-level
    passes: an index lists names sorted, so one shard's names come in a few long runs (one
    Python step a run, not a tensor).

    ``groupby`` finds the runs in C (identical strings compare by identity first) and
    ``len(list(run))`` sizes each without a Python step per name."""
    out: dict[str, list[str]] = {}
    for weight_map in maps:
        names = list(weight_map)
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
