#!/usr/bin/env python3
"""What the plugin adds to a REAL ``vllm serve`` (vLLM 0.33.0 of the conformance venv, CPU).

Each run is ``vllm serve MODEL -tp 2 -dp 4 -dpl 2 ...`` started from the conformance venv
(``/work/.conformance-venv`` or ``$FLIGHTCHECK_CONFORMANCE_PYTHON``'s venv) with
``VLLM_TARGET_DEVICE=cpu`` and the plugin registered from this checkout (a ``.dist-info``
on ``PYTHONPATH`` declaring the ``vllm.general_plugins`` entry point ``flightcheck``, as
tests/conformance/test_plugin_in_serve.py does). vLLM calls the plugin while it builds the
serve parser; the plugin writes its JSON report (``FLIGHTCHECK_REPORT``), whose timings say
what it spent: ``total_s`` (the whole plugin call: read, collect, evaluate, decide) and
``engine_read_s`` (vLLM's own parser rebuilt and run in process). The host's GPU-side facts
come from the bundled 8x B300 snapshot (``FLIGHTCHECK_FACTS``), so every check runs.

Configurations: ``engine-reader`` (the default: vLLM's parser in process) and ``built-in``
(``FLIGHTCHECK_ENGINE_READ=0``). The process then goes on into vLLM, which stops on the
uncached model; only the plugin's own numbers are printed (median / max over the runs).

    python bench/bench_plugin_vllm_serve.py [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ARGS = ["serve", "org/bench-model", "--tensor-parallel", "2", "-dp", "4", "-dpl", "2", "--max-model-len=32k"]


def venv_vllm() -> Path | None:
    py = os.environ.get("FLIGHTCHECK_CONFORMANCE_PYTHON") or "/work/.conformance-venv/bin/python"
    exe = Path(py).parent / "vllm"
    return exe if exe.is_file() else None


def shim(where: Path) -> Path:
    info = where / "flightcheck_bench-0.0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: flightcheck-bench\nVersion: 0.0\n")
    (info / "entry_points.txt").write_text("[vllm.general_plugins]\nflightcheck = flightcheck._plugin:register\n")
    return where


def one(vllm: Path, tmp: Path, extra: dict[str, str]) -> dict[str, float]:
    report = tmp / "report.json"
    report.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "FLIGHTCHECK_", "HF_"))}
    env.update(
        PYTHONPATH=os.pathsep.join([str(shim(tmp / "shim")), str(ROOT / "src")]),
        VLLM_TARGET_DEVICE="cpu",
        HF_HUB_OFFLINE="1",
        FLIGHTCHECK_REPORT=str(report),
        FLIGHTCHECK_FACTS=str(ROOT / "src/flightcheck/_examples/b300.json"),
        **extra,
    )
    t0 = time.perf_counter()
    subprocess.run([str(vllm), *ARGS], env=env, capture_output=True, text=True, timeout=600, check=False)
    wall = time.perf_counter() - t0
    doc = json.loads(report.read_text())
    t = doc["timings"]
    return {
        "total_s": t["total_s"],
        "engine_read_s": t.get("engine_read_s", 0.0),
        "wall_s": wall,
        "reader": doc["intent"]["reader"],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    vllm = venv_vllm()
    if vllm is None:
        print("no conformance venv with vllm (scripts/conformance_env.sh): nothing to measure")
        return 0
    configs = {"engine-reader": {}, "built-in": {"FLIGHTCHECK_ENGINE_READ": "0"}}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for name, extra in configs.items():
            rows = [one(vllm, tmp, extra) for _ in range(args.runs)]
            readers = sorted({str(r["reader"]) for r in rows})
            parts = []
            for key in ("total_s", "engine_read_s", "wall_s"):
                vals = [float(r[key]) for r in rows]
                parts.append(f"{key} median {statistics.median(vals):.3f} max {max(vals):.3f}")
            print(f"{name:14s} reader={','.join(readers):9s} runs={args.runs}  " + "  ".join(parts))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
