"""Generate safetensors checkpoints from a model's config.json: real headers, sparse data.

Used by the tests (healthy and broken checkpoints, the published models whose memory
figures are known) and by ``bench/bench_checkpoint.py`` (the 1.56 TB, 96-shard model).
The tensor table of each architecture follows the names and shapes of the published
checkpoints (Llama / Qwen2 dense, Mixtral, Qwen3-MoE, DeepSeek-V3 / Kimi-K2 with block FP8
or MXFP4 experts, gpt-oss); the data region is a hole (``truncate``) unless ``dense=True``,
so a terabyte checkpoint costs a few megabytes of disk.

    from support.ckptgen import write_checkpoint, load_config
    write_checkpoint(tmp / "llama", load_config("llama-3-8b"), shards=4)
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

MODELS = Path(__file__).resolve().parents[1] / "fixtures" / "models"

#: bytes per element of the stored dtypes the generator writes.
DTYPE_BYTES = {"BF16": 2, "F16": 2, "F32": 4, "F8_E4M3": 1, "U8": 1, "I8": 1, "I32": 4, "I64": 8, "BOOL": 1}

Tensor = tuple[str, str, list[int]]  # name, dtype, shape


def load_config(name: str) -> dict[str, Any]:
    """A published config.json kept under tests/fixtures/models (``llama-3-8b``)."""
    return json.loads((MODELS / f"{name}.json").read_text())


def nbytes(dtype: str, shape: list[int]) -> int:
    """Stored size of one tensor."""
    return math.prod(shape) * DTYPE_BYTES[dtype]


# --------------------------------------------------------------------------- tables


def _linear(name: str, out: int, inp: int, quant: str | None, *, bias: bool = False) -> list[Tensor]:
    """One linear layer as stored: bf16, block FP8 (+ F32 scale_inv per 128x128), or
    MXFP4 packed (U8 two values a byte + U8 E8M0 scale per 32 inputs)."""
    if quant == "fp8":
        t = [
            (f"{name}.weight", "F8_E4M3", [out, inp]),
            (f"{name}.weight_scale_inv", "F32", [-(-out // 128), -(-inp // 128)]),
        ]
    elif quant == "mxfp4":
        t = [(f"{name}.weight_packed", "U8", [out, inp // 2]), (f"{name}.weight_scale", "U8", [out, inp // 32])]
    else:
        t = [(f"{name}.weight", "BF16", [out, inp])]
    if bias:
        t.append((f"{name}.bias", "BF16", [out]))
    return t


def _norm(name: str, dim: int) -> Tensor:
    return (f"{name}.weight", "BF16", [dim])


def _dense_attention(p: str, c: dict[str, Any], bias: bool, quant: str | None = None) -> list[Tensor]:
    h, heads = c["hidden_size"], c["num_attention_heads"]
    kv = c.get("num_key_value_heads", heads)
    hd = c.get("head_dim") or h // heads
    t = _linear(f"{p}.self_attn.q_proj", heads * hd, h, quant, bias=bias)
    t += _linear(f"{p}.self_attn.k_proj", kv * hd, h, quant, bias=bias)
    t += _linear(f"{p}.self_attn.v_proj", kv * hd, h, quant, bias=bias)
    t += _linear(f"{p}.self_attn.o_proj", h, heads * hd, quant)
    if c.get("model_type") in ("qwen3", "qwen3_moe"):
        t += [_norm(f"{p}.self_attn.q_norm", hd), _norm(f"{p}.self_attn.k_norm", hd)]
    return t


def _mlp(
    p: str, h: int, inter: int, quant: str | None, names: tuple[str, str, str] = ("gate_proj", "up_proj", "down_proj")
) -> list[Tensor]:
    g, u, d = names
    return (
        _linear(f"{p}.{g}", inter, h, quant)
        + _linear(f"{p}.{u}", inter, h, quant)
        + _linear(f"{p}.{d}", h, inter, quant)
    )


def _embeddings(c: dict[str, Any], p: str = "model") -> tuple[list[Tensor], list[Tensor]]:
    v, h = c["vocab_size"], c["hidden_size"]
    head = [] if c.get("tie_word_embeddings") else [("lm_head.weight", "BF16", [v, h])]
    return [(f"{p}.embed_tokens.weight", "BF16", [v, h])], [_norm(f"{p}.norm", h)] + head


def _decoder(c: dict[str, Any], body: Callable[[int, str], list[Tensor]], layers: int | None = None) -> list[Tensor]:
    """What every table shares: the embeddings first, the final norm and LM head last, and
    each decoder layer's two norms followed by ``body(index, "model.layers.<index>")``."""
    h = c["hidden_size"]
    first, last = _embeddings(c)
    out = list(first)
    for i in range(c["num_hidden_layers"] if layers is None else layers):
        p = f"model.layers.{i}"
        out += [_norm(f"{p}.input_layernorm", h), _norm(f"{p}.post_attention_layernorm", h)]
        out += body(i, p)
    return out + last


