"""The engine knowledge by engine name: which module speaks for ``vllm`` or ``sglang``,
and the rules both share (canonical spellings, which flags take a value).

Only the flags that decide whether a launch works are read; every other flag passes
through untouched. Spellings follow the engines' own parsers: vLLM accepts underscores for
dashes (``--tensor_parallel_size``) and ``-tp=8``; SGLang's launcher has long aliases
(``--tp-size``, ``--tp``) for the same setting.
"""

from __future__ import annotations

from types import ModuleType

from flightcheck._knowledge import sglang, vllm
from flightcheck._knowledge.vllm import Reader
from flightcheck._vocabulary import redaction as _redaction

#: flags that never take a value, whichever engine (so the token after them is not read
#: as their value). Flags not listed and not known to take a value are read with the usual
#: heuristic (the next token is the value unless it is a flag).
BOOL_FLAGS: frozenset[str] = vllm.BOOL_FLAGS | sglang.BOOL_FLAGS
#: flags both engines read with a value, though no intent field comes from them.
_VALUE_FLAGS = ("--config", "--node-rank")


#: words of a flag name that make its value a secret (one rule, with the redaction of text)
SECRET_WORDS = _redaction.SECRET_WORDS
#: what a secret value is replaced with in reports and ``run --dry-run``
REDACTED = "<redacted>"


def is_secret(flag: str) -> bool:
    """True when ``flag`` (``--api-key``, ``--hf_token``, a ``--config`` key) names a secret."""
    return _redaction.is_secret_flag(flag)


def redact_argv(argv: list[str]) -> list[str]:
    """``argv`` with the value of every secret-looking flag replaced by :data:`REDACTED`
    (``--api-key=S`` and ``--api-key S``), and every secret-looking value whatever its flag
    (``hf_...``, ``Authorization: Bearer ...``, ``https://user:pass@...``:
    ``_vocabulary.redaction``); the engine still gets the real ones."""
    from flightcheck._vocabulary.redaction import redact_text

    out: list[str] = []
    hide_next = False
    for tok in argv:
        if hide_next and not tok.startswith("--"):
            out.append(REDACTED)
            hide_next = False
            continue
        hide_next = False
        if tok.startswith("-") and is_secret(tok):
            if "=" in tok:
                tok = tok.split("=", 1)[0] + "=" + REDACTED
            else:
                hide_next = True
        out.append(redact_text(tok))
    return out


def quantizations(engine: str | None) -> frozenset[str]:
    """The ``--quantization`` values the engine accepts: its parser's choices (SGLang) or
    ``QUANTIZATION_METHODS`` (vLLM), from the tables generated from the installed engines
    (``data/<engine>_<version>_args.json``, ``scripts/gen_engine_tables.py``)."""
    import json
    from importlib import resources

    name = "sglang" if engine == "sglang" else "vllm"
    files = sorted(f.name for f in resources.files(f"{__package__}.data").iterdir() if f.name.startswith(f"{name}_"))
    tables = [f for f in files if f.endswith("_args.json")]
    if not tables:
        return frozenset()
    doc = json.loads(resources.files(f"{__package__}.data").joinpath(tables[-1]).read_text(encoding="utf-8"))
    return frozenset(str(v) for v in (doc.get("quantization_choices") or {}).get("values") or ())


def module(engine: str | None) -> ModuleType:
    """The knowledge module of ``engine`` (vLLM unless SGLang is named)."""
    return sglang if engine == "sglang" else vllm


def canonical(flag: str, engine: str | None) -> str:
    """The canonical spelling of an option token's name (no ``=value``).

    ``--tensor_parallel_size`` -> ``--tensor-parallel-size`` (underscores before the first
    dot only, as vLLM does for ``--compilation_config.pass_config``); ``-tp`` ->
    ``--tensor-parallel-size``; SGLang's ``--tp-size`` -> ``--tensor-parallel-size``.
    """
    if flag.startswith("--"):
        head, dot, tail = flag[2:].partition(".")
        flag = "--" + head.replace("_", "-") + dot + tail
    aliases: dict[str, str] = module(engine).ALIASES
    return aliases.get(flag, flag)


def fields_for(engine: str | None) -> dict[str, Reader]:
    """The flag table of ``engine``."""
    fields: dict[str, Reader] = module(engine).FIELDS
    return fields


def takes_value(flag: str, engine: str | None) -> bool | None:
    """True: the flag always takes a value; False: never; None: unknown (guess)."""
    if flag in BOOL_FLAGS:
        return False
    if flag in fields_for(engine) or flag in _VALUE_FLAGS:
        return True
    return None


def flag(engine: str | None, name: str) -> str:
    """How fixes spell an option for ``engine`` (``flag("sglang", "tp")`` -> ``--tp``)."""
    table: dict[str, str] = module(engine).FLAG
    return table[name]


def layout(
    engine: str | None,
    tp: int,
    pp: int = 1,
    dp: int = 1,
    ep: bool = False,
    moe_size: int | None = None,
    pcp: int = 1,
    dcp: int = 1,
) -> str:
    """A parallel layout as the engine's flags."""
    text: str = module(engine).layout(tp, pp, dp, ep, moe_size, pcp, dcp)
    return text
