"""Checkpoints on disk for the tests: the ways a download or an exporter breaks one, and a
tiny valid one written by hand (no generator), as the cluster tests use."""

from __future__ import annotations

import json
from pathlib import Path

from support.ckptgen import shard_name, write_shard

#: The commit the HF-cache fixtures are written under (refs hold full commit hashes).
COMMIT = "0123456789abcdef0123456789abcdef01234567"
#: Every way :func:`break_checkpoint` damages a checkpoint.
BREAKAGES = (
    "truncate",
    "pad",
    "delete",
    "header-1tb",
    "overlap",
    "not-json",
    "escape",
    "index-lies",
    "duplicate",
    "no-config",
    "config-truncated",
    "loop",
    "index-not-json",
    "sparse",
)


def break_checkpoint(root: Path, how: str) -> None:
    """Damage a healthy 3-shard tiny checkpoint the way real downloads and exporters do."""
    s2 = root / shard_name(1, 3)
    index = root / "model.safetensors.index.json"
    doc = json.loads(index.read_text())
    data = s2.read_bytes()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + n])
    if how == "truncate":
        s2.write_bytes(data[:-100])
    elif how == "pad":
        s2.write_bytes(data + b"\0" * 4096)
    elif how == "delete":
        s2.unlink()
    elif how == "header-1tb":
        s2.write_bytes((1 << 40).to_bytes(8, "little") + data[8:])
    elif how in ("overlap", "not-json"):
        if how == "overlap":
            names = [k for k in header if k != "__metadata__"]
            header[names[1]]["data_offsets"] = [
                0,
                header[names[1]]["data_offsets"][1] - header[names[1]]["data_offsets"][0],
            ]
            raw = json.dumps(header).encode()
        else:
            raw = b"{not json" + b" " * (n - 9)
        raw = raw.ljust(n) if len(raw) <= n else raw
        s2.write_bytes(len(raw).to_bytes(8, "little") + raw + data[8 + n :])
    elif how == "escape":
        doc["weight_map"]["model.layers.0.mlp.down_proj.weight"] = "../../../../etc/passwd"
        index.write_text(json.dumps(doc))
    elif how == "index-lies":
        doc["weight_map"]["model.layers.9.ghost.weight"] = shard_name(1, 3)
        index.write_text(json.dumps(doc))
    elif how == "duplicate":  # a tensor of shard 2 written into shard 3 as well
        s3 = root / shard_name(2, 3)
        n3 = int.from_bytes(s3.read_bytes()[:8], "little")
        h3 = json.loads(s3.read_bytes()[8 : 8 + n3])
        extra = next(k for k in header if k != "__metadata__")
        tensors = [(k, e["dtype"], e["shape"]) for k, e in h3.items() if k != "__metadata__"] + [
            (extra, header[extra]["dtype"], header[extra]["shape"])
        ]
        write_shard(s3, tensors, dense=True)
    elif how == "no-config":
        (root / "config.json").unlink()
    elif how == "config-truncated":
        (root / "config.json").write_text((root / "config.json").read_text()[:40])
    elif how == "loop":
        s2.unlink()
        s2.symlink_to(s2.name)
    elif how == "index-not-json":
        index.write_text(index.read_text()[:100])
    elif how == "sparse":
        with open(s2, "r+b") as fh:  # make it big and sparse: same header, a hole for data
            fh.truncate(8 << 20)
        hdr_tensors = [
            (k, "U8", [((8 << 20) - 8 - n) if i == 0 else 0])
            for i, k in enumerate(k for k in header if k != "__metadata__")
        ]
        write_shard(s2, hdr_tensors[:1], dense=False)
        doc["weight_map"] = {k: v for k, v in doc["weight_map"].items() if v != s2.name or k == hdr_tensors[0][0]}
        index.write_text(json.dumps(doc))
    else:
        raise AssertionError(how)


def write_tiny_model(path: Path, shards: int = 3) -> Path:
    """A small, valid safetensors checkpoint: config.json, ``shards`` BF16 shards, the index."""
    path.mkdir(parents=True)
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": shards,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "vocab_size": 512,
        "max_position_embeddings": 2048,
        "torch_dtype": "bfloat16",
    }
    (path / "config.json").write_text(json.dumps(config))
    weight_map = {}
    for i in range(shards):
        name = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        tensors = {f"model.layers.{i}.mlp.{proj}.weight": (proj, k) for k, proj in enumerate(("gate_proj", "up_proj"))}
        size = 128 * 64 * 2
        header = json.dumps(
            {
                t: {"dtype": "BF16", "shape": [128, 64], "data_offsets": [k * size, (k + 1) * size]}
                for t, (_p, k) in tensors.items()
            }
        ).encode()
        header += b" " * (-len(header) % 8)
        with open(path / name, "wb") as fh:
            fh.write(len(header).to_bytes(8, "little") + header + bytes(size * len(tensors)))
        weight_map.update(dict.fromkeys(tensors, name))
    index = {"metadata": {"total_size": shards * 2 * 128 * 64 * 2}, "weight_map": weight_map}
    (path / "model.safetensors.index.json").write_text(json.dumps(index))
    return path