def dense_tensors(c: dict[str, Any]) -> list[Tensor]:
    """Llama / Mistral / Qwen2 / Qwen3 dense."""
    bias = c.get("model_type") == "qwen2" or bool(c.get("attention_bias"))
    return _decoder(
        c, lambda i, p: _dense_attention(p, c, bias) + _mlp(f"{p}.mlp", c["hidden_size"], c["intermediate_size"], None)
    )


def mixtral_tensors(c: dict[str, Any]) -> list[Tensor]:
    """Mixtral: ``block_sparse_moe.experts.<e>.w1|w2|w3`` and a router ``gate``."""
    h, e = c["hidden_size"], c["num_local_experts"]

    def body(i: int, p: str) -> list[Tensor]:
        out = _dense_attention(p, c, False) + [(f"{p}.block_sparse_moe.gate.weight", "BF16", [e, h])]
        for x in range(e):
            out += _mlp(f"{p}.block_sparse_moe.experts.{x}", h, c["intermediate_size"], None, ("w1", "w3", "w2"))
        return out

    return _decoder(c, body)


def qwen_moe_tensors(c: dict[str, Any]) -> list[Tensor]:
    """Qwen2-MoE / Qwen3-MoE: ``mlp.experts.<e>.*``, ``mlp.gate``, optional shared expert."""
    h, e = c["hidden_size"], c["num_experts"]
    # block FP8 (Qwen3-235B-A22B-FP8): attention and experts in FP8 blocks, the router bf16
    lin, exp = _quant(c)

    def body(i: int, p: str) -> list[Tensor]:
        out = _dense_attention(p, c, c.get("model_type") == "qwen2_moe", lin)
        out.append((f"{p}.mlp.gate.weight", "BF16", [e, h]))
        for x in range(e):
            out += _mlp(f"{p}.mlp.experts.{x}", h, c["moe_intermediate_size"], exp)
        if c.get("shared_expert_intermediate_size"):
            out += _mlp(f"{p}.mlp.shared_expert", h, c["shared_expert_intermediate_size"], None)
            out.append((f"{p}.mlp.shared_expert_gate.weight", "BF16", [1, h]))
        return out

    return _decoder(c, body)


def _quant(c: dict[str, Any]) -> tuple[str | None, str | None]:
    """(quant of linear layers, quant of routed experts) from quantization_config."""
    q = c.get("quantization_config") or {}
    if q.get("quant_method") == "fp8":
        return "fp8", "fp8"
    if q.get("format") == "mxfp4-pack-quantized" or q.get("quant_method") == "mxfp4":
        return None, "mxfp4"
    return None, None


