"""Read and validate one safetensors shard header, as the safetensors library would.

The file is read through ``shardio`` (regular files only, the header alone). This module
is also the body of the parallel scan's worker processes, so it imports only
the standard library and msgspec (a worker starts in ~20 ms with ``python -S``) and never
raises: every problem becomes a :class:`Problem` with its kind (:mod:`.problems`): truncated,
bad header or unreadable.

The rules are safetensors' own (``tensor.rs``): an 8-byte little-endian header length N of
at most 100,000,000 that fits in the file; N bytes of UTF-8 JSON (leading and trailing
spaces allowed); known dtypes; ``__metadata__`` a string-to-string map; data offsets that,
sorted, start at 0 and tile the data region with no hole or overlap; each span equal to
numel x dtype bits / 8; and file size == 8 + N + end of the last tensor.

Besides the verdict, a scan returns what the memory model and the index cross-check need,
compactly: tensors grouped for the memory model (``groups``) and a digest of the sorted
tensor names.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterator
from itertools import pairwise, repeat
from operator import attrgetter, itemgetter, lshift, mul, sub
from typing import TYPE_CHECKING, Annotated, Any, Literal

import msgspec

try:
    from flightcheck._checkpoint.bounded import Hung, imap
    from flightcheck._checkpoint.groups import Group, group_tensors
    from flightcheck._checkpoint.problems import Kind
    from flightcheck._checkpoint.shardio import MAX_HEADER, NotRegular, read_header
except ImportError:  # a scan worker loads these files as top-level modules, never flightcheck
    from bounded import Hung, imap  # type: ignore[no-redef,import-not-found]  # the same files
    from groups import Group, group_tensors  # type: ignore[no-redef,import-not-found]
    from problems import Kind  # type: ignore[no-redef,import-not-found]
    from shardio import MAX_HEADER, NotRegular, read_header  # type: ignore[no-redef,import-not-found]

__all__ = [
    "DTYPE_BITS",
    "MAX_HEADER",
    "Group",
    "Problem",
    "ShardScan",
    "names_digest",
    "parse_header",
    "scan_file",
    "scan_many",
]

MAX_DIMS = 64  # no real tensor has more; bounds the work a hostile shape can cause

#: dtype -> bits per element (safetensors Dtype::bitsize, 0.8).
DTYPE_BITS: dict[str, int] = {
    "BOOL": 8,
    "U8": 8,
    "I8": 8,
    "F8_E5M2": 8,
    "F8_E4M3": 8,
    "F8_E8M0": 8,
    "F8_E4M3FNUZ": 8,
    "F8_E5M2FNUZ": 8,
    "I16": 16,
    "U16": 16,
    "F16": 16,
    "BF16": 16,
    "I32": 32,
    "U32": 32,
    "F32": 32,
    "I64": 64,
    "U64": 64,
    "F64": 64,
    "C64": 64,
    "F4": 4,
    "F6_E2M3": 6,
    "F6_E3M2": 6,
}

_U = Annotated[int, msgspec.Meta(ge=0)]
if TYPE_CHECKING:
    _Dtype = str  # mypy cannot read the Literal built at run time
else:
    _Dtype = Literal[tuple(DTYPE_BITS)]  # validated in C by msgspec


class _Entry(msgspec.Struct, gc=False):
    """One header entry. Everything optional: ``__metadata__`` decodes to all-None too."""

    dtype: _Dtype | None = None
    shape: Annotated[tuple[_U, ...], msgspec.Meta(max_length=MAX_DIMS)] | None = None
    data_offsets: tuple[_U, _U] | None = None


class _MetaOnly(msgspec.Struct):
    meta: dict[str, str] | None = msgspec.field(default=None, name="__metadata__")


_HEADER = msgspec.json.Decoder(dict[str, _Entry])
_META = msgspec.json.Decoder(_MetaOnly)


class Problem(msgspec.Struct, array_like=True, frozen=True):
    """One finding about a shard: its kind and what is wrong."""

    kind: str
    message: str


class ShardScan(msgspec.Struct, array_like=True):
    """What one header scan found (cached per shard)."""

    size: int = 0
    header_len: int | None = None
    header_sha256: str | None = None  # of the 8-byte length + the header (filled on demand)
    n_tensors: int = 0
    data_end: int = 0
    names_digest: str | None = None  # blake2b-128 of the sorted names joined by "\n"
    groups: list[Group] = msgspec.field(default_factory=list)
    problems: list[Problem] = msgspec.field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No problem found."""
        return not self.problems


