"""The launch guard: read a real engine command, check it, stop it or fix it, exec it.

``parse_command(argv)`` reads ``vllm serve ...`` / ``python -m sglang.launch_server ...``
into an Intent (``check -- <command>`` uses it too). ``flightcheck run`` (in
:mod:`flightcheck._cli.run`) and the vLLM plugin (``flightcheck._plugin``) share the
decision logic in :mod:`.guard` and the plan application in :mod:`.apply`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from flightcheck._launch.command import EngineCommand


def parse_command(argv: list[str], env: dict[str, str] | None = None) -> EngineCommand:
    """Parse an engine command line (see :mod:`.command`); ``.intent`` is its Intent."""
    from flightcheck._launch.command import parse_command as _parse

    return _parse(argv, env)
