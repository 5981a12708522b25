"""The multicast fallback plan against the real engines (vllm 0.33.0, sglang 0.5.23).

Two kinds of checks:

* the knowledge tables: every variable the plan sets is one the installed vLLM's envs.py
  declares (or torch / NVSHMEM carries in its library), every flag it adds or drops is one
  the installed parsers know, every source file ``MULTICAST_PATHS`` cites exists;
* the plan applied to real launch lines: the planned argv goes through the engine's own
  parser (engine_reader child) without an error, and says what the plan meant.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from flightcheck import Intent
from flightcheck._checks.fabric.fallback import multicast_fallback
from flightcheck._checks.framework import Context
from flightcheck._collect.checkpoint import read_checkpoint
from flightcheck._knowledge import sglang, vllm
from flightcheck._launch import parse_command
from flightcheck._launch.apply import apply_plan
from flightcheck._vocabulary.facts import from_dict
from flightcheck._vocabulary.plan import build_plan
from flightcheck._vocabulary.results import CheckResult, PlanStep, Severity, Status
from support.evaluation import host_doc

PROBE_401 = {"ok": False, "stage": "bind", "cuda_error": 401, "cuda_error_name": "CUDA_ERROR_ILLEGAL_STATE"}


def plan_for(argv: list[str], versions: dict[str, str], host: str = "hgx-b300", model_dir: Path | None = None):
    """The fallback plan for ``argv`` on a recorded host with the pinned engine, applied."""
    cmd = parse_command(argv)
    assert cmd.intent is not None and cmd.recognised
    d = host_doc(host)
    d["python"]["packages"].update(vllm=versions["vllm"], sglang=versions["sglang"])
    d["multicast_probe"] = PROBE_401
    intent: Intent = cmd.intent
    if model_dir is not None:
        intent.model = str(model_dir)
    facts = from_dict(d)
    fb = multicast_fallback(Context(facts, intent, read_checkpoint(intent, facts)))
    steps = tuple(PlanStep(s.kind, s.name, s.value, s.why, "FC304") for s in fb.steps)
    res = CheckResult("FC304", "multicast-bind-failed", Status.FAIL, Severity.WARNING, "host", "m", "f", {}, steps)
    return fb, apply_plan(build_plan([res]), cmd, {})


def option_strings(conformance, engine: str) -> set[str]:
    return {s for o in conformance.table(engine)["options"] for s in o["option_strings"]}


def site_packages(python: str) -> Path:
    out = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return Path(out.stdout.strip())


# ---- the tables


def test_every_vllm_variable_the_plan_sets_is_declared_by_envs_py(conformance) -> None:
    declared = {v["name"] for v in conformance.table("vllm", "envs")["variables"]}
    names = [
        vllm.ALLREDUCE_USE_SYMM_MEM,
        vllm.USE_NCCL_SYMM_MEM,
        vllm.FLASHINFER_ALLREDUCE_BACKEND,
        vllm.ALLREDUCE_USE_FLASHINFER,
        vllm.ENABLE_GEMM_RS,
        vllm.USE_DIRECT_DCP_Q_GATHER,
        vllm.USE_DIRECT_DCP_KV_GATHER,
        vllm.KIMI_K3_GEMM_AR,
        vllm.RAY_EXTRA_ENV_VARS_TO_COPY,
    ]
    assert [n for n in names if n not in declared] == []
    # 0.33.0 has no switch for the latent MoE tail: the plan must stop there, not set one
    assert vllm.KIMI_K3_TAIL_SWITCH not in declared


def test_every_flag_the_plan_touches_is_known_to_the_parsers(conformance) -> None:
    v = option_strings(conformance, "vllm")
    assert {vllm.COMPILATION_CONFIG_FLAG, vllm.ADDITIONAL_CONFIG_FLAG, vllm.ALL2ALL_BACKEND_FLAG, vllm.DTYPE_FLAG} <= v
    assert set(vllm.DCP_FLAGS) <= v and set(vllm.COMPILATION_CONFIG_FLAGS) <= v and vllm.DISABLE_CUSTOM_AR_FLAG in v
    choices = next(
        o["choices"] for o in conformance.table("vllm")["options"] if vllm.ALL2ALL_BACKEND_FLAG in o["option_strings"]
    )
    assert vllm.ALL2ALL_DEFAULT in choices and vllm.ALL2ALL_MULTICAST <= set(choices)
    s = option_strings(conformance, "sglang")
    wanted = set(sglang.MULTICAST_FLAGS) | {
        sglang.FI_FUSION_BACKEND_FLAG,
        sglang.FI_FUSION_DISABLE_FLAG,
        sglang.FI_FUSION_ENABLE_FLAG,
        sglang.MOE_A2A_BACKEND_FLAG,
        sglang.ATTN_DP_SIZE_FLAG,
        sglang.DP_ATTENTION_FLAG,
    }
    assert sorted(wanted - s) == []


def test_the_cited_sources_and_library_switches_exist(engine_python: str) -> None:
    sp = site_packages(engine_python)
    for name, (source, _gate, _cover) in vllm.MULTICAST_PATHS.items():
        first = source.split(",")[0].split(" (")[0].split(";")[0].strip()
        assert (sp / "vllm" / first).exists(), (name, first)
    assert b"TORCH_SYMM_MEM_DISABLE_MULTICAST" in (sp / "torch" / "lib" / "libtorch_cuda.so").read_bytes()
    nvshmem = (sp / "nvidia" / "nvshmem" / "lib" / "libnvshmem_host.so.3").read_bytes()
    assert vllm.DISABLE_NVLS_NVSHMEM.encode() in nvshmem and b"cuMulticastBindMem" in nvshmem
    beam = (sp / "vllm" / "models" / "beam" / "nvidia" / "allreduce.py").read_text()
    assert "McastGPUBuffer(" in beam and "group.size() not in (2, 4, 8)" in beam
    fi_ar = (sp / "vllm" / "distributed" / "device_communicators" / "flashinfer_all_reduce.py").read_text()
    assert 'backend == "trtllm" and _node_count(group) > 1' in fi_ar
    lamport = (sp / "vllm" / "models" / "inkling" / "nvidia" / "ops" / "lamport.py").read_text()
    assert f'os.environ.get("{vllm.INKLING_LAMPORT_SWITCH}", "1") == "0"' in lamport
    ray = (sp / "vllm" / "v1" / "executor" / "ray_env_utils.py").read_text()
    assert "os.environ.items()" in ray
    over = (sp / "sglang" / "srt" / "arg_groups" / "overrides.py").read_text()
    assert all(f'"{a}"' in over for a in sglang.FI_AUTO_ARCHS)


# ---- the planned argv through the engines' own parsers


@pytest.fixture(scope="module")
def dsv3(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("dsv3")
    (d / "config.json").write_text(json.dumps({"architectures": ["DeepseekV3ForCausalLM"], "hidden_size": 7168}))
    return d


def sglang_cases(dsv3: Path) -> dict[str, tuple[list[str], Path | None]]:
    base = ["sglang", "serve", "--model-path", "M"]
    return {
        "flags": (
            [
                *base,
                "--tp",
                "8",
                "--enable-symm-mem",
                "--enable-mscclpp",
                "--enable-layernorm-sp",
                "--enable-megamoe-for-layernorm-sp",
            ],
            None,
        ),
        "auto_fusion": ([*base, "--tp", "8"], dsv3),
        "multi_node": ([*base, "--tp", "16", "--nnodes", "2", "--flashinfer-allreduce-fusion-backend", "auto"], dsv3),
        "deepep": ([*base, "--tp", "8", "--ep-size", "8", "--moe-a2a-backend", "deepep"], dsv3),
    }


VLLM_CASES: dict[str, list[str]] = {
    "multi_node_tp": ["vllm", "serve", "M", "-tp", "16", "--nnodes", "2"],
    "multi_node_cc": ["vllm", "serve", "M", "-tp", "16", "--nnodes", "2", "--compilation-config", '{"mode": 3}'],
    "moonep": ["vllm", "serve", "M", "-tp", "1", "-dp", "8", "-ep", "--all2all-backend", "moonep"],
    "dcp": ["vllm", "serve", "M", "-tp", "8", "-dcp", "2"],
}


@pytest.fixture(scope="module")
def planned(conformance, engine_python: str, dsv3: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    versions = conformance.pinned_versions()
    out: dict[str, Any] = {}
    cases: dict[str, tuple[str, list[str]]] = {}
    work = tmp_path_factory.mktemp("plan-cwd")
    conf = work / "s.yaml"
    conf.write_text("tp-size: 8\nenable-symm-mem: true\nenable-mscclpp: true\nenable-torch-symm-mem: false\n")
    sg = sglang_cases(dsv3)
    sg["config"] = (["sglang", "serve", "--model-path", "M", "--config", str(conf)], dsv3)
    for name, (argv, model) in sg.items():
        fb, launch = plan_for(argv, versions, model_dir=model)
        out[f"sglang:{name}"] = (fb, launch)
        cases[f"sglang:{name}"] = ("sglang", launch.argv)
    for name, argv in VLLM_CASES.items():
        fb, launch = plan_for(argv, versions)
        out[f"vllm:{name}"] = (fb, launch)
        cases[f"vllm:{name}"] = ("vllm", launch.argv)
    readings = conformance.read_many(engine_python, cases, cwd=work)
    return {k: (*out[k], readings[k]) for k in out}


def test_every_planned_argv_parses(planned) -> None:
    for name, (_fb, launch, doc) in planned.items():
        assert doc["_rc"] == 0 and doc["error"] is None, (name, launch.argv, doc["error"])


def test_sglang_plans_say_what_they_mean(planned) -> None:
    _fb, launch, _doc = planned["sglang:flags"]
    for flag in ("--enable-symm-mem", "--enable-mscclpp", "--enable-layernorm-sp", "--enable-megamoe-for-layernorm-sp"):
        assert flag not in launch.argv
    _fb, launch, _doc = planned["sglang:auto_fusion"]
    assert launch.argv[-2:] == ["--flashinfer-allreduce-fusion-backend", "trtllm"]
    _fb, launch, _doc = planned["sglang:multi_node"]
    assert "--enforce-disable-flashinfer-allreduce-fusion" in launch.argv and "trtllm" not in launch.argv
    # a flag in the --config file: dropped from a copy SGLang reads with its own rules (CLI >
    # config; store_true false = absent); the user's file is untouched
    _fb, launch, doc = planned["sglang:config"]
    copy = Path(launch.argv[launch.argv.index("--config") + 1])
    kept = copy.read_text()
    assert "enable-symm-mem" not in kept and "enable-mscclpp" not in kept and "tp-size: 8" in kept
    assert doc["tensor_parallel_size"] == 8 and launch.argv[-2:] == ["--flashinfer-allreduce-fusion-backend", "trtllm"]
    _fb, launch, _doc = planned["sglang:deepep"]
    assert launch.env.get("NVSHMEM_DISABLE_NVLS") == "1"
    assert not any("flashinfer-allreduce-fusion" in a for a in launch.argv)  # a2a backend: SGLang keeps it off


#: vLLM's own parser on the planned arguments (FlexibleArgumentParser + EngineArgs, as
#: ``vllm serve`` builds it): what the engine config will hold. The engine_reader does not
#: report compilation_config / additional_config.
VLLM_PARSE = """
import json, sys
from vllm.utils.argparse_utils import FlexibleArgumentParser
from vllm.engine.arg_utils import EngineArgs
p = FlexibleArgumentParser()
EngineArgs.add_cli_args(p)
ns = p.parse_args(sys.argv[1:])
pc = getattr(ns.compilation_config, "pass_config", None)
print(json.dumps({"mode": str(getattr(ns.compilation_config, "mode", None)),
                  "fuse_allreduce_rms": getattr(pc, "fuse_allreduce_rms", None),
                  "additional_config": ns.additional_config, "all2all_backend": ns.all2all_backend}))