def names_digest(sorted_names: list[str]) -> str:
    """The digest the index cross-check compares: the names sorted, one per line (SHA-1
    for speed, with the CPU's SHA extensions; this guards against mistakes, not attacks)."""
    import hashlib  # here: the parent imports this module for ShardScan on a warm run too

    return hashlib.sha1("\n".join(sorted_names).encode("utf-8", "surrogatepass")).hexdigest()


def _fail(scan: ShardScan, kind: str, message: str) -> ShardScan:
    scan.problems.append(Problem(kind, message))
    return scan


def _n(x: int) -> str:
    return f"{x:,}"


def scan_file(path: str, sha: bool = False) -> ShardScan:
    """Scan one shard on disk (``sha``: also hash the header). Never raises; never reads
    past the header; never opens anything but a regular file. Blocks as long as the
    filesystem does: :func:`scan_many` is the bounded, concurrent form."""
    return scan_read(read_result(path), sha)


def read_result(path: str) -> tuple[int, bytes] | BaseException:
    """``read_header(path)``, or the exception it raised (for a thread to hand back)."""
    try:
        return read_header(path)
    except Exception as exc:  # noqa: BLE001 - judged by scan_read
        return exc


def scan_read(got: tuple[int, bytes] | BaseException, sha: bool = False) -> ShardScan:
    """The scan of one shard from what :func:`read_result` gave (or a :class:`Hung`)."""
    scan = ShardScan()
    if isinstance(got, NotRegular):
        return _fail(scan, Kind.UNREADABLE, "not a regular file")
    if isinstance(got, Hung):
        return _fail(scan, Kind.UNREADABLE, f"reading the header {got} (a hung or very slow filesystem?)")
    if isinstance(got, OSError):
        return _fail(scan, Kind.UNREADABLE, f"cannot read: {got.strerror or got}")
    if isinstance(got, BaseException):
        return _fail(scan, Kind.UNREADABLE, f"scan crashed: {type(got).__name__}: {got}")
    scan.size, buf = got
    return parse_header(buf, scan.size, scan, sha=sha)


def scan_many(paths: list[str], deadline: float, sha: bool = False) -> Iterator[tuple[int, ShardScan]]:
    """``(i, scan of paths[i])`` as the reads finish: all headers are read concurrently
    (threads), parsed here one by one; a read unanswered at ``deadline``
    (``time.monotonic()``) gives an unreadable scan instead of waiting."""
    return _parse_as_read(imap(read_result, paths, deadline=deadline), sha)  # the reads start now


def _parse_as_read(reads: Iterator[tuple[int, Any]], sha: bool) -> Iterator[tuple[int, ShardScan]]:
    for i, got in reads:
        try:
            yield i, scan_read(got, sha)
        except Exception as exc:  # noqa: BLE001 - a bug must cost one shard, not the batch
            yield i, scan_read(exc)


