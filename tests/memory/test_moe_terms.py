"""The MoE / MLA / sampler-install terms read from vLLM's code by release (vllm.memory_moe)."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from flightcheck._checkpoint import load
from flightcheck._knowledge.vllm import memory_moe
from flightcheck._memory import build
from flightcheck._memory.bound import bound_terms
from flightcheck._memory.budget import Batch, forward_peak, moe_backend_span
from flightcheck._memory.config import parse
from flightcheck._memory.weights import Layout
from flightcheck._vocabulary.intent import Intent
from support.ckptgen import load_config, write_checkpoint
from support.memory_accuracy import DERIVED_WEIGHTS, derived_weights
from support.memory_accuracy import load as load_points

GiB = 1 << 30
# Qwen3-235B-A22B (model_configs.json): hidden 4096, moe_intermediate 1536, top-8 of 128
QWEN3_235B = {
    "architectures": ["Qwen3MoeForCausalLM"],
    "model_type": "qwen3_moe",
    "hidden_size": 4096,
    "intermediate_size": 12288,
    "head_dim": 128,
    "num_attention_heads": 64,
    "num_hidden_layers": 94,
    "num_key_value_heads": 4,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "moe_intermediate_size": 1536,
    "torch_dtype": "bfloat16",
    "vocab_size": 151936,
}


@pytest.mark.parametrize(
    ("v", "chunk"),
    [((0, 6, 4), 32768), ((0, 10, 0), 32768), ((0, 11, 2), 32768), ((0, 12, 0), 16384), ((0, 17, 1), 16384)]
    + [((0, 18, 0), None), ((0, 33, 0), None), (None, None)],
)
def test_fused_moe_chunk_by_release(v: tuple[int, ...] | None, chunk: int | None) -> None:
    assert memory_moe.fused_moe_chunk(v) == chunk


def test_modular_kernel_from_0_14() -> None:
    assert not memory_moe.modular_triton((0, 13, 0))
    assert memory_moe.modular_triton((0, 14, 0)) and memory_moe.modular_triton(None)


def test_workspaces_direct_and_modular_at_tp4() -> None:
    """Qwen3-235B at TP 4 (N = 2 x 384, K = 4096), 8192 dummy tokens, top-8."""
    kw = {"hidden": 4096, "inter": 384, "top_k": 8}
    direct = memory_moe.moe_workspace_bytes((0, 10, 0), 8192, **kw)
    assert direct == 8192 * 8 * (4096 + 384) * 2  # cache13 + intermediate_cache2
    modular = memory_moe.moe_workspace_bytes((0, 19, 0), 8192, **kw)
    # workspace13 (shared with fused_out) + workspace2, and the (M, K) output: out of place from 0.11.2
    assert modular == (8192 * 8 * (4096 + 4096) + 8192 * 4096) * 2
    # chunked (0.12 - 0.17): fused_out is a separate (M_full, K) buffer once there are two chunks
    chunked = memory_moe.moe_workspace_bytes((0, 15, 0), 32768, **kw)
    assert chunked == (16384 * 8 * 4096 + 32768 * 4096 + 16384 * 8 * 4096 + 32768 * 4096) * 2
    # 0.11.0 writes the output in place, 0.11.2 (torch 2.9: disable_inplace) does not
    assert memory_moe.moe_workspace_bytes((0, 11, 2), 8192, **kw) - direct == 8192 * 4096 * 2
    fp8 = memory_moe.moe_workspace_bytes((0, 10, 0), 8192, fp8=True, **kw)
    q = 8192 * 4096 + 8192 * 8 * 384  # a1q + a2q, one byte each
    assert fp8 - direct == int(q * (1 + 4 / 128))


def test_forward_peak_follows_the_release() -> None:
    cfg = parse(QWEN3_235B, None)
    lay = Layout(4)
    before = forward_peak(cfg, lay, 8192, release=(0, 13, 0))
    after = forward_peak(cfg, lay, 8192, release=(0, 14, 0))
    assert after - before == 8192 * 8 * (4096 - 384) * 2  # both out of place (0.11.2 on)
    # unknown release: the newest rule (the larger reserve)
    assert forward_peak(cfg, lay, 8192) == after


def test_deepgemm_pads_every_local_expert_to_its_block() -> None:
    assert memory_moe.deepgemm_extra_rows(8192, 8, 32) == 32 * 127 - (32 * 127) % 128 + 128
    assert memory_moe.deepgemm_extra_rows(1, 1, 1) == 127


def test_mla_prefill_workspace_cap_by_release() -> None:
    """DeepSeek-V3's 576-wide latent (512 + 64), 163,840 tokens, 1024 sequences of 16."""
    kw = {"max_model_len": 163840, "max_num_seqs": 1024, "block_size": 16, "head_size": 576}
    assert memory_moe.mla_prefill_workspace_bytes((0, 10, 0), **kw) == 128 * 1024 * 576 * 2
    assert memory_moe.mla_prefill_workspace_bytes((0, 11, 0), **kw) == 64 * 1024 * 576 * 2
    # at least one block per request; DCP enlarges it by 1 / dcp
    small = {"max_model_len": 512, "max_num_seqs": 1024, "block_size": 64, "head_size": 576}
    assert memory_moe.mla_prefill_workspace_bytes((0, 19, 0), **small) == 65536 * 576 * 2
    assert memory_moe.mla_prefill_workspace_bytes((0, 19, 0), dcp=2, **kw) == 98304 * 576 * 2


