#!/usr/bin/env python3
"""Benchmark: reading a GGUF header with flightcheck's bounded reader, vs gguf.GGUFReader.

Writes (sparse data section) a GGUF file shaped like a large model's: a 151,936-token
vocabulary (tokens, scores, token types, 150k merges), 61 layers of 40 tensors (2,440
tensors, NVFP4/Q4_K/BF16/F32), ~3.7 GB apparent. Then, each as a median of several rounds:

- ``flightcheck``: ``flightcheck._checkpoint.gguf.read`` (header only, bounded);
- ``gguf``: ``gguf.GGUFReader`` (memory-maps the file, builds every field), when installed;
- ``hostile``: a 100-byte file claiming 2^62 key/value pairs, and one whose one string
  claims the whole MAX_HEADER: time and bytes asked for.

Prints the seconds and the peak Python allocation of the flightcheck read.

    python bench/bench_gguf.py [--rounds 5] [--dir /tmp]
"""

from __future__ import annotations

import argparse
import os
import statistics
import struct
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from flightcheck._checkpoint import gguf as gg
from support.ggufgen import ARRAY, BF16_T, F32, F32_T, I32, NVFP4_T, Q4_K_T, STRING, U32, nbytes


def big_header(path: Path) -> int:
    vocab = 151_936
    tensors = [("token_embd.weight", (4096, vocab), BF16_T), ("output.weight", (4096, vocab), BF16_T)]
    for layer in range(61):
        for k in range(40):
            t = (NVFP4_T, Q4_K_T, BF16_T, F32_T)[k % 4]
            dims = (4096,) if t == F32_T else (4096, 128)
            tensors.append((f"blk.{layer}.t{k}.weight", dims, t))
    kv = [
        ("general.architecture", STRING, "flint"),
        ("flint.block_count", U32, 61),
        ("tokenizer.ggml.tokens", ARRAY, (STRING, [f"tok{i}" for i in range(vocab)])),
        ("tokenizer.ggml.scores", ARRAY, (F32, [0.0] * vocab)),
        ("tokenizer.ggml.token_type", ARRAY, (I32, [1] * vocab)),
        ("tokenizer.ggml.merges", ARRAY, (STRING, [f"a{i} b{i}" for i in range(150_000)])),
    ]
    from support.ggufgen import gguf_bytes

    head = gguf_bytes(kv=kv, tensors=tensors, data=False)
    total = sum(-(-nbytes(d, t) // 32) * 32 for _, d, t in tensors)
    with open(path, "wb") as fh:
        fh.write(head)
        fh.truncate(len(head) + total)  # sparse data section
    return len(head)


def timed(fn, rounds: int) -> list[float]:
    out = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    args = ap.parse_args()
    path = Path(args.dir) / "fc-bench.gguf"
    try:
        hlen = big_header(path)
        print(f"file: {path.stat().st_size / 1e9:.2f} GB apparent, header {hlen / 1e6:.1f} MB")
        tracemalloc.start()
        scan = gg.read(path)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert scan.ok, scan.problems
        print(
            f"parsed: {len(scan.tensors):,} tensors, {scan.weight_bytes / 1e9:.2f} GB of weights; "
            f"peak Python allocation {peak / 1e6:.1f} MB"
        )
        t = timed(lambda: gg.read(path), args.rounds)
        print(f"flightcheck read: median {statistics.median(t):.3f} s, min {min(t):.3f} s")
        try:
            import gguf
        except ImportError:
            print("gguf: not installed")
        else:
            t = timed(lambda: gguf.GGUFReader(str(path)), max(1, args.rounds // 2))
            print(f"gguf.GGUFReader:  median {statistics.median(t):.3f} s, min {min(t):.3f} s")
        raw = bytearray(path.read_bytes()[:100])
        raw[16:24] = struct.pack("<Q", 1 << 62)
        asked = [0]

        def fetch(off: int, n: int, data: bytes = bytes(raw)) -> bytes:
            asked[0] += n
            return data[off : off + n]

        t = timed(lambda: gg.parse(fetch, len(raw)), args.rounds)
        print(
            f"hostile 2^62 pairs: {statistics.median(t) * 1e6:.0f} us, {asked[0] // args.rounds} bytes asked per read"
        )
    finally:
        path.unlink(missing_ok=True)
        os.sync()


if __name__ == "__main__":
    main()
