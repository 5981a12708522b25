"""The weight files SGLang's loader reads, by load format (sglang/srt/model_loader/loader.py)."""

from __future__ import annotations

# ---- weight files by load format (DefaultModelLoader._prepare_weights in
# sglang/srt/model_loader/loader.py) ----

#: load format -> the weight files the default loader globs, in order: the first pattern
#: that matches a file wins ("auto" is ``*.safetensors``, then ``*.bin``, then the ``*.pt``
#: fallback). A format not listed here has a loader of its own (sharded state, tensorizer,
#: streamers, GGUF, ...) whose files flightcheck does not read.
LOAD_FORMAT_FILES: dict[str, tuple[str, ...]] = {
    "auto": ("*.safetensors", "*.bin", "*.pt"),
    "safetensors": ("*.safetensors",),
    "fastsafetensors": ("*.safetensors",),
    "instanttensor": ("*.safetensors",),
    "mistral": ("*.safetensors",),
    "pt": ("*.pt",),
    "npcache": ("*.bin", "*.pt"),
}
#: load formats that read no weight file at all (random weights; sglang/srt/model_loader/loader.py (DummyModelLoader)).
NO_WEIGHT_LOAD_FORMATS: frozenset[str] = frozenset({"dummy"})
#: *.bin / *.pt files the loader drops (weight_utils.filter_files_not_needed_for_inference).
NOT_WEIGHT_FILES: frozenset[str] = frozenset(
    {"training_args.bin", "optimizer.bin", "optimizer.pt", "scheduler.pt", "scaler.pt"}
)

#: "auto" never switches to the Mistral format (loader.py _prepare_weights: *.safetensors,
#: *.bin, filtered by model.safetensors.index.json); "mistral" loads consolidated*.safetensors.
AUTO_MISTRAL: bool = False
MISTRAL_FILES = "consolidated*.safetensors"
MISTRAL_INDEX = "consolidated.safetensors.index.json"

#: architectures whose model reads GGUF from the directory under the default load format:
#: none (SGLang reads GGUF only with ``--load-format gguf``, GGUFModelLoader in
#: sglang/srt/model_loader/loader.py, a format flightcheck does not read)
GGUF_ARCHITECTURES: frozenset[str] = frozenset()
GGUF_SINGLE_FILE: bool = True
GGUF_LOAD_FORMATS: frozenset[str] = frozenset()


#: SGLang 0.5.23 (srt/model_loader/weight_utils.py ``filter_duplicate_safetensors_files``)
#: checks each index value with ``os.path.isfile(join(hf_folder, value))``, then keeps only
#: the globbed files whose path is in the joined set: a value spelled ``./name`` or
#: ``sub/name`` passes the check and its file is silently not loaded. Read in 0.5.23 only.
INDEX_SPELLING_DROPS_READ = (0, 5, 23)
