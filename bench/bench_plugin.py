#!/usr/bin/env python3
"""How long the vLLM plugin adds to ``vllm serve``: its passive run on a cached 96-shard model.

Each measurement is a fresh interpreter, as ``vllm serve`` is: it sets ``sys.argv`` to
``vllm serve MODEL -tp 8 --max-model-len 128k``, loads the ``vllm.general_plugins`` entry
point ``flightcheck`` with importlib.metadata and calls it. Printed per configuration:
the plugin call (``register()``: collect + evaluate + decide) and the whole process (Python
start, imports, call) as median / p90 / max over the runs, after one warm-up run (the
"cached" model: its headers are in the page cache, as on a node that served it before).

Configurations:
  b300-facts  this machine's live host, environment, toolchain and JIT cache; the GPU-side
              sections (driver, GPUs, fabric, python packages) from the bundled healthy
              8x B300 snapshot via FLIGHTCHECK_FACTS, so every check has its inputs;
  all-live    nothing recorded: whatever this machine gives (no GPU here: NVML absent).

The model is the 96-shard Kimi-K2 layout (MXFP4 experts, ~1 TB claimed, sparse on disk)
from tests/support/ckptgen.py when present, else a small generator below (96 shards of real
headers with ~1500 tensors each).

    python bench/bench_plugin.py [--runs 7] [--model DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from plugin_driver import DRIVER, summary  # this folder: the benchmarks' shared driver

ROOT = Path(__file__).resolve().parents[1]


def build_model(target: Path) -> str:
    """A 96-shard checkpoint at ``target``; returns how it was made."""
    if (target / "model.safetensors.index.json").exists():
        return "reused"
    tests = ROOT / "tests"
    if (tests / "support" / "ckptgen.py").exists():
        sys.path.insert(0, str(tests))
        from support import ckptgen  # the checkpoint engineer's generator: real layouts, sparse data

        config = ckptgen.load_config("kimi-k2-instruct")
        config["quantization_config"] = {"quant_method": "mxfp4"}
        ckptgen.write_checkpoint(target, config, shards=96)
        return "tests/ckptgen.py (kimi-k2-instruct, MXFP4 experts)"
    _own_generator(target)
    return "bench_plugin's own generator"


def _own_generator(target: Path, shards: int = 96, per_shard: int = 1500) -> None:
    """96 shards of valid safetensors headers (tiny BF16 tensors) plus index and config."""
    target.mkdir(parents=True, exist_ok=True)
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "num_hidden_layers": 32,
        "intermediate_size": 14336,
        "vocab_size": 128256,
        "max_position_embeddings": 131072,
        "torch_dtype": "bfloat16",
    }
    (target / "config.json").write_text(json.dumps(config))
    weight_map: dict[str, str] = {}
    total = 0
    for s in range(shards):
        name = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        header: dict[str, object] = {}
        offset = 0
        for t in range(per_shard):
            key = f"model.layers.{s}.block.{t}.weight"
            header[key] = {"dtype": "BF16", "shape": [4, 4], "data_offsets": [offset, offset + 32]}
            weight_map[key] = name
            offset += 32
        blob = json.dumps(header, separators=(",", ":")).encode()
        blob += b" " * (-len(blob) % 8)
        with open(target / name, "wb") as fh:
            fh.write(struct.pack("<Q", len(blob)) + blob + b"\0" * offset)
        total += offset
    (target / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map})
    )


def gpu_side_facts(tmp: Path) -> Path:
    """The GPU-side sections of the bundled healthy 8x B300 node, as a facts file."""
    sys.path.insert(0, str(ROOT / "src"))
    from flightcheck._examples import load_example

    doc = load_example("b300")[0][0]
    keep = ("schema", "driver", "gpus", "visible_devices", "fabric_manager", "imex", "python")
    path = tmp / "b300-gpu-side.json"
    path.write_text(json.dumps({k: doc[k] for k in keep if k in doc}))
    return path


def measure(model: Path, runs: int, facts: str | None) -> list[dict[str, float]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLIGHTCHECK_")}
    env["BENCH_ARGV"] = json.dumps(["/usr/local/bin/vllm", "serve", str(model), "-tp", "8", "--max-model-len", "128k"])
    if facts:
        env["FLIGHTCHECK_FACTS"] = facts
    out = []
    for i in range(runs + 1):
        t0 = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-c", DRIVER], capture_output=True, text=True, env=env, timeout=300, check=False
        )
        wall = time.perf_counter() - t0
        if proc.returncode != 0 or not proc.stdout.strip():
            raise SystemExit(f"driver failed: {proc.stderr[-2000:]}")
        row = json.loads(proc.stdout.strip().splitlines()[-1])
        row["process_s"] = wall
        row["stderr_tail"] = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else ""
        if i:  # the first run warms the page cache
            out.append(row)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--model", type=Path, default=Path(tempfile.gettempdir()) / "flightcheck-bench-96-shards")
    args = ap.parse_args()
    how = build_model(args.model)
    shards = len(list(args.model.glob("*.safetensors")))
    claimed = json.loads((args.model / "model.safetensors.index.json").read_text())["metadata"]["total_size"]
    print(f"model: {args.model} ({shards} shards, {claimed / 1e12:.2f} TB claimed; {how})")
    with tempfile.TemporaryDirectory() as tmp:
        configs = {"b300-facts": str(gpu_side_facts(Path(tmp))), "all-live": None}
        for name, facts in configs.items():
            rows = measure(args.model, args.runs, facts)
            print(f"{name:<11} register()   {summary([r['register_s'] for r in rows])}")
            print(f"{'':<11} process      {summary([r['process_s'] for r in rows])}")
            print(f"{'':<11} outcome      {rows[-1]['outcome']}: {rows[-1]['stderr_tail'][:120]}")
    # `vllm collect-env` and other subcommands: the plugin must return at once
    env = {**os.environ, "BENCH_ARGV": json.dumps(["/usr/local/bin/vllm", "collect-env"])}
    rows = []
    for _ in range(args.runs):
        proc = subprocess.run(
            [sys.executable, "-c", DRIVER], capture_output=True, text=True, env=env, timeout=60, check=False
        )
        rows.append(json.loads(proc.stdout))
    print(f"{'collect-env':<11} load+call    {summary([r['load_s'] + r['register_s'] for r in rows])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
