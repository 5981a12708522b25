"""SGLang 0.5.23's attention-backend choice (``_knowledge.sglang.attention_backends``) on
its own: the default per GPU architecture and model, the explicit flags, the page sizes
the backends force, trtllm_mla's refusals, and DeepSeek-V3's prefill graph on trtllm_mla
(the conformance suite checks the same function against SGLang's resolution with the GPU
patched in); and what the memory model does with it."""

from __future__ import annotations

import pytest

from flightcheck._knowledge import sglang
from flightcheck._memory import MemoryModel
from flightcheck._memory.config import parse
from flightcheck._memory.model import resolve_reserve, resolve_utilization
from flightcheck._memory.weights import Layout
from support.ckptgen import load_config

DSV3 = ["DeepseekV3ForCausalLM"]
LLAMA = ["LlamaForCausalLM"]


def choose(capability: str | None, mla: bool, archs: list[str], *flags: str, **kw: bool) -> sglang.AttentionChoice:
    choice = sglang.attention_backends(capability, mla, archs, list(flags), **kw)
    assert choice is not None
    return choice


@pytest.mark.parametrize(
    ("capability", "mla", "archs", "prefill", "page", "graphs_off"),
    [
        ("9.0", True, DSV3, "fa3", None, False),
        ("10.0", True, DSV3, "trtllm_mla", 64, True),  # B200
        ("10.3", True, DSV3, "trtllm_mla", 64, True),  # B300: is_sm100 is the major 10
        ("12.0", True, DSV3, "triton", None, False),  # RTX Pro 6000: not SM100, no override
        ("10.0", True, ["DeepseekV2ForCausalLM"], "flashinfer", None, False),  # MLA outside the family
        ("10.0", True, ["KimiK25ForConditionalGeneration"], "trtllm_mla", 64, False),  # family, not V3
        ("9.0", False, LLAMA, "fa3", None, False),
        ("10.0", False, LLAMA, "trtllm_mha", 64, False),
        ("12.0", False, LLAMA, "flashinfer", None, False),
        ("8.0", False, LLAMA, "flashinfer", None, False),
    ],
)
def test_default_backend_by_architecture(
    capability: str, mla: bool, archs: list[str], prefill: str, page: int | None, graphs_off: bool
) -> None:
    c = choose(capability, mla, archs)
    assert (c.prefill, c.decode, c.page_size, c.prefill_graphs_off, c.refusal) == (
        prefill,
        prefill,
        page,
        graphs_off,
        None,
    )


def test_model_properties_change_the_mha_default() -> None:
    c = choose("10.0", False, LLAMA, asymmetric_kv=True)
    assert (c.prefill, c.decode, c.page_size) == ("fa4", "fa4", 128)
    assert choose("12.0", False, LLAMA, attention_sinks=True).prefill == "triton"


def test_explicit_backends_win_and_keep_the_prefill_graph() -> None:
    c = choose("10.0", True, DSV3, "--attention-backend=flashinfer")
    assert (c.prefill, c.page_size, c.prefill_graphs_off) == ("flashinfer", None, False)
    # a split pair: the base backend is SGLang's default, each phase its own
    c = choose("10.3", True, DSV3, "--prefill-attention-backend=flashinfer", "--decode-attention-backend=trtllm_mla")
    assert (c.prefill, c.decode, c.page_size, c.prefill_graphs_off) == ("flashinfer", "trtllm_mla", 64, False)
    # the same backend for both phases is the backend, and trtllm_mla's rule applies
    c = choose("10.0", True, DSV3, "--prefill-attention-backend=trtllm_mla", "--decode-attention-backend=trtllm_mla")
    assert (c.prefill, c.prefill_graphs_off) == ("trtllm_mla", True)
    # --cuda-graph-backend-prefill chose the graph: kept; graphs already off: nothing to turn off
    assert not choose("10.0", True, DSV3, "--cuda-graph-backend-prefill=breakable").prefill_graphs_off
    assert not choose("10.0", True, DSV3, "--disable-cuda-graph").prefill_graphs_off
    assert choose("10.0", True, DSV3, "--page-size=32").page_size == 32  # trtllm_mla takes 32 or 64
    assert choose("10.0", True, DSV3, "--page-size=16").page_size == 64
    assert choose("10.0", False, LLAMA, "--page-size=128").page_size == 128  # trtllm_mha takes 128
    assert choose("9.0", True, DSV3, "--attention-backend=flashmla").page_size == 64
    assert choose("9.0", False, LLAMA, "--kv-cache-dtype=fp8_e5m2").prefill == "triton"  # fa3 lacks e5m2
    assert choose("10.0", False, LLAMA, "--attention-backend=fa4").page_size == 128


