"""The V2 model runner's rules (vllm.memory_runner): which launches profile with it, and what it
changes in the KV budget by release — no CUDA-graph estimate before 0.29, a logits-only dummy
sampler before 0.33, its per-request state counted from 0.27."""

from __future__ import annotations

from pathlib import Path

import msgspec

from flightcheck._checkpoint import load
from flightcheck._knowledge import vllm
from flightcheck._launch.intent_read import read_options
from flightcheck._memory import build
from flightcheck._memory.bound import bound_terms
from flightcheck._memory.budget import Batch, default_reserve, profile_peak, runner_span
from flightcheck._memory.config import parse
from flightcheck._memory.weights import Layout
from flightcheck._vocabulary.intent import Intent
from flightcheck._vocabulary.version import release
from support.ckptgen import write_checkpoint

GiB = 1 << 30
# Qwen3-32B (config.json): hidden 5120, intermediate 25600, 64 layers, 8 KV heads, vocab 151936
QWEN3_32B = {
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "hidden_size": 5120,
    "intermediate_size": 25600,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "num_hidden_layers": 64,
    "vocab_size": 151936,
    "max_position_embeddings": 40960,
    "torch_dtype": "bfloat16",
}


def _v2(v: str | None, arch: str = "Qwen3ForCausalLM", **kw: object) -> bool | None:
    kw.setdefault("moe", False)
    kw.setdefault("quantized", False)
    return vllm.v2_runner(release(v) if v else None, architectures=(arch,), **kw)  # type: ignore[arg-type]


def test_which_launches_take_the_v2_runner_by_release() -> None:
    # opt-in only before 0.22.0 (VLLM_USE_V2_MODEL_RUNNER, default False)
    assert _v2("0.21.0") is False and _v2("0.21.0", env={"VLLM_USE_V2_MODEL_RUNNER": "1"}) is True
    # 0.22.0: Qwen3 dense, unquantized
    assert _v2("0.22.0") is True and _v2("0.22.0", "LlamaForCausalLM") is False
    assert _v2("0.22.0", quantized=True) is False
    # 0.23.0 adds Llama and Mistral; 0.24.0 takes a listed architecture quantized or not
    assert _v2("0.23.0", "LlamaForCausalLM") is True and _v2("0.23.0", "Qwen2ForCausalLM") is False
    assert _v2("0.24.0", "LlamaForCausalLM", quantized=True) is True
    assert _v2("0.24.0", "Qwen2ForCausalLM") is False
    # 0.25.0 - 0.28.0: every dense model, MoE only when listed
    assert _v2("0.25.0", "Qwen2ForCausalLM") is True
    assert _v2("0.27.1", "Qwen3MoeForCausalLM", moe=True) is False
    assert _v2("0.27.1", "Qwen2MoeForCausalLM", moe=True) is True
    assert _v2("0.26.0", "Qwen2ForCausalLM", hybrid=True) is False
    # 0.29.0 on: every model
    assert _v2("0.29.0", "Qwen3MoeForCausalLM", moe=True) is True and _v2("0.33.0", "Anything") is True
    # the variable forces it either way; open without a release, or with speculative decoding
    # before 0.33.0 (the methods V2 refuses change by release)
    assert _v2("0.33.0", env={"VLLM_USE_V2_MODEL_RUNNER": "0"}) is False
    assert _v2(None) is None
    assert _v2("0.27.1", speculative=True) is None and _v2("0.33.0", speculative=True) is True


def test_the_v2_runner_changes_the_budget_by_release() -> None:
    assert vllm.v2_skips_cudagraph_estimate(release("0.28.0"))
    assert not vllm.v2_skips_cudagraph_estimate(release("0.29.0"))
    assert vllm.v2_sampler_holds_logits_only(release("0.32.0"))
    assert not vllm.v2_sampler_holds_logits_only(release("0.33.0"))
    assert vllm.v2_persistent_bytes(release("0.26.0"), 1024, 151936) == 0
    # output_bin_counts + prompt_bin_mask: 1024 x 4 x (151936 + 4748)
    assert vllm.v2_persistent_bytes(release("0.27.1"), 1024, 151936) == 1024 * 4 * (151936 + 4748)
    assert vllm.sampler_bytes_per_element("v2-logits", 256) == 2


def test_the_reserve_of_a_v2_launch() -> None:
    """Qwen3-32B at 8192 tokens and 1024 sequences, 0.27.1: the V2 runner's dummy sampler holds
    1024 x 151936 logits (0.29 GiB) where the V1 runner's Triton sampler holds 14 bytes an
    element (2.03 GiB), so the forward pass is the peak; its request state is counted."""
    cfg = parse(QWEN3_32B, None)
    lay = Layout(1)
    v1 = Batch(tokens=8192, seqs=1024, sampler="triton", release=(0, 27, 1), max_model_len=32768)
    v2 = msgspec.structs.replace(v1, sampler="v2-logits", v2_runner=True)
    assert profile_peak(cfg, lay, v1)[0] > profile_peak(cfg, lay, v2)[0]
    _, parts = default_reserve(cfg, lay, "vllm", batch=v2)
    assert parts["runner_state"] == vllm.v2_persistent_bytes((0, 27, 1), 1024, 151936)
    assert "runner_state" not in default_reserve(cfg, lay, "vllm", batch=v1)[1]
    # left open (v2_runner None): the point keeps V1's sampler, the bound reaches V2's
    open_ = msgspec.structs.replace(v1, v2_runner=None)
    span = runner_span(cfg, lay, open_)
    assert span == profile_peak(cfg, lay, v1)[0] - profile_peak(cfg, lay, v2)[0] > 0
    assert runner_span(cfg, lay, v2) == 0 and runner_span(cfg, lay, v1) == 0
    terms = bound_terms(
        engine_version="0.27.1",
        total=int(95.01 * GiB),
        utilization_set=True,
        cudagraphs_counted=False,
        tp=1,
        comm=None,
        lazy_connect=True,
        runner_open=span,
    )
    assert terms["model_runner"].above == span and terms["model_runner"].below == 0


