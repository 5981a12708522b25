"""Which interpreter runs the engine: ``--python``, else the one behind ``vllm`` / ``sglang``
on the engine's PATH (its shebang), else flightcheck's own.

The engine's interpreter decides which torch, FlashInfer and Python headers the launch
gets, and it is often another venv than the one flightcheck runs in.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping

from .._errors import UsageError
from .._intent import Intent

#: Console scripts that reveal an engine's interpreter, per engine.
_SCRIPTS = {"vllm": ("vllm",), "sglang": ("sglang",)}


def shebang_python(script: str) -> str | None:
    """The interpreter named by a console script's ``#!`` line, when it is a Python."""
    try:
        with open(script, "rb") as fh:
            first = fh.readline(512)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    parts = first[2:].decode(errors="replace").split()
    if not parts:
        return None
    exe = parts[0]
    if os.path.basename(exe) == "env" and len(parts) > 1:  # "#!/usr/bin/env python3"
        exe = shutil.which(parts[1]) or parts[1]
    # pip writes "#!/bin/sh" + exec trampolines for long paths; those are not handled here
    return exe if "python" in os.path.basename(exe) else None


def engine_python(intent: Intent, env: Mapping[str, str], explicit: str | None = None) -> tuple[str, str]:
    """(interpreter path, how it was chosen).

    Raises:
        UsageError: ``--python`` names something that is not an executable file.
    """
    if explicit:
        path = explicit if os.sep in explicit else (shutil.which(explicit, path=env.get("PATH")) or explicit)
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            raise UsageError(f"--python {explicit}: not an executable file")
        return path, "--python"
    for script in _SCRIPTS.get(intent.engine, ()):
        found = shutil.which(script, path=env.get("PATH", os.defpath))
        if found:
            exe = shebang_python(found)
            if exe and os.path.isfile(exe):
                return exe, f"shebang of {found}"
    return sys.executable, "flightcheck's own interpreter"
