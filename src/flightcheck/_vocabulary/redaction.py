"""Values that look like secrets, whatever flag or field carries them.

Redaction by flag name (``--api-key``, ``--hf-token``: ``_knowledge.engines.is_secret``)
misses a token passed where the name says nothing: ``--header 'Authorization: Bearer ...'``,
a ``--model``/``--config`` value with ``hf_...`` in it, a URL with ``user:password@``. So
every text flightcheck prints or writes from an engine command (the intent's
``engine_flags``, ``unparsed``, ``refused``, ``run --dry-run``'s command line and
``--config`` copy) also goes through :func:`redact_text`, which replaces the secret part
only (``https://user:<redacted>@host/``, ``Bearer <redacted>``), leaving the rest legible.

The shapes are the issuers' documented token formats: Hugging Face user access tokens
(``hf_`` + 34 letters), OpenAI / Anthropic keys (``sk-``, ``sk-proj-``, ``sk-ant-``),
GitHub tokens (``ghp_``, ``gho_``, ``ghu_``, ``ghs_``, ``ghr_``, ``github_pat_``), Slack
tokens (``xox[abprs]-``), AWS access key ids (``AKIA`` + 16); HTTP credentials after
``Authorization:`` / ``Proxy-Authorization:`` or a ``Bearer`` / ``Basic`` scheme; the
password of a URL's userinfo (RFC 3986). Each needs enough characters after its prefix
that an ordinary word or path (``sk-learn``, ``hf_cache``) is left alone.
"""

from __future__ import annotations

import re
from functools import cache

REDACTED = "<redacted>"

#: (pattern, replacement): the replacement keeps the non-secret part (group 1). Compiled
#: on the first text to redact (:func:`_rules`): most runs have none, and compiling these
#: took ~4 ms of every ``check``'s start.
_PATTERNS: tuple[tuple[str, str], ...] = (
    # a URL's password: scheme://user:PASSWORD@host
    (r"([A-Za-z][A-Za-z0-9+.\-]*://[^/\s:@]*:)[^/\s@]+(?=@)", rf"\1{REDACTED}"),
    # an HTTP Authorization header's credentials, scheme or not (the rest of the value)
    (
        r"(?i)\b((?:proxy-)?authorization\s*[:=]\s*(?:(?:bearer|basic|token|digest)\s+)?)[^\s\"',;}]+",
        rf"\1{REDACTED}",
    ),
    # a bearer / basic credential anywhere else
    (r"(?i)\b((?:bearer|basic)\s+)[A-Za-z0-9._~+/\-]{8,}=*", rf"\1{REDACTED}"),
    # tokens by their issuers' prefixes
    (r"\bhf_[A-Za-z0-9]{20,}", REDACTED),
    (r"\bsk-(?:proj-|ant-|svcacct-)?[A-Za-z0-9_\-]{20,}", REDACTED),
    (r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})", REDACTED),
    (r"\bxox[abprs]-[A-Za-z0-9\-]{10,}", REDACTED),
    (r"\bAKIA[0-9A-Z]{16}\b", REDACTED),
)


#: words of a flag name that make its value a secret: ``--api-key``, ``--hf-token``,
#: ``--ssl-keyfile-password``; whole words only (``--tokenizer``, ``--max-num-batched-tokens``
#: and ``--kv-cache-dtype`` are not secrets).
SECRET_WORDS = frozenset({"token", "key", "apikey", "secret", "password", "passwd", "credential", "credentials"})


def is_secret_flag(flag: str) -> bool:
    """True when ``flag`` (``--api-key``, ``--hf_token``, ``--API-KEY``, a ``--config`` key)
    names a secret."""
    name = flag.lstrip("-").split("=", 1)[0].lower()
    return any(word in SECRET_WORDS for word in re.split(r"[-_.]", name))


#: a flag and its value inside a message (argparse's "unrecognized arguments: --password S",
#: a copied command line): ``--name=VALUE`` or ``--name VALUE`` (a value is not a flag)
_FLAG_VALUE = r"(?<![\w-])(--?[A-Za-z][\w.-]*)(=|[ \t]+)(?!-)([^\s\"',]+)"


@cache
def _rules() -> tuple[tuple[re.Pattern[str], str], ...]:
    return tuple((re.compile(pattern), repl) for pattern, repl in _PATTERNS)


@cache
def _flag_value() -> re.Pattern[str]:
    return re.compile(_FLAG_VALUE)


def _hide_value(m: re.Match[str]) -> str:
    return f"{m.group(1)}{m.group(2)}{REDACTED}" if is_secret_flag(m.group(1)) else m.group(0)


def redact_text(text: str) -> str:
    """``text`` with every secret-looking value replaced by :data:`REDACTED`: the value of
    a flag named like a secret, wherever the flag appears in the text, and values shaped
    like tokens or credentials whatever carries them."""
    if not text:
        return text
    if "-" in text:
        text = _flag_value().sub(_hide_value, text)
    for pattern, repl in _rules():
        text = pattern.sub(repl, text)
    return text


#: the words that make a key name a secret (the same as ``_knowledge.engines.SECRET_WORDS``,
#: which a test holds this to): ``api_key``, ``hf_token``, ``--api-key``, ``client_secret``
_SECRET_KEY_WORDS = "token|key|apikey|secret|password|passwd|credential|credentials"


@cache
def _assignment() -> re.Pattern[str]:
    # a key whose last word is a secret word, then = or :, then the value (quoted, a list, or
    # a bare word): what an engine echoes in "non-default args: {'api_key': 'S'}",
    # "ServerArgs(api_key='S')" or "--api-key S"
    return re.compile(
        rf"(?i)((?<![\w])(?:--)?(?:[a-z0-9]+[-_.])*(?:{_SECRET_KEY_WORDS})['\"]?\s*[:=]\s*)"
        r"('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|\[[^\]]*\]|[^\s,)}\]]+)"
        rf"|((?<![\w-])--(?:[a-z0-9]+-)*(?:{_SECRET_KEY_WORDS})\s+)([^\s-][^\s]*)"
    )


def redact_assignments(text: str) -> str:
    """``text`` with the value of every secret-named key replaced (``'api_key': 'S'``,
    ``hf_token=S``, ``--api-key S``), and every secret-looking value (:func:`redact_text`).

    For text an engine wrote about its own arguments (a log's ``non-default args`` line),
    where the key names the secret and the value has no recognisable shape.
    """
    if not text:
        return text

    def repl(m: re.Match[str]) -> str:
        if m.group(1) is not None:
            value = m.group(2)
            if value in ("None", "null", "''", '""', "[]"):
                return m.group(0)
            quote = value[0] if value[0] in "'\"" else ""
            return f"{m.group(1)}{quote}{REDACTED}{quote}"
        return f"{m.group(3)}{REDACTED}"

    return redact_text(_assignment().sub(repl, text))


def has_secret(text: str) -> bool:
    """True when :func:`redact_text` would change ``text``."""
    return redact_text(text) != text


def redact_deep(value: object) -> object:
    """:func:`redact_text` on every string of a JSON/YAML-like value (dicts, lists)."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {k: redact_deep(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_deep(v) for v in value]
    return value
