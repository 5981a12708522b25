"""The deployment intent: what is about to be launched, spelled as vLLM spells it.

Checks read the intent (engine, parallel layout, max_model_len, ...) next to the facts.
``check`` builds it from its flags; ``run`` and the vLLM plugin build it from the real engine
command line.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field
from typing import Any

from flightcheck._vocabulary.engine import KNOWN_ENGINES, EngineName
from flightcheck._vocabulary.errors import UsageError

#: the engines an Intent may name (``_vocabulary.engine``; a test's fake engine joins them
#: through ``_knowledge.engines.register``)
ENGINES = KNOWN_ENGINES
KV_CACHE_DTYPES = (
    "auto",
    "fp8",
    "fp8_e4m3",
    "fp8_e5m2",
    "bfloat16",
    "float16",
    "half",
    "fp8_ds_mla",
    "nvfp4",
    # vLLM 0.33 (vllm/config/cache.py KV_CACHE_DTYPES) and SGLang 0.5.23 additions
    "fp8_inc",
    "nvfp4_ds_mla",
    "turboquant_k8v4",
    "turboquant_4bit_nc",
    "turboquant_k3v4_nc",
    "turboquant_3bit_nc",
    "octave_k3v4",
    "octave_k3v3",
    "octave_k3v3_compact",
    "ultraquant_4bit",
    "int4_per_token_head",
    "int8_per_token_head",
    "fp8_per_token_head",
    "nvfp4_4over6",
    "mxfp8",
    "fp4_mx_block16",
)
#: Who read the engine command: the engine's own parser in a child, or flightcheck's.
READERS = ("engine", "built-in")

#: max_model_len meaning "let the engine fit it" (vLLM's -1 / auto).
AUTO = -1

_HUMAN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmMgGtT]?)\s*$")
_DECIMAL = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def parse_len(value: str | int) -> int:
    """Parse a max_model_len the way vLLM does: ``131072``, ``128k`` (x1000), ``128K``
    (x1024), ``1m``, ``1M``, ``25.6k``; ``-1`` and ``auto`` mean "fit automatically" (-1).

    Raises:
        UsageError: for anything else.
    """
    if isinstance(value, int):
        if value < AUTO or value == 0:
            raise UsageError(f"--max-model-len {value}: must be positive, or -1/auto")
        return value
    text = str(value).strip()
    if text.lower() == "auto" or text == "-1":
        return AUTO
    m = _HUMAN.match(text)
    if not m:
        raise UsageError(f"--max-model-len {value!r}: expected a number such as 131072, 128k, 1M, -1 or auto")
    number, suffix = m.group(1), m.group(2)
    if suffix in _BINARY:
        if "." in number:
            raise UsageError(f"--max-model-len {value!r}: binary multipliers (K, M, G) take whole numbers")
        result = int(number) * _BINARY[suffix]
    else:
        result = int(float(number) * _DECIMAL[suffix.lower()])
    if result <= 0:
        raise UsageError(f"--max-model-len {value!r}: must be positive")
    return result


#: the Intent's fields that are only shown, never used: redacted when set
_SHOWN_ONLY = frozenset({"engine_flags", "unparsed", "refused", "config_problem"})
#: Intent fields ``_launch`` reads once from the engine command for the layers below (see
#: the class); kept out of the report's ``intent`` block.
READ_ONCE_FIELDS: tuple[str, ...] = (
    # with vLLM's semantics, for every engine (``_knowledge.vllm.command.LAUNCH_OPTION_FIELDS``)
    "speculative_config",
    "speculative_error",
    "limit_mm_per_prompt",
    "mm_profiling_off",
    "mm_encoder_tp_mode",
    "eager_given",
    # the launch's flags as a map (``_launch.intent_read.read_options``)
    "option_values",
    # with the engine's own semantics (``ReaderRules.launch_options``: ENGINE_OPTION_FIELDS)
    "served_model_names",
    "all2all_backend",
    "memory_options",
)
#: the read-once fields each engine's ``ReaderRules.launch_options`` gives
ENGINE_OPTION_FIELDS: tuple[str, ...] = ("served_model_names", "all2all_backend", "memory_options")


@dataclass
class Intent:
    """One launch: the engine and the arguments that decide whether it fits and works."""

    engine: EngineName = "vllm"
    model: str | None = None
    revision: str | None = None
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    data_parallel_size: int = 1
    enable_expert_parallel: bool = False
    max_model_len: int | None = None  # None: the model's default; AUTO (-1): engine fits it
    kv_cache_dtype: str = "auto"
    gpu_memory_utilization: float | None = None  # None: the engine's default
    quantization: str | None = None
    python: str | None = None  # the engine's interpreter
    reserve_gib: float | None = None  # override of the documented per-GPU reserve
    nnodes: int = 1
    #: GPUs of the data-parallel group on this node (vLLM --data-parallel-size-local);
    #: None: all of it (DP / nnodes).
    data_parallel_size_local: int | None = None
    prefill_context_parallel_size: int = 1  # vLLM -pcp: multiplies the GPUs
    decode_context_parallel_size: int = 1  # inside the TP group: no extra GPUs
    # batch limits and memory options (None: the engine's default)
    dtype: str | None = None
    enforce_eager: bool | None = None
    load_format: str | None = None
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    kv_cache_memory_bytes: int | None = None  # bypasses gpu_memory_utilization (vLLM)
    cpu_offload_gb: float | None = None  # GiB of weights per GPU kept in CPU memory
    hf_overrides: dict[str, Any] | None = None
    deep: bool = False
    download_dir: str | None = None
    distributed_executor_backend: str | None = None  # "ray" changes how env reaches workers
    #: flags of the real engine command that checks or the plan care about (e.g. SGLang's
    #: --enable-symm-mem); empty for plain ``check``.
    engine_flags: list[str] = field(default_factory=list)
    #: what ``run`` could not read from the engine command (reported as a warning).
    unparsed: list[str] = field(default_factory=list)
    #: the engine command's ``--config`` file could not be read (missing, not YAML, not a
    #: mapping, too large): the engine would refuse to start, so FC711 blocks the launch.
    config_problem: str | None = None
    #: why the engine's own parser or validation refuses the command (FC703); empty: it accepts it.
    refused: list[str] = field(default_factory=list)
    #: who read the command: "engine" (its own parser, in a child) or "built-in"; None for
    #: an intent built from ``check``'s own flags.
    reader: str | None = None
    #: where TP/PP/DP came from when no flag or command gave them: "example" (a bundled
    #: example's layout, e.g. TP 8, where the engine's own default is TP 1); None: the
    #: flags, the engine command or the engine's defaults.
    layout_from: str | None = None
    # ---- read once from the engine command (``_launch`` fills them with the engine's own
    # semantics, ``_knowledge.vllm.launch_options``); downstream reads these, never
    # ``engine_flags``. Not in the report's ``intent`` block: ``engine_flags`` shows them.
    #: the speculative config the command gives (``--speculative-config`` with its dotted
    #: keys and the ``--spec-*`` shortcuts merged in, as vLLM's ``create_speculative_config``
    #: builds it); None: none given
    speculative_config: dict[str, Any] | None = None
    #: why vLLM's parser refuses the speculative config (then ``speculative_config`` is None)
    speculative_error: str | None = None
    #: ``--limit-mm-per-prompt``'s JSON object (dotted keys merged in); None: not given, or
    #: a value vLLM's parser refuses
    limit_mm_per_prompt: dict[str, Any] | None = None
    #: the flag that turns the vision encoder's profiling off (``--skip-mm-profiling``,
    #: ``--language-model-only``); None: profiled
    mm_profiling_off: str | None = None
    #: ``--mm-encoder-tp-mode`` (vLLM's default "weights" when not given)
    mm_encoder_tp_mode: str = "weights"
    #: ``--enforce-eager`` is among the flags (also where a leniently read line left
    #: ``enforce_eager`` unset)
    eager_given: bool = False
    #: the launch's flags as the reader rendered them: canonical name -> value, the last one
    #: winning (None: a bare flag); the multicast fallback's map of the command
    option_values: dict[str, str | None] = field(default_factory=dict)
    #: the names the engine serves the model under (vLLM's ``--served-model-name a b``,
    #: SGLang's ``--served-model-name a``); None: the model's path
    served_model_names: list[str] | None = None
    #: the MoE all-to-all backend the command chooses (vLLM's ``--all2all-backend``,
    #: SGLang's ``--moe-a2a-backend``); None: the engine's default
    all2all_backend: str | None = None
    #: what the engine's memory rules read from the command (SGLang: the terms of its default
    #: mem_fraction_static, the multimodal feature transport, the attention backends given;
    #: vLLM: nothing), read once by the engine's reader (``ReaderRules.launch_options``);
    #: empty: what a launch with no flags gives
    memory_options: dict[str, Any] = field(default_factory=dict)

    #: the engine release whose options the built-in reader judged the line by (the
    #: release atlas, ``_knowledge/atlas.py``), and how it relates to the installed one:
    #: "exact", "between", "newer-than-newest" (the newest release's rules, extrapolated)
    #: or "older-than-oldest" (none: not judged); None when not re-read by release.
    reader_release: str | None = None
    reader_relation: str | None = None
    #: the line that says so in the reports ("rules of vLLM 0.33.0 applied to 0.34.0").
    reader_note: str | None = None

    def __setattr__(self, name: str, value: Any) -> None:
        # What is only shown (never used to find files or build the launch) holds no
        # secret-looking value, whatever flag carried it (docs/security.md "Secrets"): on
        # every assignment, the constructor's and a reader's later one alike.
        if name in _SHOWN_ONLY and value is not None:
            from flightcheck._vocabulary.redaction import redact_text

            if isinstance(value, str):
                value = redact_text(value)
            elif isinstance(value, list):
                value = [redact_text(x) if isinstance(x, str) else x for x in value]
        object.__setattr__(self, name, value)

    def __post_init__(self) -> None:
        if self.engine not in KNOWN_ENGINES:
            raise UsageError(f"--engine {self.engine!r}: expected one of {', '.join(KNOWN_ENGINES)}")
        for name in (
            "tensor_parallel_size",
            "pipeline_parallel_size",
            "data_parallel_size",
            "nnodes",
            "prefill_context_parallel_size",
            "decode_context_parallel_size",
        ):
            if getattr(self, name) < 1:
                raise UsageError(f"--{name.replace('_', '-')} must be >= 1")
        if self.gpu_memory_utilization is not None and not 0 < self.gpu_memory_utilization <= 1:  # nan too
            raise UsageError("--gpu-memory-utilization must be in (0, 1]")
        if self.reserve_gib is not None and not (
            isinstance(self.reserve_gib, (int, float)) and math.isfinite(self.reserve_gib) and self.reserve_gib >= 0
        ):
            raise UsageError(f"--reserve-gib {self.reserve_gib!r}: must be a finite number >= 0")
        if self.kv_cache_dtype not in KV_CACHE_DTYPES:
            raise UsageError(f"--kv-cache-dtype {self.kv_cache_dtype!r}: expected one of {', '.join(KV_CACHE_DTYPES)}")

    @property
    def replica_size(self) -> int:
        """GPUs of one data-parallel rank: TP x PP x PCP (decode CP shares the TP group)."""
        return self.tensor_parallel_size * self.pipeline_parallel_size * self.prefill_context_parallel_size

    @property
    def world_size(self) -> int:
        """GPUs one launch uses across all nodes: TP x PP x PCP x DP."""
        return self.replica_size * self.data_parallel_size

    @property
    def gpus_per_node(self) -> int:
        """GPUs this node contributes: TP x PP x PCP x the local DP ranks when the command
        says how many run here (``--data-parallel-size-local``), else the world spread over
        ``nnodes``."""
        if self.data_parallel_size_local is not None:
            return max(1, self.replica_size * self.data_parallel_size_local)
        return max(1, -(-self.world_size // self.nnodes))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form for the report's ``intent`` block."""
        out = dataclasses.asdict(self)
        if not out["engine_flags"]:
            del out["engine_flags"]
        if not out["unparsed"]:
            del out["unparsed"]
        if out["config_problem"] is None:
            del out["config_problem"]
        if not out["refused"]:
            del out["refused"]
        if out["layout_from"] is None:
            del out["layout_from"]
        for key in ("reader_release", "reader_relation", "reader_note"):  # only when re-read by release
            if out[key] is None:
                del out[key]
        for name in READ_ONCE_FIELDS:  # engine_flags shows them (redacted)
            del out[name]
        out["world_size"] = self.world_size
        out["gpus_per_node"] = self.gpus_per_node
        return out
