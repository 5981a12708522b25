"""Read an engine command line into an :class:`~flightcheck._vocabulary.intent.Intent`.

Understood forms (an ``env [-i] [-u NAME] [NAME=VALUE]...`` prefix and wrappers such as
``numactl ...`` in front are allowed):

- ``vllm serve MODEL [flags]`` and ``python -m vllm.entrypoints.cli.main serve ...``
- ``python -m vllm.entrypoints.openai.api_server --model MODEL [flags]``
- ``python -m sglang.launch_server --model-path MODEL [flags]`` and ``sglang serve ...``

``--config file.yaml`` is read the way the engines read it: its keys are flags, placed
before the command line's, so the command line wins. Nothing here executes anything; what
cannot be read is listed in ``Intent.unparsed`` and the command still runs untouched.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from typing import Any

from flightcheck._knowledge import vllm
from flightcheck._vocabulary.errors import UsageError
from flightcheck._vocabulary.intent import Intent

_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")
_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")

#: ``python -m MODULE`` -> (engine, form, the module expects a subcommand first)
_MODULES = {
    "vllm.entrypoints.openai.api_server": ("vllm", "vllm-api-server", False),
    "vllm.entrypoints.launchers.api_server.entry": ("vllm", "vllm-api-server", False),
    "vllm.entrypoints.cli.main": ("vllm", "vllm-cli", True),
    "sglang.launch_server": ("sglang", "sglang-launch-server", False),
    "sglang.cli.main": ("sglang", "sglang-cli", True),
}


@dataclass
class EngineCommand:
    """A parsed engine command. ``argv`` is exactly what will be executed."""

    argv: list[str]
    intent: Intent
    engine: str | None = None  # None: not recognised
    form: str = "unknown"
    start: int = 0  # index in argv of the first engine argument (after ``serve`` / the module)
    at: int = 0  # index in argv where the engine invocation starts (``vllm`` / ``python``)
    env_prefix: dict[str, str | None] = field(default_factory=dict)  # from ``env``: None = unset (-u)
    env_clear: bool = False  # ``env -i``
    env_end: int = 0  # index in argv of the command ``env`` runs (0: no ``env`` prefix)
    config: str | None = None  # the --config file, as given
    config_data: dict[str, Any] | None = None  # its parsed content
    config_problem: str | None = None  # why it could not be read (the engine would refuse it)
    #: the one read of --config: (path, its tokens) or (path, why not); a FIFO delivers
    #: once, and a second read would wait out its first-byte bound again
    config_read: tuple[str, list[str] | str] | None = None

    @property
    def recognised(self) -> bool:
        """Whether flightcheck understood which engine this launches."""
        return self.engine is not None

    def engine_env(self, base: dict[str, str]) -> dict[str, str]:
        """The environment the engine will see: ``base`` with the ``env`` prefix applied."""
        env = {} if self.env_clear else dict(base)
        for name, value in self.env_prefix.items():
            if value is None:
                env.pop(name, None)
            else:
                env[name] = value
        return env


def _recognise(argv: list[str]) -> tuple[int, str | None, str, int]:
    """(index where the engine invocation starts, engine, form, index of its first argument)."""
    for i, tok in enumerate(argv):
        base = os.path.basename(tok)
        nxt = argv[i + 1] if i + 1 < len(argv) else None
        if base in ("vllm", "sglang") and nxt == "serve":
            return i, base, f"{base}-cli", i + 2
        if _PYTHON.match(base):
            j = i + 1
            while j < len(argv) and argv[j].startswith("-") and argv[j] != "-m":
                j += 2 if argv[j] in ("-X", "-W") else 1
            if j + 1 < len(argv) and argv[j] == "-m" and argv[j + 1] in _MODULES:
                engine, form, sub = _MODULES[argv[j + 1]]
                k = j + 2
                if sub:
                    if k < len(argv) and argv[k] == "serve":
                        return i, engine, form, k + 1
                    return i, None, "unknown", 0
                return i, engine, form, k
            if (
                j < len(argv)
                and os.path.basename(argv[j]) in ("vllm", "sglang")
                and j + 1 < len(argv)
                and argv[j + 1] == "serve"
            ):
                return i, os.path.basename(argv[j]), f"{os.path.basename(argv[j])}-cli", j + 2
    return 0, None, "unknown", 0


def _env_prefix(argv: list[str]) -> tuple[dict[str, str | None], bool, int]:
    """Assignments of a leading ``env`` (``env -i A=1 -u B cmd``), whether it clears the
    environment, and the index of the command it runs (0 when there is no ``env``)."""
    out: dict[str, str | None] = {}
    clear = False
    if not argv or os.path.basename(argv[0]) != "env":
        return out, clear, 0
    i = 1
    while i < len(argv):
        tok = argv[i]
        if tok in ("-i", "--ignore-environment", "-"):
            clear = True
        elif tok in ("-u", "--unset") and i + 1 < len(argv):
            out[argv[i + 1]] = None
            i += 1
        elif tok.startswith("--unset="):
            out[tok.partition("=")[2]] = None
        elif tok.startswith("-u") and len(tok) > 2:  # getopt's attached form: -uNAME
            out[tok[2:]] = None
        elif _ASSIGN.match(tok):
            name, _, value = tok.partition("=")
            out[name] = value
        else:
            break
        i += 1
    return out, clear, i


def _interpreter(argv: list[str], at: int, form: str, env: dict[str, str]) -> str | None:
    """The engine's Python: the ``python`` given, or the one behind the ``vllm`` script."""
    from flightcheck._collect.engine import shebang_python

    exe = argv[at]
    found = exe if os.sep in exe else shutil.which(exe, path=env.get("PATH", os.defpath))
    if not found or not os.path.isfile(found):
        return None
    if form.endswith("-cli") and not _PYTHON.match(os.path.basename(exe)):
        found = shebang_python(found)
        if not found or not os.path.isfile(found):
            return None
    return found if os.access(found, os.X_OK) else None


def parse_command(argv: list[str], env: dict[str, str] | None = None) -> EngineCommand:
    """Parse an engine command line. Never raises for what it cannot read: those items go to
    ``intent.unparsed`` (an empty command is a usage error)."""
    if not argv:
        raise UsageError(f"give the engine command after --, e.g. -- vllm serve MODEL {vllm.layout(8)}")
    argv = list(argv)
    prefix, clear, env_end = _env_prefix(argv)
    cmd = EngineCommand(argv, Intent(), env_prefix=prefix, env_clear=clear, env_end=env_end)
    at, engine, form, start = _recognise(argv)
    if engine is None:
        cmd.intent = Intent(
            unparsed=[f"not a vLLM or SGLang launch: {' '.join(argv[:3])}{' ...' if len(argv) > 3 else ''}"]
        )
        return cmd
    cmd.engine, cmd.form, cmd.start, cmd.at = engine, form, start, at
    from flightcheck._launch.intent_read import read_intent

    read_intent(cmd)
    engine_env = cmd.engine_env(dict(os.environ if env is None else env))
    python = _interpreter(argv, at, form, engine_env)
    if python:
        cmd.intent.python = python
    return cmd
