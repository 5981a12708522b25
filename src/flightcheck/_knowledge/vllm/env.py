"""The variables vLLM reads (vllm/envs.py ``environment_variables``), the first release
that declares each one and the default each release's getter gives it.
"""

from __future__ import annotations

from flightcheck._knowledge.vllm._versions import _release
from flightcheck._vocabulary.engine import EnvVar

# ---- environment variables (vllm/envs.py) ------------------------------------------------

ALLREDUCE_USE_SYMM_MEM = "VLLM_ALLREDUCE_USE_SYMM_MEM"
USE_NCCL_SYMM_MEM = "VLLM_USE_NCCL_SYMM_MEM"
FLASHINFER_ALLREDUCE_BACKEND = "VLLM_FLASHINFER_ALLREDUCE_BACKEND"
RAY_EXTRA_ENV_VARS_TO_COPY = "VLLM_RAY_EXTRA_ENV_VARS_TO_COPY"
KIMI_K3_GEMM_AR = "VLLM_KIMI_K3_GEMM_AR"
KIMI_K3_TAIL_SWITCH = "VLLM_ENABLE_K3_LATENT_MOE_TAIL_FUSION"
ALLOW_LONG_MAX_MODEL_LEN = "VLLM_ALLOW_LONG_MAX_MODEL_LEN"
ESTIMATE_CUDAGRAPHS = "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS"
ALLREDUCE_USE_FLASHINFER = "VLLM_ALLREDUCE_USE_FLASHINFER"  # envs.py, default 1
ENABLE_GEMM_RS = "VLLM_ENABLE_GEMM_RS"  # envs.py, default 0
USE_DIRECT_DCP_Q_GATHER = "VLLM_USE_DIRECT_DCP_Q_GATHER"  # envs.py, default None (on when applicable)
USE_DIRECT_DCP_KV_GATHER = "VLLM_USE_DIRECT_DCP_KV_GATHER"
USE_FLASHINFER_SAMPLER = "VLLM_USE_FLASHINFER_SAMPLER"  # the sampler (memory.py sampler_kind)
USE_V1 = "VLLM_USE_V1"  # V0 or V1 (memory_v0.runs_v0): 0.6.4 - 0.10.2
#: variables the plan extends (comma lists), never replaces.
LIST_VARS: tuple[str, ...] = (RAY_EXTRA_ENV_VARS_TO_COPY,)
#: the prefix of every variable vLLM declares (its Ray executor forwards these).
ENV_PREFIX = "VLLM_"

#: First vLLM release whose envs.py declares the variable, read from every release's wheel
#: from 0.10.1.1 to 0.33.0 (``pip download --no-deps vllm==X``; vllm/envs.py
#: ``environment_variables``). scripts/gen_vllm_env_gates.py regenerates the extract
#: (tests/fixtures/vllm_envs/gates.json) and ``--check`` compares this table with it;
#: tests/knowledge/test_vllm_env_gates.py does the same offline.
SINCE: dict[str, str] = {
    ALLREDUCE_USE_SYMM_MEM: "0.10.2",
    USE_NCCL_SYMM_MEM: "0.11.0",
    FLASHINFER_ALLREDUCE_BACKEND: "0.17.0",
    RAY_EXTRA_ENV_VARS_TO_COPY: "0.17.0",
    ALLREDUCE_USE_FLASHINFER: "0.17.0",
    ESTIMATE_CUDAGRAPHS: "0.18.0",
    USE_DIRECT_DCP_Q_GATHER: "0.28.0",
    USE_DIRECT_DCP_KV_GATHER: "0.28.0",
    KIMI_K3_GEMM_AR: "0.29.0",
    ENABLE_GEMM_RS: "0.31.0",
}
#: Variables whose first release must be in :data:`SINCE` (those the fallback sets or a
#: check reads by version); the others are named for their meaning only.
GATED: frozenset[str] = frozenset(SINCE)

#: The default each release's getter passes (``os.getenv(NAME, DEFAULT)``,
#: ``env_with_choices(NAME, DEFAULT, ...)``), newest first: (first release, default);
#: None is "unset" (``maybe_convert_bool(os.getenv(NAME))``). From the same wheels.
ENV_DEFAULTS: dict[str, tuple[tuple[str, str | None], ...]] = {
    ALLREDUCE_USE_SYMM_MEM: (("0.11.0", "1"), ("0.10.2", "0")),  # on by default since 0.11.0 (#24111)
    USE_NCCL_SYMM_MEM: (("0.11.0", "0"),),
    FLASHINFER_ALLREDUCE_BACKEND: (("0.19.0", "auto"), ("0.17.0", "trtllm")),
    RAY_EXTRA_ENV_VARS_TO_COPY: (("0.17.0", ""),),
    ALLREDUCE_USE_FLASHINFER: (("0.29.0", "1"), ("0.17.0", "0")),
    ESTIMATE_CUDAGRAPHS: (("0.20.0", "1"), ("0.18.0", "0")),
    USE_DIRECT_DCP_Q_GATHER: (("0.28.0", None),),
    USE_DIRECT_DCP_KV_GATHER: (("0.28.0", None),),
    KIMI_K3_GEMM_AR: (("0.29.0", "1"),),
    ENABLE_GEMM_RS: (("0.31.0", "0"),),
    ALLOW_LONG_MAX_MODEL_LEN: (("0.10.1.1", "0"),),  # older: not read here
}


