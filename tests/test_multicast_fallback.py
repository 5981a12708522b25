"""The multicast fallback: which settings each engine and version reads, Ray, SGLang, and the
Kimi-K3 latent MoE tail for which no setting exists."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from flightcheck import Intent, evaluate
from flightcheck._checks.fabric.fallback import kimi_k3_tail, multicast_fallback
from flightcheck._checks.framework import Context
from flightcheck._collect.checkpoint import read_checkpoint
from flightcheck._vocabulary.facts import from_dict
from support.evaluation import host_doc

PROBE_401 = {
    "ok": False,
    "stage": "bind",
    "cuda_error": 401,
    "cuda_error_name": "CUDA_ERROR_ILLEGAL_STATE",
    "devices": 8,
    "handle_type": "posix_fd",
    "duration_s": 0.4,
}
K3_CONFIG = {
    "architectures": ["KimiK3ForConditionalGeneration"],
    "model_type": "kimi_k3",
    "text_config": {"n_shared_experts": 1, "hidden_size": 7168},
}


def ctx_for(
    vllm: str | None = "0.34.0",
    torch: str | None = "2.14.0+cu130",
    env_vars: list[str] | None = None,
    env: dict[str, Any] | None = None,
    name: str = "hgx-b300",
    **intent: Any,
) -> Context:
    d = host_doc(name)
    d["python"]["packages"].update(vllm=vllm, torch=torch)
    if env_vars is not None:
        d["python"].update(engine="vllm", engine_env_vars=env_vars)
    d["env"].update(env or {})
    d["multicast_probe"] = PROBE_401
    intent.setdefault("tensor_parallel_size", 8)
    facts, it = from_dict(d), Intent(**intent)
    return Context(facts, it, read_checkpoint(it, facts))


def env_of(ctx: Context) -> dict[str, str]:
    fb = multicast_fallback(ctx)
    return {s.name: s.value for s in fb.steps if s.kind == "env"}


def test_current_vllm_and_torch_get_every_switch_with_a_reason():
    fb = multicast_fallback(ctx_for())
    assert [s.name for s in fb.steps] == [
        "TORCH_SYMM_MEM_DISABLE_MULTICAST",
        "VLLM_ALLREDUCE_USE_SYMM_MEM",
        "VLLM_FLASHINFER_ALLREDUCE_BACKEND",
        "NCCL_NVLS_ENABLE",
        "VLLM_USE_NCCL_SYMM_MEM",
    ]
    assert all(s.why and s.kind == "env" for s in fb.steps) and fb.blocker is None


@pytest.mark.parametrize(
    "vllm,present,absent",
    [
        ("0.10.1", [], ["VLLM_ALLREDUCE_USE_SYMM_MEM", "VLLM_USE_NCCL_SYMM_MEM", "VLLM_FLASHINFER_ALLREDUCE_BACKEND"]),
        ("0.12.0", ["VLLM_ALLREDUCE_USE_SYMM_MEM", "VLLM_USE_NCCL_SYMM_MEM"], ["VLLM_FLASHINFER_ALLREDUCE_BACKEND"]),
        ("0.19.1", ["VLLM_ALLREDUCE_USE_SYMM_MEM", "VLLM_FLASHINFER_ALLREDUCE_BACKEND"], []),
        ("0.34.0rc1", ["VLLM_FLASHINFER_ALLREDUCE_BACKEND"], []),
    ],
)
def test_version_table_decides_without_the_envs_list(vllm, present, absent):
    env = env_of(ctx_for(vllm))
    assert all(n in env for n in present) and not any(n in env for n in absent)
    assert env["NCCL_NVLS_ENABLE"] == "0"


def test_the_installed_envs_list_beats_the_table():
    declared = ["VLLM_ALLREDUCE_USE_SYMM_MEM", "VLLM_RAY_EXTRA_ENV_VARS_TO_COPY"]  # e.g. a patched build
    env = env_of(ctx_for("0.34.0", env_vars=declared))
    assert "VLLM_ALLREDUCE_USE_SYMM_MEM" in env and "VLLM_FLASHINFER_ALLREDUCE_BACKEND" not in env
    assert "VLLM_USE_NCCL_SYMM_MEM" not in env


def test_torch_before_2_5_does_not_read_the_torch_switch():
    assert "TORCH_SYMM_MEM_DISABLE_MULTICAST" not in env_of(ctx_for(torch="2.4.1+cu124"))
    assert "TORCH_SYMM_MEM_DISABLE_MULTICAST" in env_of(ctx_for(torch="2.5.0"))


def test_unknown_versions_still_get_the_switches_and_say_so():
    fb = multicast_fallback(ctx_for(vllm=None, torch=None))
    assert {s.name for s in fb.steps} >= {"TORCH_SYMM_MEM_DISABLE_MULTICAST", "NCCL_NVLS_ENABLE"}
    assert "version unknown" in next(s.why for s in fb.steps if s.name == "TORCH_SYMM_MEM_DISABLE_MULTICAST")


def test_ray_forwards_the_torch_switch_keeping_what_was_there():
    env = env_of(ctx_for(distributed_executor_backend="ray", env={"VLLM_RAY_EXTRA_ENV_VARS_TO_COPY": "MY_FLAG"}))
    assert env["VLLM_RAY_EXTRA_ENV_VARS_TO_COPY"] == "MY_FLAG,TORCH_SYMM_MEM_DISABLE_MULTICAST"
    assert "VLLM_RAY_EXTRA_ENV_VARS_TO_COPY" not in env_of(ctx_for())


def test_ray_with_an_old_vllm_says_to_export_before_ray_start():
    fb = multicast_fallback(ctx_for("0.12.0", distributed_executor_backend="ray"))
    assert "VLLM_RAY_EXTRA_ENV_VARS_TO_COPY" not in {s.name for s in fb.steps}
    assert any(
        "ray start" in n and "TORCH_SYMM_MEM_DISABLE_MULTICAST" in n and "NCCL_NVLS_ENABLE" in n for n in fb.notes
    )


def test_sglang_drops_the_flags_it_has_and_pins_the_fusion_backend():
    d = host_doc("hgx-b300")
    d["python"]["packages"].update(vllm=None, sglang="0.5.23")
    ctx = Context(from_dict(d), Intent(engine="sglang", tensor_parallel_size=8, engine_flags=["--enable-symm-mem"]))
    fb = multicast_fallback(ctx)
    kinds = [(s.kind, s.name, s.value) for s in fb.steps]
    assert ("drop_arg", "--enable-symm-mem", None) in kinds and ("drop_arg", "--enable-nccl-nvls", None) not in kinds
    assert ("add_arg", "--flashinfer-allreduce-fusion-backend", "trtllm") in kinds
    d["python"]["packages"]["sglang"] = "0.5.2"
    fb = multicast_fallback(Context(from_dict(d), Intent(engine="sglang", tensor_parallel_size=8)))
    assert not any(s.kind == "add_arg" for s in fb.steps) and fb.notes
    assert {s.name for s in fb.steps if s.kind == "drop_arg"} == {
        "--enable-nccl-nvls",
        "--enable-symm-mem",
        "--enable-torch-symm-mem",
    }


def test_sglang_plan_in_the_report():
    d = host_doc("hgx-b300")
    d["python"]["packages"].update(vllm=None, sglang="0.5.23")
    d["multicast_probe"] = PROBE_401
    report = evaluate(from_dict(d), Intent(engine="sglang", tensor_parallel_size=8))
    assert report.plan.add_args == ["--flashinfer-allreduce-fusion-backend", "trtllm"]
    assert "--enable-torch-symm-mem" in report.plan.drop_args and report.verdict == "ready-with-fallbacks"


@pytest.fixture
def k3_dir(tmp_path: Path) -> Path:
    d = tmp_path / "Kimi-K3"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(K3_CONFIG))
    return d


def test_kimi_k3_latent_tail_blocks_the_fallback_and_names_a_layout(k3_dir):
    ctx = ctx_for(model=str(k3_dir))
    msg = kimi_k3_tail(ctx)
    assert msg and "TP 8" in msg and "-tp 4 -pp 2" in msg and "--enable-expert-parallel" in msg
    report = evaluate(ctx.facts, ctx.intent)
    [r] = [c for c in report.checks if c.code == "FC304"]
    assert r.status.value == "fail" and r.severity.value == "error" and "latent MoE tail" in r.message
    assert report.exit_code == 1 and report.verdict == "not-ready" and not r.plan


@pytest.mark.parametrize(
    "change",
    [
        {"tensor_parallel_size": 4},
        {"vllm": "0.32.0"},
        {"name": "hgx-h100"},
    ],
)
def test_kimi_k3_tail_only_where_it_runs(k3_dir, change):
    kwargs = {"model": str(k3_dir), **change}
    assert kimi_k3_tail(ctx_for(**kwargs)) is None


def test_kimi_k3_tail_switch_where_the_installed_vllm_declares_it(k3_dir):
    declared = ["VLLM_ALLREDUCE_USE_SYMM_MEM", "VLLM_ENABLE_K3_LATENT_MOE_TAIL_FUSION", "VLLM_KIMI_K3_GEMM_AR"]
    ctx = ctx_for(model=str(k3_dir), env_vars=declared)
    fb = multicast_fallback(ctx)
    assert fb.blocker is None
    env = {s.name: s.value for s in fb.steps}
    assert env["VLLM_ENABLE_K3_LATENT_MOE_TAIL_FUSION"] == "0" and env["VLLM_KIMI_K3_GEMM_AR"] == "0"


def test_kimi_k3_without_shared_expert_has_no_tail(tmp_path):
    d = tmp_path / "k3-noshared"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({**K3_CONFIG, "text_config": {"n_shared_experts": 0}}))
    assert kimi_k3_tail(ctx_for(model=str(d))) is None


def test_kimi_k3_repo_id_from_the_local_hf_cache(tmp_path):
    commit = "0123456789abcdef0123456789abcdef01234567"  # refs hold full commit hashes
    snap = tmp_path / "hub" / "models--moonshotai--Kimi-K3" / "snapshots" / commit
    snap.mkdir(parents=True)
    (snap / "config.json").write_text(json.dumps(K3_CONFIG))
    (tmp_path / "hub" / "models--moonshotai--Kimi-K3" / "refs").mkdir()
    (tmp_path / "hub" / "models--moonshotai--Kimi-K3" / "refs" / "main").write_text(commit)
    ctx = ctx_for(model="moonshotai/Kimi-K3", env={"HF_HUB_CACHE": str(tmp_path / "hub")})
    assert kimi_k3_tail(ctx) is not None
