"""The vLLM plugin run the way vLLM runs it: its entry point loaded and called in a fresh
process (the helper of tests/plugin/test_plugin.py, shared with the probe tests).

The driver sets ``sys.argv`` to a vLLM command line, loads the ``vllm.general_plugins``
entry point named ``flightcheck`` with importlib.metadata and calls it, then prints what
happened. A fake ``torch`` package is first on the path, so any import of torch would show
in ``sys.modules``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

DRIVER = r"""
import json, os, sys
from importlib.metadata import entry_points
sys.argv = json.loads(os.environ.pop("PLUGIN_ARGV"))
argv_before = list(sys.argv)
for name in filter(None, os.environ.pop("PLUGIN_IMPORT", "").split(",")):  # what vLLM imported before
    __import__(name)
(ep,) = [e for e in entry_points(group="vllm.general_plugins") if e.name == "flightcheck"]
register = ep.load()
if os.environ.pop("PLUGIN_RAW", None):  # as vLLM calls it: nothing caught
    register()
    outcome = "returned"
else:
    try:
        register()
        register()  # vLLM may load plugins again in the same process
        outcome = "returned"
    except SystemExit as exc:
        outcome = f"exit:{exc.code}"
print(json.dumps({
    "outcome": outcome, "pid": os.getpid(), "env": dict(os.environ), "argv": sys.argv, "argv_before": argv_before,
    "modules": sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "cuda", "pynvml", "flightcheck")),
}))
"""


def plugin(
    tmp_path: Path, argv: list[str], facts: list[Path] | None = None, *, raw: bool = False, **env: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any] | None]:
    fake = tmp_path / "fakepkgs" / "torch"
    fake.mkdir(parents=True, exist_ok=True)
    (fake / "__init__.py").write_text("# stands in for torch: flightcheck must never import it\n")
    full = {k: v for k, v in os.environ.items() if not k.startswith("FLIGHTCHECK_")}
    full["PYTHONPATH"] = os.pathsep.join([str(tmp_path / "fakepkgs"), full.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    full["PLUGIN_ARGV"] = json.dumps(argv)
    if facts is not None:
        full["FLIGHTCHECK_FACTS"] = os.pathsep.join(str(f) for f in facts)
    if raw:
        full["PLUGIN_RAW"] = "1"
    full.update(env)
    proc = subprocess.run(
        [sys.executable, "-c", DRIVER], capture_output=True, text=True, env=full, timeout=120, check=False
    )
    out = json.loads(proc.stdout) if proc.stdout.strip() else None
    return proc, out


VLLM = "/srv/vllm/.venv/bin/vllm"
