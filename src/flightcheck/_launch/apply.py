"""Apply a fallback plan to an engine command: environment, arguments, config file.

Everything the plan does not name stays exactly as the user wrote it. A variable the plan
sets is also said in an ``env`` in front of the command where that ``env`` would otherwise
undo it (``env NAME=...``, ``env -u NAME``, ``env -i``);
``VLLM_RAY_EXTRA_ENV_VARS_TO_COPY`` is extended, never replaced. A flag to drop that sits in
the ``--config`` file is removed from a copy of the file, and the command is pointed at the copy.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from flightcheck._knowledge import engines as F
from flightcheck._knowledge import vllm
from flightcheck._launch.tokens import tokenize

if TYPE_CHECKING:
    from flightcheck._launch.command import EngineCommand
    from flightcheck._vocabulary.plan import Plan
    from flightcheck._vocabulary.results import PlanStep

#: comma-separated list variables that a plan extends instead of replacing
LIST_VARS = vllm.LIST_VARS


@dataclass
class Change:
    """One change made to the launch, for the log line."""

    what: str  # "set VLLM_ALLREDUCE_USE_SYMM_MEM=0", "drop --enable-symm-mem", ...
    code: str
    why: str


@dataclass
class Launch:
    """The command and environment that will be executed."""

    argv: list[str]
    env: dict[str, str]
    changes: list[Change] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # steps that could not be applied
    env_set: dict[str, str] = field(default_factory=dict)  # name -> value (the fallback's env)
    config_copy: str | None = None  # the --config copy written for the engine (run --dry-run removes it)


def _merge_list(old: str | None, new: str) -> str:
    items = [x for x in (old or "").split(",") if x]
    for x in new.split(","):
        if x and x not in items:
            items.append(x)
    return ",".join(items)


def _set_env(launch: Launch, cmd: EngineCommand, step: PlanStep, prefix_adds: list[str]) -> None:
    value = step.value or ""
    old = cmd.engine_env(launch.env).get(step.name)  # what the engine would see without this step
    if step.name in LIST_VARS:
        value = _merge_list(old, value)
    if old == value:
        return
    launch.env[step.name] = value
    launch.env_set[step.name] = value
    # an `env` in front of the engine that assigns, unsets (-u) or clears (-i) this name
    # would undo the fallback: say it in that `env` too (a new assignment goes last, as
    # env applies its assignments after -i / -u)
    if cmd.env_clear or step.name in cmd.env_prefix:
        assigned = [i for i, tok in enumerate(launch.argv[: cmd.env_end]) if tok.startswith(f"{step.name}=")]
        for i in assigned:
            launch.argv[i] = f"{step.name}={value}"
        if not assigned:
            prefix_adds.append(f"{step.name}={value}")
    was = f" (was {old})" if old is not None else ""
    launch.changes.append(Change(f"set {step.name}={value}{was}", step.code, step.why))


def _step_key(engine: str | None, flag: str) -> tuple[str, bool] | None:
    """The parser destination (plus a dotted path) a plan step's flag sets, and whether the
    step's spelling is the negative one; None when the engine's table has no such option."""
    from flightcheck._launch.engine_args import resolve_option

    if engine is None:
        return None
    found = resolve_option(engine, flag)
    if found is None:
        return None
    info, dotted, _ = found
    return (f"{info.dest}.{dotted}" if dotted else info.dest), info.negative


def _cli_occurrences(argv: list[str], cmd: EngineCommand, flag: str) -> list[tuple[int, int, str | None]]:
    """(start, stop, value) of each occurrence of ``flag`` on the engine's command line
    (indices into ``argv``), every spelling the engine's parser accepts: abbreviations,
    ``--flag=value``, aliases, both sides of a boolean pair, vLLM's ``_`` spelling. A
    ``--a.b`` step matches only that key; a whole ``--a`` step matches ``--a`` and its keys."""
    from flightcheck._launch.engine_args import occurrences

    wanted = _step_key(cmd.engine, flag)
    if wanted is None or cmd.engine is None:  # not an option of the table: the old matching by name
        want = F.canonical(flag, cmd.engine)
        opts, _ = tokenize(argv[cmd.start :], cmd.engine)
        return [(cmd.start + o.start, cmd.start + o.stop, o.value) for o in opts if o.flag == want]
    key = wanted[0]
    found = occurrences(cmd.engine, argv[cmd.start :])
    spans = [
        (cmd.start + o.start, cmd.start + o.stop, o.value)
        for o in found
        if o.key == key or ("." not in key and o.key.startswith(key + "."))
    ]
    # a spelling the parser does not take (SGLang's argparse has no ``_`` forms) is matched
    # by name as before, outside the options the parser does take: dropping a flag the
    # engine would refuse anyway can only help
    taken = {i for o in found for i in range(o.start, o.stop)}
    want = F.canonical(flag, cmd.engine)
    opts, _ = tokenize(argv[cmd.start :], cmd.engine)
    spans += [
        (cmd.start + o.start, cmd.start + o.stop, o.value) for o in opts if o.flag == want and o.start not in taken
    ]
    return sorted(set(spans))


def _already(argv: list[str], cmd: EngineCommand, step: PlanStep) -> bool:
    """Whether the command already says exactly what an add_arg step says (one occurrence,
    the same side of a boolean pair, the same value)."""
    from flightcheck._launch.engine_args import occurrences

    wanted = _step_key(cmd.engine, step.name)
    if wanted is None or cmd.engine is None:
        spans = _cli_occurrences(argv, cmd, step.name)
        return len(spans) == 1 and spans[0][2] == step.value
    key, negative = wanted
    same = [o for o in occurrences(cmd.engine, argv[cmd.start :]) if o.key == key or o.key.startswith(key + ".")]
    return len(same) == 1 and same[0].key == key and same[0].negative == negative and same[0].value == step.value


def _delete(argv: list[str], spans: list[tuple[int, int, str | None]]) -> None:
    for start, stop, _ in sorted(spans, reverse=True):
        del argv[start:stop]


def _drop_from_config(config: dict[Any, Any], engine: str | None, flag: str) -> bool:
    """Remove ``flag`` from ``config`` (a copy of the --config file's content); True when it was there."""
    wanted = _step_key(engine, flag)
    if wanted is None:
        want = F.canonical(flag, engine)
        keys = [k for k in config if F.canonical(f"--{k}", engine) == want]
    else:  # a key of the file is a flag to the engine's parser: every spelling it accepts
        keys = [k for k in config if (_step_key(engine, f"--{k}") or ("",))[0] == wanted[0]]
    for k in keys:
        del config[k]
    return bool(keys)


def _use_config_copy(launch: Launch, cmd: EngineCommand, config: dict[Any, Any]) -> None:
    """Write ``config`` to a new file and point the command's --config at it (the user's
    file is never written)."""
    import yaml

    fd, path = tempfile.mkstemp(prefix="flightcheck-config-", suffix=".yaml")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        yaml.safe_dump(config, fh, sort_keys=False)
    launch.config_copy = path
    for start, stop, _ in _cli_occurrences(launch.argv, cmd, "--config")[:1]:
        launch.argv[start:stop] = ["--config", path]


def apply_plan(plan: Plan, cmd: EngineCommand, env: dict[str, str]) -> Launch:
    """The launch after the plan: a new argv and a new environment (inputs untouched)."""
    launch = Launch(list(cmd.argv), dict(env))
    config = dict(cmd.config_data or {})  # what the --config file says, less the flags dropped
    prefix_adds: list[str] = []  # inserted last: the argument steps index argv past the prefix
    for step in plan.steps:
        if step.kind == "env":
            _set_env(launch, cmd, step, prefix_adds)
            continue
        if not cmd.recognised:
            launch.problems.append(
                f"{step.kind} {step.name}: flightcheck could not read the engine command to change its arguments"
            )
            continue
        if step.kind == "drop_arg":
            spans = _cli_occurrences(launch.argv, cmd, step.name)
            in_config = _drop_from_config(config, cmd.engine, step.name)
            if spans or in_config:
                _delete(launch.argv, spans)
                where = " (from the --config file, via a copy)" if in_config and not spans else ""
                launch.changes.append(Change(f"drop {step.name}{where}", step.code, step.why))
        elif step.kind == "add_arg":
            spans = _cli_occurrences(launch.argv, cmd, step.name)
            tokens = [step.name] + ([step.value] if step.value is not None else [])
            if _already(launch.argv, cmd, step):
                continue  # the command already says exactly this
            _delete(launch.argv, spans)
            launch.argv.extend(tokens)
            launch.changes.append(Change(f"add {' '.join(tokens)}", step.code, step.why))
        else:
            launch.problems.append(f"unknown plan step {step.kind} {step.name}")
    if len(config) != len(cmd.config_data or {}):
        _use_config_copy(launch, cmd, config)
    stop = launch.argv[cmd.env_end] if cmd.env_end < len(launch.argv) else ""
    if prefix_adds and stop.startswith("-"):  # an option of env that flightcheck does not read
        launch.problems.append(
            f"set {', '.join(prefix_adds)}: the env in front of the engine would undo it (option {stop} not understood)"
        )
    else:
        launch.argv[cmd.env_end : cmd.env_end] = prefix_adds
    return launch
