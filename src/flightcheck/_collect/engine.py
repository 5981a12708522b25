"""Which interpreter runs the engine: ``--python``, else the one behind ``vllm`` / ``sglang``
on the engine's PATH (its shebang), else flightcheck's own.

The engine's interpreter decides which torch, FlashInfer and Python headers the launch
gets, and it is often another venv than the one flightcheck runs in.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Mapping

from flightcheck._vocabulary.errors import UsageError
from flightcheck._vocabulary.intent import Intent

#: Console scripts that reveal an engine's interpreter, per engine.
_SCRIPTS = {"vllm": ("vllm",), "sglang": ("sglang",)}
#: pip's launcher when the interpreter's path is too long for a ``#!`` line (Linux allows
#: 127 bytes): ``#!/bin/sh`` then ``'''exec' /long/venv/bin/python "$0" "$@"``.
_TRAMPOLINE = re.compile(r"^'''exec' (\S+) \"\$0\"", re.MULTILINE)


def shebang_python(script: str, path: str | None = None) -> str | None:
    """The Python interpreter a console script runs with: the one its ``#!`` line names,
    or the one pip's ``#!/bin/sh`` trampoline execs. ``path`` resolves ``#!/usr/bin/env
    python3`` (default: this process's PATH)."""
    try:
        with open(script, "rb") as fh:
            head = fh.read(2048).decode(errors="replace")
    except OSError:
        return None
    first = head.split("\n", 1)[0]
    if not first.startswith("#!"):
        return None
    parts = first[2:].split()
    if not parts:
        return None
    exe = parts[0]
    if os.path.basename(exe) == "env" and len(parts) > 1:  # "#!/usr/bin/env python3"
        exe = shutil.which(parts[1], path=path) or parts[1]
    if "python" in os.path.basename(exe):
        return exe
    m = _TRAMPOLINE.search(head) if os.path.basename(exe) == "sh" else None
    return m.group(1) if m else None


def engine_python(intent: Intent, env: Mapping[str, str], explicit: str | None = None) -> str:
    """The engine's interpreter.

    Raises:
        UsageError: ``--python`` names something that is not an executable file.
    """
    search = env.get("PATH", os.defpath)
    if explicit:
        path = explicit if os.sep in explicit else (shutil.which(explicit, path=env.get("PATH")) or explicit)
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            raise UsageError(f"--python {explicit}: not an executable file")
        return path
    for script in _SCRIPTS.get(intent.engine, ()):
        found = shutil.which(script, path=search)
        if found:
            exe = shebang_python(found, search)
            if exe and os.path.isfile(exe):
                return exe
    return sys.executable
