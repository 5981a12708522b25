"""The weight files vLLM's loaders read, by load format
(model_executor/model_loader/default_loader.py), and Flint's GGUF checkpoint: the tensor
names it maps and what vLLM allocates for them.
"""

from __future__ import annotations

# ---- weight files by load format (DefaultModelLoader._prepare_weights in
# vllm/model_executor/model_loader/default_loader.py) ----

#: load format -> the weight files the default loader globs, in order: the first pattern
#: that matches a file wins ("auto" is ``*.safetensors``, then ``*.bin``, then the ``*.pt``
#: fallback). A format not listed here has a loader of its own (sharded state, tensorizer,
#: streamers, GGUF, ...) whose files flightcheck does not read.
LOAD_FORMAT_FILES: dict[str, tuple[str, ...]] = {
    "auto": ("*.safetensors", "*.bin", "*.pt"),
    "hf": ("*.safetensors", "*.bin", "*.pt"),
    "safetensors": ("*.safetensors",),
    "fastsafetensors": ("*.safetensors",),
    "instanttensor": ("*.safetensors",),
    "mistral": ("*.safetensors",),
    "pt": ("*.pt",),
    "npcache": ("*.bin", "*.pt"),
}
#: load formats that read no weight file at all (random weights; vllm/model_executor/model_loader/dummy_loader.py).
NO_WEIGHT_LOAD_FORMATS: frozenset[str] = frozenset({"dummy"})
#: *.bin / *.pt files the loader drops (weight_utils.filter_files_not_needed_for_inference).
NOT_WEIGHT_FILES: frozenset[str] = frozenset(
    {"training_args.bin", "optimizer.bin", "optimizer.pt", "scheduler.pt", "scaler.pt"}
)

#: "auto" loads the Mistral format when any consolidated*.safetensors exists: only those
#: files, filtered by consolidated.safetensors.index.json (default_loader.py _prepare_weights).
AUTO_MISTRAL: bool = True
MISTRAL_FILES = "consolidated*.safetensors"
MISTRAL_INDEX = "consolidated.safetensors.index.json"

#: architectures whose vLLM model reads its weights from the one ``*.gguf`` file of the
#: model directory (or a ``.gguf`` path) with the ``gguf`` package's reader: Flint's
#: ``find_gguf_file`` and ``gguf_nvfp4_weights_iterator`` (vllm/models/flint/gguf_nvfp4.py,
#: used by vllm/models/flint/model.py, which sets ``allow_patterns_overrides = ["*.gguf"]``).
#: vLLM 0.33 has no other GGUF loader: a GGUF header the ``gguf`` reader refuses fails
#: these launches, and only these.
GGUF_ARCHITECTURES: frozenset[str] = frozenset({"FlintForCausalLM"})
#: more than one ``*.gguf`` in the directory is a ValueError for them (find_gguf_file:
#: "Expected one GGUF file"): split GGUF files are not loaded
GGUF_SINGLE_FILE: bool = True

#: the load formats under which they read that file: ``FlintForCausalLM.__init__`` calls
#: ``find_gguf_file`` whatever the format and ``load_weights`` reads the GGUF itself, and
#: these formats' loader (``DefaultModelLoader``, model_loader/__init__.py
#: ``_LOAD_FORMAT_TO_MODEL_LOADER``) globs only ``allow_patterns_overrides`` when the model
#: sets it (default_loader.py ``_prepare_weights``: ``allow_patterns =
#: allow_patterns_overrides``), so safetensors beside the GGUF are never opened.
GGUF_LOAD_FORMATS: frozenset[str] = frozenset(LOAD_FORMAT_FILES)

# ---- Flint's GGUF tensor names and what vLLM allocates for them
# (vllm/models/flint/gguf_nvfp4.py ``_map_name``, ``gguf_nvfp4_weights_iterator``;
# vllm/models/flint/model.py ``_GGUF_DEQUANTIZED``, ``_nvfp4_gguf_quant_config``) ----

#: whole-model tensors: GGUF name (the base name, without ``.weight``, for NVFP4 tensors)
#: -> HF name (``_GLOBAL_NAMES``)
FLINT_GGUF_GLOBAL: dict[str, str] = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output": "lm_head",
}
#: ``blk.N.<key>`` -> ``model.layers.N.<value>`` (``_LAYER_NAMES``)
FLINT_GGUF_LAYER: dict[str, str] = {
    "attn_norm.weight": "input_layernorm.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "attn_q_norm.weight": "self_attn.q_norm.weight",
    "attn_k_norm.weight": "self_attn.k_norm.weight",
    "attn_sinks.weight": "self_attn.softmax_offset",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
    "ffn_gate_shexp": "mlp.shared_expert.gate_proj",
    "ffn_up_shexp": "mlp.shared_expert.up_proj",
    "ffn_down_shexp": "mlp.shared_expert.down_proj",
    "ffn_gate_inp.weight": "mlp.gate.weight",
}
#: stacked routed experts ``blk.N.<key>`` -> ``model.layers.N.mlp.experts.{e}.<value>``,
#: one tensor holding every expert (``_EXPERT_NAMES``)
FLINT_GGUF_EXPERTS: dict[str, str] = {
    "ffn_gate_exps": "gate_proj",
    "ffn_up_exps": "up_proj",
    "ffn_down_exps": "down_proj",
}
#: the ggml type repacked as ModelOpt NVFP4 (``_GGUF_NVFP4``); its per-tensor scale is the
#: F32 tensor ``<base>.scale``; other tensors must be BF16 or F32 ("Unsupported GGUF tensor
#: type" otherwise)
FLINT_GGUF_NVFP4 = 40
FLINT_GGUF_PLAIN_TYPES: frozenset[int] = frozenset({0, 30})  # F32, BF16
#: NVFP4 tensors dequantized to BF16 at load (``_GGUF_DEQUANTIZED``)
FLINT_GGUF_DEQUANTIZED: frozenset[str] = frozenset({"lm_head"})
#: unquantized parameters are the model dtype, which Flint requires to be bfloat16
#: (``FlintAttention``: ``assert ... model_config.dtype == torch.bfloat16``) except the
#: attention sinks, float32 (``make_attention_sink(self.num_heads, torch.float32)``)
FLINT_FP32_PARAMS: tuple[str, ...] = ("self_attn.softmax_offset",)


#: The release in which the index's values were read as ``os.path.join(hf_folder, value)``
#: and compared with ``glob(join(hf_folder, "*.safetensors"))``, raising ``FileNotFoundError:
#: Weight files referenced in index but missing`` for any that differ (model_loader/
#: weight_utils.py ``filter_duplicate_safetensors_files``, read in 0.33.0): a value spelled
#: ``./name``, ``sub/name``, or an absolute path other than the glob's. Older releases were
#: not read (they dropped such files from the load; what followed was not read).
INDEX_SPELLING_RAISES_READ = (0, 33, 0)


def index_spelling_raises(v: tuple[int, ...] | None) -> bool | None:
    """Does vLLM ``v`` refuse an index value spelled unlike its glob? True from the release
    read on (extrapolated past it) and for an unknown release (the newest read); None
    (not known) before it."""
    return True if v is None or v >= INDEX_SPELLING_RAISES_READ else None