def test_trtllm_mla_refusals() -> None:
    assert "Blackwell" in (choose("9.0", True, DSV3, "--attention-backend=trtllm_mla").refusal or "")
    assert "kv-cache-dtype" in (choose("10.0", True, DSV3, "--kv-cache-dtype=fp8_e5m2").refusal or "")
    assert choose("12.0", True, DSV3, "--attention-backend=trtllm_mla").refusal is None
    assert choose("10.0", True, DSV3, "--kv-cache-dtype=fp8_e4m3").refusal is None


def test_kimi_k3_is_trtllm_mla_on_b200_and_b300_only() -> None:
    k3 = ["KimiK3ForConditionalGeneration"]
    for sm in ("10.0", "10.3"):
        c = choose(sm, True, k3)
        assert (c.prefill, c.decode, c.page_size, c.prefill_graphs_off) == ("trtllm_mla", "trtllm_mla", 64, False)
    assert choose("10.1", True, k3).prefill == "flashinfer"  # SGLang's device_sm in (100, 103)
    assert choose("10.0", True, k3, "--attention-backend=triton").prefill == "triton"


def test_unknown_choices_say_so() -> None:
    assert sglang.attention_backends(None, True, DSV3, []) is None
    assert sglang.attention_backends("ten", True, DSV3, []) is None
    assert sglang.attention_backends("10.0", True, DSV3, [], dsa=True) is None
    assert sglang.attention_backends("10.0", False, ["GptOssForCausalLM"], []) is None
    assert sglang.attention_backends("10.0", False, ["Step3p7ForConditionalGeneration"], []) is None
    assert sglang.attention_backends("10.0", True, DSV3, ["--dcp-size=2"]) is None


def _sglang_model(capability: str | None) -> MemoryModel:
    from flightcheck._knowledge.sglang.engine import memory_options
    from flightcheck._memory import _sglang_attention

    m = MemoryModel(engine="sglang", cfg=parse(load_config("deepseek-v3")), layout=Layout(8), total=180 << 30)
    _sglang_attention(m, memory_options(["--tp=8"]), capability)
    return m


def test_memory_model_on_blackwell_keeps_the_fraction_and_pages_the_pool() -> None:
    b300, h200 = _sglang_model("10.3"), _sglang_model("9.0")
    assert b300.sglang_attention is not None and b300.sglang_attention.prefill == "trtllm_mla"
    assert any("captures no prefill CUDA graph" in n for n in b300.notes)
    assert h200.notes == []
    # the fraction is set before the backend: the same on both (1.5 GiB prefill reserve in it)
    for m in (b300, h200):
        resolve_utilization(m, None)
        resolve_reserve(m, None)
    assert b300.utilization == h200.utilization == sglang.mem_fraction_static(180 * 1024, 8, 1, True)
    assert _sglang_model(None).sglang_attention is None


def test_memory_model_names_a_refused_backend() -> None:
    from flightcheck._knowledge.sglang.engine import memory_options
    from flightcheck._memory import _sglang_attention

    m = MemoryModel(engine="sglang", cfg=parse(load_config("deepseek-v3")), layout=Layout(8))
    _sglang_attention(m, memory_options(["--attention-backend=trtllm_mla"]), "9.0")
    assert m.notes and "refuses" in m.notes[0] and "Blackwell" in m.notes[0]
