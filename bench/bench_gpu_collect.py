"""Time the GPU-side collection: the NVML child, the host-side fabric checks, the multicast probe.

    python bench/bench_gpu_collect.py [runs]

Without a GPU it times the real code against the test fakes (an 8x B300 fake pynvml, a fake
libcuda.so.1 built with cc), which measures flightcheck's own overhead (process start,
parsing, validation); on a GPU node the same numbers include the driver. Prints one line per
measurement: median and worst wall time over the runs.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

from flightcheck._collect import fabric, multicast, nvml


def timed(label: str, fn, runs: int) -> None:
    walls = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        walls.append(time.perf_counter() - t0)
    print(
        f"{label:<52} median {statistics.median(walls) * 1000:7.1f} ms   "
        f"worst {max(walls) * 1000:7.1f} ms   ({runs} runs)"
    )


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    from test_nvml_collector import r570

    with tempfile.TemporaryDirectory() as tmp:
        scen = Path(tmp) / "s.json"
        scen.write_text(json.dumps(r570(8)))
        fake_env = {**os.environ, "PYTHONPATH": str(ROOT / "tests/fakes/nvml"), "FAKE_NVML": str(scen)}
        timed("NVML child, fake pynvml, 8x B300 (R570)", lambda: nvml.parse_child(nvml.run_child(10, fake_env)), runs)
        real_env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FAKE_NVML")}
        timed(
            "NVML child, real nvidia-ml-py on this host", lambda: nvml.parse_child(nvml.run_child(10, real_env)), runs
        )
        timed("fabric manager / IMEX / NVSwitch host checks", lambda: fabric.collect_host_side(Path("/"), False), runs)
        if shutil.which("cc"):
            lib = Path(tmp) / "lib"
            lib.mkdir()
            subprocess.run(
                [
                    "cc",
                    "-shared",
                    "-fPIC",
                    "-O1",
                    "-o",
                    str(lib / "libcuda.so.1"),
                    str(ROOT / "tests/fakes/fake_libcuda.c"),
                ],
                check=True,
            )
            env = {**os.environ, "LD_LIBRARY_PATH": str(lib)}
            timed(
                "multicast probe, fake libcuda, 8 devices (bind ok)", lambda: multicast.probe_multicast(env=env), runs
            )
            t0 = time.perf_counter()
            r = multicast.probe_multicast(timeout=2, env={**env, "FAKE_CUDA_HANG": "cuMulticastBindMem"})
            print(
                f"{'multicast probe, hang at bind, timeout 2 s':<52} "
                f"{(time.perf_counter() - t0) * 1000:7.1f} ms   stage={r['stage']}"
            )


if __name__ == "__main__":
    main()