def test_the_launch_picks_the_runner_end_to_end(tmp_path: Path) -> None:
    """Through ``build``: Qwen3-32B on vLLM 0.27.1 takes the V2 runner (no CUDA-graph estimate,
    the logits-only sampler); VLLM_USE_V2_MODEL_RUNNER=0 keeps V1's figures; 0.21.0 runs V1."""
    ck = load(str(write_checkpoint(tmp_path / "q32", QWEN3_32B, shards=4)), cache_env={"FLIGHTCHECK_NO_CACHE": "1"})

    def model(version: str, env: dict[str, str | None] | None = None):  # type: ignore[no-untyped-def]
        intent = Intent(model=str(ck.path), max_model_len=32768)
        return build(
            ck, intent, total=int(95.01 * GiB), engine_version=version, compute_capability="12.0", env=env or {}
        )

    v2, forced_v1, old = model("0.27.1"), model("0.27.1", {"VLLM_USE_V2_MODEL_RUNNER": "0"}), model("0.21.0")
    assert v2.batch.v2_runner is True and v2.batch.sampler == "v2-logits" and not v2.batch.cudagraphs
    assert forced_v1.batch.v2_runner is False and forced_v1.batch.sampler == "triton"
    assert old.batch.v2_runner is False
    f2, f1 = v2.fit(), forced_v1.fit()
    assert f2 is not None and f1 is not None and f2.reserve != f1.reserve


def test_the_token_ids_are_on_the_gpu_only_for_ngram_drafting(tmp_path: Path) -> None:
    """``all_token_ids`` (max_num_reqs x max_model_len int32) is pinned host memory the GPU maps
    (states.py ``uva_instead_of_gpu``, 0.26.0 - 0.33.0): no device memory, nothing in the budget —
    except 0.33.0's n-gram drafting, which keeps it dense on the GPU; from 0.27.0 the budget counts
    it then (total_consumed), at the launch's max_model_len, and the longest length that fits
    pays it per token with the KV cache."""
    for v in ("0.26.0", "0.27.1", "0.30.0", "0.33.0"):
        assert vllm.v2_token_ids_bytes(release(v), 1024, 32768) == 0, v
        assert not vllm.v2_token_ids_on_gpu(release(v), "mtp"), v
    assert vllm.v2_token_ids_bytes(release("0.33.0"), 1024, 32768, "ngram") == 1024 * 32768 * 4
    assert vllm.v2_token_ids_on_gpu(release("0.33.0"), "ngram_gpu")
    assert not vllm.v2_token_ids_on_gpu(release("0.30.0"), "ngram") and not vllm.v2_token_ids_on_gpu(None, "ngram")
    ck = load(str(write_checkpoint(tmp_path / "q32", QWEN3_32B, shards=4)), cache_env={"FLIGHTCHECK_NO_CACHE": "1"})

    def model(version: str, flags: list[str]):  # type: ignore[no-untyped-def]
        intent = read_options(Intent(model=str(ck.path), max_model_len=32768, max_num_seqs=1024, engine_flags=flags))
        return build(ck, intent, total=int(95.01 * GiB), engine_version=version, compute_capability="12.0", env={})

    ngram = ['--speculative-config={"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}']
    m, plain = model("0.33.0", ngram), model("0.33.0", [])
    assert m.batch.v2_runner is True and plain.batch.v2_runner is True
    f, p = m.fit(), plain.fit()
    assert f is not None and p is not None
    assert p.length_cost == 0 and f.length_cost == 1024 * 4 and f.cost_length == 32768
    assert f.kv_budget == f.usable - f.weights - f.reserve - 1024 * 32768 * 4
    # the longest length that fits: its KV and its token ids fill what the budget has without them
    room = f.kv_budget + f.length_cost * 32768
    n = f.max_model_len_fit
    assert n > 32768 and n % 16 == 0
    assert f.shape.bytes_for(n) + f.length_cost * n <= room < f.shape.bytes_for(n + 16) + f.length_cost * (n + 16)
    assert f.shape.max_len(room) > n  # without the cost the same budget would claim more
    # at another length they move with it, off the KV budget, not off the room for the weights
    g = m.fit(max_len=65536)
    assert g is not None and f.kv_budget - g.kv_budget == 1024 * 4 * (65536 - 32768)
    assert g.reserve == f.reserve == m.reserve
    huge = m.fit(max_len=10**9)
    assert huge is not None and huge.weights_fit and not huge.kv_fits
    # 0.30.0 keeps them in host memory even for n-gram drafting
    old = model("0.30.0", ngram).fit()
    assert old is not None and old.length_cost == 0
