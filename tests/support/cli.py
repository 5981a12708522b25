"""Running the command line the way a user does: ``python -m flightcheck`` in a fresh process."""

from __future__ import annotations

import os
import subprocess
import sys


def cli(
    *args: str,
    env: dict[str, str] | None = None,
    timeout: float = 120,
    cwd: str | None = None,
    input_text: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m flightcheck ARGS`` in a fresh process (``input_text`` on a stdin pipe)."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "flightcheck", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
        cwd=cwd,
        input=input_text,
        check=False,
    )


def cli_in_process(*args: str) -> tuple[int, str, str]:
    """``flightcheck ARGS`` in this process (fast, for fuzzing): (exit code, stdout, stderr).
    The environment is this process's; ``--example`` keeps a run off the live host."""
    import contextlib
    import io

    from flightcheck._cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(list(args))
        except SystemExit as exc:  # --help, --version
            rc = exc.code if isinstance(exc.code, int) else 2
    return rc, out.getvalue(), err.getvalue()
