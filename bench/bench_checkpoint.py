#!/usr/bin/env python3
"""Benchmark: `flightcheck check` on a 1.56 TB, 96-shard MoE checkpoint vs safetensors.

Generates (sparse files, real headers) a DeepSeek-V3-architecture checkpoint with 1,120
routed experts a layer stored as MXFP4 (U8 packed + U8 scales): ~390k tensors, ~1.56 TB
apparent, a few hundred MB on disk. Then, interleaved over several rounds so machine noise
hits all of them alike, each as a whole process:

- ``safe_open``: a Python loop of ``safetensors.safe_open`` + ``keys()`` over the shards;
- ``cold``: ``flightcheck check --facts b300.json --model DIR -tp 8`` with FLIGHTCHECK_NO_CACHE=1;
- ``warm``: the same with the scan cache primed;
- ``passive``: ``flightcheck check --facts b300.json -tp 8`` (no model).

Then, with ``bench/slowfs.c`` (an LD_PRELOAD shim, built here with gcc) adding a latency
to every open/stat/read of the model's files, as a network filesystem or an object-store
mount would: the cold and warm check at 5 ms and 50 ms per operation; and with one shard
on a "hung mount" (every operation on it blocks forever): how long the check takes with
FLIGHTCHECK_CHECKPOINT_TIMEOUT=4 and whether it names that shard (FC508).

Prints medians and minimums, the cold / safe_open ratio, and peak RSS of the flightcheck
process and of its scan workers. Targets (issue 15): cold <= 0.6 x safe_open, warm <=
0.12 s, RSS < 300 MB, passive < 0.3 s, 50 ms latency < 2 s, hung mount within its
deadline. ``--profile`` adds cProfile's top functions of the cold and warm read
(in-process; the workers are not profiled). The generated files are deleted afterwards
unless --keep.

    python bench/bench_checkpoint.py [--dir /tmp/fc-1p56tb] [--rounds 5] [--keep] [--profile]
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


#: CPU seconds (user + system, the process and the workers it waited for) of the last run:
#: less sensitive than wall time to other work on the machine.
LAST_CPU = [0.0]


def run_rss(cmd: list[str], env: dict[str, str], kill_after: float | None = None) -> tuple[float, int, str]:
    """(wall seconds, the child's own peak RSS in MB, its stdout): fork/exec + os.wait4;
    its CPU seconds (its workers' included) go to ``LAST_CPU[0]``.
    ``kill_after``: SIGKILL it then (the stdout is then empty)."""
    t0 = time.perf_counter()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: stdout to the pipe, stderr kept
        os.dup2(w, 1)
        os.close(r)
        os.chdir(REPO)
        os.execvpe(cmd[0], cmd, env)
    os.close(w)
    timer = None
    if kill_after is not None:
        import threading

        timer = threading.Timer(kill_after, os.kill, (pid, 9))
        timer.daemon = True
        timer.start()
    chunks = []
    while True:
        b = os.read(r, 1 << 16)
        if not b:
            break
        chunks.append(b)
    os.close(r)
    _, status, usage = os.wait4(pid, 0)
    if timer is not None:
        timer.cancel()
    wall = time.perf_counter() - t0
    LAST_CPU[0] = usage.ru_utime + usage.ru_stime
    code = os.waitstatus_to_exitcode(status)
    if code == -9 and kill_after is not None:
        return wall, usage.ru_maxrss // 1024, ""
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


def build_slowfs(out: Path) -> Path | None:
    """Compile the LD_PRELOAD latency shim, or None without a C compiler."""
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None or not sys.platform.startswith("linux"):
        return None
    so = out / "slowfs.so"
    r = subprocess.run(
        [cc, "-O2", "-shared", "-fPIC", "-o", str(so), str(HERE / "slowfs.c"), "-ldl"], capture_output=True, check=False
    )
    return so if r.returncode == 0 else None


def profile(root: Path, env: dict[str, str]) -> None:
    """cProfile of the read (cold, then warm) in a fresh process: the top functions; then,
    unprofiled, where a cold read's CPU goes: this process (the index, its share of the
    shards, the cross-check) and its scan workers (their start included)."""
    # load() runs the read on a thread (to bound it), which cProfile does not follow: profile
    # its body, _load, in this thread instead
    code = (
        "import cProfile, pstats, sys, os, time, importlib;"
        "L = importlib.import_module('flightcheck._checkpoint.reader');"
        "read = lambda: L._load(sys.argv[1], None, (), None, None, None, False, time.monotonic() + 60, 60.0);"
        "os.environ['FLIGHTCHECK_NO_CACHE'] = '1'; read();"  # imports, page cache
        "[(print('--- ' + kind), os.environ.__setitem__('FLIGHTCHECK_NO_CACHE', '1' if kind == 'cold' else '0'),"
        " (pr := cProfile.Profile()).runcall(read),"
        " pstats.Stats(pr).sort_stats('tottime').print_stats(14)) for kind in ('cold', 'warm', 'warm')]"
    )
    subprocess.run([sys.executable, "-c", code, str(root)], env=env, cwd=REPO, check=False)
    split = (
        "import resource as R, sys, time, importlib;"
        "L = importlib.import_module('flightcheck._checkpoint.reader');"
        "read = lambda: L._load(sys.argv[1], None, (), None, None, None, False, time.monotonic() + 60, 60.0);"
        "read(); cpu = lambda who: (lambda u: u.ru_utime + u.ru_stime)(R.getrusage(who));"
        "s0, c0, t0 = cpu(R.RUSAGE_SELF), cpu(R.RUSAGE_CHILDREN), time.perf_counter(); ck = read();"
        "print(f'cold read, CPU seconds: this process {cpu(R.RUSAGE_SELF) - s0:.3f}, '"
        "f'its {ck.stats.workers} worker(s) {cpu(R.RUSAGE_CHILDREN) - c0:.3f}; wall {time.perf_counter() - t0:.3f} s')"
    )
    for _ in range(3):
        subprocess.run(
            [sys.executable, "-c", split, str(root)], env={**env, "FLIGHTCHECK_NO_CACHE": "1"}, cwd=REPO, check=False
        )


def has_fc508_for(out: str, shard: str) -> bool:
    doc = json.loads(out)
    return any(c["code"] == "FC508" and shard in (c.get("subject") or "") for c in doc["checks"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default=str(HERE / "out" / "ckpt-1p56tb"), help="where the sparse checkpoint goes")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--slow-rounds", type=int, default=3, help="rounds of the latency runs")
    ap.add_argument("--keep", action="store_true", help="keep the generated checkpoint")
    ap.add_argument("--profile", action="store_true", help="print cProfile's top functions of the read")
    ap.add_argument(
        "--baseline",
        metavar="SRC",
        help="also time cold and warm with flightcheck imported from SRC (another checkout's src/), "
        "interleaved in the same rounds",
    )
    args = ap.parse_args()
    root = Path(args.dir)
    root.mkdir(parents=True, exist_ok=True)
    n_tensors, size = generate(root)
    header_mb = sum(int.from_bytes(p.open("rb").read(8), "little") for p in root.glob("*.safetensors")) / 1e6
    print(
        f"checkpoint: 96 shards, {size / 1e12:.3f} TB apparent, {n_tensors:,} tensors, {header_mb:.0f} MB of "
        f"headers, {sum(p.stat().st_blocks * 512 for p in root.iterdir()) / 1e6:.0f} MB on disk"
    )
    # installed packages come with bytecode; compile ours so the comparison is like for like
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(REPO / "src" / "flightcheck")],
        check=False,
        env={k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
    )
    xdg = Path(tempfile.mkdtemp(prefix="fc-bench-xdg-"))
    # this checkout's flightcheck, whatever the venv has installed
    base = {**os.environ, "XDG_CACHE_HOME": str(xdg), "NO_COLOR": "1", "PYTHONPATH": str(REPO / "src")}
    cold_env = {**base, "FLIGHTCHECK_NO_CACHE": "1"}
    passive = [sys.executable, "-m", "flightcheck", "check", "--facts", str(B300), "-tp", "8", "--format", "json"]
    fc = [*passive[:6], "--model", str(root), *passive[6:]]
    so = [sys.executable, "-c", SAFE_OPEN, str(root)]
    if args.profile:
        profile(root, base)
    run_rss(fc, base)  # prime the warm cache (and the page cache for everyone)
    results: dict[str, list[float]] = {"safe_open": [], "cold": [], "warm": [], "passive": []}
    cpu: dict[str, list[float]] = {}
    rss: dict[str, int] = {}
    runs = [("safe_open", so, base), ("cold", fc, cold_env), ("warm", fc, base), ("passive", passive, base)]
    if args.baseline:
        old = {"PYTHONPATH": os.path.abspath(args.baseline)}
        old_xdg = {"XDG_CACHE_HOME": str(xdg / "baseline")}
        run_rss(fc, {**base, **old, **old_xdg})  # its own warm cache
        runs += [("cold (baseline)", fc, {**cold_env, **old}), ("warm (baseline)", fc, {**base, **old, **old_xdg})]
        results.update({"cold (baseline)": [], "warm (baseline)": []})
    for _ in range(args.rounds):
        for name, cmd, env in runs:
            wall, peak, out = run_rss(cmd, env)
            results[name].append(wall)
            cpu.setdefault(name, []).append(LAST_CPU[0])
            rss[name] = max(rss.get(name, 0), peak)
            if name.startswith(("cold", "warm")):
                doc = json.loads(out)
                assert doc["memory"]["per_rank"]["weights_bytes"], "no memory block"
    wrss = worker_rss(root, cold_env)
    shim = build_slowfs(xdg)
    hang_line = "hung mount:       skipped (no C compiler for bench/slowfs.c)"
    if shim is not None:
        for ms in (5, 50):
            slow = {"LD_PRELOAD": str(shim), "FC_SLOW_PREFIX": str(root), "FC_SLOW_MS": str(ms)}
            for name, env in ((f"cold @{ms} ms", cold_env), (f"warm @{ms} ms", base)):
                results[name] = [run_rss(fc, {**env, **slow}, kill_after=60)[0] for _ in range(args.slow_rounds)]
        stuck = "model-00007-of-00096.safetensors"
        hang_env = {**cold_env, "LD_PRELOAD": str(shim), "FC_HANG": str(root / stuck)}
        hang_env["FLIGHTCHECK_CHECKPOINT_TIMEOUT"] = "4"
        wall, _peak, out = run_rss(fc, hang_env, kill_after=30)
        if not out:
            hang_line = f"hung mount:       still running after {wall:.0f} s: killed   target: within the deadline"
        else:
            named = has_fc508_for(out, stuck)
            hang_line = (
                f"hung mount:       {wall:.2f} s with FLIGHTCHECK_CHECKPOINT_TIMEOUT=4, "
                f"FC508 names {stuck}: {'yes' if named else 'NO'}   target: within the deadline"
            )
    med = {k: statistics.median(v) for k, v in results.items()}
    low = {k: min(v) for k, v in results.items()}
    print(f"\n{'':15s} {'median':>8s} {'min':>8s} {'CPU med':>8s}   peak RSS   (whole process, {args.rounds} rounds)")
    for k in results:
        used = f"{statistics.median(cpu[k]):7.3f}s" if k in cpu else " " * 8
        print(f"{k:15s} {med[k]:7.3f}s {low[k]:7.3f}s {used}   {str(rss[k]) + ' MB' if k in rss else ''}")
    print(
        f"\ncold / safe_open: {med['cold'] / med['safe_open']:.2f} (median), "
        f"{low['cold'] / low['safe_open']:.2f} (min)   target <= 0.6"
    )
    if args.baseline:
        print(
            f"vs baseline:      cold {med['cold'] / med['cold (baseline)']:.2f}x, "
            f"warm {med['warm'] / med['warm (baseline)']:.2f}x (median, same rounds)"
        )
    print(f"warm:             {med['warm']:.3f} s (median)   target <= 0.12 s")
    print(f"passive:          {med['passive']:.3f} s (median)   target < 0.3 s")
    print(f"peak RSS:         flightcheck {rss['cold']} MB, each scan worker <= {wrss} MB   target < 300 MB")
    if "cold @50 ms" in med:
        print(f"50 ms latency:    {med['cold @50 ms']:.2f} s cold, {med['warm @50 ms']:.2f} s warm   target < 2 s")
    print(hang_line)
    print(f"machine:          {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} (others' work included)")
    shutil.rmtree(xdg, ignore_errors=True)
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
        print(f"deleted {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
