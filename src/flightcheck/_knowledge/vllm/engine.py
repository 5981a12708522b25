"""vLLM as an :class:`~flightcheck._vocabulary.engine.Engine`: the interface over the
tables and rules of this package (each cites the vLLM source it was read from).

Registered once, in ``_knowledge/engines.py``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any, Literal

from flightcheck._knowledge import vllm as k
from flightcheck._knowledge.vllm.command import engine_options
from flightcheck._knowledge.vllm.env import DECLARED
from flightcheck._knowledge.vllm.reader import CHILD_READER
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
    cli: str = "vllm"
    # vllm/entrypoints/cli/main.py (``vllm serve``), vllm/entrypoints/openai/api_server.py,
    # vllm/entrypoints/launchers/api_server/entry.py (0.33.0)
    modules: Mapping[str, tuple[str, bool]] = {
        "vllm.entrypoints.openai.api_server": ("vllm-api-server", False),
        "vllm.entrypoints.launchers.api_server.entry": ("vllm-api-server", False),
        "vllm.entrypoints.cli.main": ("vllm-cli", True),
    }


class _Reader:
    aliases: Mapping[str, str] = k.ALIASES
    fields: Mapping[str, Reader] = k.FIELDS
    bool_flags: frozenset[str] = k.BOOL_FLAGS
    bools: Mapping[str, tuple[str, bool]] = k.BOOLS
    flag: Mapping[str, str] = k.FLAG
    types: Mapping[str, str] = k.READER_TYPES
    intent_fields: Mapping[str, str] = k.READER_FIELDS
    loose_numbers: Mapping[str, str] = k.READER_LOOSE_NUMBERS
    kv_dtype_aliases: Mapping[str, str] = {}  # arg_utils.py: --kv-cache-dtype's choices as given
    preprocess: Literal["flexible", "server-args"] = "flexible"  # vllm/utils/argparse_utils.py
    dp_attention_flag: str | None = None
    derives_expert_parallel: bool = False
    child: Mapping[str, Any] = CHILD_READER
    executor_backend: bool = True

    # the package's own function, as it is (the interface's signature)
    layout = staticmethod(k.layout)

    def launch_options(self, flags: list[str]) -> dict[str, Any]:
        return engine_options(flags)


class _Memory:
    budget: Literal["total", "free"] = "total"
    reserve: Literal["profile", "multimodal"] = "profile"
    reserve_source: str = "default estimate (see `flightcheck explain FC402`)"
    allow_long_var: str = k.ALLOW_LONG_MAX_MODEL_LEN
    derived_context: bool = False
    kv_bytes_override: bool = True
    encoder_data_parallel: bool = True
    speculative_draft: bool = True
    token_pool: bool = False
    capacity_log: bool = True
    profiles: bool = True
    balance_check: bool = False

    def apply_overrides(self, config: dict[str, Any], overrides: dict[str, Any] | None) -> dict[str, Any]:
        return k.apply_hf_overrides(config, overrides)

    def communicators(self, release: tuple[int, ...] | None) -> Literal["in-budget", "before-snapshot", "none"]:
        return "in-budget" if k.comm_in_budget(release) else "before-snapshot"

    def pp_kv_check_whole_model(self, release: tuple[int, ...] | None) -> bool:
        return k.pp_kv_check_whole_model(release)

    def model_dtype(self, flag: str | None, config_dtype: str) -> str:
        return k.model_dtype(flag, config_dtype)

    def in_use_utilization(self, version: str | None) -> float | None:
        # the in-use check's own threshold (0.33), kept as it was: see UTILIZATION_DEFAULTS
        # for the memory model's (0.20.0); the two differ for 0.20 - 0.32
        from flightcheck._vocabulary.version import release

        v = release(version)
        return 0.92 if v is not None and v >= (0, 33) else 0.9

    def fraction_options(
        self, options: Mapping[str, Any], model: str | None, max_num_seqs: int | None
    ) -> dict[str, Any]:
        return {}

    def mm_reservation_bytes(self, options: Mapping[str, Any], env: Mapping[str, str | None]) -> int:
        return 0

    def utilization_refusal(self, value: Any, release: tuple[int, ...] | None) -> str | None:
        return k.utilization_refusal(value, release)


class _Multicast:
    fallback: Literal["switches", "flags"] = "switches"
    model_paths: bool = True


class _Log:
    # what vLLM 0.6 - 0.33 log at startup (the wording the scan was read against):
    # vllm/entrypoints/utils.py ``log_non_default_args`` ("non-default args: {...}"; older:
    # "args: Namespace(...)"), vllm/entrypoints/openai/api_server.py ("vLLM API server
    # version X"), vllm/engine/llm_engine.py / v1/engine/core.py ("Initializing a V1 LLM
    # engine (vX)"; before V1 "Initializing an LLM engine (vX)"), pip-style ``vllm==X``
    args_markers: tuple[str, ...] = ("non-default args:", "args: Namespace(")
    version_patterns: tuple[str, ...] = (
        r"vLLM API server version (\d[\w.+-]*)",
        r"Initializing a V1 LLM engine \(v(\d[\w.+-]*)\)",
        r"Initializing an LLM engine \(v(\d[\w.+-]*)\)",
        r"\bvllm(?:==| version:? )(\d[\w.+-]*)",
    )
    version_hints: tuple[str, ...] = ("ersion", "Initializing")
    # "non-default args:" is also how other launchers word it: a later SGLang line wins
    decisive: bool = False


#: vllm/envs.py: ``"VLLM_X": lambda ...`` entries, and the annotated module globals
_NAMES = (re.compile(r"""["'](VLLM_[A-Z0-9_]+)["']"""), re.compile(r"^\s*(VLLM_[A-Z0-9_]+)\s*:", re.MULTILINE))


class VLLM:
    """vLLM."""

    name: EngineName = "vllm"
    display: str = "vLLM"
    package: str = "vllm"
    env_prefix: str = k.ENV_PREFIX
    plugins_var: str | None = k.PLUGINS_VAR
    flashinfer_pin: Mapping[str, str] = k.FLASHINFER_PIN
    kernel_packages: tuple[str, ...] = ()  # its kernels are its own extension modules (vllm/_C.abi3.so)
    # vllm/utils/deep_gemm.py, vllm/model_executor/layers/mhc (tilelang), humming kernels,
    # vllm/utils/flashinfer.py has_flashinfer (0.33.0)
    index_spelling: Literal["drops", "raises"] = "raises"
    runtime_compilers: frozenset[str] = frozenset({"deepgemm", "tilelang", "humming", "flashinfer-gate"})
    probes_flashinfer_apis = True
    env_vars: Mapping[str, EnvVar] = DECLARED
    command: CommandRules = _Command()
    reader: ReaderRules = _Reader()
    checkpoint: CheckpointRules = k
    memory: MemoryRules = _Memory()
    multicast: MulticastRules = _Multicast()
    log: LogRules = _Log()

    def env_files(self, package_dir: str) -> list[str]:
        files = [os.path.join(package_dir, "envs.py")]
        split = os.path.join(package_dir, "envs")  # a future package layout
        if os.path.isdir(split):
            files += sorted(os.path.join(split, f) for f in os.listdir(split) if f.endswith(".py"))
        return files

    def env_names(self, text: str) -> set[str]:
        return {m for p in _NAMES for m in p.findall(text)}

    def non_cuda_platform(self, packages: Mapping[str, str | None], env: Mapping[str, str | None]) -> str | None:
        return k.non_cuda_platform(packages.get("vllm"), packages.get("torch"), dict(env))


ENGINE = VLLM()