def test_point_33_weights_derived_from_point_15() -> None:
    points, _ = load_points()
    assert DERIVED_WEIGHTS[33][0] == 15 and points[15]["tp"] == 8 and points[33]["tp"] == 4
    assert points[15]["model"] == points[33]["model"] == "Qwen/Qwen3-235B-A22B-FP8"
    w = derived_weights(points, 33)
    assert w is not None and abs(w - (2 * 27.6656 - 0.185)) < 1e-9
    assert derived_weights(points, 15) is None


def test_qwen3_235b_fp8_weights_from_its_headers_match_the_logs(tmp_path: Path) -> None:
    """flightcheck's own sizing (safetensors headers of a generated checkpoint with the published
    shapes: 128 x 128 FP8 blocks, a bf16 router) against vLLM's "Model loading took": point 15 (TP 8
    + EP, 0.10.0) 27.6656 GiB and point 121 (TP 4, 0.27.0) 55.19 GiB; point 33's derived weights agree."""
    cfg = {
        **load_config("qwen3-30b-a3b"),
        **{k: QWEN3_235B[k] for k in ("hidden_size", "intermediate_size", "moe_intermediate_size")},
        "num_hidden_layers": 94,
        "num_attention_heads": 64,
        "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128], "activation_scheme": "dynamic"},
    }
    ck = load(str(write_checkpoint(tmp_path / "q235", cfg, shards=24)), cache_env={"FLIGHTCHECK_NO_CACHE": "1"})

    def weights(tp: int, ep: bool, version: str) -> float:
        intent = Intent(model=str(ck.path), tensor_parallel_size=tp, enable_expert_parallel=ep)
        return build(ck, intent, total=int(79.19 * GiB), engine_version=version).weights() / GiB

    assert abs(weights(8, True, "0.10.0") - 27.6656) < 0.03
    tp4 = weights(4, False, "0.27.0")
    assert abs(tp4 - 55.19) < 0.1
    points, _ = load_points()
    derived = derived_weights(points, 33)
    assert derived is not None and abs(derived - tp4) < 0.05


def test_the_moe_backend_span_reaches_down_to_the_direct_layout() -> None:
    """From 0.14.0 the point takes the modular Triton experts; another backend the oracle picks may
    need less, down to the direct layout's buffers: the bound's moe_backend term, above the point."""
    cfg = parse(QWEN3_235B, None)
    lay = Layout(4)
    batch = Batch(tokens=8192, seqs=32, sampler="flashinfer", release=(0, 19, 0))
    span = moe_backend_span(cfg, lay, batch)
    assert span == 8192 * 8 * (4096 - 384) * 2
    assert moe_backend_span(cfg, lay, msgspec.structs.replace(batch, release=(0, 13, 0))) == 0
    assert moe_backend_span(cfg, lay, msgspec.structs.replace(batch, release=None)) == 0  # release_unknown's
    dense = parse({**QWEN3_235B, "num_experts": 0, "model_type": "qwen3"}, None)
    assert moe_backend_span(dense, lay, batch) == 0
    t = bound_terms(
        engine_version="0.19.0",
        total=80 * GiB,
        utilization_set=True,
        cudagraphs_counted=False,
        tp=1,
        comm=None,
        lazy_connect=False,
        moe_backend=span,
    )["moe_backend"]
    assert (t.below, t.above) == (0, span) and "oracle" in t.source