def parse_header(
    buf: bytes, file_size: int | None = None, scan: ShardScan | None = None, *, sha: bool = False
) -> ShardScan:
    """Validate ``buf`` = the 8-byte length + the header (``file_size`` None: skip the size rule).

    Pure and total: any input gives a :class:`ShardScan`, problems included.
    """
    scan = scan or ShardScan(size=file_size or 0)
    if len(buf) < 8:
        return _fail(
            scan, Kind.TRUNCATED, f"{_n(len(buf))} bytes: too short for even the 8-byte header length (truncated)"
        )
    n = int.from_bytes(buf[:8], "little")
    scan.header_len = n
    if n > MAX_HEADER:
        return _fail(
            scan,
            Kind.BAD_HEADER,
            f"the header length field says {_n(n)} bytes, over safetensors' {_n(MAX_HEADER)}-byte limit",
        )
    if file_size is not None and 8 + n > file_size:
        return _fail(
            scan,
            Kind.BAD_HEADER,
            f"the header length field says {_n(n)} bytes but the file has only {_n(file_size - 8)} after it "
            "(truncated or not safetensors)",
        )
    raw = memoryview(buf)[8 : 8 + n]  # a view: a copy of every header would page-fault fresh memory
    if len(raw) < n:
        if file_size is not None:  # the file was long enough a moment ago: it shrank while read
            return _fail(
                scan,
                Kind.TRUNCATED,
                f"the file ended after {_n(8 + len(raw))} bytes while reading a {_n(n)}-byte header (truncated)",
            )
        return _fail(
            scan, Kind.BAD_HEADER, f"the header length field says {_n(n)} bytes but only {_n(len(raw))} follow it"
        )
    if sha:  # the cross-node comparison's fingerprint (collect only: it costs ~0.3 ms/MB)
        import hashlib

        scan.header_sha256 = hashlib.sha256(buf[: 8 + n]).hexdigest()
    try:
        header = _HEADER.decode(raw)
    except msgspec.ValidationError as exc:
        got = _null_metadata(raw)  # ``"__metadata__": null``, which safe_open opens
        if got is None:
            return _fail(scan, Kind.BAD_HEADER, _explain_invalid(bytes(raw), exc))
        header = got
    except (msgspec.DecodeError, RecursionError) as exc:  # RecursionError: absurdly deep nesting
        return _fail(scan, Kind.BAD_HEADER, f"the header is not valid JSON: {str(exc)[:200]}")
    end = 8 + n
    if _serde_may_differ(buf, end, len(header)):
        why = _serde_refuses(bytes(raw))
        if why:
            return _fail(scan, Kind.BAD_HEADER, why)
    if buf.find(b'"__metadata__"', 8, end) >= 0 and not (
        buf.count(b'"__metadata__"', 8, end) == 1 and buf.find(b'"__metadata__":{"format":"pt"}', 8, end) >= 0
    ):
        # (the usual {"format":"pt"} needs no second pass; anything else is checked)
        try:
            _META.decode(raw)
        except (msgspec.MsgspecError, RecursionError):
            return _fail(
                scan, Kind.BAD_HEADER, "__metadata__ must map strings to strings (safetensors refuses anything else)"
            )
    header.pop("__metadata__", None)
    try:
        return _check_tensors(scan, header, file_size)
    except Exception as exc:  # noqa: BLE001 - never raise out of a scan: an input we did not foresee is invalid
        return _fail(scan, Kind.BAD_HEADER, f"the header could not be checked: {type(exc).__name__}: {str(exc)[:200]}")


def _check_tensors(scan: ShardScan, header: dict[str, _Entry], file_size: int | None) -> ShardScan:
    # Every step is a C-level pass over lists (map, zip, list equality): a Python loop per
    # tensor would cost more than the JSON decoding on a 390k-tensor checkpoint. The
    # passes run in the header's own order, which writers leave in data order: the tiling
    # check is then one list comparison, with no sort.
    entries = list(header.values())
    scan.n_tensors = len(entries)
    try:  # a missing field (None) makes one of these raise: then say which tensor
        # three attribute passes: ``zip(*rows)`` over thousands of rows costs ~5x more
        dtypes = list(map(_DTYPE, entries))
        shapes = list(map(_SHAPE, entries))
        offsets = list(map(_OFFSETS, entries))
        starts = list(map(itemgetter(0), offsets))
        ends = list(map(itemgetter(1), offsets))
        spans = list(map(sub, ends, starts))
        # numel x bits must equal 8 x span for every tensor, else shape, dtype and offsets
        # disagree (a sub-byte total fails too: 8 x span is whole bytes).
        bits = list(map(mul, map(math.prod, shapes), map(DTYPE_BITS.__getitem__, dtypes)))
    except (TypeError, KeyError):
        for name, e in sorted(header.items()):
            missing = [f for f in ("dtype", "shape", "data_offsets") if getattr(e, f) is None]
            if missing:
                return _fail(scan, Kind.BAD_HEADER, f"tensor {name!r} has no {', '.join(missing)}")
        raise  # not a missing field: parse_header reports it
    if bits != list(map(lshift, spans, repeat(3))):
        # the first offender in name order, as safetensors (which reads a sorted map) says
        names = sorted(header)
        bad = {k for k, b, s in zip(header, bits, spans, strict=False) if b != s * 8}
        name = next(n for n in names if n in bad)
        e = header[name]
        n_bits = math.prod(e.shape or ()) * DTYPE_BITS[e.dtype or ""]
        start, end = e.data_offsets or (0, 0)
        return _fail(
            scan,
            Kind.BAD_HEADER,
            f"tensor {name!r} is {e.dtype} {list(e.shape or ())} = {n_bits / 8:,g} "
            f"bytes but its data_offsets {[start, end]} span {_n(end - start)}",
        )
    if entries and not _tiled(starts, ends, spans):  # spans are >= 0 here: each is numel x size
        names = sorted(header)
        return _fail(scan, Kind.BAD_HEADER, _explain_offsets(names, [header[n].data_offsets for n in names]))  # type: ignore[misc]
    scan.data_end = max(ends) if entries else 0
    if file_size is not None and file_size != 8 + scan.header_len + scan.data_end:  # type: ignore[operator]
        need = 8 + scan.header_len + scan.data_end  # type: ignore[operator]
        if file_size < need:
            msg = (
                f"the file is {_n(file_size)} bytes but its header needs {_n(need)}: "
                f"{_n(need - file_size)} bytes missing (truncated download)"
            )
        else:
            msg = (
                f"the file is {_n(file_size)} bytes but its header accounts for {_n(need)}: "
                f"{_n(file_size - need)} extra bytes (padded, or appended to)"
            )
        _fail(scan, Kind.TRUNCATED, msg)
    names = sorted(header)
    scan.names_digest = names_digest(names)
    # the groups want name order: each tensor's span by name, the rest read per group
    scan.groups = group_tensors(names, header, dict(zip(header, spans, strict=False)))
    return scan


