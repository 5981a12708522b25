"""A passive ``flightcheck check`` imports nothing of the engine stack (docs/architecture.md):
run in-process in a fresh interpreter whose sys.path holds importable stand-ins for torch,
triton, flashinfer, vllm, sglang, tilelang, humming and cuda-bindings, each with the
dist-info that makes the collectors treat it as installed (so every collector that reads
their files as text runs), and none of them may end up in ``sys.modules``. Speed is
measured in bench/bench_passive.py, not here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

#: import name -> (distribution, version) of each stand-in.
STANDINS = {
    "torch": ("torch", "2.14.0+cu130"),
    "triton": ("triton", "3.8.0"),
    "flashinfer": ("flashinfer_python", "0.7.2.post1"),
    "flashinfer_cubin": ("flashinfer_cubin", "0.7.2.post1"),
    "vllm": ("vllm", "0.33.0"),
    "sglang": ("sglang", "0.5.23"),
    "tilelang": ("tilelang", "0.1.12"),
    "humming": ("humming_kernels", "0.1.19"),
    "cuda": ("cuda_bindings", "13.1.1"),
    "nvidia_cutlass_dsl": ("nvidia_cutlass_dsl", "4.8.0"),
}

CHILD = r"""
import json, sys
from flightcheck._cli.main import main
rc = main(["check", "--format", "json", "--python", sys.executable, "--output", sys.argv[1]])
watched = set(json.loads(sys.argv[2]))
imported = sorted(m for m in sys.modules if m.split(".")[0] in watched)
import os
from flightcheck._collect.pyinfo import engine_info  # what the check's collectors saw (cached)
seen = engine_info(sys.executable, os.environ).get("packages") or {}
print(json.dumps({"rc": rc, "imported": imported, "seen": seen}))
"""


def site(root: Path) -> Path:
    """Stand-ins that import cleanly, so an import (even one wrapped in try/except) stays
    in ``sys.modules``."""
    for mod, (dist, version) in STANDINS.items():
        pkg = root / mod
        pkg.mkdir(parents=True)
        (pkg / "__init__.py").write_text(f"# a stand-in: flightcheck must never import {mod}\n")
        info = root / f"{dist}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n\n")
        (info / "RECORD").write_text(f"{mod}/__init__.py,,\n")
    (root / "flashinfer" / "artifacts.py").write_text("class ArtifactPath:\n    pass\n")  # read as text
    return root


def test_a_passive_check_imports_none_of_the_engine_stack(tmp_path: Path) -> None:
    fake = site(tmp_path / "site")
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLIGHTCHECK_")}
    env["PYTHONPATH"] = os.pathsep.join([str(fake), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update(XDG_CACHE_HOME=str(tmp_path / "xdg"), HOME=str(tmp_path))
    out = tmp_path / "report.json"
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(out), json.dumps(sorted(STANDINS))],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["imported"] == []
    assert got["rc"] in (0, 1, 3)
    report = json.loads(out.read_text())
    assert report["verdict"] and report["checks"]
    # the collectors saw the stand-ins as installed, so their text readers ran
    assert got["seen"]["tilelang"] == "0.1.12" and got["seen"]["humming-kernels"] == "0.1.19"
    assert got["seen"]["vllm"] == "0.33.0" and got["seen"]["flashinfer-python"] == "0.7.2.post1"
