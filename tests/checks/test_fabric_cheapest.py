"""The multicast fallback plan picks the cheapest switch that works, by release, and no
variable that changes nothing (FC303 / FC304's plan; issue 21, item 4).

Per release the exact plan on the B300 warm-reboot node (bind fails with 401); per path a
test that the broad switch is not chosen where a cheaper one exists; the costs with their
sources in the plan, the text report and the JSON.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from flightcheck import Intent, evaluate
from flightcheck._checks.fabric.fallback import multicast_fallback, multicast_paths
from flightcheck._checks.framework import Context
from flightcheck._collect.checkpoint import read_checkpoint
from flightcheck._knowledge import vllm
from flightcheck._vocabulary.facts import from_dict
from support.cli import cli
from support.evaluation import PROBE_401, host_doc

ATTRIBUTE_OFF = {
    **PROBE_401,
    "stage": "attribute",
    "cuda_error": None,
    "cuda_error_name": None,
    "multicast_supported": [False] * 8,
    "detail": "attribute 0",
}
SYMM, TORCH, FI, NVLS = (
    "VLLM_ALLREDUCE_USE_SYMM_MEM",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST",
    "VLLM_FLASHINFER_ALLREDUCE_BACKEND",
    "NCCL_NVLS_ENABLE",
)
FUSION_OFF = "--compilation-config.pass_config.fuse_allreduce_rms"


def ctx_for(
    vllm_version: str | None = "0.33.0",
    env: dict[str, Any] | None = None,
    probe: dict[str, Any] | None = None,
    nvswitch: bool | None = True,
    packages: dict[str, str] | None = None,
    **intent: Any,
) -> Context:
    d = host_doc("hgx-b300")  # 8 x B300, NVSwitch, torch 2.14.0, NCCL 2.28.9
    d["python"]["packages"].update(vllm=vllm_version, **(packages or {}))
    d["env"].update(env or {})
    d["fabric_manager"]["nvswitch_system"] = nvswitch
    d["multicast_probe"] = probe or PROBE_401
    intent.setdefault("tensor_parallel_size", 8)
    facts, it = from_dict(d), Intent(**intent)
    return Context(facts, it, read_checkpoint(it, facts))


def plan_of(ctx: Context, attribute_off: bool = False) -> list[tuple[str, str, str | None]]:
    return [(s.kind, s.name, s.value) for s in multicast_fallback(ctx, attribute_off=attribute_off).steps]


def names(ctx: Context, attribute_off: bool = False) -> set[str]:
    return {name for _, name, _ in plan_of(ctx, attribute_off)}


# ---- the exact plan by release ----------------------------------------------------------


@pytest.mark.parametrize(
    ("release", "plan"),
    [
        # 0.10.2 reads VLLM_ALLREDUCE_USE_SYMM_MEM but keeps it off by default: only torch + NCCL
        ("0.10.2", [("env", TORCH, "1"), ("env", NVLS, "0")]),
        # symm-mem all-reduce on by default from 0.11.0; no FlashInfer multicast before 0.17.0
        ("0.12.0", [("env", TORCH, "1"), ("env", SYMM, "0"), ("env", NVLS, "0")]),
        # 0.17.0-0.18.x default trtllm, 0.19.0-0.24.x resolve auto to trtllm on one node:
        # the FlashInfer backend variable would change nothing
        ("0.17.0", [("env", TORCH, "1"), ("env", SYMM, "0"), ("env", NVLS, "0")]),
        ("0.19.1", [("env", TORCH, "1"), ("env", SYMM, "0"), ("env", NVLS, "0")]),
        # 0.25.0+: auto is mnnvl on one node (#47219); trtllm keeps the fusion on NVSwitch
        ("0.33.0", [("env", TORCH, "1"), ("env", SYMM, "0"), ("env", FI, "trtllm"), ("env", NVLS, "0")]),
    ],
)
def test_the_exact_plan_by_release(release, plan):
    fb = multicast_fallback(ctx_for(release))
    assert [(s.kind, s.name, s.value) for s in fb.steps] == plan
    assert not any(n.startswith("rules of") for n in fb.notes)


def test_a_release_newer_than_read_gets_the_033_plan_and_says_so():
    fb = multicast_fallback(ctx_for("0.40.0"))
    assert [(s.kind, s.name, s.value) for s in fb.steps] == [
        ("env", TORCH, "1"),
        ("env", SYMM, "0"),
        ("env", FI, "trtllm"),
        ("env", NVLS, "0"),
    ]
    assert "rules of vLLM 0.33.0 applied to 0.40.0 (newer than the newest release read)" in fb.notes


def test_b300_example_before_and_after():
    # the bundled b300-multicast-401 example (vLLM 0.33.0, TP 8): VLLM_USE_NCCL_SYMM_MEM=0 left the plan
    proc = cli("check", "--example", "b300-multicast-401", "--format", "json")
    plan = json.loads(proc.stdout)["plan"]
    assert plan["env"] == {TORCH: "1", SYMM: "0", FI: "trtllm", NVLS: "0"}
    costs = {s["name"]: s["cost"] for s in plan["steps"]}
    assert "#37756" in costs[FI] and "#50179" in costs[SYMM] and costs[TORCH] and costs[NVLS]


# ---- torch symmetric memory: multicast off inside torch before symmetric memory off ---------


def test_multicast_off_inside_torch_comes_first_and_the_custom_allreduce_stays():
    ctx = ctx_for("0.33.0")
    steps = multicast_fallback(ctx).steps
    assert [s.name for s in steps][:2] == [TORCH, SYMM]
    assert vllm.DISABLE_CUSTOM_AR_FLAG not in {s.name for s in steps}  # never the broad switch
    assert "peer mappings" in steps[0].cost
    # vLLM's own switch only spares what turns itself off anyway (symm_mem.py multicast_ptr == 0)
    assert "turns itself off without multicast" in steps[1].cost and "#50179" in steps[1].cost


def test_a_release_that_keeps_the_two_shot_keeps_symmetric_memory_on(monkeypatch):
    # no release read does yet (PR #50182 open); the gate drops the vLLM switch once one does
    monkeypatch.setattr(vllm, "SYMM_MEM_TWO_SHOT_WITHOUT_MULTICAST_SINCE", "0.33.0")
    assert TORCH in names(ctx_for("0.33.0")) and SYMM not in names(ctx_for("0.33.0"))
    assert SYMM in names(ctx_for("0.32.0"))  # gated in both directions


def test_without_the_torch_switch_the_vllm_switch_is_the_only_one_and_says_so():
    ctx = ctx_for("0.33.0", packages={"torch": "2.4.1+cu124"})
    steps = {s.name: s for s in multicast_fallback(ctx).steps}
    assert TORCH not in steps and "torch < 2.5" in steps[SYMM].cost


def test_tp1_sets_no_symmetric_memory_or_flashinfer_switch():
    # every torch symm-mem user of vLLM runs in the TP group; NCCL still spans the EP group
    ctx = ctx_for("0.33.0", tensor_parallel_size=1, data_parallel_size=8, enable_expert_parallel=True)
    assert plan_of(ctx) == [("env", NVLS, "0")]


def test_symm_mem_switch_only_where_the_allreduce_is_on():
    assert SYMM not in names(ctx_for("0.33.0", env={SYMM: "0"}))  # already off
    assert SYMM in names(ctx_for("0.10.2", env={SYMM: "1"}))  # opted in before the default


# ---- FlashInfer all-reduce: trtllm on NVSwitch, fusion off before a slower backend ----------


def test_nvswitch_one_node_keeps_the_fusion_on_trtllm_not_fusion_off():
    steps = {s.name: s for s in multicast_fallback(ctx_for("0.33.0")).steps}
    assert steps[FI].value == "trtllm" and "#37756" in steps[FI].cost
    assert FUSION_OFF not in steps and "VLLM_ALLREDUCE_USE_FLASHINFER" not in steps


@pytest.mark.parametrize("nvswitch", [False, None])
def test_without_nvswitch_the_fusion_goes_off_not_to_the_slower_trtllm(nvswitch):
    ctx = ctx_for("0.33.0", probe=ATTRIBUTE_OFF, nvswitch=nvswitch)
    steps = {s.name: s for s in multicast_fallback(ctx, attribute_off=True).steps}
    assert FI not in steps  # forced trtllm: 259 ms ITL against 25 ms with the fusion off (PR #48075)
    assert steps[FUSION_OFF].value == "false" and "259 ms" in steps[FUSION_OFF].cost
    assert steps["VLLM_ALLREDUCE_USE_FLASHINFER"].value == "0"  # on by default from 0.29.0


def test_trtllm_needs_the_torch_switch_where_its_workspace_is_torch_symmetric_memory():
    # FlashInfer 0.6.12's trtllm workspace is torch symm-mem (multicast unless torch's switch);
    # 0.7.2.post1's is SymmDeviceMemory(enable_multicast=False)
    fi_06 = {"flashinfer-python": "0.6.12"}
    steps = {s.name: s for s in multicast_fallback(ctx_for("0.33.0", packages=fi_06)).steps}
    assert steps[FI].value == "trtllm" and "torch symmetric memory" in steps[FI].why and TORCH in steps
    old_torch = {**fi_06, "torch": "2.4.1+cu124"}  # no torch switch: trtllm would still bind multicast
    steps = {s.name: s for s in multicast_fallback(ctx_for("0.33.0", packages=old_torch)).steps}
    assert FI not in steps and steps[FUSION_OFF].value == "false"
    new_fi = {"flashinfer-python": "0.7.2.post1", "torch": "2.4.1+cu124"}
    assert FI in names(ctx_for("0.33.0", packages=new_fi))  # its workspace never binds multicast


@pytest.mark.parametrize(
    ("release", "asked", "pinned"),
    [
        ("0.17.0", "auto", True),  # before 0.19.0 vLLM hands auto to FlashInfer: mnnvl (#34109)
        ("0.19.1", "auto", False),  # #38136: auto is trtllm on one node
        ("0.19.1", "mnnvl", True),
        ("0.33.0", "trtllm", False),  # already off multicast
    ],
)
def test_the_backend_is_pinned_only_where_vllm_would_pick_mnnvl(release, asked, pinned):
    assert (FI in names(ctx_for(release, env={FI: asked}))) is pinned


def test_fc305_names_the_flashinfer_path_by_the_same_rule():
    off = {TORCH: "1", NVLS: "0"}
    mnnvl = [p for p in multicast_paths(ctx_for("0.17.0", env={**off, FI: "auto"})) if "FlashInfer" in p]
    assert mnnvl == [f"FlashInfer mnnvl all-reduce ({FI})"]
    assert not [p for p in multicast_paths(ctx_for("0.19.1", env={**off, FI: "auto"})) if "FlashInfer" in p]


# ---- NCCL: NVLS off only where NCCL would try it --------------------------------------------


def test_every_attribute_off_leaves_nvls_to_nccl():
    # nvls.cc: NCCL follows CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED; 0 everywhere: no NVLS
    ctx = ctx_for("0.33.0", probe=ATTRIBUTE_OFF)
    assert NVLS not in names(ctx, attribute_off=True)
    forced = ctx_for("0.33.0", probe=ATTRIBUTE_OFF, env={NVLS: "1"})
    assert NVLS in names(forced, attribute_off=True)  # NCCL_NVLS_ENABLE=1 forces NVLS past it
    some = ctx_for("0.33.0", probe={**ATTRIBUTE_OFF, "multicast_supported": [True] * 7 + [False]})
    assert NVLS in names(some, attribute_off=True)


@pytest.mark.parametrize("nccl", ["2.28.9", "2.29.7"])
def test_a_failed_bind_keeps_nvls_off_whatever_nccl(nccl):
    ctx = ctx_for("0.33.0", packages={"nvidia-nccl-cu13": nccl})
    [step] = [s for s in multicast_fallback(ctx).steps if s.name == NVLS]
    assert step.value == "0" and ("required" in step.why) is (nccl == "2.29.7")


def test_nccl_symmetric_memory_only_where_the_launch_turned_it_on():
    assert "VLLM_USE_NCCL_SYMM_MEM" not in names(ctx_for("0.33.0"))
    assert ("env", "VLLM_USE_NCCL_SYMM_MEM", "0") in plan_of(ctx_for("0.33.0", env={"VLLM_USE_NCCL_SYMM_MEM": "1"}))


# ---- SGLang, and the costs in the reports ---------------------------------------------------


def test_sglang_drops_torch_symm_mem_because_it_refuses_to_run_without_multicast():
    d = host_doc("hgx-b300")
    d["python"]["packages"].update(vllm=None, sglang="0.5.23")
    d["multicast_probe"] = PROBE_401
    it = Intent(engine="sglang", tensor_parallel_size=8, engine_flags=["--enable-torch-symm-mem"])
    facts = from_dict(d)
    steps = {s.name: s for s in multicast_fallback(Context(facts, it, read_checkpoint(it, facts))).steps}
    assert steps["--enable-torch-symm-mem"].kind == "drop_arg" and "#30364" in steps["--enable-torch-symm-mem"].cost
    assert steps[TORCH].cost


def test_the_text_report_shows_each_cost_under_its_step():
    report = evaluate(ctx_for("0.33.0").facts, Intent(tensor_parallel_size=8))
    assert report.plan.env[FI] == "trtllm"
    proc = cli("check", "--example", "b300-multicast-401")
    lines = proc.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if f"export {FI}=trtllm" in line)
    assert "cost: keeps the all-reduce + RMSNorm fusion" in lines[at + 1] and "#37756" in lines[at + 1]
