"""What a serving engine is to flightcheck: the :class:`Engine` interface.

One implementation a engine, in its knowledge package (``_knowledge/vllm/engine.py``,
``_knowledge/sglang/engine.py``), registered once in ``_knowledge/engines.py``
(``engines.get(name)``). Code outside the engine packages never compares an engine's name:
it asks the engine (``engines.get(intent.engine).memory.kv_bytes_override``), so a third
engine is a new package and one registration, and ``tests/test_architecture.py`` counts the
comparisons (zero).

The interface is grouped by concern: the launch line (:class:`CommandRules`), the reading of
its options (:class:`ReaderRules`), the checkpoint it loads (:class:`CheckpointRules`), the
memory it plans (:class:`MemoryRules`), the multicast fallback (:class:`MulticastRules`) and
its log (:class:`LogRules`).
Where an algorithm needs a higher layer (the memory model, the fallback plan, the built-in
parser), the engine gives data or a named mechanism (``budget = "free"``), never its name,
and the algorithm stays in its layer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, get_args

#: the engines flightcheck knows; anything else is refused at the edge (one line, exit 2)
EngineName = Literal["vllm", "sglang"]
ENGINE_NAMES: tuple[EngineName, ...] = get_args(EngineName)
#: the names an Intent accepts: :data:`ENGINE_NAMES` and any engine a test registers
#: (``_knowledge.engines.register``, which keeps this list; one list, shared by reference)
KNOWN_ENGINES: list[str] = list(ENGINE_NAMES)

#: a flag's reader: (Intent field, converter raising ValueError / UsageError)
Reader = tuple[str, Callable[[str], Any]]


class CommandRules(Protocol):
    """How a launch line names the engine."""

    #: the console script whose ``serve`` subcommand launches it (``vllm serve``)
    cli: str
    #: ``python -m <module>`` entry points -> (form, whether ``serve`` follows the module)
    modules: Mapping[str, tuple[str, bool]]


class ReaderRules(Protocol):
    """The engine's option syntax, as the built-in reader needs it (the generated tables
    of ``_knowledge/data/<engine>_<release>_args.json`` give the options themselves)."""

    #: short or alternative spellings -> the canonical long flag
    aliases: Mapping[str, str]
    #: canonical flag -> (Intent field, converter), for the token-by-token reading
    fields: Mapping[str, Reader]
    #: flags that never take a value
    bool_flags: frozenset[str]
    #: boolean intent flags (``--x`` / ``--no-x``) -> (field, value)
    bools: Mapping[str, tuple[str, bool]]
    #: how fixes and messages spell an option (``flag["tp"]``)
    flag: Mapping[str, str]
    #: argparse ``type`` names of the table -> the converters the engine's parser uses
    types: Mapping[str, str]
    #: argparse dest -> Intent field
    intent_fields: Mapping[str, str]
    #: dests the engine reads as numbers even when written as words (vLLM's ``"1k"``)
    loose_numbers: Mapping[str, str]
    #: what the engine's parser rewrites a kv-cache dtype to (SGLang: ``bf16`` -> ``bfloat16``)
    kv_dtype_aliases: Mapping[str, str]
    #: the argv pre-processing of the engine's parser before argparse: ``"flexible"`` (vLLM's
    #: FlexibleArgumentParser: ``_`` for ``-``, ``-O3``, ``--a.b`` as JSON, ``--config`` YAML
    #: merged as flags, a positional model) or ``"server-args"`` (SGLang's ServerArgs:
    #: ``sglang serve`` and its ``--config`` merge, ``--model-path``)
    preprocess: Literal["flexible", "server-args"]
    #: the flag that turns on DP attention (splits the TP group; adds no GPUs), or None
    dp_attention_flag: str | None
    #: whether expert parallelism is derived from ``ep_size`` (SGLang), not a switch (vLLM)
    derives_expert_parallel: bool
    #: whether the engine starts its workers by ``--distributed-executor-backend``
    executor_backend: bool
    #: what the engine-reader child (``_collect/engine_reader.py``, which knows no engine) is
    #: told: the console script, modules and subcommand that name the engine, its reading
    #: procedure (``"parsed"`` / ``"prepared"``) and the ``module:attr`` paths of its parser,
    #: validation and record, the record's attribute of each canonical field, the engine
    #: fields, the environment its import wants (JSON; ``_knowledge.engines.reader_spec``)
    child: Mapping[str, Any]

    def layout(
        self,
        tp: int,
        pp: int = 1,
        dp: int = 1,
        ep: bool = False,
        moe_size: int | None = None,
        pcp: int = 1,
        dcp: int = 1,
    ) -> str:
        """A parallel layout as the engine's flags."""
        ...

    def launch_options(self, flags: list[str]) -> dict[str, Any]:
        """The Intent's engine-read fields (``intent.ENGINE_OPTION_FIELDS``: the served names,
        the all-to-all backend, the memory rules' options) from the launch's canonical flags
        (``--name[=value]``, as the reader renders them), with the engine's semantics: read
        once where the launch is read (``_launch.intent_read.read_options``)."""
        ...


