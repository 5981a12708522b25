#!/usr/bin/env python3
"""What the multicast probe adds to the vLLM plugin: cold (this boot's first launch), cached, and where no probe runs.

Each measurement is a fresh interpreter, as ``vllm serve`` is: ``sys.argv`` is
``vllm serve MODEL -tp N``, the ``vllm.general_plugins`` entry point ``flightcheck`` is
loaded with importlib.metadata and called. The node is the bundled healthy 8x B300
snapshot (FLIGHTCHECK_FACTS, without a recorded probe result, as after a warm reboot)
and the driver is tests/fakes/fake_libcuda.c, built here with cc and found through
LD_LIBRARY_PATH as the real libcuda.so.1 would be: it answers at once, so "cold" is the
probe's own machinery (the child interpreter, ctypes, the cache read and write), not CUDA
initialisation on real GPUs, which adds about a second or more per launch on 8 GPUs
(it is paid once per boot).

Configurations (median / p90 / max of ``register()`` over the rounds, interleaved, after
one warm-up round):
  off        B300, TP 8, FLIGHTCHECK_PROBE=0: the plugin as it was (the baseline)
  cold       B300, TP 8, the cache emptied before every run: the probe runs
  cached     B300, TP 8, this boot's verdict in the cache: no probe
  cold-401   B300, TP 8, the bind fails (CUDA error 401): the probe runs, the fallback is applied
  cached-401 the same, cached
  pcie       TP 8 on a node without NVSwitch: no probe
  one-gpu    B300, TP 1: no probe

Printed: each configuration's time, its ``timings.probe_s`` from the JSON report, and the
added time against ``off`` (cold and cached), the numbers the issue asks for.

    python bench/bench_plugin_probe.py [--runs 9]   # rounds
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from plugin_driver import DRIVER, summary  # this folder: the benchmarks' shared driver

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "src"))


def facts_file(tmp: Path, name: str, **sections: object) -> Path:
    from flightcheck._examples import load_example

    doc = load_example("b300")[0][0]
    doc.pop("multicast_probe", None)
    doc["unavailable"] = {k: v for k, v in (doc.get("unavailable") or {}).items() if not k.startswith("multicast")}
    doc.update(sections)
    path = tmp / f"{name}.json"
    path.write_text(json.dumps(doc))
    return path


def build_libcuda(tmp: Path) -> Path:
    out = tmp / "libcuda"
    out.mkdir()
    src = ROOT / "tests" / "fakes" / "fake_libcuda.c"
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-o", str(out / "libcuda.so.1"), str(src)], check=True)
    return out


def fake_systemctl(tmp: Path) -> Path:
    """A systemctl that gives the fabric manager's start (this machine may have no systemd)."""
    bindir = tmp / "bin"
    bindir.mkdir()
    p = bindir / "systemctl"
    p.write_text(
        "#!/bin/sh\necho LoadState=loaded\necho ActiveState=active\necho ActiveEnterTimestampMonotonic=81234567\n"
    )
    p.chmod(0o755)
    return bindir