_DTYPE = attrgetter("dtype")
_SHAPE = attrgetter("shape")
_OFFSETS = attrgetter("data_offsets")


def _tiled(starts: list[int], ends: list[int], spans: list[int]) -> bool:
    """Do the spans tile [0, end) with no hole or overlap, as safetensors requires?

    With every span non-empty, sorting starts and ends separately is enough: the largest
    start can only pair with the largest end, and so on down, so ``starts[k+1] == ends[k]``
    on the sorted lists means the sorted intervals abut. Empty tensors make the pairing
    ambiguous; then sort the (start, end) pairs as safetensors does.
    """
    if starts[0] == 0 and starts[1:] == ends[:-1]:
        return True  # already in data order (as most writers leave them): abutting from 0
    if 0 in spans:
        order = sorted(zip(starts, ends, strict=False))
        o_starts = list(map(itemgetter(0), order))
        o_ends = list(map(itemgetter(1), order))
    else:
        o_starts, o_ends = sorted(starts), sorted(ends)
    return o_starts[0] == 0 and o_starts[1:] == o_ends[:-1]


_HEADER_OR_NULL = msgspec.json.Decoder(dict[str, _Entry | None])


def _null_metadata(raw: memoryview) -> dict[str, _Entry] | None:
    """The header, if it failed the typed decode only for ``"__metadata__": null``
    (safetensors 0.8.0 reads an ``Option``: null is no metadata); else None."""
    try:
        got = _HEADER_OR_NULL.decode(raw)
    except (msgspec.MsgspecError, RecursionError):
        return None
    if got.get("__metadata__", 0) is not None:
        return None
    del got["__metadata__"]
    return None if None in got.values() else got  # type: ignore[return-value]  # no None left


#: Field names serde_json refuses to see twice in one tensor's entry (safetensors'
#: ``TensorInfo`` struct; an unknown field is ignored, repeated or not).
_FIELDS = (b'"dtype"', b'"shape"', b'"data_offsets"')


def _serde_may_differ(buf: bytes, end: int, n_entries: int) -> bool:
    """Could safetensors' serde_json refuse what msgspec decoded? Only with a key spelled
    with an escape, a ``-0`` (serde reads it as a float), ``__metadata__`` more than once,
    or a field name counted more often than there are entries (a repeated field): the
    exact answer (:func:`_serde_refuses`) is paid only then."""
    # (a one-byte find is a memchr; the two-byte needle is searched only past it)
    if buf.find(b"\\", 8, end) >= 0 and buf.find(b"\\u", 8, end) >= 0:
        return True
    if buf.find(b"-", 8, end) >= 0 and buf.find(b"-0", 8, end) >= 0:
        return True
    if buf.count(b'"__metadata__"', 8, end) > 1:
        return True
    n = n_entries - (buf.find(b'"__metadata__"', 8, end) >= 0)
    return any(buf.count(f, 8, end) > n for f in _FIELDS)


class _Obj(list):
    """A JSON object as its (key, value) pairs, repeats kept (for :func:`_serde_refuses`)."""


class _MinusZero:
    """``-0`` where a number was (serde_json reads it as the float -0.0)."""


def _int(text: str) -> int | _MinusZero:
    return _MinusZero() if text.startswith("-") else int(text)  # any other negative failed msgspec


