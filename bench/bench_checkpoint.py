#!/usr/bin/env python3
"""Benchmark: `flightcheck check` on a 1.56 TB, 96-shard MoE checkpoint vs safetensors.

Generates (sparse files, real headers) a DeepSeek-V3-architecture checkpoint with 1,120
routed experts a layer stored as MXFP4 (U8 packed + U8 scales): ~390k tensors, ~1.56 TB
apparent, a few hundred MB on disk. Then, interleaved over several rounds so machine noise
hits all of them alike, each as a whole process:

- ``safe_open``: a Python loop of ``safetensors.safe_open`` + ``keys()`` over the shards;
- ``cold``: ``flightcheck check --facts b300.json --model DIR -tp 8`` with FLIGHTCHECK_NO_CACHE=1;
- ``warm``: the same with the scan cache primed.

Prints wall times (median, min), the cold / safe_open ratio, and peak RSS of the
flightcheck process and of its scan workers. Targets: cold <= safe_open, warm < 0.3 s,
RSS < 300 MB. The generated files are deleted afterwards unless --keep.

    python bench/bench_checkpoint.py [--dir /tmp/fc-1p56tb] [--rounds 5] [--keep]
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
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO / "tests"))

from support import ckptgen

B300 = REPO / "src" / "flightcheck" / "_examples" / "b300.json"
SAFE_OPEN = """
import sys, glob
from safetensors import safe_open
n = 0
for p in sorted(glob.glob(sys.argv[1] + "/*.safetensors")):
    with safe_open(p, framework="numpy") as f:
        n += len(f.keys())
print(n)
"""


def bench_config() -> dict:
    """DeepSeek-V3's architecture scaled to 1.56 TB with MXFP4 experts."""
    cfg = ckptgen.load_config("deepseek-v3")
    cfg.update(n_routed_experts=1120, num_nextn_predict_layers=0)
    cfg["quantization_config"] = {
        "quant_method": "compressed-tensors",
        "format": "mxfp4-pack-quantized",
        "config_groups": {"group_0": {"weights": {"num_bits": 4, "type": "float", "group_size": 32}}},
    }
    return cfg


def generate(root: Path) -> tuple[int, int]:
    cfg = bench_config()
    tensors = ckptgen.tensors_for(cfg)
    if not (root / "model.safetensors.index.json").exists():
        t0 = time.perf_counter()
        ckptgen.write_checkpoint(root, cfg, shards=96, tensors=tensors)
        print(f"generated {root} in {time.perf_counter() - t0:.1f} s")
    size = sum(p.stat().st_size for p in root.glob("*.safetensors"))
    return len(tensors), size


def run_rss(cmd: list[str], env: dict[str, str]) -> tuple[float, int, str]:
    """(wall seconds, the child's own peak RSS in MB, its stdout): fork/exec + os.wait4."""
    t0 = time.perf_counter()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: stdout to the pipe, stderr kept
        os.dup2(w, 1)
        os.close(r)
        os.chdir(REPO)
        os.execvpe(cmd[0], cmd, env)
    os.close(w)
    chunks = []
    while True:
        b = os.read(r, 1 << 16)
        if not b:
            break
        chunks.append(b)
    os.close(r)
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - t0
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        raise SystemExit(f"{' '.join(cmd[:5])} exited {code}")
    return wall, usage.ru_maxrss // 1024, b"".join(chunks).decode()


def worker_rss(root: Path, env: dict[str, str]) -> int:
    """Peak RSS (MB) of the scan's worker processes, from a process that only scans."""
    code = (
        "import resource, glob, sys; from flightcheck._checkpoint.scan import scan_paths;"
        "p = sorted(glob.glob(sys.argv[1] + '/*.safetensors')); scan_paths(p, workers=2);"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(root)], env=env, capture_output=True, text=True, cwd=REPO, check=False
    )
    return int(out.stdout.strip() or 0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default=str(HERE / "out" / "ckpt-1p56tb"), help="where the sparse checkpoint goes")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--keep", action="store_true", help="keep the generated checkpoint")
    args = ap.parse_args()
    root = Path(args.dir)
    root.mkdir(parents=True, exist_ok=True)
    n_tensors, size = generate(root)
    print(
        f"checkpoint: 96 shards, {size / 1e12:.3f} TB apparent, {n_tensors:,} tensors, "
        f"{sum(p.stat().st_blocks * 512 for p in root.iterdir()) / 1e6:.0f} MB on disk"
    )
    # installed packages come with bytecode; compile ours so the comparison is like for like
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(REPO / "src" / "flightcheck")],
        check=False,
        env={k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
    )
    xdg = Path(tempfile.mkdtemp(prefix="fc-bench-xdg-"))
    base = {**os.environ, "XDG_CACHE_HOME": str(xdg), "NO_COLOR": "1"}
    cold_env = {**base, "FLIGHTCHECK_NO_CACHE": "1"}
    fc = [
        sys.executable,
        "-m",
        "flightcheck",
        "check",
        "--facts",
        str(B300),
        "--model",
        str(root),
        "-tp",
        "8",
        "--format",
        "json",
    ]
    so = [sys.executable, "-c", SAFE_OPEN, str(root)]
    run_rss(fc, base)  # prime the warm cache (and the page cache for everyone)
    results: dict[str, list[float]] = {"safe_open": [], "cold": [], "warm": []}
    rss: dict[str, int] = {}
    for _ in range(args.rounds):
        for name, cmd, env in (("safe_open", so, base), ("cold", fc, cold_env), ("warm", fc, base)):
            wall, peak, out = run_rss(cmd, env)
            results[name].append(wall)
            rss[name] = max(rss.get(name, 0), peak)
            if name != "safe_open":
                doc = json.loads(out)
                assert doc["memory"]["per_rank"]["weights_bytes"], "no memory block"
    wrss = worker_rss(root, cold_env)
    med = {k: statistics.median(v) for k, v in results.items()}
    low = {k: min(v) for k, v in results.items()}
    print(f"\n{'':12s} {'median':>8s} {'min':>8s}   peak RSS")
    for k in results:
        print(f"{k:12s} {med[k]:7.3f}s {low[k]:7.3f}s   {rss[k]} MB")
    print(
        f"\ncold / safe_open: {med['cold'] / med['safe_open']:.2f} (median), "
        f"{low['cold'] / low['safe_open']:.2f} (min)   target <= 1"
    )
    print(f"warm:             {med['warm']:.3f} s (median)   target < 0.3 s")
    print(f"peak RSS:         flightcheck {rss['cold']} MB, each scan worker <= {wrss} MB   target < 300 MB")
    print(f"machine:          {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    shutil.rmtree(xdg, ignore_errors=True)
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
        print(f"deleted {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
