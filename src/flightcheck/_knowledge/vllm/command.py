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

from flightcheck._knowledge.vllm.multimodal import encoder_tp_mode, limit_mm_per_prompt, mm_profiling_off
from flightcheck._knowledge.vllm.spec_decode import speculative_given

#: the Intent fields :func:`launch_options` fills.
LAUNCH_OPTION_FIELDS: tuple[str, ...] = (
    "speculative_config",
    "speculative_error",
    "limit_mm_per_prompt",
    "mm_profiling_off",
    "mm_encoder_tp_mode",
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
    }
