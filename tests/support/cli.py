"""Running the command line the way a user does: ``python -m flightcheck`` in a fresh process."""

from __future__ import annotations

import os
import subprocess
import sys


def cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120, cwd: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m flightcheck ARGS`` in a fresh process."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "flightcheck", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
        cwd=cwd,
        check=False,
    )
