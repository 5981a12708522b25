"""What torch.compile changes in vLLM's profile peak (vllm.memory_compile): an FP8 (per-tensor /
per-token) linear layer's MLP activation is held as FP8 under Inductor from 0.10.0."""

from __future__ import annotations

from pathlib import Path

import msgspec

from flightcheck._checkpoint import load
from flightcheck._knowledge import vllm
from flightcheck._knowledge.vllm.command import engine_options
from flightcheck._memory import build
from flightcheck._memory.bound import bound_terms
from flightcheck._memory.budget import Batch, act_quant_span, forward_peak, profile_peak
from flightcheck._memory.config import parse
from flightcheck._memory.weights import Layout
from flightcheck._vocabulary.intent import Intent
from flightcheck._vocabulary.version import release
from support.ckptgen import write_checkpoint

GiB = 1 << 30
# Llama-3.1-70B (config.json): hidden 8192, intermediate 28672, 64 heads, 8 KV heads
LLAMA_70B = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 8192,
    "intermediate_size": 28672,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "num_hidden_layers": 80,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "torch_dtype": "bfloat16",
}


def _cfg(quant: dict[str, object] | None = None):  # type: ignore[no-untyped-def]
    doc = dict(LLAMA_70B)
    if quant is not None:
        doc["quantization_config"] = quant
    return parse(doc, None)


def test_the_rule_is_gated_by_release_engine_gpu_and_compilation() -> None:
    def rule(v: str | None, **kw: object) -> bool | None:
        kw.setdefault("v0", False)
        kw.setdefault("eager", False)
        kw.setdefault("compute_capability", "9.0")
        return vllm.fp8_activation_stored_as_fp8(release(v) if v else None, **kw)  # type: ignore[arg-type]

    # 0.9.2 quantizes through ops.scaled_fp8_quant (opaque): no QuantFP8 to trace
    assert rule("0.9.2") is False
    assert rule(vllm.INDUCTOR_ACT_QUANT_SINCE) is True
    assert rule("0.23.0") is True and rule("0.23.0", compute_capability="12.0") is True
    assert rule("0.23.0", v0=True) is False  # V0 does not compile
    assert rule("0.23.0", eager=True) is False  # --enforce-eager: mode NONE
    assert rule("0.23.0", env={"TORCH_COMPILE_DISABLE": "1"}) is False
    # below cc 8.9 (and with VLLM_TEST_FORCE_FP8_MARLIN=1) Marlin's weight-only FP8 runs
    assert rule("0.23.0", compute_capability="8.0") is False and rule("0.23.0", compute_capability="8.6") is False
    assert rule("0.23.0", compute_capability="8.9") is True
    assert rule("0.23.0", env={"VLLM_TEST_FORCE_FP8_MARLIN": "1"}) is False
    # open: no release, no GPU, or -O / --compilation-config set (they may turn compilation off)
    assert rule(None) is None
    assert rule("0.23.0", compute_capability=None) is None
    assert rule("0.23.0", compile_flags=True) is None


def test_compilation_flags_are_recognised_in_the_canonical_flags() -> None:
    given = vllm.compile_flags_given
    assert given(["--optimization-level=0"])
    assert given(["-O.level=3"]) and given(["-O", "3"])
    assert given(["--compilation-config={}"]) and given(["--compilation-config.mode=0"]) and given(["-cc.mode=none"])
    assert not given(["--max-model-len=16384", "--enforce-eager", "--quantization=fp8"])
    assert engine_options(["--optimization-level=0"])["memory_options"] == {"compile_flags": True}
    assert "compile_flags" not in engine_options(["--max-model-len=8192"])["memory_options"]


def test_the_fp8_activation_is_one_byte_an_element_in_the_mlp() -> None:
    """Llama-3.1-70B at 16384 tokens (the MLP is the forward peak): the gate/up output stays
    16-bit, the activation shrinks from 2 bytes to 1 — tokens x intermediate bytes less."""
    cfg = _cfg({"quant_method": "fp8", "activation_scheme": "dynamic"})
    lay, tokens = Layout(1), 16384
    bf16 = forward_peak(cfg, lay, tokens, release=(0, 23, 0))
    fp8 = forward_peak(cfg, lay, tokens, release=(0, 23, 0), act_fp8=True)
    assert bf16 - fp8 == tokens * 28672
    assert abs(bf16 / GiB - 3.125) < 1e-9 and abs(fp8 / GiB - 2.6875) < 1e-9
    # at TP 2 each rank's share of the intermediate
    assert forward_peak(cfg, Layout(2), tokens) - forward_peak(cfg, Layout(2), tokens, act_fp8=True) == tokens * 14336


