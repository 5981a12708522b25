"""One reader for the engines' environment variables.

Each variable is declared once (:class:`EnvVar`: its name, kind, default and the engine file
it was read in), in its engine's package (``_knowledge/vllm/env.py``,
``_knowledge/sglang/envs.py``), and read here the way that engine reads it: the engines do
not agree on what a boolean is, and each variable follows its own engine's rule
(:data:`Spelling`):

- ``"int"``: vLLM's ``bool(int(os.getenv(NAME, default)))`` (and ``maybe_convert_bool``):
  any integer, ``"0"`` off; a word (``"true"``) makes vLLM raise at its first read, so
  flightcheck cannot tell what the launch gets (None).
- ``"one-or-true"``: vLLM's ``os.environ.get(NAME, default).strip().lower() in ("1", "true")``.
- ``"words"``: SGLang's ``EnvBool`` (srt/environ.py): ``true/1/yes/y`` on, ``false/0/no/n``
  off (case-insensitive, not stripped); anything else warns and takes the default.
"""

from __future__ import annotations

from collections.abc import Mapping

from flightcheck._vocabulary.engine import EnvVar, Spelling

__all__ = ["EnvVar", "Spelling", "enabled", "given", "raw"]

Env = Mapping[str, str | None] | None

_SGLANG_TRUE = ("true", "1", "yes", "y")
_SGLANG_FALSE = ("false", "0", "no", "n")


def raw(var: EnvVar, env: Env) -> str | None:
    """The text the launch sets, None when unset (an empty value is unset)."""
    text = (env or {}).get(var.name)
    return None if text is None or text.strip() == "" else text


def _bool(var: EnvVar, text: str) -> bool | None:
    if var.spelling == "int":
        try:
            return bool(int(text))
        except ValueError:
            return None
    if var.spelling == "one-or-true":
        return text.strip().lower() in ("1", "true")
    if var.spelling == "words":
        low = text.lower()
        return True if low in _SGLANG_TRUE else False if low in _SGLANG_FALSE else None
    raise ValueError(f"{var.name}: not a boolean variable")


def given(var: EnvVar, env: Env) -> bool | None:
    """The boolean the launch sets, None when it sets none (or none the engine can read):
    the caller's default applies (a release-dependent one, say)."""
    text = raw(var, env)
    return None if text is None else _bool(var, text)


def enabled(var: EnvVar, env: Env) -> bool | None:
    """The boolean the engine runs with: the launch's, else the declared default (SGLang: an
    unreadable value takes the default too); None when neither decides."""
    value = given(var, env)
    if value is not None:
        return value
    if raw(var, env) is not None and var.spelling == "int":
        return None  # vLLM raises on it
    return _bool(var, var.default) if var.default is not None else None
