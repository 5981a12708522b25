"""What a vLLM command line sets that the memory model reads beyond the Intent's plain
fields, read once from the launch's flags with vLLM's own semantics (JSON-object options
with their dotted keys merged in and replacing a JSON given: :func:`.reader._json_arg`;
the last spelling of a flag winning, as argparse's does).

``_launch`` (the built-in reader and the engine's reading alike) calls
:func:`launch_options` once and stores the result in the Intent's typed fields; nothing
downstream reads ``Intent.engine_flags`` for these.
"""

from __future__ import annotations

from typing import Any

from flightcheck._knowledge.vllm.flashinfer_paths import ALL2ALL_FLAG
from flightcheck._knowledge.vllm.memory_compile import compile_flags_given
from flightcheck._knowledge.vllm.multimodal import encoder_tp_mode, limit_mm_per_prompt, mm_profiling_off
from flightcheck._knowledge.vllm.options import FLAG
from flightcheck._knowledge.vllm.reader import SERVED_NAME_FLAG
from flightcheck._knowledge.vllm.spec_decode import speculative_given

#: ``--enable-chunked-prefill`` / ``--no-enable-chunked-prefill`` (BooleanOptionalAction of
#: SchedulerConfig.enable_chunked_prefill, vllm/engine/arg_utils.py, 0.10.1.1 - 0.33.0)
CHUNKED_PREFILL_FLAGS = {"--enable-chunked-prefill": True, "--no-enable-chunked-prefill": False}

#: the Intent fields :func:`launch_options` fills.
LAUNCH_OPTION_FIELDS: tuple[str, ...] = (
    "speculative_config",
    "speculative_error",
    "limit_mm_per_prompt",
    "mm_profiling_off",
    "mm_encoder_tp_mode",
    "eager_given",
)


def launch_options(flags: list[str]) -> dict[str, Any]:
    """The Intent fields of :data:`LAUNCH_OPTION_FIELDS` from the launch's canonical flags
    (``--name[=value]``, as the reader renders them)."""
    spec, spec_error = speculative_given(flags)
    return {
        "speculative_config": spec,
        "speculative_error": spec_error,
        "limit_mm_per_prompt": limit_mm_per_prompt(flags),
        "mm_profiling_off": mm_profiling_off(flags),
        "mm_encoder_tp_mode": encoder_tp_mode(flags),
        "eager_given": FLAG["eager"] in flags,
    }


def engine_options(flags: list[str]) -> dict[str, Any]:
    """The Intent's engine-read fields (``ENGINE_OPTION_FIELDS``) of a vLLM launch: the
    served names (``--served-model-name a b``), the all2all backend (``--all2all-backend``,
    the last one given, as argparse keeps it; FC712) and, as memory options, whether chunked
    prefill is on (``--[no-]enable-chunked-prefill``, when given) and whether a compilation
    option is set (``-O``, ``--compilation-config``: ``compile_flags``)."""
    served: list[str] | None = None
    backend: str | None = None
    memory: dict[str, Any] = {}
    for item in flags:
        name, eq, value = item.partition("=")
        if name == SERVED_NAME_FLAG and eq:
            served = value.split()
        elif name == ALL2ALL_FLAG and eq:
            backend = value
        elif name in CHUNKED_PREFILL_FLAGS:
            # the last one given wins (BooleanOptionalAction); off, the batch is the context
            # (memory_gptoss.batch_by_length)
            memory["enable_chunked_prefill"] = CHUNKED_PREFILL_FLAGS[name]
    if compile_flags_given(flags):
        # -O / --compilation-config may turn compilation or the custom ops off: whether an FP8
        # layer's activation is held as FP8 is left open (memory_compile)
        memory["compile_flags"] = True
    return {"served_model_names": served, "all2all_backend": backend, "memory_options": memory}