def deepseek_tensors(c: dict[str, Any]) -> list[Tensor]:
    """DeepSeek-V2/V3 and Kimi-K2: MLA attention, dense first layers, routed + shared
    experts, MTP layers after ``num_hidden_layers`` (``num_nextn_predict_layers``)."""
    h, heads = c["hidden_size"], c["num_attention_heads"]
    qk_nope, qk_rope, v_hd = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"]
    q_lora, kv_lora = c.get("q_lora_rank"), c["kv_lora_rank"]
    e = c["n_routed_experts"]
    lin, exp_q = _quant(c)

    def body(i: int, p: str) -> list[Tensor]:
        a = f"{p}.self_attn"
        if q_lora:
            out = _linear(f"{a}.q_a_proj", q_lora, h, lin) + [_norm(f"{a}.q_a_layernorm", q_lora)]
            out += _linear(f"{a}.q_b_proj", heads * (qk_nope + qk_rope), q_lora, lin)
        else:
            out = _linear(f"{a}.q_proj", heads * (qk_nope + qk_rope), h, lin)
        out += _linear(f"{a}.kv_a_proj_with_mqa", kv_lora + qk_rope, h, lin) + [_norm(f"{a}.kv_a_layernorm", kv_lora)]
        out += _linear(f"{a}.kv_b_proj", heads * (qk_nope + v_hd), kv_lora, lin)
        out += _linear(f"{a}.o_proj", h, heads * v_hd, lin)
        if i < c.get("first_k_dense_replace", 0):
            out += _mlp(f"{p}.mlp", h, c["intermediate_size"], lin)
        else:
            out.append((f"{p}.mlp.gate.weight", "BF16", [e, h]))
            out.append((f"{p}.mlp.gate.e_score_correction_bias", "F32", [e]))
            for x in range(e):
                out += _mlp(f"{p}.mlp.experts.{x}", h, c["moe_intermediate_size"], exp_q)
            shared = c.get("n_shared_experts") or 0
            if shared:
                out += _mlp(f"{p}.mlp.shared_experts", h, c["moe_intermediate_size"] * shared, lin)
        if i >= c["num_hidden_layers"]:  # the MTP block's own parts
            out += [
                _norm(f"{p}.enorm", h),
                _norm(f"{p}.hnorm", h),
                (f"{p}.eh_proj.weight", "BF16", [h, 2 * h]),
                _norm(f"{p}.shared_head.norm", h),
            ]
            out += [
                (f"{p}.embed_tokens.weight", "BF16", [c["vocab_size"], h]),
                (f"{p}.shared_head.head.weight", "BF16", [c["vocab_size"], h]),
            ]
        return out

    return _decoder(c, body, c["num_hidden_layers"] + int(c.get("num_nextn_predict_layers") or 0))


