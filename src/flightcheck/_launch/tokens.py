"""Engine command-line tokens: options with their values, as the engines' parsers split
them, and ``--config`` files expanded into tokens the way the engines expand them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from flightcheck._knowledge import engines as F
from flightcheck._vocabulary.errors import UsageError

_NUMBER = re.compile(r"^-\d+(\.\d+)?$")


@dataclass
class Opt:
    """One option of the engine command: canonical flag, value, where it sits."""

    flag: str
    value: str | None
    start: int  # index into the tokenised list
    stop: int  # exclusive
    source: str = "cli"  # "cli" | "config"
    given: str = ""  # the name as written (``-tp``), for messages


def tokenize(args: list[str], engine: str | None, source: str = "cli") -> tuple[list[Opt], list[tuple[int, str]]]:
    """Split engine arguments into options and positionals ``(index, token)``."""
    opts: list[Opt] = []
    positionals: list[tuple[int, str]] = []
    i, n = 0, len(args)
    while i < n:
        tok = args[i]
        if tok == "--":
            positionals.extend((j, args[j]) for j in range(i + 1, n))
            break
        if not tok.startswith("-") or tok == "-" or _NUMBER.match(tok):
            positionals.append((i, tok))
            i += 1
            continue
        name, eq, value = tok.partition("=")
        flag = F.canonical(name, engine)
        if eq:
            opts.append(Opt(flag, value, i, i + 1, source, name))
            i += 1
            continue
        wants = F.takes_value(flag, engine)
        nxt = args[i + 1] if i + 1 < n else None
        if nxt is not None and (wants or (wants is None and (not nxt.startswith("-") or _NUMBER.match(nxt)))):
            opts.append(Opt(flag, nxt, i, i + 2, source, name))
            i += 2
        else:
            opts.append(Opt(flag, None, i, i + 1, source, name))
            i += 1
    return opts, positionals


#: the largest --config file read (a real one is a few hundred bytes)
MAX_CONFIG = 1 << 20
#: the most nodes a --config document may build, aliases expanded ("billion laughs")
MAX_CONFIG_NODES = 100_000
MAX_CONFIG_DEPTH = 64


def _check_size(data: Any, path: str) -> None:
    """Refuse a document that expands to more than :data:`MAX_CONFIG_NODES` values or
    nests deeper than :data:`MAX_CONFIG_DEPTH`: yaml shares an alias's object, but turning
    it into flag tokens expands every use ("billion laughs": minutes and gigabytes)."""
    from flightcheck._vocabulary.inputs import shown

    count = 0
    stack: list[tuple[Any, int]] = [(data, 0)]
    while stack:
        value, depth = stack.pop()
        count += 1
        if count > MAX_CONFIG_NODES:
            raise UsageError(f"--config {shown(path)}: more than {MAX_CONFIG_NODES:,} values (aliases expanded)")
        if depth > MAX_CONFIG_DEPTH:
            raise UsageError(f"--config {shown(path)}: nested more than {MAX_CONFIG_DEPTH} levels deep")
        if isinstance(value, dict):
            stack.extend((v, depth + 1) for kv in value.items() for v in kv)
        elif isinstance(value, (list, tuple)):
            stack.extend((v, depth + 1) for v in value)


def config_tokens(path: str, engine: str = "vllm") -> tuple[list[str], dict[str, Any]]:
    """A ``--config`` YAML file as flag tokens (flat keys; nested values become JSON, as the
    engines pass them to their dict-valued flags). Booleans and nulls as each engine turns
    them into words: vLLM ``key: false`` is ``--no-key``; SGLang's
    (:func:`sglang_config_words`) differs.

    Raises:
        UsageError: unreadable or not a mapping.
    """
    import json

    import yaml

    from flightcheck._vocabulary.inputs import read_bounded, shown

    raw = read_bounded(path, MAX_CONFIG, "--config")
    try:
        data = yaml.safe_load(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise UsageError(f"--config {shown(path)}: not UTF-8 text") from None
    except yaml.YAMLError as exc:
        raise UsageError(f"--config {shown(path)}: not valid YAML: {str(exc).splitlines()[0]}") from None
    except RecursionError:
        raise UsageError(f"--config {shown(path)}: nested too deeply") from None
    _check_size(data, path)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise UsageError(f"--config {shown(path)}: expected a mapping of flag names to values")
    if F.get(engine).reader.preprocess == "server-args":  # ServerArgs' own --config merge
        return sglang_config_words(data, path), data
    tokens: list[str] = []
    for key, value in data.items():
        flag = f"--{key}"
        if isinstance(value, bool):
            if value:
                tokens.append(flag)
            elif not str(key).startswith("no-"):
                tokens.append(f"--no-{key}")
        elif isinstance(value, list):
            if value:
                tokens += [flag, *(str(v) for v in value)]
        elif isinstance(value, dict):
            tokens += [flag, json.dumps(value)]
        elif value is not None:
            tokens += [flag, str(value)]
    return tokens, data


def sglang_config_words(data: dict[Any, Any], path: str) -> list[str]:
    """SGLang 0.5.23's words for a --config mapping
    (srt/utils/server_args_config_parser.py ``ConfigArgumentMerger._convert_config_to_args``):
    a store_true flag is ``--key`` when true and nothing when false; any other boolean is
    ``--key true`` / ``--key false``; a list is ``--key v1 v2`` (nothing when empty); a
    mapping is its JSON; anything else, None included, ``--key str(value)``. The key is
    written as given (its ``-``/``_`` spelling matters to argparse); it is matched with
    ``_`` for ``-`` against the parser's actions, and a key of an action that takes neither
    nothing nor one value raises ValueError ("Unsupported config option").

    Raises:
        UsageError: an unsupported option (SGLang refuses to start).
    """
    import json

    from flightcheck._knowledge import argtables
    from flightcheck._vocabulary.inputs import shown

    store_true: set[str] = set()
    supported: set[str] = set()
    unsupported: set[str] = set()
    for opt in argtables.options("sglang"):
        keys = {o[2:].replace("-", "_") for o in opt["option_strings"] if o.startswith("--")}
        if opt["action_class"] == "_StoreTrueAction":
            store_true |= keys
            supported |= keys
        elif opt["action_class"] == "_StoreAction" or opt["nargs"] is None:
            supported |= keys
        elif not ({"--config", "--help", "-h"} & set(opt["option_strings"])):
            unsupported |= keys
    words: list[str] = []
    for key, value in data.items():
        norm = str(key).replace("-", "_")
        if norm in unsupported - supported:
            raise UsageError(f"--config {shown(path)}: SGLang refuses the option {key!r} in a config file")
        flag = f"--{key}"
        if isinstance(value, bool):
            if norm in store_true:
                words += [flag] if value else []
            else:
                words += [flag, str(value).lower()]
        elif isinstance(value, list):
            if value:
                words += [flag, *(str(v) for v in value)]
        elif isinstance(value, dict):
            words += [flag, json.dumps(value)]
        else:
            words += [flag, str(value)]
    return words
