"""The SGLang environment variables flightcheck reads, by name: each declared once, beside
its name (kind, default, how SGLang spells a boolean: ``python/sglang/srt/environ.py``
``Envs``, 0.5.23). Read them with :mod:`flightcheck._knowledge.envread`."""

from __future__ import annotations

from flightcheck._knowledge.sglang.memory import UNBALANCED_CHECK
from flightcheck._knowledge.sglang.options import ALLOW_LONG
from flightcheck._vocabulary.engine import EnvVar

DECLARED: dict[str, EnvVar] = {v.name: v for v in (UNBALANCED_CHECK, ALLOW_LONG)}
