"""What the memory model needs from config.json, read the way vLLM reads it.

Multimodal wrappers keep the language model's fields under ``text_config`` (or
``llm_config``); those win, with ``architectures`` and ``quantization_config`` taken from
the top level when the inner config lacks them. Nothing here guesses a missing required
field: ``missing`` names it and FC507 reports it.
"""

from __future__ import annotations

from typing import Any

import msgspec

from flightcheck._knowledge import sglang, vllm

#: Fields without which no memory figure can be computed (FC507): positive integers.
REQUIRED = ("num_hidden_layers", "hidden_size", "num_attention_heads")
#: Far beyond any model; bounds the per-layer lists a hostile config could ask for.
MAX_LAYERS = 100_000
MAX_ROPE_FACTOR = 1 << 20
#: Far beyond any vision tower's input side (pixels); a larger one is as good as absent.
MAX_IMAGE_SIDE = 1 << 16

_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "half": 2, "float32": 4, "float": 4, "fp32": 4, "bf16": 2, "fp16": 2}


def dtype_size(name: str, default: int = 2) -> int:
    """Bytes a value of the dtype ``name`` (a config's torch_dtype spelling) takes."""
    return _DTYPE_BYTES.get(name, default)


_EXPERT_KEYS = ("n_routed_experts", "num_local_experts", "num_experts", "n_experts", "moe_num_experts")
_MOE_INTER_KEYS = ("moe_intermediate_size", "expert_intermediate_size", "intermediate_size_moe")


class Quant(msgspec.Struct, frozen=True):
    """The checkpoint's weight quantization, as far as memory and layout care."""

    method: str | None = None  # "fp8-block" | "fp8" | "mxfp4" | "nvfp4" | "int4" | other name
    block: int | None = None  # output-dim block (block FP8: 128)
    group: int | None = None  # input-dim group (MXFP4 32, NVFP4 16, INT4 e.g. 32/128)
    raw: str | None = None  # quant_method as written

    @property
    def alignment(self) -> int | None:
        """What the per-rank intermediate size must be a multiple of (FC404)."""
        return self.block or self.group


class VisionTower(msgspec.Struct, frozen=True):
    """A vision model's encoder as vLLM's profile run exercises it (``vision_config``).

    ``tokens_per_item``: the language-model tokens of one maximal image, where vLLM derives
    it from config.json alone (``get_mm_max_tokens_per_item`` of the model's processing
    info); None where it comes from elsewhere (Qwen-VL: ``qwen``, the processor configs'
    figures; others: files flightcheck does not read). ``patches_per_item``: the encoder's sequence for that
    image (before any patch merge). ``patches_per_token``: the merge factor, used when the
    item size is unknown."""

    layers: int
    hidden: int
    intermediate: int
    out_hidden: int  # the width of what the encoder hands the language model (one token)
    patch_values: int  # channels x patch x patch (x temporal patch): one patch of dummy pixels
    patches_per_token: int = 1
    tokens_per_item: int | None = None
    patches_per_item: int | None = None
    source: str = ""
    #: Qwen-VL's processor figures, when the checkpoint has its processor configs: the item
    #: then depends on the release and max_model_len (``vllm.qwen_vl_item``)
    qwen: vllm.QwenVisionProcessor | None = None


