"""Every command line the fallback rewrites parses in vLLM's REAL parser, and the changed
field has the value the plan meant (issue 10, item 5).

The lines use the spellings vLLM accepts that a name-by-name tokenizer misses
(abbreviations, ``--flag=value``, ``_`` names, short aliases, the ``--a.b v`` JSON form);
``apply_plan`` rewrites them; ONE ``engine_reader.py --batch`` child of the conformance
venv reads every rewritten argv with ``vllm serve``'s parser and
``AsyncEngineArgs.from_cli_args``.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from flightcheck._knowledge import vllm
from flightcheck._launch import parse_command
from flightcheck._launch.apply import apply_plan
from flightcheck._vocabulary.plan import build_plan
from flightcheck._vocabulary.results import CheckResult, PlanStep, Severity, Status

DROP_EP = PlanStep("drop_arg", "--enable-expert-parallel", None, "why")
A2A = PlanStep("add_arg", vllm.ALL2ALL_BACKEND_FLAG, vllm.ALL2ALL_DEFAULT, "why")
FUSION = PlanStep("add_arg", f"{vllm.COMPILATION_CONFIG_FLAG}.pass_config.fuse_allreduce_rms", "false", "why")
TP4 = PlanStep("add_arg", "--tensor-parallel-size", "4", "why")

API = ["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "org/M"]
#: (command, plan step, where the changed field is in the reader's document, the value meant)
CASES: list[tuple[list[str], PlanStep, tuple[str, ...], Any]] = [
    (["vllm", "serve", "org/M", "--enable-expert-par", "-tp", "2"], DROP_EP, ("enable_expert_parallel",), False),
    (["vllm", "serve", "org/M", "-ep", "--served-model-name", "a", "b"], DROP_EP, ("enable_expert_parallel",), False),
    (["vllm", "serve", "org/M", "--enable_expert_parallel"], DROP_EP, ("enable_expert_parallel",), False),
    (
        ["vllm", "serve", "org/M", "--all2all=deepep_low_latency", "-ep"],
        A2A,
        ("engine_fields", "all2all_backend"),
        vllm.ALL2ALL_DEFAULT,
    ),
    (
        ["vllm", "serve", "org/M", "--all2all", "deepep_high_throughput", "-ep"],
        A2A,
        ("engine_fields", "all2all_backend"),
        vllm.ALL2ALL_DEFAULT,
    ),
    (
        ["vllm", "serve", "org/M", "--all2all_backend=deepep_low_latency", "-ep"],
        A2A,
        ("engine_fields", "all2all_backend"),
        vllm.ALL2ALL_DEFAULT,
    ),
    (
        ["vllm", "serve", "org/M", "--compilation_config.pass_config.fuse_allreduce_rms=true", "-tp", "2"],
        FUSION,
        ("non_default", "compilation_config", "pass_config", "fuse_allreduce_rms"),
        False,
    ),
    (["vllm", "serve", "org/M", "--tensor-parallel", "8"], TP4, ("tensor_parallel_size",), 4),
    (["vllm", "serve", "org/M", "--tensor_parallel_size=8"], TP4, ("tensor_parallel_size",), 4),
    ([*API, "--tensor-par=8", "--max-model-len", "4096"], TP4, ("tensor_parallel_size",), 4),
]


def rewrite(argv: list[str], step: PlanStep) -> list[str]:
    steps = (PlanStep(step.kind, step.name, step.value, step.why, "FC304"),)
    res = CheckResult("FC304", "name", Status.FAIL, Severity.WARNING, "host", "m", "f", {}, steps)
    launch = apply_plan(build_plan([res]), parse_command(argv, {"PATH": "/nonexistent"}), {})
    assert launch.changes and not launch.problems, (argv, launch.problems)
    return launch.argv


def dig(doc: dict[str, Any], path: tuple[str, ...]) -> Any:
    node: Any = doc
    for key in path:
        assert isinstance(node, dict) and key in node, (path, key)
        node = node[key]
    return node


def test_every_rewritten_line_parses_in_vllm_with_the_intended_value(
    engine_python: str, conformance: Any, tmp_path: Path
) -> None:
    rewritten = [rewrite(argv, step) for argv, step, _, _ in CASES]
    proc = subprocess.run(
        conformance.reader_command(engine_python, "vllm", "--batch", "--timeout", "300"),
        input="".join(json.dumps(a) + "\n" for a in rewritten),
        capture_output=True,
        text=True,
        env=conformance.child_env(),
        cwd=str(tmp_path),
        timeout=900,
        check=False,
    )
    docs = [json.loads(x) for x in proc.stdout.splitlines()]
    assert len(docs) == len(CASES), proc.stderr[-3000:]
    for (argv, _step, path, want), new, doc in zip(CASES, rewritten, docs, strict=True):
        assert doc["error"] is None, (argv, new, doc["error"])
        assert dig(doc, path) == want, (argv, new, path)
