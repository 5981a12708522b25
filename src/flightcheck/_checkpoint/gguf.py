"""A GGUF header, read within bounds: magic, version, metadata, tensor infos and sizes.

GGUF (llama.cpp's format, v2 and v3) is a header followed by the tensors' data:
``"GGUF"``, a uint32 version, uint64 tensor and key/value counts, the key/value pairs
(typed values, arrays of them included), then one record per tensor (name, dimensions,
ggml type, offset into the data section); the data section starts at the next multiple
of ``general.alignment`` (32 by default). The truth for what an engine accepts is the
``gguf`` package's reader, which vLLM's GGUF loading uses (``gguf.GGUFReader``, in
vllm/models/flint/gguf_nvfp4.py of vLLM 0.33): its checks are mirrored here, read from
gguf 0.19.0's ``gguf/gguf_reader.py`` (``GGUFReader.__init__``, ``_get_field_parts``,
``_build_tensors``) and ``gguf/constants.py`` (``GGUFValueType``,
``GGMLQuantizationType``, ``GGML_QUANT_SIZES``). flightcheck never imports ``gguf``.

A file nobody vouches for must not make this allocate or loop without bound: the header
is read in chunks, only as far as it goes, never past :data:`MAX_HEADER` bytes nor the end
of the file; every count is checked against the bytes left before anything is looped over
(each item takes at least a byte, so a count the file cannot hold is refused at once), and
array values are skipped, not stored. Problems are the reader's kinds
(:mod:`.problems`), as for safetensors: a file that ends inside its header or before its
tensors' data is ``TRUNCATED`` (FC503), anything the ``gguf`` reader refuses is
``BAD_HEADER`` (FC504), a file that cannot be opened or read is ``UNREADABLE`` (FC508).

Stdlib only.
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Callable
from typing import Any

import msgspec

from flightcheck._checkpoint.problems import Kind

MAGIC = b"GGUF"
#: the versions gguf's reader supports (gguf_reader.py: READER_SUPPORTED_VERSIONS = [2, 3])
VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32  # constants.py GGUF_DEFAULT_ALIGNMENT
#: header bytes read at most (as safetensors' MAX_HEADER_SIZE): a 150k-token vocabulary
#: array is a few MB, so a header past this is not a model's
MAX_HEADER = 100_000_000
#: arrays of arrays nest at most this deep (the spec allows nesting; no model needs more)
MAX_DEPTH = 8
#: metadata strings kept (decoded) up to this many bytes; longer ones are skipped
KEEP_STRING = 1024

#: GGUFValueType (constants.py) -> struct code of a fixed-size value; 8 (STRING) and 9
#: (ARRAY) are variable-sized
_SCALAR = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
STRING, ARRAY, UINT32 = 8, 9, 4

#: GGMLQuantizationType -> (name, block size in elements, bytes per block):
#: gguf 0.19.0 gguf/constants.py, GGML_QUANT_SIZES (QK_K = 256)
GGML_TYPES: dict[int, tuple[str, int, int]] = {
    0: ("F32", 1, 4),
    1: ("F16", 1, 2),
    2: ("Q4_0", 32, 2 + 16),
    3: ("Q4_1", 32, 2 + 2 + 16),
    6: ("Q5_0", 32, 2 + 4 + 16),
    7: ("Q5_1", 32, 2 + 2 + 4 + 16),
    8: ("Q8_0", 32, 2 + 32),
    9: ("Q8_1", 32, 4 + 4 + 32),
    10: ("Q2_K", 256, 2 + 2 + 256 // 16 + 256 // 4),
    11: ("Q3_K", 256, 2 + 256 // 4 + 256 // 8 + 12),
    12: ("Q4_K", 256, 2 + 2 + 256 // 2 + 12),
    13: ("Q5_K", 256, 2 + 2 + 256 // 2 + 256 // 8 + 12),
    14: ("Q6_K", 256, 2 + 256 // 2 + 256 // 4 + 256 // 16),
    15: ("Q8_K", 256, 4 + 256 + 256 // 8),
    16: ("IQ2_XXS", 256, 2 + 256 // 4),
    17: ("IQ2_XS", 256, 2 + 256 // 4 + 256 // 32),
    18: ("IQ3_XXS", 256, 2 + 256 // 4 + 256 // 8),
    19: ("IQ1_S", 256, 2 + 256 // 8 + 256 // 16),
    20: ("IQ4_NL", 32, 2 + 16),
    21: ("IQ3_S", 256, 2 + 256 // 4 + 256 // 8 + 256 // 32 + 4),
    22: ("IQ2_S", 256, 2 + 256 // 4 + 256 // 16),
    23: ("IQ4_XS", 256, 2 + 2 + 256 // 2 + 256 // 64),
    24: ("I8", 1, 1),
    25: ("I16", 1, 2),
    26: ("I32", 1, 4),
    27: ("I64", 1, 8),
    28: ("F64", 1, 8),
    29: ("IQ1_M", 256, 256 // 8 + 256 // 16 + 256 // 32),
    30: ("BF16", 1, 2),
    34: ("TQ1_0", 256, 2 + 4 * 13),
    35: ("TQ2_0", 256, 2 + 64),
    39: ("MXFP4", 32, 1 + 16),
    40: ("NVFP4", 64, 4 + 32),
    41: ("Q1_0", 128, 2 + 16),
}
#: types gguf's reader maps to a numpy element type; every other one is read as rows of
#: blocks, whose first dimension must be a whole number of blocks (_build_tensors,
#: quants.py quant_shape_to_byte_shape)
_ELEMENT_TYPES = frozenset({0, 1, 24, 25, 26, 27, 28})
#: field names gguf's reader adds itself: a key/value pair of the same name is a duplicate
_RESERVED = frozenset({"GGUF.version", "GGUF.tensor_count", "GGUF.kv_count"})

#: ``name-00001-of-00003.gguf``: one part of a split model (llama.cpp's gguf-split naming)
SPLIT_NAME = re.compile(r"^(?P<base>.*)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$")


class Tensor(msgspec.Struct, frozen=True):
    """One tensor info record."""

    name: str
    dims: tuple[int, ...]  # as stored: the fastest-varying dimension first
    ggml_type: int
    offset: int  # from the start of the data section
    nbytes: int

    @property
    def type_name(self) -> str:
        return GGML_TYPES[self.ggml_type][0] if self.ggml_type in GGML_TYPES else str(self.ggml_type)


class GGUFScan(msgspec.Struct):
    """What one GGUF header says, and what is wrong with the file."""

    size: int = 0
    version: int | None = None
    big_endian: bool = False
    n_tensors: int = 0
    n_kv: int = 0
    #: scalar and short string values by key; an array as ``("array", element type, length)``
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    tensors: list[Tensor] = msgspec.field(default_factory=list)
    alignment: int = DEFAULT_ALIGNMENT
    data_offset: int = 0  # where the data section starts
    data_end: int = 0  # the end of the last tensor's data
    problems: list[tuple[str, str]] = msgspec.field(default_factory=list)  # (kind, message)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def weight_bytes(self) -> int:
        """The bytes of all the tensors' data (what the loader reads)."""
        return sum(t.nbytes for t in self.tensors)

    @property
    def architecture(self) -> str | None:
        got = self.metadata.get("general.architecture")
        return got if isinstance(got, str) else None


