"""The engines by name: the one registration of each :class:`Engine` (``get(name)``,
``names()``), and the rules every engine shares (canonical spellings, which flags take a
value, secrets).

A new engine is a knowledge package with an ``engine.py`` giving ``ENGINE`` and one line in
:data:`_REGISTERED`; its name joins ``_vocabulary.engine.EngineName``. Nothing else compares
an engine's name (``tests/test_architecture.py`` counts: zero).

Only the flags that decide whether a launch works are read; every other flag passes
through untouched. Spellings follow the engines' own parsers: vLLM accepts underscores for
dashes (``--tensor_parallel_size``) and ``-tp=8``; SGLang's launcher has long aliases
(``--tp-size``, ``--tp``) for the same setting.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flightcheck._knowledge.sglang.engine import ENGINE as _SGLANG
from flightcheck._knowledge.vllm.engine import ENGINE as _VLLM
from flightcheck._vocabulary import redaction as _redaction
from flightcheck._vocabulary.engine import ENGINE_NAMES, KNOWN_ENGINES, Engine, EngineName, Reader
from flightcheck._vocabulary.errors import UsageError

#: the one registration of each engine, by name (the first is the default)
_REGISTERED: dict[str, Engine] = {e.name: e for e in (_VLLM, _SGLANG)}
#: the engine of a launch that names none (``--engine`` absent; the plugin's)
DEFAULT: EngineName = "vllm"


def register(engine: Engine) -> None:
    """Add an engine (a test's fake; a new engine registers in :data:`_REGISTERED`)."""
    _REGISTERED[engine.name] = engine
    if engine.name not in KNOWN_ENGINES:
        KNOWN_ENGINES.append(engine.name)
    global BOOL_FLAGS
    BOOL_FLAGS = frozenset().union(*(e.reader.bool_flags for e in _REGISTERED.values()))


def unregister(name: str) -> None:
    """Remove an engine :func:`register` added (tests)."""
    if name in ENGINE_NAMES:
        raise ValueError(f"{name} is a built-in engine")
    _REGISTERED.pop(name, None)
    if name in KNOWN_ENGINES:
        KNOWN_ENGINES.remove(name)
    global BOOL_FLAGS
    BOOL_FLAGS = frozenset().union(*(e.reader.bool_flags for e in _REGISTERED.values()))


def names() -> tuple[str, ...]:
    """The registered engines' names, the default first."""
    return tuple(_REGISTERED)


def get(name: str | None) -> Engine:
    """The engine named ``name`` (None: the default, vLLM).

    Raises:
        UsageError: no engine of that name (one line; never mapped to another engine).
    """
    if name is None:
        return _REGISTERED[DEFAULT]
    found = _REGISTERED.get(name)
    if found is None:
        raise UsageError(f"--engine {name!r}: expected one of {', '.join(_REGISTERED)}")
    return found


def reader_spec(name: str | None) -> dict[str, Any]:
    """What the engine-reader child is told about the engine ``name`` (``ReaderRules.child``,
    JSON-able), with the environment every registered engine's import wants: one venv may
    hold several engines, and one engine's import may pull in another's."""
    engine = get(name)
    spec = dict(engine.reader.child)
    env: dict[str, str] = {}
    defaults: dict[str, str] = {}
    for e in _REGISTERED.values():
        env.update(e.reader.child.get("env", {}))
        defaults.update(e.reader.child.get("env_defaults", {}))
    spec["env"], spec["env_defaults"] = env, defaults
    return spec


def find(name: str | None) -> Engine | None:
    """The engine named ``name``, or None (a name read from facts, where an unknown one is
    a fact to report, not a usage error)."""
    return _REGISTERED.get(name) if name is not None else None


def by_cli(word: str) -> Engine | None:
    """The engine whose console script is ``word`` (``vllm`` of ``vllm serve``), if any."""
    return next((e for e in _REGISTERED.values() if e.command.cli == word), None)


def by_module(module: str) -> tuple[Engine, str, bool] | None:
    """(engine, form, whether ``serve`` follows) of a ``python -m <module>`` entry point."""
    for e in _REGISTERED.values():
        if module in e.command.modules:
            form, serve = e.command.modules[module]
            return e, form, serve
    return None


#: flags that never take a value, whichever engine (so the token after them is not read
#: as their value). Flags not listed and not known to take a value are read with the usual
#: heuristic (the next token is the value unless it is a flag).
BOOL_FLAGS: frozenset[str] = frozenset().union(*(e.reader.bool_flags for e in _REGISTERED.values()))
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
    from flightcheck._knowledge import argtables

    name = get(engine).name
    if name not in argtables.TABLE_VERSION:
        return frozenset()
    return frozenset(str(v) for v in argtables.values(name, "quantization_choices"))


def canonical(flag: str, engine: str | None) -> str:
    """The canonical spelling of an option token's name (no ``=value``).

    ``--tensor_parallel_size`` -> ``--tensor-parallel-size`` (underscores before the first
    dot only, as vLLM does for ``--compilation_config.pass_config``); ``-tp`` ->
    ``--tensor-parallel-size``; SGLang's ``--tp-size`` -> ``--tensor-parallel-size``.
    """
    if flag.startswith("--"):
        head, dot, tail = flag[2:].partition(".")
        flag = "--" + head.replace("_", "-") + dot + tail
    return get(engine).reader.aliases.get(flag, flag)


def fields_for(engine: str | None) -> Mapping[str, Reader]:
    """The flag table of ``engine``."""
    return get(engine).reader.fields


def takes_value(flag: str, engine: str | None) -> bool | None:
    """True: the flag always takes a value; False: never; None: unknown (guess)."""
    if flag in BOOL_FLAGS:
        return False
    if flag in fields_for(engine) or flag in _VALUE_FLAGS:
        return True
    return None


def flag(engine: str | None, name: str) -> str:
    """How fixes spell an option for ``engine`` (``flag("sglang", "tp")`` -> ``--tp``)."""
    return get(engine).reader.flag[name]


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
    return get(engine).reader.layout(tp, pp, dp, ep, moe_size, pcp, dcp)
