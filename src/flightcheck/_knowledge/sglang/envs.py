"""The SGLang environment variables flightcheck reads, each declared once: kind, default and
how SGLang spells a boolean, as ``python/sglang/srt/environ.py`` ``Envs`` declares them
(0.5.23). Read them with :mod:`flightcheck._knowledge.envread`."""

from __future__ import annotations

from flightcheck._knowledge.sglang import options as k
from flightcheck._vocabulary.engine import EnvVar

_ENVIRON = "sglang/srt/environ.py (0.5.23)"

DECLARED: dict[str, EnvVar] = {
    v.name: v
    for v in (
        # SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK = EnvBool(True)
        EnvVar(k.UNBALANCED_CHECK_ENV, "bool", "true", _ENVIRON, "words"),
        # SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN = EnvBool(False)
        EnvVar(k.ALLOW_LONG_MAX_MODEL_LEN, "bool", "false", _ENVIRON, "words"),
    )
}
