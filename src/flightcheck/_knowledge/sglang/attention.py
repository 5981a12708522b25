"""SGLang's choice of attention backend (0.5.23): the model's own overrides, the GPU's
default, the page size and CUDA graphs they imply, and what the engine refuses.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from flightcheck._knowledge.sglang.memory import DCP_FLAG, NO_GRAPH_FLAGS, PREFILL_BACKEND_FLAG
from flightcheck._knowledge.sglang.options import FLAG

# ---- attention backend (sglang 0.5.23) ---------------------------------------------------
#
# arg_groups/pipeline.py, after the memory settings: the model overrides
# (arg_groups/model_overrides/deepseek_v2.py ``_deepseek_family_overrides``: the DeepSeek
# family with DSA (an ``index_topk`` in config.json) gets "dsa" when no backend is given;
# without DSA, on SM100 (utils/common.py ``is_sm100_supported``: compute capability major
# 10, so 10.0 and 10.3), "trtllm_mla" when none of the three backend flags is given), then
# attention_hook.py ``handle_attention_backend_compatibility``: overrides.py
# ``_attention_backend_default`` (--prefill- and --decode-attention-backend equal: that is
# the backend; no --attention-backend: model_override_base.py ``get_default_attn_backend``:
# MLA fa3 on Hopper, flashinfer on SM100, else triton; MHA fa3 on Hopper, trtllm_mha on SM100
# (fa4 for unequal K/V head dims), else flashinfer, or triton with attention sinks),
# ``_mla_backend_page_constraints`` (flashmla: page 64; trtllm_mla / cutedsl_mla: 32 or 64,
# else 64; trtllm_mha: 16/32/64/128, else 64), ``_mla_kv_cache_dtype_checks`` (trtllm_mla
# off Blackwell, or with a KV dtype other than fp8_e4m3 / bf16 / auto: ValueError),
# ``_cutedsl_prefill_backend_fill`` (prefill trtllm_mla), ``_attention_backend_fa3_fp8_fallback``
# (fa3 with fp8_e5m2: triton), ``_fa4_page_constraint`` (fa4, MHA, SM100: page 128); then
# cuda_graph_hook.py ``disable_prefill_cuda_graph_for_deepseek_trtllm_mla``: a
# "DeepseekV3ForCausalLM" whose prefill backend is trtllm_mla captures no prefill graph,
# unless --cuda-graph-backend-prefill chose one. Hopper is taken to run CUDA >= 12.3 and
# Blackwell >= 12.8 (``_check_cuda_device_version``), FlashInfer to be installed (it is a
# dependency of the CUDA wheel). Kimi-K3 (model_overrides/kimi_k3.py): trtllm_mla for
# prefill and decode on SM 10.0 / 10.3 when no backend is given. Not modelled (the choice is
# then unknown, or taken as if absent): speculative decoding (its topk on Hopper / SM100 MHA,
# Kimi-K3's DSPARK), --enable-deterministic-inference, Whisper, DSA models, --dcp-size,
# the architectures with their own backend rules (``OWN_BACKEND_ARCHS``), ROCm.

ATTENTION_BACKEND_FLAG = "--attention-backend"
PREFILL_ATTENTION_BACKEND_FLAG = "--prefill-attention-backend"
DECODE_ATTENTION_BACKEND_FLAG = "--decode-attention-backend"
PAGE_SIZE_FLAG = "--page-size"
#: model_overrides/deepseek_v2.py ``_deepseek_family_overrides``' architectures
DEEPSEEK_FAMILY_ARCHS = frozenset(
    {
        "DeepseekV3ForCausalLM",
        "DeepseekV32ForCausalLM",
        "KimiK25ForConditionalGeneration",
        "MistralLarge3ForCausalLM",
        "PixtralForConditionalGeneration",
        "GlmMoeDsaForCausalLM",
        "Glm5NextForConditionalGeneration",
        "HYV4ForCausalLM",
        "HYV4ForCausalLMNextN",
        "LongcatFlashForCausalLM",
        "LongcatFlashForCausalLMNextN",
        "Dots3NoteForCausalLM",
    }
)
#: model_overrides/kimi_k3.py ``_kimi_k3_overrides``: trtllm_mla for prefill and decode on
#: SM 10.0 / 10.3 when no backend is given (without DCP and DSPARK)
KIMI_K3_ARCH = "KimiK3ForConditionalGeneration"
KIMI_K3_TRTLLM_SMS = frozenset({"10.0", "10.3"})
#: architectures whose model override (arg_groups/model_overrides/*.py, registered in
#: model_override_base.py ``_MODEL_OVERRIDE_FNS``) writes an attention backend or a page
#: size by rules not modelled here: their choice is unknown (the conformance suite checks
#: this list against the installed registry)
OWN_BACKEND_ARCHS = frozenset(
    {
        "BeamForCausalLM",
        "DeepseekV4ForCausalLM",
        "DiffusionGemmaForBlockDiffusion",
        "EmbeddingGemma2Model",
        "Exaone4ForCausalLM",
        "ExaoneMoEForCausalLM",
        "ExaoneMoeForCausalLM",
        "FalconH1ForCausalLM",
        "Gemma4ForCausalLM",
        "Gemma4ForConditionalGeneration",
        "Gemma4UnifiedForConditionalGeneration",
        "GptOssForCausalLM",
        "GraniteMoeHybridForCausalLM",
        "IQuestQ1ForCausalLM",
        "IQuestQ1MTP",
        "InklingForConditionalGeneration",
        "InklingForConditionalGenerationMTP",
        "InternS2MobiusForConditionalGeneration",
        "InternS2PreviewForConditionalGeneration",
        "JetNemotronForCausalLM",
        "JetVLMForConditionalGeneration",
        "Lfm2ForCausalLM",
        "Lfm2MoeForCausalLM",
        "Llama4ForCausalLM",
        "Llama4ForConditionalGeneration",
        "MiMoV2FlashForCausalLM",
        "MiMoV2ForCausalLM",
        "MiniCPMForCausalLM",
        "MiniCPMSALAForCausalLM",
        "MiniCPMV4_6ForConditionalGeneration",
        "MiniCPMV4_7ForConditionalGeneration",
        "MiniMaxM3SparseForCausalLM",
        "MiniMaxM3SparseForConditionalGeneration",
        "MossVLForConditionalGeneration",
        "NemotronHForCausalLM",
        "NemotronHPuzzleForCausalLM",
        "NemotronH_Omni_Reasoning_V3",
        "Olmo2ForCausalLM",
        "Qwen3NextForCausalLM",
        "Qwen3VLForConditionalGeneration",
        "Qwen3VLMoeForConditionalGeneration",
        "Qwen3_5ForConditionalGeneration",
        "Qwen3_5MoeForConditionalGeneration",
        "Qwen4ExpForConditionalGeneration",
    }
)
#: overrides.py ``_step3p_overrides``: registered by a predicate (a substring of the name)
OWN_BACKEND_ARCH_PARTS = ("Step3p5ForCausalLM", "Step3p7ForConditionalGeneration")
#: cuda_graph_hook.py ``disable_prefill_cuda_graph_for_deepseek_trtllm_mla``: the one
#: architecture whose prefill graphs trtllm_mla turns off
TRTLLM_MLA_NO_PREFILL_GRAPH_ARCH = "DeepseekV3ForCausalLM"
#: overrides.py ``_mla_kv_cache_dtype_checks``
TRTLLM_MLA_KV_DTYPES = frozenset({"fp8_e4m3", "bf16", "auto"})


class AttentionChoice(msgspec.Struct, frozen=True):
    """What SGLang 0.5.23 resolves for the attention of a launch on one GPU architecture."""

    prefill: str
    decode: str
    #: the page size after the backends' constraints (None: --page-size not given and no
    #: backend constraint, SGLang's own default applies)
    page_size: int | None
    #: disable_prefill_cuda_graph_for_deepseek_trtllm_mla fires (after the fraction is set:
    #: its 1.5 GiB reserve stays in mem_fraction_static and becomes unused slack)
    prefill_graphs_off: bool
    #: the ValueError SGLang raises for this choice (None: none)
    refusal: str | None = None


def _capability_minor(capability: str | None) -> int:
    """``"10.3"`` -> 3 (0 when absent)."""
    tail = (capability or "").strip().partition(".")[2]
    return int(tail) if tail.isdigit() else 0


def _capability_major(capability: str | None) -> int | None:
    """``"10.0"`` -> 10; None when unknown or unreadable."""
    head = (capability or "").strip().split(".")[0]
    return int(head) if head.isdigit() else None


def attention_flags(flags: list[str]) -> dict[str, Any]:
    """What a launch's canonical flags (``--name=value``) say that :func:`attention_backends`
    reads, read once where the launch is read (the Intent's ``memory_options``): the
    backends given, the KV dtype, the page size, decode CP splitting the heads, a prefill
    CUDA-graph backend given, a flag that turns the prefill graphs off. As SGLang's parser
    does, the last value of a flag wins."""
    values: dict[str, str] = {}
    for item in flags:
        name, _, value = item.partition("=")
        values[name] = value
    page_text = values.get(PAGE_SIZE_FLAG, "")
    return {
        "attention": values.get(ATTENTION_BACKEND_FLAG) or None,
        "prefill": values.get(PREFILL_ATTENTION_BACKEND_FLAG) or None,
        "decode": values.get(DECODE_ATTENTION_BACKEND_FLAG) or None,
        "kv_dtype": values.get(FLAG["kv_dtype"]) or "auto",
        "page_size": int(page_text) if page_text.isdigit() else None,
        "dcp_split": values.get(DCP_FLAG, "1") not in ("", "0", "1"),
        "prefill_backend_given": PREFILL_BACKEND_FLAG in values,
        "prefill_graphs_off": any(NO_GRAPH_FLAGS.get(item, (False, False))[1] for item in flags),
    }


def attention_backends(
    capability: str | None,
    mla: bool,
    architectures: list[str] | tuple[str, ...],
    flags: list[str] | Mapping[str, Any],
    *,
    dsa: bool = False,
    asymmetric_kv: bool = False,
    attention_sinks: bool = False,
) -> AttentionChoice | None:
    """SGLang's attention backends for a launch (canonical ``--name=value`` flags) on a GPU
    of compute ``capability`` ("9.0", "10.3", ...; see above); None when it is not known:
    the capability unknown, a DSA model (its page size follows the indexer's pooling), an
    architecture with its own backend rules (``OWN_BACKEND_ARCHS``), --dcp-size > 1.
    ``architectures``: config.json's top-level ones; ``dsa``: it has ``index_topk``;
    ``asymmetric_kv``: K and V head dims differ; ``attention_sinks``: the model has them."""
    major = _capability_major(capability)
    arch = architectures[0] if architectures else ""
    if (
        major is None
        or (dsa and arch in DEEPSEEK_FAMILY_ARCHS)
        or arch in OWN_BACKEND_ARCHS
        or any(part in arch for part in OWN_BACKEND_ARCH_PARTS)
    ):
        return None
    given = attention_flags(flags) if isinstance(flags, list) else flags
    attn, prefill, decode = given["attention"], given["prefill"], given["decode"]
    kv_dtype: str = given["kv_dtype"]
    page: int | None = given["page_size"]
    if given["dcp_split"]:
        return None
    sm100, hopper = major == 10, major == 9
    unset = attn is None and prefill is None and decode is None
    if unset and sm100 and arch in DEEPSEEK_FAMILY_ARCHS:
        attn = "trtllm_mla"
    elif unset and arch == KIMI_K3_ARCH and f"{major}.{_capability_minor(capability)}" in KIMI_K3_TRTLLM_SMS:
        prefill = decode = "trtllm_mla"
    if prefill is not None and prefill == decode:
        attn = prefill
    elif attn is None:
        if mla:
            attn = "fa3" if hopper else "flashinfer" if sm100 else "triton"
        elif hopper:
            attn = "fa3"
        elif sm100:
            attn = "fa4" if asymmetric_kv else "trtllm_mha"
        else:
            attn = "triton" if attention_sinks else "flashinfer"
    both = {attn, decode or attn}
    every = both | {prefill or attn}
    if "flashmla" in both:
        page = 64
    if "trtllm_mla" in both and page not in (32, 64):
        page = 64
    if "cutedsl_mla" in every and page not in (32, 64):
        page = 64
    if "trtllm_mha" in every and page not in (16, 32, 64, 128):
        page = 64
    refusal = None
    if "trtllm_mla" in both:
        if major not in (10, 11, 12):
            refusal = "TRTLLM MLA backend is only supported on Blackwell GPUs (SM100/SM12x)"
        elif kv_dtype not in TRTLLM_MLA_KV_DTYPES:
            refusal = "TensorRT-LLM MLA backend only supports kv-cache-dtype of fp8_e4m3, bf16, or auto"
    if refusal is None and "cutedsl_mla" in every and prefill is None:
        prefill = "trtllm_mla"
    if attn == "fa3" and kv_dtype == "fp8_e5m2":
        attn = "triton"
    if "fa4" in every and not mla and sm100:
        page = 128
    first = prefill or attn
    graphs_off = (
        not given["prefill_backend_given"]
        and first == "trtllm_mla"
        and TRTLLM_MLA_NO_PREFILL_GRAPH_ARCH in architectures
        and not given["prefill_graphs_off"]
    )
    return AttentionChoice(first, decode or attn, page, graphs_off, refusal)