class ModelConfig(msgspec.Struct):
    """The fields of config.json the memory model reads."""

    model_type: str = ""
    architectures: tuple[str, ...] = ()
    layers: int = 0
    hidden: int = 0
    heads: int = 0
    kv_heads: int = 0
    head_dim: int = 0
    vocab: int | None = None
    #: an EAGLE-3 draft's own vocabulary (``draft_vocab_size``; llama_eagle3.py defaults it
    #: to ``vocab_size``)
    draft_vocab: int | None = None
    max_position: int | None = None
    rope_factor: float | None = None  # linear / dynamic rope scaling multiplies the limit
    vllm_window: int | None = None  # vLLM's derived max_model_len (vllm.context_window)
    dtype_bytes: int = 2
    dtype_name: str = "bfloat16"
    tie_embeddings: bool = False
    intermediate: int | None = None
    # MLA (DeepSeek-V2/V3, Kimi-K2)
    kv_lora_rank: int | None = None
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0
    # MoE
    experts: int | None = None
    moe_intermediate: int | None = None
    shared_intermediate: int | None = None  # shared experts (TP-split even with EP)
    first_dense: int = 0  # leading dense-MLP layers of a MoE (first_k_dense_replace)
    top_k: int = 0
    # per-layer attention kind: "full" | "sliding" | "linear"
    layer_kinds: list[str] = msgspec.field(default_factory=list)
    sliding_window: int | None = None
    linear: dict[str, Any] = msgspec.field(default_factory=dict)  # the linear-attention config, raw
    quant: Quant = msgspec.field(default_factory=Quant)
    missing: list[str] = msgspec.field(default_factory=list)
    #: SGLang's derived context length (``flightcheck._knowledge.sglang.context_length``)
    derived_context: int = 2048
    #: a vision model's (vision_config.num_hidden_layers, hidden_size), SGLang's defaults 24 / 1024
    vision: tuple[int, int] | None = None
    #: the top-level ``architectures`` (a multimodal wrapper's; SGLang's hf_config.architectures)
    outer_architectures: tuple[str, ...] = ()
    #: the vision encoder vLLM's profile run exercises (:func:`vision_tower`)
    tower: VisionTower | None = None
    #: a DeepSeek-family sparse-attention (DSA) model: config.json has ``index_topk``
    #: (SGLang's configs/model_config.py ``is_deepseek_dsa``, which also asks the architecture)
    dsa: bool = False

    @property
    def mla(self) -> bool:
        return bool(self.kv_lora_rank)

    @property
    def moe(self) -> bool:
        return bool(self.experts)

    def layers_of(self, kind: str) -> int:
        return sum(1 for k in self.layer_kinds if k == kind)

    @property
    def context_window(self) -> int | None:
        """The longest max_model_len vLLM accepts without an override
        (``vllm.context_window``: the smallest length key, ``model_max_length`` replacing
        it, times the rope factor)."""
        return self.vllm_window


def _int(d: dict[str, Any], *keys: str) -> int | None:
    """The first of ``keys`` holding a non-negative integer (every field read is a size or a
    count: anything else is as good as absent)."""
    for k in keys:
        v = d.get(k)
        if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
            return v
    return None


def text_config(doc: dict[str, Any]) -> dict[str, Any]:
    """The language model's config (the inner one of a multimodal wrapper)."""
    for key in ("text_config", "llm_config", "language_config"):
        inner = doc.get(key)
        if isinstance(inner, dict) and "num_hidden_layers" in inner:
            merged = dict(inner)
            for k in ("architectures", "quantization_config", "torch_dtype", "dtype", "tie_word_embeddings"):
                if k not in merged and k in doc:
                    merged[k] = doc[k]
            return merged
    return doc


