"""GGUF files for tests, written byte by byte from the format's description (llama.cpp's
docs/gguf.md; the value and ggml type codes of gguf 0.19.0's constants.py) — not with the
``gguf`` package, so the reader is tested against the format, and the package (when it is
installed) against both."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
_CODE = {U8: "B", I8: "b", U16: "H", I16: "h", U32: "I", I32: "i", F32: "f", BOOL: "?", U64: "Q", I64: "q", F64: "d"}
F32_T, F16_T, Q4_0_T, Q8_0_T, Q4_K_T, BF16_T, NVFP4_T = 0, 1, 2, 8, 12, 30, 40
#: (block size, bytes per block) of the types above (constants.py GGML_QUANT_SIZES)
SIZES = {
    F32_T: (1, 4),
    F16_T: (1, 2),
    Q4_0_T: (32, 18),
    Q8_0_T: (32, 34),
    Q4_K_T: (256, 144),
    BF16_T: (1, 2),
    NVFP4_T: (64, 36),
}


def _s(b: str | bytes, order: str = "<") -> bytes:
    raw = b.encode() if isinstance(b, str) else b
    return struct.pack(order + "Q", len(raw)) + raw


def value(vtype: int, v: Any, order: str = "<") -> bytes:
    """A value's bytes (without its type): ``v`` for an ARRAY is (element type, [items])."""
    if vtype == STRING:
        return _s(v, order)
    if vtype == ARRAY:
        itype, items = v
        out = struct.pack(order + "IQ", itype, len(items))
        return out + b"".join(value(itype, x, order) for x in items)
    return struct.pack(order + _CODE[vtype], v)


def nbytes(dims: tuple[int, ...], ggml_type: int) -> int:
    n = 1
    for d in dims:
        n *= d
    block, size = SIZES.get(ggml_type, (1, 1))  # an unknown type (a malformed file): one byte a value
    return n * size // block


def gguf_bytes(
    kv: list[tuple[str, int, Any]] | None = None,
    tensors: list[tuple[str, tuple[int, ...], int]] | None = None,
    *,
    version: int = 3,
    alignment: int = 32,
    order: str = "<",
    data: bool = True,
) -> bytes:
    """A whole GGUF file: ``kv`` as (key, value type, value), ``tensors`` as (name, dims,
    ggml type), each tensor's data aligned and filled with a byte pattern; ``data=False``
    stops after the header's padding."""
    kv = kv if kv is not None else [("general.architecture", STRING, "flint")]
    tensors = tensors if tensors is not None else [("token_embd.weight", (64, 4), F16_T)]
    out = bytearray(b"GGUF")
    out += struct.pack(order + "IQQ", version, len(tensors), len(kv))
    for key, vtype, v in kv:
        out += _s(key, order) + struct.pack(order + "I", vtype) + value(vtype, v, order)
    offset = 0
    placed = []
    for name, dims, t in tensors:
        out += _s(name, order) + struct.pack(order + "I", len(dims)) + struct.pack(f"{order}{len(dims)}Q", *dims)
        out += struct.pack(order + "IQ", t, offset)
        placed.append((offset, nbytes(dims, t)))
        offset += -(-nbytes(dims, t) // alignment) * alignment
    out += b"\0" * (-len(out) % alignment)
    if not data:
        return bytes(out)
    start = len(out)
    for i, (off, n) in enumerate(placed):
        out += b"\0" * (start + off - len(out))
        out += bytes([(i * 7 + 1) % 251]) * n
    return bytes(out)


def write_gguf(path: Path, **kw: Any) -> Path:
    path.write_bytes(gguf_bytes(**kw))
    return path


#: a small Flint-like model: the tensor names vLLM's Flint loader maps (vllm/models/flint/gguf_nvfp4.py)
FLINT_TENSORS: list[tuple[str, tuple[int, ...], int]] = [
    ("token_embd.weight", (128, 32), BF16_T),
    ("blk.0.attn_q.weight", (128, 128), NVFP4_T),
    ("blk.0.attn_q.weight.scale", (1,), F32_T),
    ("output_norm.weight", (128,), F32_T),
]
