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
    ("blk.0.attn_q.scale", (1,), F32_T),
    ("output_norm.weight", (128,), F32_T),
]


def write_gguf_sparse(path: Path, **kw: Any) -> Path:
    """A GGUF file whose data section is a hole: the header as :func:`gguf_bytes` writes it,
    the file then extended to where the last tensor's data ends (a 100 GB model costs no disk)."""
    tensors = kw.get("tensors") or []
    alignment = kw.get("alignment", 32)
    header = gguf_bytes(data=False, **kw)
    data = sum(-(-nbytes(d, t) // alignment) * alignment for _, d, t in tensors)
    with open(path, "wb") as f:
        f.write(header)
        f.truncate(len(header) + data)
    return path


def flint_model(
    *,
    layers: int = 4,
    hidden: int = 256,
    heads: int = 4,
    kv_heads: int = 2,
    head_dim: int = 64,
    experts: int = 8,
    moe_inter: int = 128,
    shared_inter: int = 128,
    dense_inter: int = 512,
    vocab: int = 1024,
    dense_layers: tuple[int, ...] = (0,),
    max_position: int = 32768,
) -> tuple[dict[str, Any], list[tuple[str, tuple[int, ...], int]]]:
    """(config.json, GGUF tensors) of a Flint-shaped NVFP4 model: the tensors vLLM's Flint
    loader maps (vllm/models/flint/gguf_nvfp4.py ``_GLOBAL_NAMES``, ``_LAYER_NAMES``,
    ``_EXPERT_NAMES``), NVFP4 linear layers each with its F32 ``<base>.scale``, stacked
    experts as one tensor a projection (dims as GGUF stores them: columns first, experts
    last), norms and the router F32, the embedding BF16."""
    q, kv = heads * head_dim, kv_heads * head_dim

    def linear(base: str, cols: int, rows: int, stack: int = 0) -> list[tuple[str, tuple[int, ...], int]]:
        dims = (cols, rows, stack) if stack else (cols, rows)
        return [(base + ".weight", dims, NVFP4_T), (base + ".scale", (stack,) if stack else (1,), F32_T)]

    out: list[tuple[str, tuple[int, ...], int]] = [("token_embd.weight", (hidden, vocab), BF16_T)]
    for i in range(layers):
        b = f"blk.{i}."
        out += [
            (b + "attn_norm.weight", (hidden,), F32_T),
            (b + "ffn_norm.weight", (hidden,), F32_T),
            (b + "attn_q_norm.weight", (head_dim,), F32_T),
            (b + "attn_k_norm.weight", (head_dim,), F32_T),
            (b + "attn_sinks.weight", (heads,), F32_T),
        ]
        out += linear(b + "attn_q", hidden, q) + linear(b + "attn_k", hidden, kv) + linear(b + "attn_v", hidden, kv)
        out += linear(b + "attn_output", q, hidden)
        if i in dense_layers:
            out += linear(b + "ffn_gate", hidden, dense_inter) + linear(b + "ffn_up", hidden, dense_inter)
            out += linear(b + "ffn_down", dense_inter, hidden)
            continue
        out.append((b + "ffn_gate_inp.weight", (hidden, experts), F32_T))
        out += linear(b + "ffn_gate_exps", hidden, moe_inter, experts)
        out += linear(b + "ffn_up_exps", hidden, moe_inter, experts)
        out += linear(b + "ffn_down_exps", moe_inter, hidden, experts)
        out += linear(b + "ffn_gate_shexp", hidden, shared_inter) + linear(b + "ffn_up_shexp", hidden, shared_inter)
        out += linear(b + "ffn_down_shexp", shared_inter, hidden)
    out += [("output_norm.weight", (hidden,), F32_T)] + linear("output", hidden, vocab)
    config = {
        "architectures": ["FlintForCausalLM"],
        "model_type": "flint",
        "torch_dtype": "bfloat16",
        "vocab_size": vocab,
        "hidden_size": hidden,
        "intermediate_size": dense_inter,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": head_dim,
        "max_position_embeddings": max_position,
        "num_experts": experts,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": moe_inter,
        "shared_expert_intermediate_size": shared_inter,
        "mlp_only_layers": list(dense_layers),
        "layer_types": ["full_attention"] * layers,
        "use_sliding_window": False,
        "sliding_window": None,
        "tie_word_embeddings": False,
        "rms_norm_eps": 1e-6,
    }
    return config, out
