"""SGLang as an :class:`~flightcheck._vocabulary.engine.Engine`: the interface over the
tables and rules of this package (each cites the SGLang source it was read from).

Registered once, in ``_knowledge/engines.py``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any, Literal

from flightcheck._knowledge import sglang as k
from flightcheck._knowledge.sglang.envs import DECLARED
from flightcheck._knowledge.sglang.reader import CHILD_READER, SERVED_NAME_FLAG
from flightcheck._vocabulary.engine import (
    CheckpointRules,
    CommandRules,
    EngineName,
    EnvVar,
    LogRules,
    MemoryRules,
    MulticastRules,
    Reader,
    ReaderRules,
)


class _Command:
    cli: str = "sglang"
    # python/sglang/launch_server.py, python/sglang/cli/main.py (``sglang serve``; 0.5.23)
    modules: Mapping[str, tuple[str, bool]] = {
        "sglang.launch_server": ("sglang-launch-server", False),
        "sglang.cli.main": ("sglang-cli", True),
    }


class _Reader:
    aliases: Mapping[str, str] = k.ALIASES
    fields: Mapping[str, Reader] = k.FIELDS
    bool_flags: frozenset[str] = k.BOOL_FLAGS
    bools: Mapping[str, tuple[str, bool]] = {}
    flag: Mapping[str, str] = k.FLAG
    types: Mapping[str, str] = k.READER_TYPES
    intent_fields: Mapping[str, str] = k.READER_FIELDS
    loose_numbers: Mapping[str, str] = {}
    kv_dtype_aliases: Mapping[str, str] = k.KV_DTYPE_NAMES
    preprocess: Literal["flexible", "server-args"] = "server-args"
    dp_attention_flag: str | None = k.DP_ATTENTION_FLAG
    derives_expert_parallel: bool = True
    child: Mapping[str, Any] = CHILD_READER
    executor_backend: bool = False

    # the package's own function, as it is (the interface's signature)
    layout = staticmethod(k.layout)

    def launch_options(self, flags: list[str]) -> dict[str, Any]:
        # the last value of a flag wins, as argparse keeps it
        values = {name: value for name, eq, value in (f.partition("=") for f in flags) if eq}
        served = values.get(SERVED_NAME_FLAG)
        return {
            "served_model_names": [served] if served is not None else None,
            "all2all_backend": values.get(k.MOE_A2A_BACKEND_FLAG),
            "memory_options": memory_options(flags),
        }


def memory_options(flags: list[str]) -> dict[str, Any]:
    """What SGLang's memory rules read from a launch's canonical flags, read once (the
    Intent's ``memory_options``): the terms of the default mem_fraction_static
    (``fraction_flag_options``), whether the multimodal features move through CUDA memory
    (``mm_feature_cache``), the attention backends given (``attention_flags``)."""
    return {
        "fraction": k.fraction_flag_options(flags),
        "mm_feature_cache": k.mm_feature_cache(flags),
        "attention": k.attention_flags(flags),
    }


#: a launch that sets nothing: what an Intent read from no command (``check``'s own flags) has
_NO_FLAGS = memory_options([])


def _given(options: Mapping[str, Any]) -> Mapping[str, Any]:
    return options or _NO_FLAGS


class _Memory:
    budget: Literal["total", "free"] = "free"
    reserve: Literal["profile", "multimodal"] = "multimodal"
    reserve_source: str = "outside SGLang's mem_fraction_static"
    allow_long_var: str = k.ALLOW_LONG_MAX_MODEL_LEN
    derived_context: bool = True
    kv_bytes_override: bool = False
    encoder_data_parallel: bool = False
    speculative_draft: bool = False
    token_pool: bool = True
    capacity_log: bool = False
    profiles: bool = False
    balance_check: bool = True

    def apply_overrides(self, config: dict[str, Any], overrides: dict[str, Any] | None) -> dict[str, Any]:
        return k.apply_model_override_args(config, overrides)

    def communicators(self, release: tuple[int, ...] | None) -> Literal["in-budget", "before-snapshot", "none"]:
        return "none"

    def pp_kv_check_whole_model(self, release: tuple[int, ...] | None) -> bool:
        return False

    def model_dtype(self, flag: str | None, config_dtype: str) -> str:
        # SGLang's own --dtype rule is not read here: the config's dtype, as before
        return config_dtype

    def in_use_utilization(self, version: str | None) -> float | None:
        return None  # SGLang's check is of free memory (see the GPU-in-use check)

    def fraction_options(
        self, options: Mapping[str, Any], model: str | None, max_num_seqs: int | None
    ) -> dict[str, Any]:
        return {**_given(options)["fraction"], **k.fraction_launch_terms(model, max_num_seqs)}

    def mm_reservation_bytes(self, options: Mapping[str, Any], env: Mapping[str, str | None]) -> int:
        return k.mm_reservation_bytes(bool(_given(options)["mm_feature_cache"]), dict(env))

    def utilization_refusal(self, value: Any, release: tuple[int, ...] | None) -> str | None:
        return None  # --mem-fraction-static has no range validator (sglang 0.5.23 server_args.py)


class _Multicast:
    fallback: Literal["switches", "flags"] = "flags"
    model_paths: bool = False


class _Log:
    # sglang 0.4 - 0.5.23 python/sglang/srt/entrypoints/http_server.py / launch_server.py
    # log ``server_args=ServerArgs(...)`` at startup; its version as ``sglang==X`` /
    # ``sglang version X`` / ``sglang_version=X`` (srt/utils ``get_version`` in the env dump)
    args_markers: tuple[str, ...] = ("ServerArgs(",)
    version_patterns: tuple[str, ...] = (r"\bsglang(?:==| version:? |_version=)(\d[\w.+-]*)",)
    version_hints: tuple[str, ...] = ("ersion", "sglang")
    # ``ServerArgs(`` and ``sglang_version=`` name no other engine
    decisive: bool = True


#: python/sglang/srt/environ.py: ``SGLANG_X`` / ``SGL_X`` names
_NAMES = (re.compile(r"\b((?:SGLANG|SGL)_[A-Z0-9_]+)\b"),)


class SGLang:
    """SGLang."""

    name: EngineName = "sglang"
    display: str = "SGLang"
    package: str = "sglang"
    env_prefix: str = "SGLANG_"  # srt/environ.py (older names: SGL_)
    plugins_var: str | None = None
    flashinfer_pin: Mapping[str, str] = {}
    # Requires-Dist: sgl-kernel (extra "srt", read in 0.4.1 ...) renamed sglang-kernel (0.5.10);
    # both install the sgl_kernel module its srt layers import (``from sgl_kernel import ...``)
    kernel_packages: tuple[str, ...] = ("sgl-kernel", "sglang-kernel")
    index_spelling: Literal["drops", "raises"] = "drops"
    runtime_compilers: frozenset[str] = frozenset()  # its JIT paths are checked by flags and pins
    probes_flashinfer_apis = False
    env_vars: Mapping[str, EnvVar] = DECLARED
    command: CommandRules = _Command()
    reader: ReaderRules = _Reader()
    checkpoint: CheckpointRules = k
    memory: MemoryRules = _Memory()
    multicast: MulticastRules = _Multicast()
    log: LogRules = _Log()

    def env_files(self, package_dir: str) -> list[str]:
        return [os.path.join(package_dir, "srt", "environ.py")]

    def env_names(self, text: str) -> set[str]:
        return {m for p in _NAMES for m in p.findall(text)}

    def non_cuda_platform(self, packages: Mapping[str, str | None], env: Mapping[str, str | None]) -> str | None:
        return None  # not read for SGLang: its non-CUDA builds are not told apart here


ENGINE = SGLang()
