"""The plugin reads the launch with vLLM's own parser, in process (issue 10, item 1).

Two checks against vllm 0.33.0 of the conformance venv, on the CPU platform:

* a REAL ``vllm serve`` of corpus lines with the plugin registered from this checkout (a
  ``.dist-info`` on ``PYTHONPATH`` declaring the ``vllm.general_plugins`` entry point, as
  an installed flightcheck does): its JSON report says ``intent.reader == "engine"`` and
  carries the fields vLLM read (the golden readings of tests/conformance/golden);
* a sample of the corpus read in ONE interpreter that has imported vLLM's serve modules
  (what ``vllm serve`` has imported when it calls the plugin), through
  ``_plugin.engine_reading``: every document equals the golden reading, field by field, and
  a line vLLM refuses is a refusal.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

#: golden fields compared (the engine reader's canonical fields)
FIELDS = (
    "model",
    "served_model_name",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "data_parallel_size",
    "data_parallel_size_local",
    "prefill_context_parallel_size",
    "decode_context_parallel_size",
    "enable_expert_parallel",
    "max_model_len",
    "kv_cache_dtype",
    "gpu_memory_utilization",
    "quantization",
    "dtype",
    "enforce_eager",
    "load_format",
    "max_num_batched_tokens",
    "max_num_seqs",
    "kv_cache_memory_bytes",
    "cpu_offload_gb",
    "hf_overrides",
    "nnodes",
    "node_rank",
    "headless",
)

DRIVER = r"""
import json, os, sys
import vllm.engine.arg_utils, vllm.plugins, vllm.entrypoints.cli.serve  # as `vllm serve` has them
from flightcheck._plugin import engine_reading
from flightcheck._launch import parse_command
from flightcheck._launch.engine_ask import apply_engine_reading
for line in sys.stdin:
    argv = json.loads(line)
    doc = engine_reading(argv, dict(os.environ))
    out = {"doc": doc}
    if doc is not None:
        cmd = parse_command(argv, {"PATH": "/nonexistent"})
        apply_engine_reading(cmd, doc)
        out["intent"] = cmd.intent.to_dict()
    sys.__stdout__.write(json.dumps(out, default=repr) + "\n")
    sys.__stdout__.flush()
"""


def golden(conformance: Any) -> list[dict[str, Any]]:
    path = conformance.REPO / "tests/conformance/golden/vllm.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()]


def plugin_env(conformance: Any, tmp_path: Path, *, registered: bool = True, **extra: str) -> dict[str, str]:
    """The conformance venv's environment with this checkout's flightcheck importable and,
    when ``registered``, declared as a vLLM plugin."""
    info = tmp_path / "shim" / "flightcheck_conformance-0.0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: flightcheck-conformance\nVersion: 0.0\n")
    (info / "entry_points.txt").write_text("[vllm.general_plugins]\nflightcheck = flightcheck._plugin:register\n")
    env = {k: v for k, v in conformance.child_env().items() if not k.startswith("FLIGHTCHECK_")}
    paths = [str(tmp_path / "shim")] if registered else []
    env["PYTHONPATH"] = os.pathsep.join([*paths, str(conformance.REPO / "src")])
    env["HF_HUB_OFFLINE"] = "1"
    env.update(extra)
    return env


def test_the_plugin_in_a_real_vllm_serve_reads_with_vllms_parser(
    engine_python: str, conformance: Any, tmp_path: Path
) -> None:
    rows = [r for r in golden(conformance) if r.get("form") == "vllm serve" and r["error"] is None]
    # a multi-node data-parallel line (the issue's -dpl case) when the corpus has one, else the first
    row = next((r for r in rows if r["data_parallel_size_local"] not in (None, r["data_parallel_size"])), rows[0])
    vllm = Path(engine_python).parent / "vllm"
    report = tmp_path / "report.json"
    env = plugin_env(
        conformance,
        tmp_path,
        FLIGHTCHECK_REPORT=str(report),
        FLIGHTCHECK_FACTS=str(conformance.REPO / "src/flightcheck/_examples/b300.json"),
    )
    work = tmp_path / "cwd"
    work.mkdir()
    proc = subprocess.run(
        [str(vllm), *row["argv"][1:]],
        env=env,
        cwd=str(work),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert report.exists(), f"the plugin did not run in vllm serve: {proc.stderr[-3000:]}"
    doc = json.loads(report.read_text())
    intent = doc["intent"]
    assert intent["reader"] == "engine", row["cmd"]
    for name in (
        "tensor_parallel_size",
        "pipeline_parallel_size",
        "data_parallel_size",
        "data_parallel_size_local",
        "prefill_context_parallel_size",
        "decode_context_parallel_size",
        "enable_expert_parallel",
        "nnodes",
    ):
        assert intent[name] == row[name], (name, row["cmd"])
    assert intent["model"] == row["model"]
    print(
        f"plugin in vllm serve: engine_read_s={doc['timings'].get('engine_read_s')} total_s={doc['timings']['total_s']}"
    )


def test_in_process_readings_equal_vllms_own_on_a_corpus_sample(
    engine_python: str, conformance: Any, tmp_path: Path
) -> None:
    rows = [r for r in golden(conformance) if r.get("form") in ("vllm serve", "api_server")]
    sample = rows[::6]  # ~35 lines: every form, accepted and refused
    assert any(r["error"] for r in sample) and any(r["form"] == "api_server" for r in sample)
    work = tmp_path / "cwd"
    work.mkdir()
    proc = subprocess.run(
        [engine_python, "-c", DRIVER],
        input="".join(json.dumps(r["argv"]) + "\n" for r in sample),
        env=plugin_env(conformance, tmp_path, registered=False),  # only the driver calls the plugin's reader
        cwd=str(work),
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    outs = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    assert len(outs) == len(sample), proc.stderr[-3000:]
    for row, out in zip(sample, outs, strict=True):
        doc = out["doc"]
        assert doc is not None and doc["in_process"] is True, row["cmd"]
        assert out["intent"]["reader"] == "engine"
        if row["error"]:
            assert doc["error"] and out["intent"]["refused"], row["cmd"]
            continue
        assert doc["error"] is None, (row["cmd"], doc["error"])
        for name in FIELDS:
            assert doc[name] == row[name], (name, row["cmd"], doc[name], row[name])


@pytest.mark.parametrize("off", ["FLIGHTCHECK_ENGINE_READ"])
def test_the_in_process_reading_can_be_turned_off(off: str, engine_python: str, conformance: Any, tmp_path) -> None:
    proc = subprocess.run(
        [engine_python, "-c", DRIVER],
        input=json.dumps(["vllm", "serve", "M", "-tp", "2"]) + "\n",
        env=plugin_env(conformance, tmp_path, registered=False, **{off: "0"}),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    (out,) = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    assert out["doc"] is None
