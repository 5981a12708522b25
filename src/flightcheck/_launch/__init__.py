"""The launch guard: read a real engine command, check it, stop it or fix it, exec it.

``parse_command(argv)`` reads ``vllm serve ...`` / ``python -m sglang.launch_server ...``
into an Intent (``check -- <command>`` uses it too); ``main(args, command)`` is
``flightcheck run``. The vLLM plugin (``flightcheck._plugin``) shares the decision logic
in :mod:`.guard` and the plan application in :mod:`.apply`.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .command import EngineCommand


def parse_command(argv: list[str], env: dict[str, str] | None = None) -> EngineCommand:
    """Parse an engine command line (see :mod:`.command`); ``.intent`` is its Intent."""
    from .command import parse_command as _parse

    return _parse(argv, env)


def main(args: argparse.Namespace, command: list[str]) -> int:
    """``flightcheck run``: returns an exit code only when the engine is not started."""
    from .run import main as _main

    return _main(args, command)
