"""vLLM's Flint and its GGUF: what vLLM loads is what flightcheck reads.

vLLM 0.33's ``FlintForCausalLM`` looks for the one ``*.gguf`` of its model directory while
it is built (vllm/models/flint/gguf_nvfp4.py ``find_gguf_file``: several raise "Expected
one GGUF file") and, with one, sets ``allow_patterns_overrides = ["*.gguf"]``
(vllm/models/flint/model.py), so the default loader globs only that (default_loader.py
``_prepare_weights``) and ``load_weights`` reads the GGUF itself: safetensors beside it are
never opened. The memory fit counts the GGUF's tensors per rank, named and sized as vLLM
allocates them (flightcheck._checkpoint.ggufnames). GGUF files are generated from the
format (support.ggufgen); the larger models are sparse files. Several ``*.gguf`` files
(FC512) are tested with the other checkpoint checks, in test_checkpoint.py.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from flightcheck._checkpoint import load
from flightcheck._memory import build
from flightcheck._memory.weights import Layout
from flightcheck._vocabulary.intent import Intent
from support.checkpoints import break_checkpoint
from support.ckptgen import load_config, write_checkpoint
from support.evaluation import facts, host_doc, results
from support.ggufgen import BF16_T, F32_T, Q4_K_T, STRING, U32, flint_model, write_gguf, write_gguf_sparse

KV = [("general.architecture", STRING, "flint")]
H200_BYTES = 150_754_820_096  # 140.4 GiB, as CUDA reports an H200
#: a Flint-shaped MoE of ~154 GiB in NVFP4: too big for one H200, fits on two and on a B300
MID = {
    "layers": 60,
    "hidden": 4096,
    "heads": 32,
    "kv_heads": 4,
    "head_dim": 128,
    "experts": 256,
    "moe_inter": 1536,
    "shared_inter": 2048,
    "dense_inter": 12288,
    "vocab": 150144,
    "max_position": 1 << 20,
}


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def b300():
    return facts("b300", env=host_doc("b300")["env"])


def h200():
    doc = host_doc("b300")
    gpus = copy.deepcopy(doc["gpus"])
    for g in gpus:
        g.update(name="NVIDIA H200", memory_total_bytes=H200_BYTES, compute_capability="9.0")
    return facts("b300", gpus=gpus, env=doc["env"])


def errors(res: dict[str, list], prefix: str = "FC") -> list[tuple[str, str]]:
    return [
        (c, r.message)
        for c, rs in res.items()
        if c.startswith(prefix)
        for r in rs
        if r.status.value in ("fail", "unknown") and r.severity.value == "error"
    ]


def flint_dir(tmp_path: Path, *, safetensors: bool = False, sparse: bool = False, **shape: Any) -> Path:
    """A Flint model directory with one GGUF (``flint-nvfp4.gguf``); ``safetensors``: a
    healthy 3-shard safetensors checkpoint beside it (a BF16 export kept next to the GGUF)."""
    root = tmp_path / "flint"
    config, tensors = flint_model(**shape)
    if safetensors:
        write_checkpoint(root, load_config("tiny-llama"), shards=3, dense=True)
    root.mkdir(exist_ok=True)
    (root / "config.json").write_text(json.dumps(config))
    (write_gguf_sparse if sparse else write_gguf)(root / "flint-nvfp4.gguf", kv=KV, tensors=tensors)
    return root


# ---- 1. the GGUF is what vLLM loads, not the safetensors beside it -----------------------


@pytest.mark.parametrize("how", ["truncate", "not-json", "delete"])
def test_fc503_does_not_stop_a_broken_safetensors_shard_beside_flints_gguf(tmp_path: Path, how: str) -> None:
    root = flint_dir(tmp_path, safetensors=True)
    break_checkpoint(root, how)
    for fmt in (None, "safetensors"):
        res = results(b300(), model=str(root), load_format=fmt)
        assert errors(res, "FC5") == [], (fmt, errors(res, "FC5"))
        (r,) = res["FC502"]
        assert r.status.value == "skip" and "flint-nvfp4.gguf" in r.message
    ck = load(str(root))
    assert ck.gguf_loaded == "flint-nvfp4.gguf" and ck.shards == [] and list(ck.other_weights) == [ck.gguf_loaded]
    # the same directory for a model that reads safetensors: the broken shard stops it
    (root / "config.json").write_text(json.dumps(load_config("tiny-llama")))
    assert errors(results(b300(), model=str(root)), "FC5")


def test_a_broken_gguf_stops_flint_even_beside_good_safetensors(tmp_path: Path) -> None:
    root = flint_dir(tmp_path, safetensors=True)
    p = root / "flint-nvfp4.gguf"
    p.write_bytes(p.read_bytes()[:-100])
    got = errors(results(b300(), model=str(root)), "FC5")
    assert [c for c, _ in got] == ["FC503"] and "flint-nvfp4.gguf" in got[0][1] and "truncated" in got[0][1]
    p.write_bytes(b"GGUF\x09\0\0\0" + b"\0" * 64)  # a version the gguf reader refuses
    assert [c for c, _ in errors(results(b300(), model=str(root)), "FC5")] == ["FC504"]
    # --load-format dummy: vLLM reads no weights at all
    assert errors(results(b300(), model=str(root), load_format="dummy"), "FC5") == []


# ---- 2. memory fit from the GGUF, per rank ----------------------------------------------


def expected_bytes(s: dict[str, int]) -> int:
    """What vLLM allocates for :data:`MID` at TP 1, from the shapes alone: NVFP4 linear
    layers at 36 bytes per 64 values plus a 4-byte scale (per expert for stacked ones),
    the LM head dequantized to BF16, every other tensor BF16 but the F32 sinks."""
    h, L, moe = s["hidden"], s["layers"], s["layers"] - 1  # layer 0 is dense
    q, kv = s["heads"] * s["head_dim"], s["kv_heads"] * s["head_dim"]

    def nv(values: int) -> int:
        return values * 36 // 64

    attn = nv(h * q) * 2 + nv(h * kv) * 2 + 4 * 4
    experts = 3 * (nv(h * s["moe_inter"] * s["experts"]) + 4 * s["experts"])
    shared = 3 * (nv(h * s["shared_inter"]) + 4)
    dense = 3 * (nv(h * s["dense_inter"]) + 4)
    norms = (2 * h + 2 * s["head_dim"]) * 2 + s["heads"] * 4
    router = h * s["experts"] * 2
    return (
        L * (attn + norms)
        + moe * (experts + shared + router)
        + dense
        + s["vocab"] * h * 2  # embedding, BF16
        + s["vocab"] * h * 2  # lm_head, dequantized
        + h * 2  # final norm
    )


def test_the_gguf_is_counted_as_vllm_allocates_it(tmp_path: Path) -> None:
    root = flint_dir(tmp_path, sparse=True, **MID)
    ck = load(str(root))
    m = build(ck, Intent(model=str(root)), total=H200_BYTES)
    assert m.error is None and m.tally is not None
    want = expected_bytes(MID)
    assert m.tally.total == want and m.weights() == want  # one rank holds it all at TP 1
    # the stored file is smaller: its lm_head is NVFP4, its F32 norms/router become BF16
    assert ck.gguf_weight_bytes is not None and ck.gguf_weight_bytes < want
    # TP 2: everything split but the replicated norms and routers (and the KV heads: 4 / 2)
    half = m.weights(Layout(2))
    replicated = m.tally.of("replicated")
    assert half == pytest.approx((want - replicated) / 2 + replicated, rel=1e-9)
    assert m.load_bytes == (root / "flint-nvfp4.gguf").stat().st_size


def test_fc401_stops_a_flint_gguf_too_big_for_one_gpu(tmp_path: Path) -> None:
    root = flint_dir(tmp_path, sparse=True, **MID)
    res = results(h200(), model=str(root), tensor_parallel_size=1, max_model_len=32768)
    (r,) = [r for r in res["FC401"] if r.status.value == "fail"]
    assert r.severity.value == "error" and "weights need 153.8 GiB per GPU at -tp 1" in r.message, r.message
    assert r.fix == "-tp 2" and r.evidence["weights_bytes"] == expected_bytes(MID)


def test_fc401_does_not_stop_a_flint_gguf_that_fits_at_tp2(tmp_path: Path) -> None:
    root = flint_dir(tmp_path, sparse=True, **MID)
    for f, tp in ((h200(), 2), (b300(), 1)):
        res = results(f, model=str(root), tensor_parallel_size=tp, max_model_len=32768)
        assert errors(res) == [], (tp, errors(res))
        (r,) = res["FC401"]
        assert r.status.value == "pass" and "flint-nvfp4.gguf" in r.message  # where the figure comes from
        assert {r.status.value for r in res["FC402"]} == {"pass"}


def test_fc402_stops_a_flint_gguf_whose_kv_cache_does_not_fit(tmp_path: Path) -> None:
    """At TP 2 on H200s the weights take 77 GiB a GPU; a 1M-token sequence's KV cache
    (60 full-attention layers x 2 KV heads a rank x 128 x 2 x 2 bytes = 60 KiB a token)
    another 60 GiB: more than the 129 GiB usable."""
    root = flint_dir(tmp_path, sparse=True, **MID)
    res = results(h200(), model=str(root), tensor_parallel_size=2, max_model_len=1 << 20)
    assert {r.status.value for r in res["FC401"]} == {"pass"}
    (r,) = [r for r in res["FC402"] if r.status.value == "fail"]
    assert r.severity.value == "error"
    assert errors(results(h200(), model=str(root), tensor_parallel_size=2, max_model_len=131072)) == []


@pytest.mark.parametrize(
    "drop, extra, why",
    [
        (None, ("blk.0.attn_qkv.weight", (256, 768), BF16_T), "'blk.0.attn_qkv.weight' has no name"),
        (None, ("blk.0.ffn_up_exps.weight", (256, 128, 8), BF16_T), "'blk.0.ffn_up_exps.weight' has no name"),
        (None, ("blk.0.ffn_extra.weight", (256, 16), Q4_K_T), "is Q4_K"),
        (None, ("rope_freqs.weight", (32,), F32_T), "'rope_freqs.weight' has no name"),
        ("blk.0.attn_q.scale", None, "has no 'blk.0.attn_q.scale'"),
    ],
)
def test_a_tensor_flint_refuses_stops_and_leaves_the_weights_uncounted(
    tmp_path: Path, drop: str | None, extra: tuple | None, why: str
) -> None:
    """Where vLLM's loader raises (gguf_nvfp4.py: "Unexpected tensor in Flint GGUF",
    "Unsupported GGUF tensor type", the KeyError of a missing scale), the load fails: FC504.
    And no guess at the weights (a total / TP could stop a launch that fits): FC401 skips
    and says why."""
    root = flint_dir(tmp_path)
    tensors = [t for t in flint_model()[1] if t[0] != drop] + ([extra] if extra else [])
    write_gguf(root / "flint-nvfp4.gguf", kv=KV, tensors=tensors)
    res = results(h200(), model=str(root))
    (r,) = res["FC401"]
    assert r.status.value == "skip" and "weights not counted" in r.message and why in r.message, r.message
    got = errors(res, "FC5")
    assert [c for c, _ in got] == ["FC504"] and why in got[0][1], got


def test_fc504_does_not_stop_what_flints_loader_passes_over(tmp_path: Path) -> None:
    """A ``.scale`` tensor is never read on its own (the iterator skips names ending in
    ``.scale`` and looks up only NVFP4 tensors' scales), and metadata is not looked at: an
    orphan scale and extra keys load fine, and the weights are still counted."""
    root = flint_dir(tmp_path)
    tensors = [*flint_model()[1], ("blk.0.attn_norm.scale", (1,), F32_T), ("stray.scale", (4,), F32_T)]
    kv = [*KV, ("flint.context_length", U32, 32768), ("general.name", STRING, "Flint")]
    write_gguf(root / "flint-nvfp4.gguf", kv=kv, tensors=tensors)
    res = results(h200(), model=str(root))
    assert errors(res) == []
    assert {r.status.value for r in res["FC401"]} == {"pass"}