"""


def vllm_parse(conformance, python: str, argv: list[str]) -> dict[str, Any]:
    assert argv[:3] == ["vllm", "serve", "M"], argv
    proc = subprocess.run(
        [python, "-c", VLLM_PARSE, "--model", "M", *argv[3:]],
        capture_output=True,
        text=True,
        check=False,
        env=conformance.child_env(),
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc: dict[str, Any] = json.loads(proc.stdout.splitlines()[-1])
    return doc


def test_vllm_plans_say_what_they_mean(conformance, engine_python: str, planned) -> None:
    _fb, launch, _doc = planned["vllm:multi_node_tp"]
    assert launch.env.get(vllm.FLASHINFER_ALLREDUCE_BACKEND) != "trtllm"  # would raise ValueError
    assert vllm_parse(conformance, engine_python, launch.argv)["fuse_allreduce_rms"] is False
    _fb, launch, _doc = planned["vllm:multi_node_cc"]
    got = vllm_parse(conformance, engine_python, launch.argv)
    assert got["fuse_allreduce_rms"] is False and got["mode"] == "3"  # the user's config kept
    _fb, launch, _doc = planned["vllm:moonep"]
    assert vllm_parse(conformance, engine_python, launch.argv)["all2all_backend"] == vllm.ALL2ALL_DEFAULT
    _fb, launch, _doc = planned["vllm:dcp"]
    assert launch.env[vllm.USE_DIRECT_DCP_Q_GATHER] == "0"


def test_vllm_specialised_decode_leaves_the_rest_of_additional_config(conformance, engine_python, tmp_path) -> None:
    k3 = tmp_path / "k3"
    k3.mkdir()
    cfg = {"architectures": ["KimiK3ForConditionalGeneration"], "num_shared_experts": 1}
    (k3 / "config.json").write_text(json.dumps(cfg))
    extra = json.dumps({"decode_backend": "latency_specialized", "mla_core": "auto"})
    argv = ["vllm", "serve", "M", "-tp", "8", "--additional-config", extra]
    _fb, launch = plan_for(argv, conformance.pinned_versions(), model_dir=k3)
    assert vllm_parse(conformance, engine_python, launch.argv)["additional_config"] == {"mla_core": "auto"}
