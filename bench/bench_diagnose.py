"""How fast and in how much memory ``flightcheck diagnose`` reads a big log.

Writes a log of ``--size-gb`` (default 1) to a temporary file, streamed (the generator
holds one block): a vLLM 0.11 startup across 8 ranks, then serving output (throughput
lines, access-log lines, request lines, a warning now and then), then the failure: a
CUDA OOM while serving would be unknown, so the end is an NCCL shared-memory failure on a
restart. Then runs ``python -m flightcheck diagnose FILE --format json`` in a child and
prints its wall time, CPU time and peak RSS, and what it found.

    python bench/bench_diagnose.py [--size-gb 1] [--keep PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

STARTUP = [
    "(APIServer pid=1) INFO 11-02 08:00:00 [api_server.py:1896] vLLM API server version 0.11.0",
    (
        "(APIServer pid=1) INFO 11-02 08:00:00 [utils.py:328] non-default args: {'model_tag': '/models/m', "
        "'tensor_parallel_size': 8, 'api_key': 'sk-bench-0123456789abcdefghijkl'}"
    ),
    "(EngineCore_DP0 pid=301) (Worker_TP0 pid=500) INFO 11-02 08:00:10 [gpu_model_runner.py:2602] Starting to load",
    (
        "(EngineCore_DP0 pid=301) (Worker_TP0 pid=500) INFO 11-02 08:14:10 [gpu_model_runner.py:2653] "
        "Model loading took 118.3 GiB and 840.0 seconds"
    ),
    "(EngineCore_DP0 pid=301) INFO 11-02 08:15:00 [kv_cache_utils.py:1] GPU KV cache size: 1,879,376 tokens",
    (
        "(EngineCore_DP0 pid=301) (Worker_TP0 pid=500) INFO 11-02 08:15:30 [gpu_model_runner.py:1] "
        "Graph capturing finished in 30 secs"
    ),
    "(APIServer pid=1) INFO 11-02 08:16:00 [api_server.py:1] Starting vLLM API server 0 on http://0.0.0.0:8000",
]
SERVING = [
    (
        "(APIServer pid=1) INFO 11-02 {t} [loggers.py:123] Engine 000: Avg prompt throughput: 12034.5 tokens/s, Avg "
        "generation throughput: 881.2 tokens/s, Running: 31 reqs, Waiting: 0 reqs, GPU KV cache usage: 21.2%, Prefix "
        "cache hit rate: 45.0%"
    ),
    '(APIServer pid=1) INFO:     10.0.3.{n}:51234 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    (
        "(APIServer pid=1) INFO 11-02 {t} [logger.py:41] Received request chatcmpl-{n}: prompt: 'Summarise the "
        "following text in three sentences', params: SamplingParams(n=1, temperature=0.7, max_tokens=512), "
        "lora_request: None."
    ),
    "(APIServer pid=1) INFO 11-02 {t} [async_llm.py:271] Added request chatcmpl-{n}.",
]
WARNING = (
    "(APIServer pid=1) WARNING 11-02 {t} [protocol.py:81] The following fields were present in the request but "
    "ignored: {{'foo'}}"
)
FAILURE = [
    "(APIServer pid=1) INFO 11-02 23:00:00 [api_server.py:1896] vLLM API server version 0.11.0",
    (
        "gpu01:9621:9688 [3] misc/shmutils.cc:112 NCCL WARN Error while creating shared memory segment "
        "/dev/shm/nccl-KWfVyt (size 5967872)"
    ),
    "(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
]


def write_log(path: str, size: int) -> int:
    """Write about ``size`` bytes; returns the bytes written."""
    written = 0
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(STARTUP) + "\n")
        n = 0
        while written < size:
            block = []
            for _ in range(2000):
                n += 1
                t = f"{8 + (n // 3600000) % 14:02d}:{(n // 60000) % 60:02d}:{(n // 1000) % 60:02d}"
                block.append((WARNING if n % 997 == 0 else SERVING[n % 4]).format(t=t, n=n % 250))
            text = "\n".join(block) + "\n"
            f.write(text)
            written += len(text)
        f.write("\n".join(FAILURE) + "\n")
    return os.path.getsize(path)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-gb", type=float, default=1.0)
    ap.add_argument("--keep", default=None, metavar="PATH", help="write the log here and keep it")
    args = ap.parse_args()
    path = args.keep or tempfile.mkstemp(suffix=".log", prefix="fc-diagnose-bench-")[1]
    try:
        t = time.perf_counter()
        size = write_log(path, int(args.size_gb * 1024**3))
        print(f"log: {size / 1024**3:.2f} GiB written in {time.perf_counter() - t:.1f} s ({path})")
        src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
        env = dict(os.environ, PYTHONPATH=os.path.abspath(src))
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "flightcheck", "diagnose", path, "--format", "json"],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        wall = time.perf_counter() - t
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        doc = json.loads(proc.stdout)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        print(
            f"diagnose: exit {proc.returncode}, {wall:.2f} s wall, {cpu:.2f} s CPU, "
            f"peak RSS {after.ru_maxrss / 1024:.0f} MiB, {size / 1024**2 / wall:.0f} MiB/s, "
            f"{doc['input']['lines']:,} lines"
        )
        causes = [(c["code"], c["line_number"]) for c in doc["causes"]]
        print(f"found: {causes}; api key in output: {'sk-bench' in proc.stdout}; os.cpu_count()={os.cpu_count()}")
        return 0 if causes and causes[0][0] == "FC601" else 1
    finally:
        if not args.keep:
            os.unlink(path)


if __name__ == "__main__":
    sys.exit(main())