class CheckpointRules(Protocol):
    """Which files of a model directory the engine loads (the knowledge package's tables)."""

    LOAD_FORMAT_FILES: dict[str, tuple[str, ...]]
    NO_WEIGHT_LOAD_FORMATS: frozenset[str]
    NOT_WEIGHT_FILES: frozenset[str]
    AUTO_MISTRAL: bool
    MISTRAL_FILES: str
    MISTRAL_INDEX: str
    GGUF_ARCHITECTURES: frozenset[str]
    GGUF_SINGLE_FILE: bool
    GGUF_LOAD_FORMATS: frozenset[str]


class MemoryRules(Protocol):
    """How the engine sizes its memory (the algorithms are in ``_memory``; these choose)."""

    #: what the utilization is a fraction of: ``"total"`` (vLLM's gpu_memory_utilization of
    #: the GPU's memory) or ``"free"`` (SGLang's mem_fraction_static of what is free before
    #: the weights load; its default is derived from the GPU and the layout)
    budget: Literal["total", "free"]
    #: what the engine holds back besides weights and KV: ``"profile"`` (vLLM's profiled
    #: peak, CUDA graphs, the sampler) or ``"multimodal"`` (SGLang: a vision model's cache)
    reserve: Literal["profile", "multimodal"]
    #: where the reserve comes from, in the report
    reserve_source: str
    #: the variable that lets max_model_len exceed the model's context
    allow_long_var: str
    #: whether the engine derives its own context length (SGLang's _derive_context_length)
    #: rather than reading the model's window
    derived_context: bool
    #: a KV budget in bytes (``--kv-cache-memory-bytes``) that bypasses the utilization
    kv_bytes_override: bool
    #: the vision encoder may run data-parallel (weights whole on every TP rank)
    encoder_data_parallel: bool
    #: speculative decoding drafts with a checkpoint of its own (read with the target)
    speculative_draft: bool
    #: the engine reports a token pool (SGLang's max_total_num_tokens and running requests)
    token_pool: bool
    #: the engine logs its KV capacity and concurrency (vLLM's "GPU KV cache size")
    capacity_log: bool
    #: the engine profiles a batch and snapshots memory before the weights (vLLM)
    profiles: bool
    #: the engine checks that free memory is balanced across its TP ranks (SGLang)
    balance_check: bool

    def apply_overrides(self, config: dict[str, Any], overrides: dict[str, Any] | None) -> dict[str, Any]:
        """config.json as the engine sees it after the launch's overrides (``--hf-overrides``,
        ``--json-model-override-args``)."""
        ...

    def communicators(self, release: tuple[int, ...] | None) -> Literal["in-budget", "before-snapshot", "none"]:
        """Where the communicators' memory sits for this release."""
        ...

    def pp_kv_check_whole_model(self, release: tuple[int, ...] | None) -> bool:
        """Whether the one-sequence KV check counts the whole model with PP > 1."""
        ...

    def model_dtype(self, flag: str | None, config_dtype: str) -> str:
        """The dtype the engine runs the model in for the launch's ``--dtype`` (None: not given)
        and the config's torch_dtype: the unquantized weights, the KV cache and activations."""
        ...

    def in_use_utilization(self, version: str | None) -> float | None:
        """The default utilization the GPU-in-use check assumes (None: not that kind)."""
        ...

    def fraction_options(
        self, options: Mapping[str, Any], model: str | None, max_num_seqs: int | None
    ) -> dict[str, Any]:
        """The launch's terms of the default fraction (empty: none); ``options``: the
        Intent's ``memory_options``."""
        ...

    def mm_reservation_bytes(self, options: Mapping[str, Any], env: Mapping[str, str | None]) -> int:
        """What a multimodal model's KV budget loses after sizing (0: nothing); ``options``:
        the Intent's ``memory_options``."""
        ...

    def utilization_refusal(self, value: Any, release: tuple[int, ...] | None) -> str | None:
        """Why the engine refuses this memory fraction at startup (FC703); None: it takes it."""
        ...