def parse(
    doc: dict[str, Any],
    hf_quant: dict[str, Any] | None = None,
    processor: dict[str, Any] | None = None,
    video_processor: dict[str, Any] | None = None,
) -> ModelConfig:
    """Read ``doc`` (config.json); ``hf_quant`` is ModelOpt's hf_quant_config.json if any,
    ``processor`` / ``video_processor`` the checkpoint's (video_)preprocessor_config.json."""
    d = text_config(doc)
    archs = d.get("architectures")
    c = ModelConfig(
        model_type=str(d.get("model_type") or ""),
        architectures=tuple(a for a in archs if isinstance(a, str)) if isinstance(archs, list) else (),
    )
    c.missing = [k if k not in d else f"{k} (got {str(d[k])[:40]})" for k in REQUIRED if not _int(d, k)]
    c.layers = _int(d, "num_hidden_layers") or 0
    if c.layers > MAX_LAYERS:
        c.missing.append(f"num_hidden_layers (got {c.layers:,})")
        c.layers = 0
    c.hidden = _int(d, "hidden_size") or 0
    c.heads = _int(d, "num_attention_heads") or 0
    c.kv_heads = _int(d, "num_key_value_heads", "num_kv_heads") or c.heads
    c.head_dim = _int(d, "head_dim") or (c.hidden // c.heads if c.heads else 0)
    c.vocab = _int(d, "vocab_size", "padded_vocab_size")
    c.draft_vocab = _int(d, "draft_vocab_size")
    c.max_position = _int(
        d, "max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "max_sequence_length"
    )
    dtype = str(d.get("torch_dtype") or d.get("dtype") or "bfloat16").replace("torch.", "")
    c.dtype_name, c.dtype_bytes = dtype, _DTYPE_BYTES.get(dtype, 2)
    c.tie_embeddings = bool(d.get("tie_word_embeddings", False))
    c.intermediate = _int(d, "intermediate_size", "ffn_hidden_size")
    rope = d.get("rope_scaling") if isinstance(d.get("rope_scaling"), dict) else None
    factor = (
        rope.get("factor") if rope and str(rope.get("rope_type") or rope.get("type")) in ("linear", "dynamic") else None
    )
    if isinstance(factor, (int, float)) and not isinstance(factor, bool) and 0 < factor <= MAX_ROPE_FACTOR:
        c.rope_factor = float(factor)
    c.kv_lora_rank = _int(d, "kv_lora_rank")
    c.qk_rope_head_dim = _int(d, "qk_rope_head_dim") or 0
    c.qk_nope_head_dim = _int(d, "qk_nope_head_dim") or 0
    c.v_head_dim = _int(d, "v_head_dim") or 0
    c.experts = _int(d, *_EXPERT_KEYS)
    c.moe_intermediate = _int(d, *_MOE_INTER_KEYS) or (c.intermediate if c.experts else None)
    c.top_k = (
        _int(d, "num_experts_per_tok", "num_experts_per_token", "experts_per_token", "moe_topk", "num_selected_experts")
        or 0
    )
    shared = _int(d, "n_shared_experts", "num_shared_experts")
    c.shared_intermediate = _int(d, "shared_expert_intermediate_size") or (
        shared * c.moe_intermediate if shared and c.moe_intermediate else None
    )
    c.first_dense = _int(d, "first_k_dense_replace") or 0
    c.layer_kinds, c.sliding_window, c.linear = _layer_kinds(d, c.layers)
    c.quant = quant_of(
        d.get("quantization_config") if isinstance(d.get("quantization_config"), dict) else None, hf_quant
    )
    c.derived_context = sglang.context_length(d)
    c.vllm_window, _ = vllm.context_window(d)
    outer = doc.get("architectures")
    c.outer_architectures = tuple(a for a in outer if isinstance(a, str)) if isinstance(outer, list) else ()
    c.dsa = doc.get("index_topk") is not None
    vision = doc.get("vision_config")
    if isinstance(vision, dict):
        # memory_hook.py adjust_mem_fraction_for_vlm: getattr(vision_config, ..., 24 / 1024)
        c.vision = (_int(vision, "num_hidden_layers") or 24, _int(vision, "hidden_size") or 1024)
        c.tower = vision_tower(doc, vision, c.hidden)
        qwen = qwen_processor(doc, vision, processor, video_processor)
        if c.tower is not None and qwen is not None:
            c.tower = msgspec.structs.replace(
                c.tower, qwen=qwen, source="the processor configs' pixel limits (vllm.qwen_vl_item)"
            )
    return c


#: config.json model types whose item vLLM sizes by qwen2_vl.py's rules (qwen2_5_vl.py's
#: processing info inherits them) and by qwen3_vl.py's (qwen3_vl_moe.py inherits them)
QWEN2_VL_TYPES = ("qwen2_vl", "qwen2_5_vl")
QWEN3_VL_TYPES = ("qwen3_vl", "qwen3_vl_moe")


def _pixel_limits(proc: dict[str, Any] | None) -> tuple[int, int] | None:
    """(min, max) pixels as the HF processor holds them: ``min_pixels`` / ``max_pixels``
    over ``size.shortest_edge`` / ``longest_edge`` (transformers
    qwen2_vl/image_processing_qwen2_vl.py: "backward compatibility: override size with
    min_pixels and max_pixels"; vLLM's ``_get_vision_size`` lets them win the same way); None
    when either is missing (the processor's class defaults are not assumed) or implausible."""
    if not isinstance(proc, dict):
        return None
    raw = proc.get("size")
    size: dict[str, Any] = raw if isinstance(raw, dict) else {}
    lo = _int(proc, "min_pixels") or _int(size, "shortest_edge")
    hi = _int(proc, "max_pixels") or _int(size, "longest_edge")
    return (lo, hi) if lo and hi and lo <= hi <= MAX_IMAGE_SIDE * MAX_IMAGE_SIDE else None


def qwen_processor(
    doc: dict[str, Any], vision: dict[str, Any], processor: dict[str, Any] | None, video: dict[str, Any] | None
) -> vllm.QwenVisionProcessor | None:
    """Qwen2-VL / Qwen2.5-VL / Qwen3-VL processor figures: vision_config's patch_size,
    spatial_merge_size and temporal_patch_size (what vLLM's ``_get_vision_info`` reads), the
    image processor's pixel limits (preprocessor_config.json) and, for Qwen3-VL, the video
    processor's (video_preprocessor_config.json, whose ``temporal_patch_size`` 0.33's
    ``get_max_video_tokens`` reads); Qwen2-VL's videos use the image processor's limits.
    None for other models or when a figure is missing (no guessing)."""
    kind = str(doc.get("model_type") or "")
    if kind not in QWEN2_VL_TYPES + QWEN3_VL_TYPES:
        return None
    patch, merge = _int(vision, "patch_size"), _int(vision, "spatial_merge_size")
    temporal = _int(vision, "temporal_patch_size")
    image = _pixel_limits(processor)
    qwen3 = kind in QWEN3_VL_TYPES
    vid = _pixel_limits(video) if qwen3 else image
    if not (patch and merge and temporal and image and vid):
        return None
    vt = (_int(video, "temporal_patch_size") if qwen3 and isinstance(video, dict) else None) or temporal
    return vllm.QwenVisionProcessor(qwen3, patch, merge, temporal, image[0], image[1], vid[0], vid[1], vt)


def vision_tower(doc: dict[str, Any], vision: dict[str, Any], text_hidden: int) -> VisionTower | None:
    """The encoder's sizes from ``vision_config`` (the spellings of CLIP / SigLIP / Pixtral,
    Qwen-VL's ``depth`` / ``num_heads``, Kimi's ``vt_*``), and one maximal image's tokens
    where vLLM 0.33 derives them from config.json:

    - LLaVA (model_executor/models/llava.py ``get_num_image_tokens``, clip.py /
      siglip.py ``get_num_image_tokens``): the tower sees ``(image_size / patch_size)^2``
      patches (+1 class token for CLIP); the ``default`` feature-select strategy drops
      the class token (vision.py ``get_num_selected_vision_tokens``), ``full`` keeps it;
    - Mistral3 (mistral3.py ``Mistral3HFEncoderInfo.get_patch_grid_size`` and pixtral.py
      ``PixtralHFEncoderInfo.get_num_image_tokens``): ``ceil(image_size / (patch_size x
      spatial_merge_size))^2`` tokens from ``(image_size / patch_size)^2`` patches.

    Qwen-VL's item comes from its processor configs instead (:func:`qwen_processor`, set by
    :func:`parse`). Anything else (Gemma 4 and Kimi also profile video or read a media
    processor config) has no item size here: the budget falls back to the batch
    (``_memory.budget.encoder_terms``).
    None when the sizes themselves are missing."""
    layers = _int(vision, "num_hidden_layers", "depth", "vt_num_hidden_layers", "num_layers")
    hidden = _int(vision, "hidden_size", "embed_dim", "vt_hidden_size", "width")
    inter = _int(vision, "intermediate_size", "vt_intermediate_size", "mlp_dim")
    if not layers or not hidden:
        return None
    if not inter:
        ratio = vision.get("mlp_ratio")
        inter = int(hidden * ratio) if isinstance(ratio, (int, float)) and 0 < ratio < 64 else 4 * hidden
    patch = _int(vision, "patch_size") or 14
    channels = _int(vision, "num_channels", "in_channels", "in_chans") or 3
    temporal = _int(vision, "temporal_patch_size") or 1
    merge = _int(doc, "spatial_merge_size") or _int(vision, "spatial_merge_size") or 1
    kernel = vision.get("merge_kernel_size")
    per_token = merge * merge
    if isinstance(kernel, list) and len(kernel) == 2 and all(isinstance(k, int) and k > 0 for k in kernel):
        per_token = kernel[0] * kernel[1]
    elif _int(vision, "pooling_kernel_size"):
        per_token = (_int(vision, "pooling_kernel_size") or 1) ** 2
    deepstack = vision.get("deepstack_visual_indexes")
    out = text_hidden * (1 + (len(deepstack) if isinstance(deepstack, list) else 0))
    kind = str(doc.get("model_type") or "")
    vkind = str(vision.get("model_type") or "")
    image = _int(vision, "image_size")
    image = image if image and image <= MAX_IMAGE_SIDE else None
    tokens = patches = None
    source = "not derivable from config.json"
    if (
        image
        and patch
        and image % patch == 0
        and kind == "llava"
        and vkind in ("clip_vision_model", "siglip_vision_model")
    ):
        grid = (image // patch) ** 2
        patches = grid + (1 if vkind == "clip_vision_model" else 0)
        strategy = doc.get("vision_feature_select_strategy", "default")
        tokens = patches - 1 if strategy == "default" and vkind == "clip_vision_model" else patches
        source = "llava.py: (image_size / patch_size)^2 patches, the feature-select strategy's tokens"
    elif image and patch and kind == "mistral3" and vkind == "pixtral":
        side = (image - 1) // (patch * merge) + 1
        tokens, patches = side * side, ((image - 1) // patch + 1) ** 2
        source = "mistral3.py: ceil(image_size / (patch_size x spatial_merge_size))^2 tokens"
    return VisionTower(
        layers=layers,
        hidden=hidden,
        intermediate=inter,
        out_hidden=out,
        patch_values=channels * patch * patch * temporal,
        patches_per_token=per_token,
        tokens_per_item=tokens,
        patches_per_item=patches,
        source=source,
    )


def _layer_kinds(d: dict[str, Any], layers: int) -> tuple[list[str], int | None, dict[str, Any]]:
    """Each layer's attention kind, from ``layer_types``, the linear-attention config, a
    hybrid pattern, or the sliding-window settings; everything "full" otherwise."""
    window = _int(d, "sliding_window")
    if d.get("use_sliding_window") is False:
        window = None  # Qwen2 writes a window it does not use
    kinds = ["full"] * layers
    types = d.get("layer_types")
    raw_linear = d.get("linear_attn_config")
    linear_cfg: dict[str, Any] = raw_linear if isinstance(raw_linear, dict) else {}
    if isinstance(types, list) and len(types) == layers:
        for i, t in enumerate(types):
            t = str(t)
            if "linear" in t or "mamba" in t or "conv" in t or "kda" in t:
                kinds[i] = "linear"
            elif "sliding" in t or "local" in t or "chunk" in t:
                kinds[i] = "sliding" if window else "full"
    elif isinstance(linear_cfg.get("full_attn_layers"), list):
        full = {int(x) for x in linear_cfg["full_attn_layers"] if isinstance(x, int)}
        one_based = 0 not in full and layers in full
        kinds = ["full" if (i + 1 if one_based else i) in full else "linear" for i in range(layers)]
    elif isinstance(d.get("hybrid_override_pattern"), str) and len(d["hybrid_override_pattern"]) == layers:
        kinds = ["full" if ch == "*" else ("linear" if ch == "M" else "none") for ch in d["hybrid_override_pattern"]]
    elif _int(d, "attn_layer_period") and d.get("attn_layer_offset") is not None:
        period, offset = _int(d, "attn_layer_period") or 1, _int(d, "attn_layer_offset") or 0
        kinds = ["full" if i % period == offset else "linear" for i in range(layers)]
    elif window and str(d.get("model_type")) in ("mistral", "mixtral"):
        kinds = ["sliding"] * layers
    elif window and str(d.get("model_type")) == "gemma2":
        kinds = ["sliding" if i % 2 == 0 else "full" for i in range(layers)]
    if "sliding" not in kinds:
        window = None
    linear = dict(linear_cfg)
    for k, v in d.items():
        if k.startswith(("linear_", "mamba_", "ssm_", "conv_", "state_", "n_groups", "time_step")):
            linear.setdefault(k, v)
    return kinds, window, linear


def quant_of(q: dict[str, Any] | None, hf_quant: dict[str, Any] | None = None) -> Quant:
    """The quantization scheme from quantization_config (or ModelOpt's hf_quant_config)."""
    if q is None and hf_quant and isinstance(hf_quant.get("quantization"), dict):
        algo = str(hf_quant["quantization"].get("quant_algo") or "")
        q = {"quant_method": "modelopt", "quant_algo": algo}
    if not q:
        return Quant()
    method = str(q.get("quant_method") or "").lower()
    if method == "fp8":
        blk = q.get("weight_block_size")
        if isinstance(blk, list) and len(blk) == 2 and all(isinstance(x, int) for x in blk):
            return Quant("fp8-block", block=blk[0], raw=method)
        return Quant("fp8", raw=method)
    if method == "mxfp4":
        return Quant("mxfp4", group=32, raw=method)
    if method == "modelopt":
        algo = str(q.get("quant_algo") or "").upper()
        if "FP4" in algo:
            return Quant("nvfp4", group=_int(q, "group_size") or 16, raw=method)
        return Quant("fp8", raw=method)
    if method == "compressed-tensors":
        fmt = str(q.get("format") or "").lower()
        group = None
        groups = q.get("config_groups")
        for g in groups.values() if isinstance(groups, dict) else ():
            w = g.get("weights") if isinstance(g, dict) else None
            if not isinstance(w, dict):
                continue
            group = group or _int(w, "group_size")
            blk = w.get("block_structure")
            if isinstance(blk, list) and blk and isinstance(blk[0], int):
                return Quant("fp8-block", block=blk[0], raw=method)
        if "mxfp4" in fmt:
            return Quant("mxfp4", group=group or 32, raw=method)
        if "nvfp4" in fmt:
            return Quant("nvfp4", group=group or 16, raw=method)
        if "pack" in fmt:
            return Quant("int4", group=group, raw=method)
        if "float" in fmt:
            return Quant("fp8", raw=method)
        return Quant(method, group=group, raw=method)
    if method in ("awq", "gptq", "awq_marlin", "gptq_marlin"):
        return Quant("int4", group=_int(q, "group_size", "q_group_size"), raw=method)
    return Quant(method or None, group=_int(q, "group_size"), raw=method)