def test_only_fp8_linear_layers_without_blocks_take_it() -> None:
    batch = Batch(tokens=16384, seqs=1024, sampler="triton", release=(0, 23, 0), act_fp8=True)
    lay = Layout(1)
    fp8 = _cfg({"quant_method": "fp8", "activation_scheme": "dynamic"})
    block = _cfg({"quant_method": "fp8", "weight_block_size": [128, 128]})
    bf16 = _cfg()
    off = msgspec.structs.replace(batch, act_fp8=False)
    assert profile_peak(fp8, lay, batch)[0] < profile_peak(fp8, lay, off)[0]
    # block-scaled FP8 turns +quant_fp8 on (config/vllm.py has_blocked_weights): 16-bit figure kept
    assert profile_peak(block, lay, batch) == profile_peak(block, lay, off)
    assert profile_peak(bf16, lay, batch) == profile_peak(bf16, lay, off)
    # --quantization fp8 on the 16-bit checkpoint: the same FP8 linear layers
    online = msgspec.structs.replace(batch, online_fp8=True)
    assert profile_peak(bf16, lay, online)[0] == profile_peak(fp8, lay, batch)[0]


def test_an_open_compilation_widens_the_bound_above_the_point() -> None:
    cfg = _cfg({"quant_method": "fp8", "activation_scheme": "dynamic"})
    lay = Layout(1)
    batch = Batch(tokens=16384, seqs=1024, sampler="triton", release=(0, 23, 0), act_fp8=None)
    span = act_quant_span(cfg, lay, batch)
    assert span == 16384 * 28672
    # decided either way: nothing open
    assert act_quant_span(cfg, lay, msgspec.structs.replace(batch, act_fp8=True)) == 0
    assert act_quant_span(cfg, lay, msgspec.structs.replace(batch, act_fp8=False)) == 0
    assert act_quant_span(_cfg(), lay, batch) == 0
    one_gpu = {
        "engine_version": "0.23.0",
        "total": int(94.97 * GiB),
        "utilization_set": True,
        "cudagraphs_counted": True,
        "tp": 1,
        "comm": None,
        "lazy_connect": True,
    }
    terms = bound_terms(**one_gpu, act_quant_open=span)
    assert terms["fp8_act_quant"].below == 0 and terms["fp8_act_quant"].above == span
    assert "fp8_act_quant" not in bound_terms(**one_gpu)


def test_the_launch_decides_it_end_to_end(tmp_path: Path) -> None:
    """``--quantization fp8`` on a 16-bit Llama-3.1-70B at 16384 tokens on a 96 GB Blackwell
    board, vLLM 0.23.0: compiled, the reserve is tokens x intermediate smaller than with
    --enforce-eager (which also drops the CUDA-graph estimate) or -O0 (left open: the point
    keeps the 16-bit figure, the bound reaches the FP8 one)."""
    ck = load(str(write_checkpoint(tmp_path / "l70", LLAMA_70B, shards=4)), cache_env={"FLIGHTCHECK_NO_CACHE": "1"})

    def model(**kw: object):  # type: ignore[no-untyped-def]
        flags = kw.pop("flags", [])
        intent = Intent(
            model=str(ck.path),
            quantization="fp8",
            max_model_len=16384,
            max_num_batched_tokens=16384,
            max_num_seqs=1024,
            **kw,  # type: ignore[arg-type]
        )
        intent.memory_options.update(engine_options(list(flags))["memory_options"])  # type: ignore[arg-type]
        return build(ck, intent, total=int(94.97 * GiB), engine_version="0.23.0", compute_capability="12.0")

    compiled, eager, o0 = model(), model(enforce_eager=True), model(flags=["--optimization-level=0"])
    assert compiled.batch.act_fp8 is True and eager.batch.act_fp8 is False and o0.batch.act_fp8 is None
    saved = 16384 * 28672
    fc, fo = compiled.fit(), o0.fit()
    assert fc is not None and fo is not None
    assert fo.reserve - fc.reserve == saved
    assert "fp8_act_quant" not in compiled.bound_terms()
    assert o0.bound_terms()["fp8_act_quant"].above == saved