class MulticastRules(Protocol):
    """How the fallback keeps the engine off multicast."""

    #: ``"switches"``: the engine's variables turn each path off (vLLM); ``"flags"``: the
    #: paths are the launch's own flags, dropped or stopped on (SGLang)
    fallback: Literal["switches", "flags"]
    #: the engine's own model code binds multicast with no switch (Kimi-K3's latent MoE
    #: tail, Beam's all-reduce workspace: vLLM)
    model_paths: bool


class LogRules(Protocol):
    """How the engine's own log says that this engine wrote it, and which release
    (``flightcheck diagnose``: ``_diagnose/scan.py`` reads every registered engine's)."""

    #: substrings of the line that prints the engine's arguments (one of them, with ``args``)
    args_markers: tuple[str, ...]
    #: regular expressions of the lines that give the engine's release; each has exactly one
    #: capturing group, the version
    version_patterns: tuple[str, ...]
    #: substrings one of which every version line holds (a cheap test before the patterns)
    version_hints: tuple[str, ...]
    #: this engine's argument and version lines are unmistakable: once one is read, another
    #: engine's (less specific) line does not take the launch over
    decisive: bool


#: how an engine turns a variable's text into a boolean (``_knowledge/envread.py``)
Spelling = Literal["int", "one-or-true", "words", "text"]


@dataclass(frozen=True)
class EnvVar:
    """One engine environment variable, declared once in its engine's package
    (``vllm/env.py``, ``sglang/envs.py``) and read with ``_knowledge.envread``."""

    name: str
    kind: Literal["bool", "int", "str", "choice"]
    #: the engine's default as text (None: None, or one the caller gates by release)
    default: str | None
    #: where it was read: ``"vllm/envs.py (0.33.0)"``
    source: str
    spelling: Spelling = "int"
    choices: tuple[str, ...] = ()


class Engine(Protocol):
    """One serving engine: everything engine-specific flightcheck does goes through it."""

    #: the name the CLI, the Intent and the reports use
    name: EngineName
    #: how messages write it ("vLLM")
    display: str
    #: the distribution (``pip install``; ``facts.python.packages``) and import name
    package: str
    #: the prefix of every environment variable the engine declares (``VLLM_``)
    env_prefix: str
    #: the variable that lists the engine's plugins (flightcheck rides in vLLM as one);
    #: None: the engine has no plugins, flightcheck checks only through ``run``
    plugins_var: str | None
    #: ``flashinfer-python`` pins by engine release (requirements/cuda.txt), where known
    flashinfer_pin: Mapping[str, str]
    #: distributions of prebuilt CUDA kernels the engine's code imports besides its own
    #: extension modules (SGLang's sgl_kernel), whose device code the driver must run
    kernel_packages: tuple[str, ...]
    #: an index entry spelled unlike the engine's glob (``./name``): ``"drops"`` (the file is
    #: found but not loaded: SGLang) or ``"raises"`` (FileNotFoundError, by release: vLLM)
    index_spelling: Literal["drops", "raises"]
    #: the runtime compilers and JIT kernel libraries the engine's own code reaches, whose
    #: gates the toolchain checks apply: ``"deepgemm"`` (DG_JIT), ``"tilelang"`` /
    #: ``"humming"`` (its kernels), ``"flashinfer-gate"`` (FlashInfer switched off, not
    #: failed, when no cubin and no nvcc / ninja: vLLM's has_flashinfer)
    runtime_compilers: frozenset[str]
    #: whether flightcheck has read the engine's paths into FlashInfer: the APIs its helpers
    #: probe (vLLM's ``has_flashinfer_*``, ``_knowledge/vllm/flashinfer_paths.py``) and the
    #: modules its launch paths build (``_knowledge/flashinfer_modules.py``); False: not read
    probes_flashinfer_apis: bool
    #: the engine's variables flightcheck reads, each declared once (``<engine>/envs.py``)
    env_vars: Mapping[str, EnvVar]
    command: CommandRules
    reader: ReaderRules
    checkpoint: CheckpointRules
    memory: MemoryRules
    multicast: MulticastRules
    log: LogRules

    def env_files(self, package_dir: str) -> list[str]:
        """The files of the installed package that declare its environment variables."""
        ...

    def env_names(self, text: str) -> set[str]:
        """The variable names one of those files declares."""
        ...

    def non_cuda_platform(self, packages: Mapping[str, str | None], env: Mapping[str, str | None]) -> str | None:
        """The platform other than CUDA this install runs on ("CPU", "ROCm"); None: CUDA,
        or nothing says otherwise."""
        ...
