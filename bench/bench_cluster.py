"""Time ``flightcheck cluster --facts-dir`` on large snapshot sets: N nodes, each an 8-GPU
node whose checkpoint section lists a 96-shard model (the 1.56 TB case), one node's shard
truncated so FC802 has to find it.

    python bench/bench_cluster.py [nodes ...]      (default: 2 16 64 256)

Prints, per node count, the wall time of the whole command (a fresh process: start-up,
loading and validating every snapshot, every node's checks, the cross-node checks, the
report) and of the in-process evaluation alone, median of 3 runs; and the size of the
``--format html`` page and the time to render it from the evaluated report.
"""

from __future__ import annotations

import copy
import hashlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from flightcheck import Intent
from flightcheck._checks.cluster.evaluate import evaluate_cluster
from flightcheck._cluster.snapshots import load_dir
from flightcheck._report.cluster_html import render as render_html

SHARDS = 96


def node_doc(base: dict, i: int) -> dict:
    doc = copy.deepcopy(base)
    doc["host"]["hostname"] = f"gpu-b300-{i:03d}"
    files = {"config.json": 6114, "model.safetensors.index.json": 9_412_877}
    sha = {}
    for s in range(1, SHARDS + 1):
        name = f"model-{s:05d}-of-{SHARDS:05d}.safetensors"
        files[name] = 16_250_000_000 + s
        sha[name] = hashlib.sha256(name.encode()).hexdigest()
    if i == 1:  # one interrupted copy
        files[f"model-00042-of-{SHARDS:05d}.safetensors"] -= 1 << 20
    doc["checkpoint"] = {
        "model": "/models/Kimi-K3-MXFP4",
        "path": "/models/Kimi-K3-MXFP4",
        "files": files,
        "header_sha256": sha,
    }
    return doc


def median_s(fn, runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    counts = [int(a) for a in sys.argv[1:]] or [2, 16, 64, 256]
    base = json.loads((ROOT / "tests" / "fixtures" / "cluster" / "hgx-b300-a.json").read_text())
    for n in counts:
        with tempfile.TemporaryDirectory() as tmp:
            for i in range(n):
                Path(tmp, f"node{i:03d}.json").write_text(json.dumps(node_doc(base, i)))
            cmd = [sys.executable, "-m", "flightcheck", "cluster", "--facts-dir", tmp, "-tp", "8", "--format", "json"]
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
            report = json.loads(proc.stdout)
            found = [c["subject"] for c in report["checks"] if c["code"] == "FC802" and c["status"] == "fail"]
            assert found == ["node:gpu-b300-001"], found
            cli_s = median_s(lambda cmd=cmd: subprocess.run(cmd, capture_output=True, check=False))
            nodes = {name: facts for name, (facts, _) in load_dir(tmp).items()}
            eval_s = median_s(
                lambda nodes=nodes, n=n: evaluate_cluster(nodes, Intent(tensor_parallel_size=8, nnodes=n))
            )
            report = evaluate_cluster(nodes, Intent(tensor_parallel_size=8, nnodes=n))
            html_s = median_s(lambda report=report: render_html(report))
            size = len(render_html(report).encode())
            print(
                f"{n:4d} nodes x {SHARDS} shards: "
                f"cluster command {cli_s:6.2f} s, evaluation alone {eval_s * 1000:7.1f} ms, "
                f"html page {size / 1024:6.1f} KiB rendered in {html_s * 1000:6.1f} ms"
            )


if __name__ == "__main__":
    main()
