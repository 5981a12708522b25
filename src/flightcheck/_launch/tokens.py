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


def config_tokens(path: str) -> tuple[list[str], dict[str, Any]]:
    """A ``--config`` YAML file as flag tokens (flat keys; nested values become JSON, as the
    engines pass them to their dict-valued flags).

    Raises:
        UsageError: unreadable or not a mapping.
    """
    import json

    import yaml

    try:
        with open(path, encoding="utf-8") as fh:
            data = yaml.safe_load(fh)
    except OSError as exc:
        raise UsageError(f"--config {path}: cannot read: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise UsageError(f"--config {path}: not valid YAML: {str(exc).splitlines()[0]}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise UsageError(f"--config {path}: expected a mapping of flag names to values")
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