def env_default(name: str, version: str) -> str | None:
    """The default vLLM ``version`` gives ``name`` (None: unset, not declared, or unknown)."""
    v = _release(version)
    for since, value in ENV_DEFAULTS.get(name, ()):
        if v >= _release(since):
            return value
    return None


SYMM_MEM_DEFAULT_ON = ENV_DEFAULTS[ALLREDUCE_USE_SYMM_MEM][0][0]  # VLLM_ALLREDUCE_USE_SYMM_MEM on by default
MNNVL_AUTO_SINGLE_NODE = "0.25.0"  # "auto" FlashInfer all-reduce means mnnvl on one node (#47219)
#: ``auto`` became the default in 0.19.0 (the envs.py defaults above) with #38136, which resolves
#: it in vLLM: trtllm on one node, mnnvl across nodes. Before it (0.17.0-0.18.x, default trtllm)
#: an ``auto`` the user set went to FlashInfer, whose auto picks mnnvl (#34109).
FI_AUTO_RESOLVED_SINCE = ENV_DEFAULTS[FLASHINFER_ALLREDUCE_BACKEND][0][0]


# ---- which platform vLLM runs on (vllm/platforms/__init__.py, read in 0.33.0) ----------------

#: ``cpu_platform_plugin``: ``VLLM_TARGET_DEVICE == "cpu"``, or the installed vLLM's version
#: contains "cpu" (``vllm_version_matches_substr("cpu")``: the ``+cpu`` wheels);
#: ``rocm_platform_plugin``: amdsmi finds a GPU, which a ROCm build of torch
#: (``torch.version.hip``, a ``+rocm`` local version) goes with. Past 0.33.0: extrapolated.
TARGET_DEVICE = "VLLM_TARGET_DEVICE"


def non_cuda_platform(
    vllm_version: str | None, torch_version: str | None, env: dict[str, str | None] | None
) -> str | None:
    """The platform other than CUDA vLLM will run on ("CPU", "ROCm"), from the engine's
    package versions and environment; None: CUDA, or nothing says otherwise."""
    target = ((env or {}).get(TARGET_DEVICE) or "").strip().lower()
    v, t = (vllm_version or "").lower(), (torch_version or "").lower()
    if target == "cpu" or "cpu" in v:
        return "CPU"
    if "rocm" in v or "+rocm" in t:
        return "ROCm"
    return None


# ---- how vLLM reads each variable flightcheck reads (one declaration a variable) ----------
# kind, default and boolean spelling as vllm/envs.py ``environment_variables`` reads them;
# read them with :mod:`flightcheck._knowledge.envread`.

_ENVS = "vllm/envs.py (0.33.0)"

DECLARED: dict[str, EnvVar] = {
    v.name: v
    for v in (
        # "VLLM_ALLREDUCE_USE_SYMM_MEM": lambda: bool(int(os.getenv(..., "1")))
        EnvVar(ALLREDUCE_USE_SYMM_MEM, "bool", "1", _ENVS),
        # bool(int(os.getenv(..., "0"))) (0.11.0-0.33.0): the fallback sets it only where it is on
        EnvVar(USE_NCCL_SYMM_MEM, "bool", None, _ENVS),
        # bool(int(os.getenv(...))); default "0" in 0.17.0-0.28.x, "1" from 0.29.0 (ENV_DEFAULTS)
        EnvVar(ALLREDUCE_USE_FLASHINFER, "bool", None, _ENVS),
        # maybe_convert_bool(os.getenv(...)): None unless set
        EnvVar(USE_DIRECT_DCP_Q_GATHER, "bool", None, _ENVS),
        EnvVar(USE_DIRECT_DCP_KV_GATHER, "bool", None, _ENVS),
        # os.environ.get(..., "0").strip().lower() in ("1", "true")
        EnvVar(ALLOW_LONG_MAX_MODEL_LEN, "bool", "0", _ENVS, "one-or-true"),
        # bool(int(os.getenv(..., "1"))) since 0.20.0 (earlier "0": the callers gate by release)
        EnvVar(ESTIMATE_CUDAGRAPHS, "bool", None, _ENVS),
        # bool(int(os.environ[...])) if set, else True (0.33.0); "0" before 0.11
        EnvVar(USE_FLASHINFER_SAMPLER, "bool", None, _ENVS),
        # bool(int(os.getenv("VLLM_USE_V1", "1"))): vllm/envs.py 0.8.0 - 0.10.2 (gone since); the
        # same reading with default "0" in 0.6.4 - 0.7.3 (absent in 0.6.3.post1)
        EnvVar(USE_V1, "bool", None, "vllm/envs.py (0.6.4 - 0.10.2)"),
    )
}