def run_once(argv: list[str], env: dict[str, str], cache: Path, cold: bool) -> dict[str, float]:
    """One fresh interpreter calling the plugin; ``cold``: this boot's cache emptied first."""
    if cold:
        shutil.rmtree(cache, ignore_errors=True)
    report = cache.parent / f"report-{cache.name}.json"
    proc = subprocess.run(
        [sys.executable, "-c", DRIVER],
        capture_output=True,
        text=True,
        env={**env, "BENCH_ARGV": json.dumps(argv), "FLIGHTCHECK_REPORT": str(report)},
        timeout=300,
        check=False,
    )
    if not proc.stdout.strip():
        raise SystemExit(f"driver failed: {proc.stderr[-2000:]}")
    row = json.loads(proc.stdout.strip().splitlines()[-1])
    row["probe_s"] = json.loads(report.read_text())["timings"].get("probe_s")
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=9)
    args = ap.parse_args()
    if shutil.which("cc") is None:
        raise SystemExit("needs a C compiler (cc) to build the fake libcuda")
    from support.ckptgen import load_config, write_checkpoint

    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        model = str(write_checkpoint(tmp / "tiny-llama", load_config("tiny-llama"), shards=2, dense=True))
        lib, bindir = build_libcuda(tmp), fake_systemctl(tmp)
        b300 = facts_file(tmp, "b300")
        pcie = facts_file(tmp, "pcie", fabric_manager={"nvswitch_system": False, "service": "not-installed"})
        base = {k: v for k, v in os.environ.items() if not k.startswith(("FLIGHTCHECK_", "FAKE_CUDA"))}
        base.update(LD_LIBRARY_PATH=str(lib), PATH=os.pathsep.join([str(bindir), base.get("PATH", "")]))
        tp8 = ["/usr/local/bin/vllm", "serve", model, "-tp", "8"]
        tp1 = ["/usr/local/bin/vllm", "serve", model, "-tp", "1"]
        configs = [
            ("off", tp8, b300, {"FLIGHTCHECK_PROBE": "0"}, True),
            ("cold", tp8, b300, {}, True),
            ("cached", tp8, b300, {}, False),
            ("cold-401", tp8, b300, {"FAKE_CUDA_FAIL": "cuMulticastBindMem:401"}, True),
            ("cached-401", tp8, b300, {"FAKE_CUDA_FAIL": "cuMulticastBindMem:401"}, False),
            ("pcie", tp8, pcie, {}, True),
            ("one-gpu", tp1, b300, {}, True),
        ]
        medians: dict[str, float] = {}
        probes: dict[str, float] = {}
        print(f"fake libcuda, 8 devices; model {model} (2 shards); {args.runs} rounds, fresh interpreters")
        rows: dict[str, list[dict[str, float]]] = {name: [] for name, *_ in configs}
        for i in range(args.runs + 1):  # interleaved: machine noise hits every configuration alike
            for name, argv, facts, extra, cold in configs:
                cache = tmp / f"cache-{name}"
                env = {**base, "FLIGHTCHECK_FACTS": str(facts), "XDG_CACHE_HOME": str(cache), **extra}
                row = run_once(argv, env, cache, cold)
                if i:  # round 0 warms the page cache and primes the probe cache of "cached"
                    rows[name].append(row)
        for name, *_ in configs:
            got = rows[name]
            medians[name] = statistics.median(r["register_s"] for r in got)
            probe = [r["probe_s"] for r in got if r["probe_s"] is not None]
            probes[name] = statistics.median(probe) if probe else float("nan")
            probe_text = f"probe_s median {probes[name]:.3f} s" if probe else "probe_s absent"
            fb = "fallback applied" if got[-1]["fallback"] else "no fallback"
            print(f"{name:<11} register() {summary([r['register_s'] for r in got])}  {probe_text}; {fb}")
        # the probe step's own wall time (timings.probe_s: the decision, the cache, the child)
        # is the added time; the register() medians differ by more than that between any two
        # configurations on a busy machine (the passive run is most of them)
        cold, cached = (probes["cold"], probes["cold-401"]), (probes["cached"], probes["cached-401"])
        print(f"added by the probe, cold (first launch of a boot): {cold[0]:.3f} s ok, {cold[1]:.3f} s 401")
        print(f"added by the probe, cached (every later launch):   {cached[0]:.3f} s ok, {cached[1]:.3f} s 401")
        print(f"added where no probe runs: pcie {probes['pcie']:.3f} s, one GPU {probes['one-gpu']:.3f} s")
        print(
            f"register() median vs off (noise included): cold {medians['cold'] - medians['off']:+.3f} s, "
            f"cached {medians['cached'] - medians['off']:+.3f} s, pcie {medians['pcie'] - medians['off']:+.3f} s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