def gpt_oss_tensors(c: dict[str, Any]) -> list[Tensor]:
    """gpt-oss: fused MXFP4 experts (``*_blocks`` U8 [E, N, K/32, 16], ``*_scales`` U8),
    attention with biases and per-head sinks, a router with bias."""
    h, heads, kv, hd = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
    e, inter = c["num_local_experts"], c["intermediate_size"]

    def body(i: int, p: str) -> list[Tensor]:
        a = f"{p}.self_attn"
        out = _linear(f"{a}.q_proj", heads * hd, h, None, bias=True) + _linear(
            f"{a}.k_proj", kv * hd, h, None, bias=True
        )
        out += _linear(f"{a}.v_proj", kv * hd, h, None, bias=True) + _linear(
            f"{a}.o_proj", h, heads * hd, None, bias=True
        )
        out.append((f"{a}.sinks", "BF16", [heads]))
        out += [(f"{p}.mlp.router.weight", "BF16", [e, h]), (f"{p}.mlp.router.bias", "BF16", [e])]
        for proj, n, k in (("gate_up_proj", 2 * inter, h), ("down_proj", h, inter)):
            out.append((f"{p}.mlp.experts.{proj}_blocks", "U8", [e, n, k // 32, 16]))
            out.append((f"{p}.mlp.experts.{proj}_scales", "U8", [e, n, k // 32]))
            out.append((f"{p}.mlp.experts.{proj}_bias", "BF16", [e, n]))
        return out

    return _decoder(c, body)


def tensors_for(c: dict[str, Any]) -> list[Tensor]:
    """The stored tensor table of a model, chosen by its model_type."""
    mt = c.get("model_type")
    if mt in ("deepseek_v2", "deepseek_v3", "kimi_k2"):
        return deepseek_tensors(c)
    if mt == "mixtral":
        return mixtral_tensors(c)
    if mt in ("qwen2_moe", "qwen3_moe"):
        return qwen_moe_tensors(c)
    if mt == "gpt_oss":
        return gpt_oss_tensors(c)
    return dense_tensors(c)


# --------------------------------------------------------------------------- writing


def split_shards(tensors: list[Tensor], shards: int) -> list[list[Tensor]]:
    """Consecutive runs of about equal bytes (as HF's sharding does)."""
    total = sum(nbytes(d, s) for _, d, s in tensors)
    target = total / max(1, shards)
    out: list[list[Tensor]] = [[]]
    acc = 0
    for t in tensors:
        size = nbytes(t[1], t[2])
        if out[-1] and acc + size / 2 > target * len(out) and len(out) < shards:
            out.append([])
        out[-1].append(t)
        acc += size
    return out


def header_bytes(
    tensors: Iterable[Tensor], metadata: dict[str, str] | None = None, *, align: int = 8
) -> tuple[bytes, int]:
    """(8-byte length + JSON header padded with spaces, end of the data region)."""
    head: dict[str, Any] = {"__metadata__": metadata if metadata is not None else {"format": "pt"}}
    off = 0
    for name, dtype, shape in tensors:
        size = nbytes(dtype, shape)
        head[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + size]}
        off += size
    raw = json.dumps(head, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % align)
    return len(raw).to_bytes(8, "little") + raw, off


def write_shard(
    path: Path, tensors: list[Tensor], *, dense: bool = False, metadata: dict[str, str] | None = None
) -> int:
    """Write one shard; the data region is a hole unless ``dense``. Returns its size."""
    head, end = header_bytes(tensors, metadata)
    with open(path, "wb") as fh:
        fh.write(head)
        if dense:
            left = end
            block = b"\x01" * (1 << 20)  # non-zero: a compressing filesystem must still allocate it
            while left > 0:
                fh.write(block[: min(left, len(block))])
                left -= len(block)
        else:
            fh.truncate(len(head) + end)
    return len(head) + end


def shard_name(i: int, n: int) -> str:
    """HF's naming: model-00001-of-00004.safetensors."""
    return f"model-{i + 1:05d}-of-{n:05d}.safetensors"


def write_checkpoint(
    path: str | os.PathLike[str],
    config: dict[str, Any],
    *,
    shards: int = 1,
    tensors: list[Tensor] | None = None,
    index: bool | None = None,
    dense: bool = False,
    namer: Callable[[int, int], str] = shard_name,
) -> Path:
    """Write config.json, the shards and (with more than one shard) the index.

    A single shard is ``model.safetensors`` without an index, as HF writes it.
    """
    root = Path(path)
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.json").write_text(json.dumps(config, indent=2))
    table = tensors if tensors is not None else tensors_for(config)
    parts = split_shards(table, shards)
    use_index = len(parts) > 1 if index is None else index
    weight_map: dict[str, str] = {}
    total = 0
    for i, part in enumerate(parts):
        name = namer(i, len(parts)) if use_index or len(parts) > 1 else "model.safetensors"
        write_shard(root / name, part, dense=dense)
        for t in part:
            weight_map[t[0]] = name
            total += nbytes(t[1], t[2])
    if use_index:
        doc = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
        (root / "model.safetensors.index.json").write_text(json.dumps(doc, indent=2))
    return root


def write_hf_cache(
    hub: Path,
    repo_id: str,
    config: dict[str, Any],
    *,
    shards: int = 2,
    commit: str = "a" * 40,
    branch: str = "main",
    tree: bool = True,
    dense: bool = True,
) -> Path:
    """Lay a checkpoint out as huggingface_hub's cache does: blobs named by hash,
    ``snapshots/<commit>/<file>`` symlinks into them, ``refs/<branch>``, and the tree
    cache ``trees/<commit>.json`` with each file's expected size. Returns the snapshot."""
    import hashlib
    import tempfile

    repo = hub / ("models--" + repo_id.replace("/", "--"))
    blobs, snap = repo / "blobs", repo / "snapshots" / commit
    blobs.mkdir(parents=True, exist_ok=True)
    snap.mkdir(parents=True, exist_ok=True)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / branch).write_text(commit)
    files: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        src = write_checkpoint(Path(tmp) / "m", config, shards=shards, dense=dense)
        for f in sorted(src.iterdir()):
            h = hashlib.sha256()
            with open(f, "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
            etag = h.hexdigest()
            os.replace(f, blobs / etag)
            (snap / f.name).symlink_to(os.path.relpath(blobs / etag, snap))
            size = (blobs / etag).stat().st_size
            files[f.name] = {"size": size, "blob_id": etag[:40], "lfs_sha256": etag, "lfs_size": size}
    if tree:
        (repo / "trees").mkdir(exist_ok=True)
        (repo / "trees" / f"{commit}.json").write_text(json.dumps({"format_version": 1, "files": files}))
    return snap
