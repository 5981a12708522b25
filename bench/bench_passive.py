#!/usr/bin/env python3
"""Wall time of a passive ``flightcheck check`` (no model, no --deep) on this machine.

Measures process start to exit of the CLI several times and prints the median, the spread,
and the collection / evaluation timings the report itself records; then the heaviest
imports of one run from ``python -X importtime``. Target: under 0.5 s here, most of it
Python start-up. Usage:

    python bench/bench_passive.py [--runs 15] [--top 12] [-- extra flightcheck check args]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

TARGET_S = 0.5


def cli() -> list[str]:
    """The installed console script next to this interpreter, else ``python -m flightcheck``."""
    script = os.path.join(os.path.dirname(sys.executable), "flightcheck")
    return [script] if os.path.exists(script) else [sys.executable, "-m", "flightcheck"]


def one_run(cmd: list[str]) -> tuple[float, dict]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode not in (0, 1, 3):
        sys.exit(f"flightcheck failed (exit {proc.returncode}): {proc.stderr.strip()[-400:]}")
    try:
        timings = json.loads(proc.stdout).get("timings", {})
    except ValueError:
        timings = {}
    return wall, timings


def import_hotspots(extra: list[str], top: int) -> list[tuple[float, float, str]]:
    """(cumulative ms, self ms, module) of the slowest top-level-ish imports of one run."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "flightcheck", "check", "--format", "json", *extra],
        capture_output=True,
        text=True,
        check=False,
    )
    rows = []
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        first, cum_us, name = line.split("|", 2)
        self_us = first.split(":", 1)[1]
        rows.append((int(cum_us) / 1000, int(self_us) / 1000, name.rstrip()))
    rows.sort(reverse=True)
    # report only outermost entries (an import whose parent is already listed adds nothing)
    shown: list[tuple[float, float, str]] = []
    for cum, self_ms, name in rows:
        depth = len(name) - len(name.lstrip()) - 1  # importtime indents nested imports by 2
        if depth <= 2:
            shown.append((cum, self_ms, name))
        if len(shown) >= top:
            break
    return shown


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("extra", nargs="*", help="extra arguments for `flightcheck check` (after --)")
    args = ap.parse_args()
    cmd = cli() + ["check", *args.extra]  # the default text report, as a user runs it
    json_cmd = cmd + ["--format", "json"]
    one_run(cmd)  # warm the page cache
    walls, json_walls, collects, totals = [], [], [], []
    for _ in range(args.runs):
        walls.append(one_run(cmd)[0])
        wall, timings = one_run(json_cmd)
        json_walls.append(wall)
        collects.append(timings.get("collect_s", float("nan")))
        totals.append(timings.get("total_s", float("nan")))
    med = statistics.median(walls)
    print(f"command: {' '.join(cmd)}")
    print(f"runs: {args.runs}")
    print(
        f"wall, text report (process start to exit): median {med:.3f} s, min {min(walls):.3f} s, max {max(walls):.3f} s"
    )
    print(f"wall, --format json: median {statistics.median(json_walls):.3f} s")
    print(
        f"in-process (json runs): collect median {statistics.median(collects):.3f} s, "
        f"start-to-report median {statistics.median(totals):.3f} s"
    )
    bare = []
    for _ in range(5):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], capture_output=True, check=False)
        bare.append(time.perf_counter() - t0)
    print(f"bare interpreter start (python -c pass): median {statistics.median(bare):.3f} s")
    print(f"target: < {TARGET_S} s -> {'OK' if med < TARGET_S else 'OVER'}")
    print("\nheaviest imports (python -X importtime, ms cumulative / self):")
    for cum, self_ms, name in import_hotspots(args.extra, args.top):
        print(f"  {cum:8.1f} {self_ms:8.1f}  {name}")
    return 0 if med < TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
