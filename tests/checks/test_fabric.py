"""FC301–FC309 on recorded hosts and variations; the verdicts the fabric story needs.

The second half is the multicast fallback FC303 / FC304 plan: which settings each engine
and version reads, Ray, SGLang, and the Kimi-K3 latent MoE tail for which no setting
exists.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from flightcheck import Intent, evaluate
from flightcheck._checks.fabric.fallback import beam_allreduce, describe, kimi_k3_tail, multicast_fallback
from flightcheck._checks.framework import Context
from flightcheck._collect.checkpoint import read_checkpoint
from flightcheck._launch.intent_read import read_options
from flightcheck._vocabulary.facts import from_dict
from support.cli import cli
from support.evaluation import PROBE_401, assert_fires, assert_silent, host_doc, results, statuses

FC3 = ("FC301", "FC302", "FC303", "FC304", "FC305", "FC306", "FC307", "FC308", "FC309")


def host(name: str = "hgx-b300", **sections: Any) -> dict[str, Any]:
    d = host_doc(name)
    d.update(sections)
    return d


def with_fabric(name: str = "hgx-b300", **fabric: Any) -> dict[str, Any]:
    d = host(name)
    for g in d["gpus"]:
        g["fabric"].update(fabric)
    return d


@pytest.mark.parametrize(
    "name,tp", [("hgx-b300", 8), ("hgx-h100", 8), ("pcie-l40s", 4), ("h200-single", 1), ("vm-passthrough-h100", 1)]
)
@pytest.mark.parametrize("code", FC3)
def test_healthy_recorded_hosts_do_not_fail(name, tp, code):
    # FC309 answers unknown on an NVSwitch host whose multicast probe was not run (no --deep):
    # the fact is undecidable without it, which is not a crash
    assert_silent(code, from_dict(host(name)), allow_unknown=code == "FC309", tensor_parallel_size=tp)


def test_fc301_fabric_manager_stopped():
    d = with_fabric(state="in_progress", status=None)
    d["fabric_manager"]["service"] = "inactive"
    [r] = assert_fires("FC301", from_dict(d), tensor_parallel_size=8)
    assert "in_progress on 8 of 8 GPUs" in r.message and "inactive" in r.message and r.subject == "gpus:0-7"
    assert r.fix.startswith("sudo systemctl start nvidia-fabricmanager") and "nvidia-smi -r" in r.fix
    report = evaluate(from_dict(d), Intent(tensor_parallel_size=8))
    assert report.exit_code == 1 and not report.plan  # no fallback for a fabric that is not up


def test_fc301_stuck_while_running_and_not_installed():
    d = with_fabric(state="in_progress", status=None)
    [r] = assert_fires("FC301", from_dict(d))
    assert "stuck" in r.fix and "1. stop every CUDA process" in r.fix and "(validated on bare metal)" in r.fix
    d["fabric_manager"].update(service="not-installed", version=None)
    [r] = assert_fires("FC301", from_dict(d))
    assert "nvidia-fabricmanager-580=580.95.05" in r.fix
    d["fabric_manager"]["service"] = "unknown"
    d["host"]["container"] = "docker"
    [r] = assert_fires("FC301", from_dict(d))
    assert "on the host" in r.fix


def test_fc301_fm_down_on_h100_with_links_inactive_also_warns_fc307():
    d = with_fabric("hgx-h100", state="not_started", status=None)
    for g in d["gpus"]:
        g["nvlink"]["active"] = 0
    d["fabric_manager"]["service"] = "failed"
    assert_fires("FC301", from_dict(d), tensor_parallel_size=8)
    assert_fires("FC307", from_dict(d), tensor_parallel_size=8)


def test_fc302_completed_but_failed_status_or_bad_health():
    d = with_fabric(status="insufficient resources", clique_id=0)
    [r] = assert_fires("FC302", from_dict(d), tensor_parallel_size=8)
    assert "status insufficient resources" in r.message and "fabricmanager.log" in r.fix and "nvidia-smi -r" in r.fix
    d = host()
    d["gpus"][4]["fabric"]["health"].update(incorrect_configuration=True, configuration="insufficient_nvlinks")
    [r] = assert_fires("FC302", from_dict(d), tensor_parallel_size=8)
    assert r.subject == "gpu:4" and "insufficient_nvlinks" in r.message and "FC307" in r.fix


def test_fc303_attribute_off_gives_the_plan():
    d = host(
        multicast_probe={
            **PROBE_401,
            "ok": False,
            "stage": "attribute",
            "cuda_error": None,
            "cuda_error_name": None,
            "multicast_supported": [True, True, True, False, True, True, True, True],
            "detail": "attribute 0",
        }
    )
    [r] = assert_fires("FC303", from_dict(d), tensor_parallel_size=8)
    assert r.severity.value == "warning" and r.subject == "gpu:3"
    assert {s.name for s in r.plan} >= {"TORCH_SYMM_MEM_DISABLE_MULTICAST", "VLLM_ALLREDUCE_USE_SYMM_MEM"}
    assert statuses(from_dict(d), "FC304", tensor_parallel_size=8) == {"skip"}  # not a bind failure
    report = evaluate(from_dict(d), Intent(tensor_parallel_size=8))
    assert report.verdict == "ready-with-fallbacks" and report.plan.env["NCCL_NVLS_ENABLE"] == "0"


def test_fc303_without_any_attribute_reading_is_skipped():
    assert statuses(from_dict(host("hgx-h100")), "FC303", tensor_parallel_size=8) == {"skip"}


def test_fc304_the_warm_reboot_401_story():
    d = host(multicast_probe=PROBE_401)
    d["python"]["packages"]["vllm"] = "0.34.0"
    report = evaluate(from_dict(d), Intent(tensor_parallel_size=8))
    [r] = [c for c in report.checks if c.code == "FC304"]
    assert r.status.value == "fail" and r.severity.value == "warning"
    assert "CUDA error 401 CUDA_ERROR_ILLEGAL_STATE" in r.message
    assert "systemctl stop nvidia-fabricmanager" in r.fix and "nvidia-smi -r" in r.fix and "bare metal" in r.fix
    assert report.verdict == "ready-with-fallbacks" and report.exit_code == 0
    assert report.plan.env == {
        "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
        "VLLM_ALLREDUCE_USE_SYMM_MEM": "0",
        "VLLM_FLASHINFER_ALLREDUCE_BACKEND": "trtllm",
        "NCCL_NVLS_ENABLE": "0",
    }  # VLLM_USE_NCCL_SYMM_MEM is off by default (envs.py 0.11.0-0.33.0): not in the plan
    assert all(s.why for s in report.plan.steps) and report.plan.reasons == ["FC304"]


def test_fc304_one_gpu_has_nothing_to_fall_back_from():
    report = evaluate(from_dict(host(multicast_probe=PROBE_401)), Intent(tensor_parallel_size=1))
    assert {r.status.value for r in report.checks if r.code == "FC304"} == {"skip"} and not report.plan


@pytest.mark.parametrize(
    "probe,status",
    [
        ({"stage": "timeout", "last_stage": "bind", "detail": "no answer within 30s"}, "fail"),
        ({"stage": "timeout", "last_stage": "attribute", "detail": "no answer within 30s"}, "unknown"),
        ({"stage": "mem_create", "cuda_error": 2, "cuda_error_name": "CUDA_ERROR_OUT_OF_MEMORY"}, "unknown"),
        ({"stage": "bind", "cuda_error": 802, "cuda_error_name": "CUDA_ERROR_SYSTEM_NOT_READY"}, "fail"),
        ({"ok": True, "stage": None, "cuda_error": None, "cuda_error_name": None}, "pass"),
    ],
)
def test_fc304_outcomes(probe, status):
    p = {**PROBE_401, "cuda_error": None, "cuda_error_name": None, **probe}
    assert statuses(from_dict(host(multicast_probe=p)), "FC304", tensor_parallel_size=8) == {status}


def test_fc304_802_hint_names_the_fabric_manager():
    p = {**PROBE_401, "cuda_error": 802, "cuda_error_name": "CUDA_ERROR_SYSTEM_NOT_READY"}
    [r] = assert_fires("FC304", from_dict(host(multicast_probe=p)), tensor_parallel_size=8)
    assert "nvlsm" in r.fix and r.severity.value == "warning" and r.plan


def test_fc304_cuda_that_cannot_start_is_an_error_without_a_plan():
    p = {
        **PROBE_401,
        "stage": "attribute",
        "cuda_error": 802,
        "cuda_error_name": "CUDA_ERROR_SYSTEM_NOT_READY",
        "detail": "cuInit failed",
        "last_stage": "init",
    }
    report = evaluate(from_dict(host(multicast_probe=p)), Intent(tensor_parallel_size=8))
    [r] = [c for c in report.checks if c.code == "FC304"]
    assert r.status.value == "fail" and r.severity.value == "error" and "CUDA cannot start" in r.message
    assert not report.plan and report.exit_code == 1 and "systemctl status nvidia-fabricmanager" in r.fix


def test_fc305_nccl_nvls_off_while_symm_mem_is_on():
    d = host()
    d["env"]["NCCL_NVLS_ENABLE"] = "0"
    [r] = assert_fires("FC305", from_dict(d), tensor_parallel_size=8)
    assert (
        r.severity.value == "info"
        and "torch symmetric-memory" in r.message
        and "TORCH_SYMM_MEM_DISABLE_MULTICAST=1" in r.fix
    )
    assert evaluate(from_dict(d), Intent(tensor_parallel_size=8)).exit_code == 0
    d["env"].update(TORCH_SYMM_MEM_DISABLE_MULTICAST="1")
    # FlashInfer's mnnvl workspace binds through cuda-python, not torch: still on
    [r] = assert_fires("FC305", from_dict(d), tensor_parallel_size=8)
    assert "FlashInfer mnnvl" in r.message and "CustomAllreduce" not in r.message
    d["env"].update(VLLM_FLASHINFER_ALLREDUCE_BACKEND="trtllm")
    assert_silent("FC305", from_dict(d), tensor_parallel_size=8)


def test_fc305_lists_custom_allreduce_mnnvl_buffers_and_nvshmem():
    d = host()
    d["env"]["NCCL_NVLS_ENABLE"] = "0"
    flags = ["--all2all-backend=deepep_low_latency"]
    [r] = assert_fires("FC305", from_dict(d), tensor_parallel_size=8, engine_flags=flags)
    assert "CustomAllreduce's MNNVL buffers" in r.message and "--all2all-backend deepep_low_latency" in r.message


def test_fc306_multi_node_domain_without_imex_channel():
    uuid = "5d2a90c1-77e4-4b0e-9f3c-0c1d2e3f4a5b"
    # HGX nodes run their own fabric manager: two of them are two domains, no IMEX needed
    assert statuses(from_dict(with_fabric(cluster_uuid=uuid)), "FC306", tensor_parallel_size=16, nnodes=2) == {"skip"}
    # an NVL72 compute tray: fabric completed, the NVSwitches (and their manager) off-host
    d = with_fabric(cluster_uuid=uuid)
    d["fabric_manager"] = {"nvswitch_system": False, "service": "not-installed", "version": None}
    [r] = assert_fires("FC306", from_dict(d), tensor_parallel_size=16, nnodes=2)
    assert "mknod /dev/nvidia-caps-imex-channels/channel0" in r.fix and "NVIDIA_IMEX_CHANNELS=0" in r.fix
    d["imex"]["channels"] = ["channel0"]
    assert_silent("FC306", from_dict(d), tensor_parallel_size=16, nnodes=2)
    assert statuses(
        from_dict(with_fabric(cluster_uuid="5d2a90c1-77e4-4b0e-9f3c-0c1d2e3f4a5b")), "FC306", tensor_parallel_size=8
    ) == {"skip"}


def test_fc307_links_down():
    d = host()
    d["gpus"][2]["nvlink"]["active"] = 16
    [r] = assert_fires("FC307", from_dict(d), tensor_parallel_size=8)
    assert "GPU 2: 16/18" in r.message and "nvidia-smi nvlink -s -i 2" in r.fix


def test_fc308_fabric_manager_version_mismatch():
    d = host()
    d["fabric_manager"]["version"] = "580.82.07"
    [r] = assert_fires("FC308", from_dict(d), tensor_parallel_size=8)
    assert "580.82.07 != driver 580.95.05" in r.message and "nvidia-fabricmanager-580=580.95.05" in r.fix
    d["fabric_manager"].update(version=None, service="unknown")
    assert statuses(from_dict(d), "FC308", tensor_parallel_size=8) == {"skip"}


def test_fc309_no_probe_on_an_nvswitch_system_is_honestly_unknown():
    report = evaluate(from_dict(host("hgx-h100")), Intent(tensor_parallel_size=8))
    [r] = [c for c in report.checks if c.code == "FC309"]
    assert r.status.value == "unknown" and r.severity.value == "info" and "--deep" in r.message
    assert report.exit_code == 0  # an info unknown never blocks
    assert statuses(from_dict(host("hgx-b300")), "FC309", tensor_parallel_size=8) == {"pass"}
    assert statuses(from_dict(host("hgx-h100")), "FC309", tensor_parallel_size=1) == {"skip"}


def test_family_headline_and_text_report():
    report = evaluate(from_dict(host()), Intent(tensor_parallel_size=8))
    assert report.summaries["FC3"] == (
        "NVSwitch system, fabric manager active 580.95.05, fabric completed on 8/8 GPUs, multicast bind ok (1.38s)"
    )
    assert (
        evaluate(from_dict(host("pcie-l40s")), Intent(tensor_parallel_size=4))
        .summaries["FC3"]
        .startswith("no NVSwitch")
    )


def test_cli_scenario_json_plan(tmp_path):
    delta = tmp_path / "delta.json"
    delta.write_text(json.dumps({"multicast_probe": PROBE_401}))
    base = tmp_path / "base.json"
    base.write_text(json.dumps(host_doc("hgx-b300")))
    r = cli("check", "--facts", str(base), "--facts", str(delta), "--format", "json", "-tp", "8")
    doc = json.loads(r.stdout)
    assert r.returncode == 0 and doc["verdict"] == "ready-with-fallbacks"
    assert doc["plan"]["env"]["VLLM_ALLREDUCE_USE_SYMM_MEM"] == "0" and doc["plan"]["reasons"] == ["FC304"]
    fc304 = next(c for c in doc["checks"] if c["code"] == "FC304")
    assert fc304["evidence"]["probe"]["cuda_error"] == 401
    text = cli("check", "--facts", str(base), "--facts", str(delta), "-tp", "8", env={"NO_COLOR": "1"}).stdout
    assert "Fallback plan" in text and "export TORCH_SYMM_MEM_DISABLE_MULTICAST=1" in text


def test_results_cover_every_fc3_code():
    res = results(from_dict(host()), tensor_parallel_size=8)
    assert set(FC3) <= set(res)


@pytest.mark.parametrize(
    "example,verdict,code", [("b300-multicast-401", "ready-with-fallbacks", "FC304"), ("h100-hgx", "ready", "FC309")]
)
def test_bundled_examples(example, verdict, code):
    r = cli("check", "--example", example, "--format", "json")
    doc = json.loads(r.stdout)
    assert r.returncode == 0 and doc["verdict"] == verdict
    assert next(c for c in doc["checks"] if c["code"] == code)["status"] in ("fail", "unknown")


# --------------------------------------------------------------------------- the multicast fallback


K3_CONFIG = {
    "architectures": ["KimiK3ForConditionalGeneration"],
    "model_type": "kimi_k3",
    "text_config": {"num_shared_experts": 1, "routed_expert_hidden_size": 2048, "hidden_size": 7168},
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
    facts, it = from_dict(d), read_options(Intent(**intent))  # the flags read as _launch reads them
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
    ]
    assert all(s.why and s.kind == "env" for s in fb.steps) and fb.blocker is None


@pytest.mark.parametrize(
    "vllm,present,absent",
    [
        ("0.10.1", [], ["VLLM_ALLREDUCE_USE_SYMM_MEM", "VLLM_USE_NCCL_SYMM_MEM", "VLLM_FLASHINFER_ALLREDUCE_BACKEND"]),
        # VLLM_USE_NCCL_SYMM_MEM is read from 0.11.0 but off by default: nothing to turn off
        ("0.12.0", ["VLLM_ALLREDUCE_USE_SYMM_MEM"], ["VLLM_USE_NCCL_SYMM_MEM", "VLLM_FLASHINFER_ALLREDUCE_BACKEND"]),
        # 0.19.0-0.24.x resolve "auto" to trtllm on one node (#38136): the backend is already trtllm
        ("0.19.1", ["VLLM_ALLREDUCE_USE_SYMM_MEM"], ["VLLM_FLASHINFER_ALLREDUCE_BACKEND"]),
        ("0.25.0", ["VLLM_ALLREDUCE_USE_SYMM_MEM", "VLLM_FLASHINFER_ALLREDUCE_BACKEND"], []),
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
    env = env_of(
        ctx_for("0.32.0", distributed_executor_backend="ray", env={"VLLM_RAY_EXTRA_ENV_VARS_TO_COPY": "MY_FLAG"})
    )
    assert env["VLLM_RAY_EXTRA_ENV_VARS_TO_COPY"] == "MY_FLAG,TORCH_SYMM_MEM_DISABLE_MULTICAST"
    assert "VLLM_RAY_EXTRA_ENV_VARS_TO_COPY" not in env_of(ctx_for("0.32.0"))


def test_ray_from_0_33_copies_the_driver_environment():
    # vllm/v1/executor/ray_env_utils.py get_driver_env_vars: every driver variable, setdefault
    fb = multicast_fallback(ctx_for("0.33.0", distributed_executor_backend="ray"))
    assert "VLLM_RAY_EXTRA_ENV_VARS_TO_COPY" not in {s.name for s in fb.steps}
    assert any("copies this environment" in n for n in fb.notes)


def test_ray_with_an_old_vllm_says_to_export_before_ray_start():
    fb = multicast_fallback(ctx_for("0.12.0", distributed_executor_backend="ray"))
    assert "VLLM_RAY_EXTRA_ENV_VARS_TO_COPY" not in {s.name for s in fb.steps}
    assert any(
        "ray start" in n and "TORCH_SYMM_MEM_DISABLE_MULTICAST" in n and "NCCL_NVLS_ENABLE" in n for n in fb.notes
    )


def sglang_ctx(
    version: str | None = "0.5.23",
    flags: list[str] | None = None,
    model: str | None = None,
    name: str = "hgx-b300",
    **intent: Any,
) -> Context:
    d = host_doc(name)
    d["python"]["packages"].update(vllm=None, sglang=version)
    d["multicast_probe"] = PROBE_401
    intent.setdefault("tensor_parallel_size", 8)
    facts, it = from_dict(d), read_options(Intent(engine="sglang", model=model, engine_flags=flags or [], **intent))
    return Context(facts, it, read_checkpoint(it, facts))


def steps_of(ctx: Context) -> list[tuple[str, str, str | None]]:
    return [(s.kind, s.name, s.value) for s in multicast_fallback(ctx).steps]


@pytest.fixture
def dsv3_dir(tmp_path: Path) -> Path:
    d = tmp_path / "dsv3"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"architectures": ["DeepseekV3ForCausalLM"], "hidden_size": 7168}))
    return d


def test_sglang_drops_the_multicast_flags_the_command_has():
    flags = ["--enable-symm-mem", "--enable-mscclpp", "--enable-layernorm-sp", "--enable-megamoe-for-layernorm-sp"]
    kinds = steps_of(sglang_ctx(flags=flags))
    drops = {n for k, n, _ in kinds if k == "drop_arg"}
    assert drops == set(flags)  # megamoe-for-layernorm-sp raises without layernorm-sp: both go
    assert ("env", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "1") in kinds and ("env", "NCCL_NVLS_ENABLE", "0") in kinds


def test_sglang_pins_trtllm_only_where_sglang_turns_the_fusion_on(dsv3_dir):
    # overrides.py _flashinfer_allreduce_fusion_auto_enable: DeepseekV3 on SM100, TP 8, one node
    assert ("add_arg", "--flashinfer-allreduce-fusion-backend", "trtllm") in steps_of(sglang_ctx(model=str(dsv3_dir)))
    for flags in (["--enable-dp-attention"], ["--moe-a2a-backend=deepep"], ["--attn-dp-size=8"]):
        kinds = steps_of(sglang_ctx(model=str(dsv3_dir), flags=flags))
        assert not any(k == "add_arg" for k, _, _ in kinds), flags
    # a model outside SGLang's list: the fusion stays off, no fusion flag
    (dsv3_dir / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"]}))
    assert not any(k == "add_arg" for k, _, _ in steps_of(sglang_ctx(model=str(dsv3_dir))))
    # SM89 (L40S): SGLang never enables it (and _resolve_backend raises there)
    (dsv3_dir / "config.json").write_text(json.dumps({"architectures": ["DeepseekV3ForCausalLM"]}))
    assert not any(k == "add_arg" for k, _, _ in steps_of(sglang_ctx(model=str(dsv3_dir), name="pcie-l40s")))


def test_sglang_unknown_model_gets_the_enforce_disable_flag_not_a_backend():
    kinds = steps_of(sglang_ctx())
    assert ("add_arg", "--enforce-disable-flashinfer-allreduce-fusion", None) in kinds
    assert not any(n == "--flashinfer-allreduce-fusion-backend" for _, n, _ in kinds)


def test_sglang_multi_node_uses_enforce_disable_never_trtllm(dsv3_dir):
    # flashinfer_comm_fusion.py _resolve_backend: trtllm with a multi-node group raises ValueError
    for flags in ([], ["--flashinfer-allreduce-fusion-backend=auto"]):
        kinds = steps_of(sglang_ctx(model=str(dsv3_dir), flags=flags, tensor_parallel_size=16, nnodes=2))
        assert ("add_arg", "--enforce-disable-flashinfer-allreduce-fusion", None) in kinds
        assert not any(v == "trtllm" for _, _, v in kinds)


def test_sglang_user_asked_backend_is_pinned_to_trtllm():
    kinds = steps_of(sglang_ctx(flags=["--flashinfer-allreduce-fusion-backend=mnnvl"]))
    assert ("add_arg", "--flashinfer-allreduce-fusion-backend", "trtllm") in kinds


@pytest.mark.parametrize("version", ["0.5.5", "0.5.6", "0.5.9", "0.5.10", "0.5.13"])
def test_sglang_before_0_5_14_gets_no_fusion_flag(version, dsv3_dir):
    # those wheels reject --flashinfer-allreduce-fusion-backend, and their fusion only builds
    # FlashInfer's trtllm (CUDA IPC) workspace: nothing to turn off, nothing to stop
    kinds = steps_of(sglang_ctx(version, model=str(dsv3_dir)))
    assert not any(k == "add_arg" for k, _, _ in kinds)
    fb = multicast_fallback(sglang_ctx(version, model=str(dsv3_dir)))
    assert fb.blocker is None and fb.steps


def test_sglang_deepep_turns_nvshmem_nvls_off():
    kinds = steps_of(sglang_ctx(flags=["--moe-a2a-backend=deepep"]))
    assert ("env", "NVSHMEM_DISABLE_NVLS", "1") in kinds
    assert ("env", "NVSHMEM_DISABLE_NVLS", "1") not in steps_of(sglang_ctx())


def test_sglang_plan_in_the_report(dsv3_dir):
    d = host_doc("hgx-b300")
    d["python"]["packages"].update(vllm=None, sglang="0.5.23")
    d["multicast_probe"] = PROBE_401
    report = evaluate(from_dict(d), Intent(engine="sglang", model=str(dsv3_dir), tensor_parallel_size=8))
    assert report.plan.add_args == ["--flashinfer-allreduce-fusion-backend", "trtllm"]
    [r] = [c for c in report.checks if c.code == "FC304"]
    assert (
        r.status.value == "fail"
        and r.severity.value == "warning"
        and "--enable-torch-symm-mem" in report.plan.drop_args
    )


# ---- vLLM 0.33.0: one test per multicast path (vllm._knowledge.MULTICAST_PATHS)


def test_vllm_033_symm_mem_custom_allreduce_nccl_flashinfer_paths_are_switched_off():
    env = env_of(ctx_for("0.33.0"))
    assert env["TORCH_SYMM_MEM_DISABLE_MULTICAST"] == "1"  # symm-mem AR, CustomAllreduce MNNVL buffers
    assert env["VLLM_ALLREDUCE_USE_SYMM_MEM"] == "0"
    assert env["VLLM_FLASHINFER_ALLREDUCE_BACKEND"] == "trtllm"  # one node: CUDA IPC
    assert env["NCCL_NVLS_ENABLE"] == "0" and "VLLM_USE_NCCL_SYMM_MEM" not in env  # off by default
    on = env_of(ctx_for("0.33.0", env={"VLLM_USE_NCCL_SYMM_MEM": "1"}))
    assert on["VLLM_USE_NCCL_SYMM_MEM"] == "0"  # the launch turned it on: the plan turns it off


def test_vllm_tp_across_nodes_turns_the_fusion_off_instead_of_trtllm():
    # flashinfer_all_reduce.py get_fi_ar_workspace: trtllm + _node_count > 1 raises ValueError
    ctx = ctx_for("0.33.0", tensor_parallel_size=16, nnodes=2, env={"VLLM_FLASHINFER_ALLREDUCE_BACKEND": "trtllm"})
    fb = multicast_fallback(ctx)
    env = {s.name: s.value for s in fb.steps if s.kind == "env"}
    assert env["VLLM_FLASHINFER_ALLREDUCE_BACKEND"] == "auto" and env["VLLM_ALLREDUCE_USE_FLASHINFER"] == "0"
    assert ("add_arg", "--compilation-config.pass_config.fuse_allreduce_rms", "false") in [
        (s.kind, s.name, s.value) for s in fb.steps
    ]
    # TP inside one node, PP across nodes: trtllm is fine there
    assert (
        env_of(ctx_for("0.33.0", tensor_parallel_size=8, pipeline_parallel_size=2, nnodes=2))[
            "VLLM_FLASHINFER_ALLREDUCE_BACKEND"
        ]
        == "trtllm"
    )


def test_vllm_fusion_off_merges_the_users_compilation_config():
    flags = ['--compilation-config={"mode": 3, "pass_config": {"fuse_norm_quant": true}}']
    ctx = ctx_for("0.33.0", tensor_parallel_size=16, nnodes=2, engine_flags=flags)
    [step] = [s for s in multicast_fallback(ctx).steps if s.kind == "add_arg"]
    assert step.name == "--compilation-config"
    assert json.loads(step.value or "") == {
        "mode": 3,
        "pass_config": {"fuse_norm_quant": True, "fuse_allreduce_rms": False},
    }


def test_vllm_direct_dcp_gathers_are_turned_off_with_dcp():
    assert "VLLM_USE_DIRECT_DCP_Q_GATHER" not in env_of(ctx_for("0.33.0"))
    env = env_of(ctx_for("0.33.0", engine_flags=["-dcp=4"]))
    assert env["VLLM_USE_DIRECT_DCP_Q_GATHER"] == "0" and env["VLLM_USE_DIRECT_DCP_KV_GATHER"] == "0"
    env = env_of(ctx_for("0.33.0", env={"VLLM_USE_DIRECT_DCP_Q_GATHER": "1"}))
    assert env["VLLM_USE_DIRECT_DCP_Q_GATHER"] == "0"


def test_vllm_moonep_is_replaced_and_deepep_gets_nvshmem_off():
    fb = multicast_fallback(
        ctx_for("0.33.0", tensor_parallel_size=1, data_parallel_size=8, engine_flags=["--all2all-backend=moonep"])
    )
    assert ("add_arg", "--all2all-backend", "allgather_reducescatter") in [(s.kind, s.name, s.value) for s in fb.steps]
    env = env_of(ctx_for("0.33.0", engine_flags=["--all2all-backend=deepep_low_latency"]))
    assert env["NVSHMEM_DISABLE_NVLS"] == "1"


def test_vllm_gemm_rs_opt_in_and_inkling_lamport_are_turned_off(tmp_path):
    assert env_of(ctx_for("0.33.0", env={"VLLM_ENABLE_GEMM_RS": "1"}))["VLLM_ENABLE_GEMM_RS"] == "0"
    assert "VLLM_ENABLE_GEMM_RS" not in env_of(ctx_for("0.33.0"))
    d = tmp_path / "inkling"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"architectures": ["InklingForCausalLM"]}))
    assert env_of(ctx_for("0.33.0", model=str(d)))["LAMPORT_RS_SCONV"] == "0"


def test_deepseek_v41_specialised_decode_is_dropped_too(tmp_path):
    # specialized_decode/__init__.py raises ValueError when the multicast check fails
    d = tmp_path / "dsv41"
    d.mkdir()
    (d / "config.json").write_text(
        json.dumps({"architectures": ["DeepseekV41ForCausalLM"], "model_type": "deepseek_v41"})
    )
    flags = ['--additional-config={"decode_backend": "latency_specialized"}']
    fb = multicast_fallback(ctx_for("0.33.0", model=str(d), engine_flags=flags))
    assert [(s.kind, s.name, s.value) for s in fb.steps if s.kind == "add_arg"] == [
        ("add_arg", "--additional-config", "{}")
    ]


def test_tp1_expert_parallel_launch_is_checked_for_multicast():
    # -tp 1 -dp 8 -ep: the EP group runs NCCL across 8 NVSwitch GPUs
    d = host(multicast_probe=PROBE_401)
    report = evaluate(from_dict(d), Intent(tensor_parallel_size=1, data_parallel_size=8, enable_expert_parallel=True))
    [r] = [c for c in report.checks if c.code == "FC304"]
    assert r.status.value == "fail" and report.plan.env["NCCL_NVLS_ENABLE"] == "0"


@pytest.fixture
def k3_dir(tmp_path: Path) -> Path:
    d = tmp_path / "Kimi-K3"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(K3_CONFIG))
    return d


def test_fc304_kimi_k3_latent_tail_blocks_the_fallback_and_names_a_layout(k3_dir):
    ctx = ctx_for(model=str(k3_dir))
    msg = kimi_k3_tail(ctx)
    assert msg and "MoE TP 8" in msg and "`-tp 8 --enable-expert-parallel`" in msg
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
        {"enable_expert_parallel": True},  # EP: MoE TP size 1, _use_fused_path is False
        {"quantization": "fp8"},  # the routed up-projection is quantised
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


@pytest.mark.parametrize("drop", ["num_shared_experts", "routed_expert_hidden_size"])
def test_kimi_k3_gates_of_the_config(tmp_path, drop):
    d = tmp_path / "k3"
    d.mkdir()
    text = {k: v for k, v in K3_CONFIG["text_config"].items() if k != drop}  # type: ignore[attr-defined]
    (d / "config.json").write_text(json.dumps({**K3_CONFIG, "text_config": text}))
    assert kimi_k3_tail(ctx_for(model=str(d))) is None


def test_kimi_k3_moe_tp_is_tp_times_dp_without_ep(k3_dir):
    assert kimi_k3_tail(ctx_for(model=str(k3_dir), tensor_parallel_size=4, data_parallel_size=2))


def test_kimi_k3_quantised_checkpoint_that_keeps_the_up_projection_in_bf16(tmp_path):
    d = tmp_path / "k3q"
    d.mkdir()
    qc = {"quant_method": "fp8", "ignore": ["model.layers.1.block_sparse_moe.routed_expert_up_proj"]}
    (d / "config.json").write_text(json.dumps({**K3_CONFIG, "quantization_config": qc}))
    assert kimi_k3_tail(ctx_for(model=str(d)))
    qc["ignore"] = []
    (d / "config.json").write_text(json.dumps({**K3_CONFIG, "quantization_config": qc}))
    assert kimi_k3_tail(ctx_for(model=str(d))) is None


def test_kimi_k3_specialised_decode_goes_back_to_the_stock_decode(k3_dir):
    flags = ['--additional-config={"decode_backend": "latency_specialized", "mla_core": "auto"}']
    fb = multicast_fallback(ctx_for("0.33.0", model=str(k3_dir), enable_expert_parallel=True, engine_flags=flags))
    [step] = [s for s in fb.steps if s.kind == "add_arg"]
    assert step.name == "--additional-config" and json.loads(step.value or "") == {"mla_core": "auto"}
    env = {s.name: s.value for s in fb.steps if s.kind == "env"}
    assert env["VLLM_KIMI_K3_GEMM_AR"] == "0" and fb.blocker is None


BEAM_CONFIG = {"architectures": ["BeamForCausalLM"], "hidden_size": 4096, "torch_dtype": "bfloat16"}


@pytest.fixture
def beam_dir(tmp_path: Path) -> Path:
    d = tmp_path / "Beam"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(BEAM_CONFIG))
    return d


def test_fc304_beam_allreduce_stops_the_launch_with_a_pipeline_layout(beam_dir):
    ctx = ctx_for("0.33.0", model=str(beam_dir), tensor_parallel_size=8)
    msg = beam_allreduce(ctx)
    assert msg and "McastGPUBuffer" in msg and "`-tp 1 -pp 8`" in msg
    report = evaluate(ctx.facts, ctx.intent)
    [r] = [c for c in report.checks if c.code == "FC304"]
    assert r.status.value == "fail" and r.severity.value == "error" and "Beam" in r.message


@pytest.mark.parametrize(
    "change",
    [
        {"tensor_parallel_size": 1, "pipeline_parallel_size": 8},
        {"engine_flags": ["--dtype=float16"]},
        {"vllm": "0.32.0"},
        {"name": "pcie-l40s"},
    ],
)
def test_beam_allreduce_only_where_it_runs(beam_dir, change):
    kwargs: dict[str, Any] = {"vllm": "0.33.0", "model": str(beam_dir), **change}
    assert beam_allreduce(ctx_for(**kwargs)) is None


@pytest.mark.parametrize("hidden", [512, 1536, 9216])
def test_beam_allreduce_hidden_size_gate(tmp_path, hidden):
    d = tmp_path / "b"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({**BEAM_CONFIG, "hidden_size": hidden}))
    assert beam_allreduce(ctx_for("0.33.0", model=str(d))) is None


def test_beam_steps_aside_when_the_attribute_is_off(beam_dir):
    # allreduce.py create(): is_multicast_supported on every rank, else no workspace
    fb = multicast_fallback(ctx_for("0.33.0", model=str(beam_dir)), attribute_off=True)
    assert fb.blocker is None


def test_kimi_k3_repo_id_from_the_local_hf_cache(tmp_path):
    commit = "0123456789abcdef0123456789abcdef01234567"  # refs hold full commit hashes
    snap = tmp_path / "hub" / "models--moonshotai--Kimi-K3" / "snapshots" / commit
    snap.mkdir(parents=True)
    (snap / "config.json").write_text(json.dumps(K3_CONFIG))
    (tmp_path / "hub" / "models--moonshotai--Kimi-K3" / "refs").mkdir()
    (tmp_path / "hub" / "models--moonshotai--Kimi-K3" / "refs" / "main").write_text(commit)
    ctx = ctx_for(model="moonshotai/Kimi-K3", env={"HF_HUB_CACHE": str(tmp_path / "hub")})
    assert kimi_k3_tail(ctx) is not None


# ---- the fallback plan by release (issue: every release users run) ----------------------


def steps_by_name(ctx: Context) -> dict[str, Any]:
    return {s.name: s for s in multicast_fallback(ctx).steps}


def test_before_0_17_the_flashinfer_fusion_is_kept_across_nodes():
    """Up to 0.16.x the fusion builds only CUDA IPC workspaces (no multicast): the plan
    neither turns it off nor asks for it by a field name of another release."""
    for old in ("0.10.1", "0.12.0", "0.16.0"):
        fb = multicast_fallback(ctx_for(old, tensor_parallel_size=16, nnodes=2))
        names = [s.name for s in fb.steps]
        assert not any("compilation-config" in n or "FLASHINFER" in n for n in names), (old, names)
        assert not any("fusion pass" in n for n in fb.notes), (old, fb.notes)
        assert "NCCL_NVLS_ENABLE" in names


def test_0_17_across_nodes_turns_the_fusion_off_by_its_name_with_the_cost():
    steps = steps_by_name(ctx_for("0.17.0", tensor_parallel_size=16, nnodes=2))
    off = steps["--compilation-config.pass_config.fuse_allreduce_rms"]
    assert off.value == "false" and "#48075" in off.cost and "259 ms" in off.cost
    # the standalone FlashInfer all-reduce is off by default in 0.17.0-0.28.x (on from 0.29.0)
    assert "VLLM_ALLREDUCE_USE_FLASHINFER" not in steps
    later = steps_by_name(ctx_for("0.29.0", tensor_parallel_size=16, nnodes=2))
    assert later["VLLM_ALLREDUCE_USE_FLASHINFER"].value == "0"


def test_an_older_release_gets_only_the_switches_it_declares():
    names = set(steps_by_name(ctx_for("0.10.1")))
    assert names == {"TORCH_SYMM_MEM_DISABLE_MULTICAST", "NCCL_NVLS_ENABLE"}


def test_a_vllm_newer_than_read_gets_the_note_and_0_33_does_not():
    fb = multicast_fallback(ctx_for("0.40.0"))
    assert "rules of vLLM 0.33.0 applied to 0.40.0 (newer than the newest release read)" in fb.notes
    assert describe(fb.steps, fb.notes)["rules"].startswith("rules of vLLM 0.33.0 applied to 0.40.0")
    fb = multicast_fallback(ctx_for("0.33.0"))
    assert not any(n.startswith("rules of") for n in fb.notes)
    assert describe(fb.steps, fb.notes)["rules"] is None


@pytest.mark.parametrize(("nccl", "said"), [("2.29.7", "required"), ("2.28.9", "falls back by itself")])
def test_nccl_nvls_off_is_required_from_2_29(nccl: str, said: str):
    ctx = ctx_for("0.33.0")
    ctx.facts.python.packages["nvidia-nccl-cu13"] = nccl
    step = steps_by_name(ctx)["NCCL_NVLS_ENABLE"]
    assert step.value == "0" and said in step.why and step.cost


def test_the_report_plan_carries_each_steps_cost():
    from flightcheck._vocabulary.plan import build_plan

    d = host(
        multicast_probe={
            **PROBE_401,
            "ok": False,
            "stage": "attribute",
            "cuda_error": None,
            "cuda_error_name": None,
            "multicast_supported": [False] * 8,
            "detail": "attribute 0",
        }
    )
    [r] = assert_fires("FC303", from_dict(d), tensor_parallel_size=8)
    plan = build_plan([r]).to_dict()
    assert set(plan) >= {"env", "args", "reasons", "steps"}
    costs = {s["name"]: s["cost"] for s in plan["steps"]}
    assert "#50179" in costs.get("VLLM_ALLREDUCE_USE_SYMM_MEM", "")
