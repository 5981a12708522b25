#!/usr/bin/env python3
"""Read every corpus line with the ENGINE's own parser; write the golden readings.

    python scripts/gen_reader_golden.py [--python /work/.conformance-venv/bin/python]

For each engine, every line of ``tests/conformance/corpus/<engine>_commands.jsonl`` is
split as a POSIX shell splits it (``shlex.split``; a redirection or control operator such
as ``> log 2>&1 &`` ends the command; quotes removed, NOTHING expanded: a
``$MODEL`` reaches the engine as the literal text ``$MODEL``, which is what the engine would
see if the variable were unset-and-quoted; both readers see the same literal, so the
comparison is fair). Shell words before the engine invocation (``KEY=VALUE`` assignments,
``env``, ``nohup``, ``uv run``, ``numactl ...``) are the shell's business, not the engine's
parser's: the engine argv starts at ``vllm``/``sglang`` ``serve`` or ``python -m <engine
module>`` (see :func:`engine_start`).

All lines of one engine go through ONE ``engine_reader.py --batch`` child (the engine is
imported once), in an empty temporary working directory (a ``--config x.yaml`` of the
corpus does not exist there: the engine's reaction to a missing file is the golden).

Output: ``tests/conformance/golden/<engine>.jsonl``, one object per corpus line, in corpus
order: the ``cmd``, the ``argv`` given to the engine, ``error``/``error_stage`` (null when
the engine accepts the line) and the fields of :data:`FIELDS` as the engine read them.
The conformance suite checks the committed files equal a fresh reading
(tests/conformance/test_reader_golden.py); tests/launch/test_reader_agreement.py checks
flightcheck's built-in reader against them without the engines.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

from flightcheck._launch.engine_ask import reader_command

CORPUS = REPO / "tests" / "conformance" / "corpus"
GOLDEN = REPO / "tests" / "conformance" / "golden"

#: The engine reader's canonical fields kept in the golden files.
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
    "expert_parallel_size",
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
#: Engine settings kept too (they change what the launch uses).
ENGINE_FIELDS = (
    "data_parallel_start_rank",
    "moe_a2a_backend",
    "enable_dp_attention",
    "attn_dp_size",
    "attn_cp_size",
    "disable_cuda_graph",
)

_PY = re.compile(r"^python(\d+(\.\d+)?)?$")
#: ``python -m`` modules that launch the engines' servers (what engine_reader.py reads).
MODULES = {
    "vllm": (
        "vllm.entrypoints.openai.api_server",
        "vllm.entrypoints.launchers.api_server.entry",
        "vllm.entrypoints.cli.main",
    ),
    "sglang": ("sglang.launch_server", "sglang.cli.main"),
}


def engine_start(engine: str, words: list[str]) -> int | None:
    """Index of the engine invocation in a shell-split line (None: not found)."""
    for i, word in enumerate(words):
        base = os.path.basename(word)
        nxt = words[i + 1] if i + 1 < len(words) else ""
        if base == engine and nxt == "serve":
            return i
        if _PY.match(base) and nxt == "-m" and i + 2 < len(words) and words[i + 2] in MODULES[engine]:
            return i
    return None


#: Shell words that end the command: redirections and control operators (``> log 2>&1 &``).
_SHELL_END = re.compile(r"^(\d*>>?.*|\d*<.*|&>.*|&&?|\|\|?|;)$")


def shell_words(cmd: str) -> list[str] | None:
    """The words the shell hands the command (redirections and what follows cut off)."""
    try:
        words = shlex.split(cmd)
    except ValueError:
        return None
    for i, word in enumerate(words):
        if _SHELL_END.match(word):
            return words[:i]
    return words


def engine_argv(engine: str, cmd: str) -> list[str] | None:
    words = shell_words(cmd)
    at = None if words is None else engine_start(engine, words)
    return None if words is None or at is None else words[at:]


def golden_line(entry: dict, argv: list[str] | None, doc: dict | None) -> dict:
    out: dict = {"cmd": entry["cmd"], "words": shell_words(entry["cmd"]), "argv": argv}
    if doc is None:
        out.update(error="not an engine launch line", error_stage="shell")
        return out
    out["error"] = doc.get("error")
    out["error_stage"] = doc.get("error_stage")
    out["form"] = doc.get("form")
    for key in FIELDS:
        out[key] = doc.get(key)
    extra = doc.get("engine_fields") or {}
    out["engine_fields"] = {k: extra[k] for k in ENGINE_FIELDS if k in extra}
    return out


def read_engine(python: str, engine: str, entries: list[dict], timeout: float) -> list[dict]:
    argvs = [engine_argv(engine, e["cmd"]) for e in entries]
    batch = [a for a in argvs if a is not None]
    env = {k: v for k, v in os.environ.items() if not re.match(r"^(VLLM_|SGLANG_|HF_|TRANSFORMERS_|PYTHONPATH$)", k)}
    env["VLLM_TARGET_DEVICE"] = "cpu"
    with tempfile.TemporaryDirectory() as cwd:
        proc = subprocess.run(
            reader_command(python, engine, "--batch", "--timeout", str(timeout)),
            input="".join(json.dumps(a) + "\n" for a in batch),
            capture_output=True,
            text=True,
            check=False,
            env=env,
            cwd=cwd,
            timeout=timeout * max(1, len(batch)) + 300,
        )
    docs = [json.loads(line) for line in proc.stdout.splitlines()]
    if len(docs) != len(batch):
        raise SystemExit(f"{engine}: {len(batch)} lines in, {len(docs)} out\n{proc.stderr[-3000:]}")
    venv = str(Path(python).absolute().parent.parent)
    for doc in docs:  # the same golden wherever the venv lives
        if isinstance(doc.get("error"), str):
            doc["error"] = doc["error"].replace(venv, "<venv>")
    it = iter(docs)
    return [golden_line(e, a, next(it) if a is not None else None) for e, a in zip(entries, argvs, strict=True)]


def corpus(engine: str) -> list[dict]:
    path = CORPUS / f"{engine}_commands.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--python", default=os.environ.get("FLIGHTCHECK_CONFORMANCE_PYTHON", "/work/.conformance-venv/bin/python")
    )
    ap.add_argument("--out", type=Path, default=GOLDEN)
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("engines", nargs="*", default=["vllm", "sglang"])
    ns = ap.parse_args()
    ns.out.mkdir(parents=True, exist_ok=True)
    for engine in ns.engines:
        lines = read_engine(ns.python, engine, corpus(engine), ns.timeout)
        (ns.out / f"{engine}.jsonl").write_text("".join(json.dumps(x, sort_keys=False) + "\n" for x in lines))
        rejected = sum(1 for x in lines if x["error"])
        print(f"{engine}: {len(lines)} lines, {rejected} rejected by the engine", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
