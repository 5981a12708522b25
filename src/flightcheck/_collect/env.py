"""Environment collector: the allow-listed variables of the engine's environment.

Secrets never leave the host: only names on the allow-list (exact, or by prefix) are
recorded, and a name that looks like a secret is dropped whatever the allow-list says.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from flightcheck._collect import CollectContext, collector

#: Exact names always recorded (null when unset), as the facts spec lists them.
ALWAYS = (
    "CUDA_HOME",
    "CUDA_PATH",
    "PATH",
    "CUDA_VISIBLE_DEVICES",
    "TORCH_CUDA_ARCH_LIST",
    "NCCL_NVLS_ENABLE",
    "HF_HOME",
    "HF_HUB_CACHE",
    "HF_HUB_OFFLINE",
)
#: Further exact names recorded when set.
EXTRA = (
    "HUGGINGFACE_HUB_CACHE",
    "TRANSFORMERS_OFFLINE",
    "XDG_CACHE_HOME",
    "MAX_JOBS",
    "CC",
    "CXX",
    "LD_LIBRARY_PATH",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "TRTLLM_DG_ENABLED",
    "NVIDIA_IMEX_CHANNELS",
    "PYTORCH_CUDA_ALLOC_CONF",
    # what runtime compilers read (Triton, tilelang, FlashInfer's CUDA-home lookup)
    "HOME",
    "USER",
    "TMPDIR",
    "LIBRARY_PATH",
    "NVCC_APPEND_FLAGS",
    "NVCC_PREPEND_FLAGS",
)
#: Prefixes recorded when set.
PREFIXES = (
    "FLASHINFER_",
    "VLLM_",
    "NCCL_",
    "TORCH_SYMM_MEM_",
    "TORCH_SYMMMEM",
    "SGLANG_",
    "CUDA_",
    "FLIGHTCHECK_",
    # runtime compilers: Triton, DeepGEMM, tilelang, CuTe DSL (FA4, quack), humming, Inductor
    "TRITON_",
    "DG_",
    "TILELANG_",
    "CUTE_DSL_",
    "HUMMING_",
    "TORCHINDUCTOR_",
    "FLASH_ATTENTION_CUTE_DSL_",
)

_SECRET = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.IGNORECASE)


def is_secret(name: str) -> bool:
    """A name that looks like it holds a secret (never recorded)."""
    return bool(_SECRET.search(name))


def allowed(name: str) -> bool:
    """On the allow-list and not secret-looking."""
    if is_secret(name):
        return False
    return name in ALWAYS or name in EXTRA or name.startswith(PREFIXES)


def snapshot(env: Mapping[str, str]) -> dict[str, str | None]:
    """The ``env`` section for an environment."""
    from flightcheck._vocabulary.redaction import redact_text

    out: dict[str, str | None] = {name: env.get(name) for name in ALWAYS}
    for name in sorted(env):
        if allowed(name):
            out[name] = env[name]
    # a name that says nothing may still hold a secret (a proxy URL with user:password@)
    return {k: redact_text(v) if isinstance(v, str) else v for k, v in out.items()}


@collector("env", sections=("env", "visible_devices"), timeout=1.0)
def collect_env(cctx: CollectContext) -> dict[str, Any]:
    """The ``env`` and ``visible_devices`` sections."""
    return {"env": snapshot(cctx.env), "visible_devices": cctx.env.get("CUDA_VISIBLE_DEVICES")}