class _Stop(Exception):
    """The header cannot be read on: (kind, message)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


class _Reader:
    """Sequential reads of the header through ``fetch(offset, n)``, in growing chunks, never
    past the file's end or :data:`MAX_HEADER`."""

    def __init__(self, fetch: Callable[[int, int], bytes], size: int) -> None:
        self.fetch = fetch
        self.size = size
        self.buf = b""
        self.pos = 0
        self.order = "<"

    def left(self) -> int:
        return self.size - self.pos

    def need(self, n: int, what: str) -> None:
        end = self.pos + n
        if end > self.size:
            raise _Stop(
                Kind.TRUNCATED,
                f"the file ends at {self.size:,} bytes, inside its header ({what} needs {n:,} bytes at offset "
                f"{self.pos:,}): truncated",
            )
        if end > MAX_HEADER:
            raise _Stop(Kind.BAD_HEADER, f"the header runs past {MAX_HEADER:,} bytes ({what}): not a model's header")
        if end > len(self.buf):
            want = min(self.size, MAX_HEADER, max(end, 2 * len(self.buf), 1 << 20))
            got = self.fetch(len(self.buf), want - len(self.buf))
            self.buf += got
            if end > len(self.buf):  # the file shrank since its size was taken
                raise _Stop(Kind.TRUNCATED, f"the file ends at {len(self.buf):,} bytes, inside its header: truncated")

    def take(self, n: int, what: str) -> bytes:
        self.need(n, what)
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return out

    def skip(self, n: int, what: str) -> None:
        self.need(n, what)
        self.pos += n

    def scalar(self, code: str, what: str) -> Any:
        n = struct.calcsize(code)
        return struct.unpack(self.order + code, self.take(n, what))[0]

    def count(self, n: int, min_bytes: int, what: str) -> int:
        """``n`` items of at least ``min_bytes`` each must fit in what is left of the file
        (and of :data:`MAX_HEADER`): checked before any loop over them."""
        room = min(self.left(), MAX_HEADER - self.pos)
        if n * min_bytes > room:
            # past MAX_HEADER no header is a model's; within it, past the file's end: cut short
            kind = Kind.BAD_HEADER if self.pos + n * min_bytes > MAX_HEADER else Kind.TRUNCATED
            raise _Stop(
                kind,
                f"it says {n:,} {what}, which need at least {n * min_bytes:,} bytes; "
                f"only {max(0, room):,} are left" + (": truncated" if kind == Kind.TRUNCATED else ""),
            )
        return n

    def string(self, what: str) -> bytes:
        n = self.scalar("Q", what)
        self.count(n, 1, f"bytes in {what}")
        return self.take(n, what)