def _serde_refuses(raw: bytes) -> str | None:
    """What safetensors 0.8.0 refuses that msgspec accepted (measured with ``safe_open``):
    ``__metadata__`` twice (also spelled with an escape), a field twice in one tensor's
    entry, ``-0`` in a shape or offsets, metadata that is not strings. None: it opens."""
    import json

    try:
        doc = json.loads(raw, object_pairs_hook=_Obj, parse_int=_int)
    except (ValueError, RecursionError):
        return None  # msgspec already decoded it: leave the verdict to the typed checks
    if not isinstance(doc, _Obj):
        return None
    metas = [value for key, value in doc if key == "__metadata__"]
    if len(metas) > 1:
        return "__metadata__ appears twice in the header (safetensors refuses a repeated __metadata__)"
    if (
        metas
        and metas[0] is not None
        and not (isinstance(metas[0], _Obj) and all(isinstance(value, str) for _, value in metas[0]))
    ):
        return "__metadata__ must map strings to strings (safetensors refuses anything else)"
    for name, entry in doc:
        if name == "__metadata__" or not isinstance(entry, _Obj):
            continue
        keys = [key for key, _ in entry]
        for field in ("dtype", "shape", "data_offsets"):
            if keys.count(field) > 1:
                return f"tensor {name!r} has {field} twice (safetensors refuses a repeated field)"
        for key, value in entry:
            if (
                key in ("shape", "data_offsets")
                and isinstance(value, list)
                and any(isinstance(d, _MinusZero) for d in value)
            ):
                return f"tensor {name!r} has -0 in its {key} (safetensors reads it as a float and refuses it)"
    return None


def _explain_invalid(raw: bytes, exc: msgspec.ValidationError) -> str:
    """Name the offending tensor of a typed-decode failure (slow path, failures only)."""
    text = str(exc)
    try:
        doc = msgspec.json.decode(raw)
    except (msgspec.MsgspecError, RecursionError) as err:
        return f"the header is not valid JSON: {str(err)[:200]}"
    if not isinstance(doc, dict):
        return f"the header must be a JSON object, not {type(doc).__name__}"
    for name, e in doc.items():
        if name == "__metadata__":
            continue
        if not isinstance(e, dict):
            return f"tensor {name!r}: expected an object, got {type(e).__name__}"
        dtype = e.get("dtype")
        if not isinstance(dtype, str) or dtype not in DTYPE_BITS:  # a list or object is unhashable
            return f"tensor {name!r} has unknown dtype {dtype!r}"
        shape = e.get("shape")
        if (
            not isinstance(shape, list)
            or len(shape) > MAX_DIMS
            or not all(isinstance(d, int) and d >= 0 for d in shape)
        ):
            return f"tensor {name!r} has an invalid shape {str(shape)[:80]}"
        offs = e.get("data_offsets")
        if not (isinstance(offs, list) and len(offs) == 2 and all(isinstance(o, int) and o >= 0 for o in offs)):
            return f"tensor {name!r} has invalid data_offsets {str(offs)[:80]}"
    return f"the header is not valid: {text[:200]}"


def _explain_offsets(names: list[str], offsets: list[tuple[int, int]]) -> str:
    """Say where the offsets stop tiling the data region (failures only)."""
    order = sorted(zip(offsets, names, strict=False))
    (first, fname) = order[0]
    if first[0] != 0:
        return f"the first tensor {fname!r} starts at {_n(first[0])}, not 0: a hole at the start of the data"
    for (a, an), (b, bn) in pairwise(order):
        if b[0] < a[1]:
            return f"tensors {an!r} {list(a)} and {bn!r} {list(b)} overlap"
        if b[0] > a[1]:
            return f"a hole of {_n(b[0] - a[1])} bytes between tensors {an!r} and {bn!r}"
    return "the data offsets do not tile the data region"


def main() -> int:
    """Worker: read msgpack [paths, sha, seconds] on stdin; write each shard's scan as soon
    as it is done, as a frame (4-byte little-endian length + msgpack [i, ShardScan]), so a
    shard on a hung mount costs only itself; stop at the deadline (then exit at once: a
    thread stuck in the kernel must not hold the process)."""
    import gc
    import os
    import time

    gc.disable()  # many short-lived containers, no cycles: collection only costs time
    raw_paths, sha, seconds = msgspec.msgpack.decode(sys.stdin.buffer.read(), type=tuple[list[bytes], bool, float])
    paths = list(map(os.fsdecode, raw_paths))  # bytes on the wire: a path need not be UTF-8
    out = sys.stdout.buffer
    enc = msgspec.msgpack.Encoder()
    for i, scan in scan_many(paths, time.monotonic() + seconds, sha):
        frame = enc.encode((i, scan))
        out.write(len(frame).to_bytes(4, "little") + frame)
        out.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
