"""The vLLM environment variables flightcheck reads, each declared once: kind, default and
how vLLM spells a boolean, as ``vllm/envs.py`` ``environment_variables`` reads them (0.33.0,
and the release named where a variable is gone from it). Read them with
:mod:`flightcheck._knowledge.envread`."""

from __future__ import annotations

from flightcheck._knowledge.vllm import env as k
from flightcheck._vocabulary.engine import EnvVar

_ENVS = "vllm/envs.py (0.33.0)"

DECLARED: dict[str, EnvVar] = {
    v.name: v
    for v in (
        # "VLLM_ALLREDUCE_USE_SYMM_MEM": lambda: bool(int(os.getenv(..., "1")))
        EnvVar(k.ALLREDUCE_USE_SYMM_MEM, "bool", "1", _ENVS),
        # maybe_convert_bool(os.getenv(...)): None unless set
        EnvVar(k.USE_DIRECT_DCP_Q_GATHER, "bool", None, _ENVS),
        EnvVar(k.USE_DIRECT_DCP_KV_GATHER, "bool", None, _ENVS),
        # os.environ.get(..., "0").strip().lower() in ("1", "true")
        EnvVar(k.ALLOW_LONG_MAX_MODEL_LEN, "bool", "0", _ENVS, "one-or-true"),
        # bool(int(os.getenv(..., "1"))) since 0.20.0 (earlier "0": the callers gate by release)
        EnvVar(k.ESTIMATE_CUDAGRAPHS, "bool", None, _ENVS),
        # bool(int(os.environ[...])) if set, else True (0.33.0); "0" before 0.11
        EnvVar(k.USE_FLASHINFER_SAMPLER, "bool", None, _ENVS),
        # bool(int(os.getenv("VLLM_USE_V1", "1"))): vllm/envs.py 0.8.0 - 0.10.2 (gone since)
        EnvVar(k.USE_V1, "bool", None, "vllm/envs.py (0.8.0 - 0.10.2)"),
    )
}