def parse(fetch: Callable[[int, int], bytes], size: int) -> GGUFScan:
    """The header of a GGUF file of ``size`` bytes, read through ``fetch(offset, n)``
    (which may return fewer bytes only at the end of the file). Never raises for what the
    file holds: problems are in ``scan.problems``."""
    scan = GGUFScan(size=size)
    r = _Reader(fetch, size)
    try:
        _parse(r, scan)
    except _Stop as stop:
        scan.problems.append((stop.kind, stop.message))
    return scan


def parse_bytes(data: bytes, size: int | None = None) -> GGUFScan:
    """:func:`parse` of a header held in memory (``size``: the file's, when ``data`` is its
    beginning only)."""
    return parse(lambda off, n: data[off : off + n], len(data) if size is None else size)


def _parse(r: _Reader, scan: GGUFScan) -> None:
    if r.size < 4:
        raise _Stop(Kind.TRUNCATED, f"{r.size} bytes: too short for even the GGUF magic (truncated)")
    magic = r.take(4, "the magic")
    if magic != MAGIC:
        raise _Stop(Kind.BAD_HEADER, f"it does not start with the GGUF magic (b'GGUF'), but {magic!r}")
    raw = r.take(4, "the version")
    version = int.from_bytes(raw, "little")
    if version & 0xFFFF == 0:  # written on a big-endian host (gguf_reader.py: byte_order 'S')
        r.order, scan.big_endian = ">", True
        version = int.from_bytes(raw, "big")
    scan.version = version
    if version not in VERSIONS:
        raise _Stop(
            Kind.BAD_HEADER,
            f"GGUF version {version}: the gguf reader supports versions {' and '.join(map(str, VERSIONS))} only",
        )
    scan.n_tensors = n_tensors = r.scalar("Q", "the tensor count")
    scan.n_kv = n_kv = r.scalar("Q", "the key/value count")
    # a key/value pair takes at least 8 (key length) + 4 (type) + 1 (a uint8) bytes
    r.count(n_kv, 13, "key/value pairs")
    seen: set[str] = set(_RESERVED)
    align_type = UINT32
    for i in range(n_kv):
        key = _utf8(r.string(f"key {i}"), f"key {i}")
        if key in seen:
            raise _Stop(Kind.BAD_HEADER, f"the key {key!r} appears twice (the gguf reader refuses duplicates)")
        seen.add(key)
        vtype = r.scalar("I", f"the type of {key!r}")
        if key == "general.alignment":
            align_type = vtype
        value = _value(r, vtype, key, 0)
        if len(scan.metadata) < 4096:  # the few keys anyone asks for; never unbounded
            scan.metadata[key] = value
    # a tensor info takes at least 8 (name length) + 4 (n_dims) + 4 (type) + 8 (offset)
    r.count(n_tensors, 24, "tensors")
    infos: list[tuple[str, tuple[int, ...], int, int]] = []
    for i in range(n_tensors):
        name = _utf8(r.string(f"the name of tensor {i}"), f"the name of tensor {i}")
        n_dims = r.scalar("I", f"the dimension count of {name!r}")
        r.count(n_dims, 8, f"dimensions of {name!r}")
        dims = struct.unpack(f"{r.order}{n_dims}Q", r.take(8 * n_dims, f"the dimensions of {name!r}"))
        ggml_type = r.scalar("I", f"the type of {name!r}")
        offset = r.scalar("Q", f"the data offset of {name!r}")
        infos.append((name, dims, ggml_type, offset))
    align = scan.metadata.get("general.alignment")
    if align is not None:
        if not isinstance(align, int) or isinstance(align, bool) or align_type != UINT32:
            raise _Stop(Kind.BAD_HEADER, "general.alignment is not a uint32 (the gguf reader refuses it)")
        if align == 0 or align & (align - 1):
            raise _Stop(Kind.BAD_HEADER, f"general.alignment {align} is not a power of two")
        scan.alignment = align
    scan.data_offset = -(-r.pos // scan.alignment) * scan.alignment
    _tensors(scan, infos)


def _value(r: _Reader, vtype: int, key: str, depth: int) -> Any:
    """Read (or skip) one value; what :class:`GGUFScan` keeps of it."""
    code = _SCALAR.get(vtype)
    if code is not None:
        return r.scalar(code, f"the value of {key!r}")
    if vtype == STRING:
        raw = r.string(f"the value of {key!r}")
        return raw.decode("utf-8", "replace") if len(raw) <= KEEP_STRING else f"<{len(raw):,} bytes>"
    if vtype == ARRAY:
        if depth >= MAX_DEPTH:
            raise _Stop(Kind.BAD_HEADER, f"{key!r} nests arrays more than {MAX_DEPTH} deep")
        itype = r.scalar("I", f"the element type of {key!r}")
        n = r.scalar("Q", f"the length of {key!r}")
        if n == 0:
            return ("array", itype, 0)  # gguf's reader never looks at the element type then
        item = _SCALAR.get(itype)
        if item is not None:
            size = struct.calcsize(item)
            r.count(n, size, f"elements of {key!r}")
            r.skip(n * size, f"the elements of {key!r}")
        elif itype == STRING:
            r.count(n, 8, f"strings in {key!r}")
            _skip_strings(r, n, key)
        elif itype == ARRAY:
            r.count(n, 12, f"arrays in {key!r}")
            for _ in range(n):
                _value(r, ARRAY, key, depth + 1)
        else:
            raise _Stop(Kind.BAD_HEADER, f"{key!r} is an array of unknown value type {itype}")
        return ("array", itype, n)
    raise _Stop(Kind.BAD_HEADER, f"{key!r} has unknown value type {vtype}")


def _skip_strings(r: _Reader, n: int, key: str) -> None:
    """Skip ``n`` strings (a vocabulary: 150k of them): the buffer is walked directly, and
    asked to grow only when a string runs past what has been read."""
    unpack = struct.Struct(r.order + "Q").unpack_from
    pos, buf = r.pos, r.buf
    for _ in range(n):
        if pos + 8 > len(buf):
            r.pos = pos
            r.need(8, f"a string of {key!r}")
            buf = r.buf
        length = unpack(buf, pos)[0]
        end = pos + 8 + length
        if end > len(buf):
            r.pos = pos + 8
            r.count(length, 1, f"bytes in {key!r}")
            r.need(length, f"a string of {key!r}")
            buf = r.buf
        pos = end
    r.pos = pos


def _utf8(raw: bytes, what: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _Stop(Kind.BAD_HEADER, f"{what} is not valid UTF-8 ({raw[:40]!r})") from None


def _tensors(scan: GGUFScan, infos: list[tuple[str, tuple[int, ...], int, int]]) -> None:
    """Sizes and bounds, as gguf's ``_build_tensors`` checks them (in order: a duplicate
    name, an unknown type, a row that is not whole blocks, data past the end)."""
    names: set[str] = set()
    end = scan.data_offset
    for name, dims, ggml_type, offset in infos:
        if name in names:
            raise _Stop(Kind.BAD_HEADER, f"tensor {name!r} appears twice")
        names.add(name)
        if ggml_type not in GGML_TYPES:
            raise _Stop(Kind.BAD_HEADER, f"tensor {name!r} has unknown ggml type {ggml_type}")
        tname, block, type_size = GGML_TYPES[ggml_type]
        n = 1
        for d in dims:
            n *= d
        if ggml_type not in _ELEMENT_TYPES and (not dims or dims[0] % block):
            raise _Stop(
                Kind.BAD_HEADER,
                f"tensor {name!r} ({tname}) has rows of {dims[0] if dims else 0} values, "
                f"not a multiple of its {block}-value block",
            )
        nbytes = n * type_size // block
        stop = scan.data_offset + offset + nbytes
        if stop > scan.size:
            raise _Stop(
                Kind.TRUNCATED,
                f"tensor {name!r} ends at byte {stop:,} but the file has {scan.size:,}: truncated",
            )
        end = max(end, stop)
        scan.tensors.append(Tensor(name, tuple(dims), ggml_type, offset, nbytes))
    scan.data_end = end


def read(path: str | os.PathLike[str]) -> GGUFScan:
    """The header of the GGUF file at ``path``, opened as :mod:`.shardio` opens a shard
    (a regular file only, never blocking). An error opening or reading it is UNREADABLE.
    The caller bounds the time (:mod:`.bounded`)."""
    from flightcheck._checkpoint.shardio import _open_regular, pread_all

    try:
        fd, st = _open_regular(path)
    except OSError as exc:
        scan = GGUFScan()
        scan.problems.append((Kind.UNREADABLE, f"cannot be opened: {exc.strerror or exc}"))
        return scan
    try:
        return parse(lambda off, n: pread_all(fd, n, off), st.st_size)
    except OSError as exc:
        scan = GGUFScan(size=st.st_size)
        scan.problems.append((Kind.UNREADABLE, f"cannot be read: {exc.strerror or exc}"))
        return scan
    finally:
        os.close(fd)
