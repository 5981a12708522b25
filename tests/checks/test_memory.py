"""FC401–FC405 fire and stay silent on recorded nodes, with suggestions that are computed
for the launch (smallest TP that fits, fp8 KV, the largest max_model_len)."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest

from support.ckptgen import load_config, write_checkpoint
from support.evaluation import (
    assert_fires,
    assert_silent,
    counting_bug,
    evaluated,
    facts,
    host_doc,
    results,
    statuses,
)

GiB = 1 << 30
H200_BYTES = 150754820096


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("ckpt")
    out = {}
    for name, shards in (("kimi-k2-instruct", 61), ("qwen2-7b", 4), ("llama-3-8b", 4)):
        out[name] = str(write_checkpoint(root / name, load_config(name), shards=shards))
    moe = {**load_config("qwen3-30b-a3b"), "num_hidden_layers": 2, "num_experts": 4}
    out["tiny-moe"] = str(write_checkpoint(root / "tiny-moe", moe, shards=2))
    fp8 = {**moe, "num_experts": 16, "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}
    out["tiny-moe-fp8"] = str(write_checkpoint(root / "tiny-moe-fp8", fp8, shards=2))
    return out


@pytest.fixture(autouse=True)
def shared_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    # one cache for the module: the 139k-tensor Kimi checkpoint is scanned once
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "memchecks-xdg"))


def h200(**sections):
    doc = host_doc("b300")
    gpus = copy.deepcopy(doc["gpus"])
    for g in gpus:
        g.update(name="NVIDIA H200", memory_total_bytes=H200_BYTES, compute_capability="9.0")
    return facts("b300", gpus=gpus, **sections)


def test_fc402_kimi_tp8_on_h200_needs_fp8_kv_or_tp16(ckpts) -> None:
    """Moonshot's "smallest deployment unit is 16 GPUs for 128K", derived from headers."""
    f = h200()
    # the weights fit with 4.0 GiB to spare at the estimate; from 0.27.0 the profiler counts the
    # blocks torch keeps reserved after the profile twice (vllm.consumed_counts_allocator_cache:
    # up to the 2.3 GiB MoE peak), so the low end goes below zero: a warning naming the margin,
    # never a stop
    (w,) = evaluated("FC401", results(f, model=ckpts["kimi-k2-instruct"], tensor_parallel_size=8)["FC401"])
    assert w.status.value == "fail" and w.severity.value == "warning", w.message
    assert "4.0 GiB under the estimate" in w.message and "allocator cache up to 2.3 GiB less" in w.message
    (r,) = assert_fires("FC402", f, model=ckpts["kimi-k2-instruct"], tensor_parallel_size=8)
    assert "131,072 tokens needs 8.6 GiB" in r.message and "70,272 B/token" in r.message
    # the V2 model runner's penalties state (vllm.v2_persistent_bytes: 1024 requests x (163,840 +
    # 5,120) x 4 B = 0.64 GiB, counted from 0.27.0) leaves an fp8 KV cache just short as well
    # (torch's 33 MiB of cuBLAS / cuBLASLt workspaces on cc 9.0, cublas.blas_workspaces_bytes, take 976
    # fp8 tokens of 35,136 B: 122,944 before)
    assert "an fp8 KV cache would not fit either (up to 121,968 tokens)" in r.message
    fixes = r.fix.splitlines()
    fit = int(re.search(r"--max-model-len (\d+)", r.fix).group(1))
    assert 0 < fit < 131072 and fit % 16 == 0
    # (TP within the 8-GPU node, pipeline stages across: never -tp 16, which FC202 refuses)
    assert "--kv-cache-dtype fp8" not in fixes and "-tp 4 -pp 2" in fixes
    assert r.evidence["kv_bytes_per_token"] == 70272


def test_kimi_fits_where_it_should(ckpts) -> None:
    for f, tp in ((facts("b300"), 8), (h200(), 16)):
        for code in ("FC401", "FC402", "FC403", "FC404"):
            assert_silent(code, f, model=ckpts["kimi-k2-instruct"], tensor_parallel_size=tp)
    # fp8 KV at TP 8 on H200 is 0.27 GiB short at the estimate once the V2 runner's penalties
    # state is counted (vllm.memory_runner), inside the bound's [low, high] (NCCL's connections
    # made on first use, the CUDA-graph estimate: bound.bound_terms) — a warning naming the
    # margin, never a stop
    got = evaluated(
        "FC402",
        results(h200(), model=ckpts["kimi-k2-instruct"], tensor_parallel_size=8, kv_cache_dtype="fp8")["FC402"],
    )
    assert [r.severity.value for r in got if r.status.value == "fail"] == ["warning"]
    (r,) = got
    assert "may start or may refuse" in r.message and "nccl after snapshot" in r.message
    assert r.evidence["kv_budget_low_bytes"] < r.evidence["kv_budget_bytes"] <= r.evidence["kv_budget_high_bytes"]


def test_fc401_weights_too_big_names_the_smallest_tp(ckpts) -> None:
    (r,) = assert_fires("FC401", h200(), model=ckpts["kimi-k2-instruct"], tensor_parallel_size=4)
    assert (
        "weights need 240.7 GiB per GPU at -tp 4" in r.message and "H200 (140.4 GiB) has 129.2 GiB usable" in r.message
    )
    # TP 8 holds the weights but not 128K of MLA cache (not split by TP): 16 would be the
    # smallest TP alone, but not within a node of 8 (FC202 refuses it); two pipeline stages
    # halve the layers, so the weights *and* the MLA cache per GPU, and fit on one node of 8
    assert r.fix == "-tp 4 -pp 2" and "-tp 16" not in r.message
    assert "-tp 4 -pp 2 fits (8 GPUs;" in r.message
    assert statuses(h200(), "FC402", model=ckpts["kimi-k2-instruct"], tensor_parallel_size=4) == {"skip"}


def test_fc402_pipeline_stages_every_kv_figure_is_the_binding_stages(ckpts) -> None:
    """61 layers over 8 stages hold 7 or 8 each: the B/token FC402 quotes, the length FC403
    suggests and the memory block all belong to the stage with the least room (stage 0,
    with 7 layers, was quoted, and FC403's length then left under 5% where it binds)."""
    from flightcheck import evaluate
    from flightcheck._vocabulary.intent import Intent

    kw = {"model": ckpts["kimi-k2-instruct"], "tensor_parallel_size": 2, "pipeline_parallel_size": 8}
    per_token = 8 * (512 + 64) * 2
    (r,) = assert_fires("FC402", h200(), max_model_len=10_000_000, **kw)
    assert r.evidence["kv_bytes_per_token"] == per_token and f"({per_token:,} B/token" in r.message
    mem = evaluate(h200(), Intent(max_model_len=10_000_000, **kw)).memory
    per = mem["per_rank"]
    assert per["kv_bytes_per_token"] == per_token and mem["pp_stage"] == 2
    assert abs(sum(mem["weights_breakdown"].values()) - per["weights_bytes"]) < 16
    tight = int((per["kv_budget_bytes"] - 0.03 * per["usable_bytes"]) // per_token) // 16 * 16
    (w,) = assert_fires("FC403", h200(), max_model_len=tight, **kw)
    safer = int(w.fix.split()[-1])
    assert per["kv_budget_bytes"] - safer * per_token >= 0.05 * per["usable_bytes"]


def test_fc403_headroom_warning(ckpts) -> None:
    model = ckpts["llama-3-8b"]
    res = results(h200(), model=model, tensor_parallel_size=1, max_model_len=8192, reserve_gib=100.0)
    (_fit,) = [r for r in res["FC402"] if r.status.value == "pass"]
    budget = res["FC402"][0].evidence["kv_budget_bytes"]
    tight = int(budget * 0.97 // 131072) // 16 * 16  # leaves ~3% of the usable memory
    (r,) = assert_fires("FC403", h200(), model=model, tensor_parallel_size=1, max_model_len=tight, reserve_gib=100.0)
    assert r.severity.value == "warning" and r.fix.startswith("--max-model-len ")
    assert_silent("FC403", h200(), model=model, tensor_parallel_size=1, max_model_len=8192, reserve_gib=100.0)


def test_fc404_layout_invalid(ckpts) -> None:
    (r,) = assert_fires("FC404", facts("b300"), model=ckpts["qwen2-7b"], tensor_parallel_size=8)
    assert "28 attention heads do not divide by TP 8" in r.message and r.fix == "-tp one of 1, 2, 4"
    assert_silent("FC404", facts("b300"), model=ckpts["qwen2-7b"], tensor_parallel_size=4)
    block = assert_fires("FC404", facts("b300"), model=ckpts["kimi-k2-instruct"], tensor_parallel_size=32)
    said = " | ".join(x.message for x in block)
    assert "2048 / 32 = 64, is not a multiple of the fp8-block block of 128" in said
    assert (
        "dense intermediate size per rank, 18432 / 32 = 576" in said
        and "shared-expert intermediate size per rank, 2048 / 32" in said
    )
    assert block[0].fix == "-tp one of 1, 2, 4, 8, 16"  # EP would not save the dense layer and shared experts
    (ep,) = assert_fires("FC404", facts("b300"), model=ckpts["tiny-moe-fp8"], tensor_parallel_size=8)
    assert "768 / 8 = 96" in ep.message and ep.fix.splitlines()[0] == "-tp 8 --enable-expert-parallel"
    assert_silent(
        "FC404", facts("b300"), model=ckpts["tiny-moe-fp8"], tensor_parallel_size=8, enable_expert_parallel=True
    )
    few = assert_fires(
        "FC404", facts("b300"), model=ckpts["tiny-moe"], tensor_parallel_size=8, enable_expert_parallel=True
    )
    assert "4 experts cannot be spread over 8" in few[0].message


def test_fc405_max_model_len_over_the_window(ckpts) -> None:
    (r,) = assert_fires("FC405", facts("b300"), model=ckpts["llama-3-8b"], max_model_len=16384)
    assert "context window of 8,192" in r.message and r.fix.startswith("--max-model-len 8192")
    doc = host_doc("b300")
    allowed = facts("b300", env={**doc["env"], "VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"})
    assert_silent("FC405", allowed, model=ckpts["llama-3-8b"], max_model_len=16384)
    assert statuses(facts("b300"), "FC405", model=ckpts["llama-3-8b"]) == {"skip"}
    # FC402's length suggestion never exceeds the window (FC405 would refuse it) ...
    (kv,) = assert_fires("FC402", h200(), model=ckpts["llama-3-8b"], max_model_len=10_000_000)
    assert kv.fix.splitlines()[0] == "--max-model-len 8192"
    # ... unless the override is set
    (kv,) = assert_fires("FC402", allowed, model=ckpts["llama-3-8b"], max_model_len=10_000_000)
    assert int(kv.fix.splitlines()[0].split()[-1]) > 8192


def test_auto_length_and_unknown_gpus(ckpts) -> None:
    res = results(h200(), model=ckpts["kimi-k2-instruct"], tensor_parallel_size=8, max_model_len=-1)
    (r,) = res["FC402"]
    assert r.status.value == "pass" and "auto: up to" in r.message
    nogpu = facts("b300", gpus=None)
    assert statuses(nogpu, "FC401", model=ckpts["llama-3-8b"]) == {"unknown"}
    assert statuses(nogpu, "FC402", model=ckpts["llama-3-8b"]) == {"unknown"}


def test_no_model_skips_and_missing_model_skips(tmp_path: Path) -> None:
    assert statuses(facts("b300"), "FC401") == {"skip"}
    assert statuses(facts("b300"), "FC501") == {"skip"}
    gone = str(tmp_path / "gone")
    assert statuses(facts("b300"), "FC402", model=gone) == {"skip"}
    assert statuses(facts("b300"), "FC501", model=gone) == {"fail"}


def test_fc402_sglang_budget_and_flags(ckpts) -> None:
    """SGLang's static fraction holds weights + KV pool only: the weights fit an H200 at
    TP 8, 128K of KV does not, and every fix is spelled as SGLang spells it."""
    res = results(h200(), engine="sglang", model=ckpts["kimi-k2-instruct"], tensor_parallel_size=8)
    assert res["FC401"][0].status.value == "pass"
    (r,) = res["FC402"]
    assert r.status.value == "fail"
    fixes = r.fix.splitlines()
    assert fixes[0].startswith("--context-length ") and "--tp 8 --pp-size 2" in fixes
    assert any(f.startswith("--mem-fraction-static ") for f in fixes)
    # SGLang 0.5.23 keeps 1.5 GiB back for an MLA model's prefill graphs: fp8 KV alone is short
    assert "fp8 KV cache would not fit either" in r.message


def _apply(fix_line: str) -> dict:
    """A fix line as launch options (the flags FC402 writes)."""
    words, out = fix_line.split(), {}
    names = {
        "--max-model-len": "max_model_len",
        "--kv-cache-dtype": "kv_cache_dtype",
        "--gpu-memory-utilization": "gpu_memory_utilization",
        "-tp": "tensor_parallel_size",
        "-pp": "pipeline_parallel_size",
    }
    while words:
        w = words.pop(0)
        if w == "--enable-expert-parallel":
            out["enable_expert_parallel"] = True
            continue
        value = words.pop(0)
        out[names[w]] = value if w == "--kv-cache-dtype" else (float(value) if "." in value else int(value))
    return out


@pytest.mark.parametrize(
    "model, intent",
    [
        ("kimi-k2-instruct", {"tensor_parallel_size": 8}),
        ("llama-3-8b", {"max_model_len": 10_000_000}),
        ("llama-3-8b", {"max_model_len": 1_000_000_000}),  # no layout holds that: none may be offered
    ],
)
def test_fc402_each_fix_line_alone_makes_it_fit(ckpts, model: str, intent: dict) -> None:
    launch = {"model": ckpts[model], **intent}
    (r,) = assert_fires("FC402", h200(), **launch)
    assert r.fix and "holds the weights" not in r.message
    for line in r.fix.splitlines():
        # no stop after any one fix; a warning only where the bound's low end is still short
        # (bound.bound_terms: NCCL's connections on first use at TP > 1), never at the estimate
        got = evaluated("FC402", results(h200(), **{**launch, **_apply(line)})["FC402"])
        failing = [x for x in got if x.status.value == "fail"]
        assert all(x.severity.value == "warning" and "as low as" in x.message for x in failing), line


def test_fc402_counts_ngram_token_ids_with_the_length(ckpts) -> None:
    """vLLM 0.33.0's V2 runner keeps ``all_token_ids`` (max_num_reqs x max_model_len int32) on the
    GPU for n-gram drafting (vllm.v2_token_ids_on_gpu), inside the budget: the message names them,
    and the length FC402 offers pays them per token, so it fits when applied."""
    ngram = '--speculative-config={"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}'
    launch = {"model": ckpts["llama-3-8b"], "max_model_len": 2_000_000, "engine_flags": [ngram]}
    (r,) = assert_fires("FC402", h200(), **launch)
    assert "GiB of per-request token ids at this length" in r.message, r.message
    fit = int(re.search(r"--max-model-len (\d+)", r.fix).group(1))
    got = evaluated("FC402", results(h200(), **{**launch, "max_model_len": fit})["FC402"])
    assert not [x for x in got if x.status.value == "fail" and x.severity.value == "error"], [x.message for x in got]
    # without n-gram drafting they are pinned host memory: no such line
    (plain,) = assert_fires("FC402", h200(), model=ckpts["llama-3-8b"], max_model_len=2_000_000)
    assert "token ids" not in plain.message


def test_a_bug_in_the_memory_model_is_unknown_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Built once; every FC4xx check says 'unknown' with the cause, none re-runs it."""
    import flightcheck._checks.shared.memory as mem_mod

    root = write_checkpoint(tmp_path / "m", load_config("tiny-llama"), shards=2, dense=True)
    calls: list = []
    monkeypatch.setattr(mem_mod, "build", counting_bug(calls))
    res = results(facts("b300"), model=str(root))
    assert len(calls) == 1
    for code in ("FC401", "FC402", "FC403", "FC404", "FC405"):
        assert {r.status.value for r in res[code]} == {"unknown"} and "synthetic" in res[code][0].message, code


def _with_gpus(**fields):
    doc = host_doc("b300")
    gpus = copy.deepcopy(doc["gpus"])
    for g in gpus:
        g.update(fields)
    return facts("b300", gpus=gpus)


def test_fc406_other_processes_leave_less_than_the_slack(ckpts) -> None:
    """vLLM raises "Free memory on device ... less than desired" when what is on the GPU at
    its snapshot exceeds (1 - util) x total: 40 GiB in use on a B300 (268 GiB) at 0.92 does."""
    (r,) = assert_fires("FC406", _with_gpus(memory_used_bytes=40 * GiB), model=ckpts["qwen2-7b"])
    assert r.severity.value == "error" and "less than desired GPU memory utilization" in r.message
    util = float(r.fix.split()[-1])
    assert r.fix.startswith("--gpu-memory-utilization") and util < 0.92
    # the fix alone makes it fit
    assert_silent("FC406", _with_gpus(memory_used_bytes=40 * GiB), model=ckpts["qwen2-7b"], gpu_memory_utilization=util)


def test_fc406_tight_utilization_with_communication_buffers_warns(ckpts) -> None:
    """Only the estimate tips it (nothing else on the GPUs): a warning, not an error."""
    f = _with_gpus(memory_used_bytes=0, memory_reserved_bytes=0)
    (r,) = assert_fires("FC406", f, model=ckpts["qwen2-7b"], tensor_parallel_size=4, gpu_memory_utilization=0.997)
    assert r.severity.value == "warning" and "communication" in r.message
    assert_silent("FC406", f, model=ckpts["qwen2-7b"], tensor_parallel_size=4)


def _h100(**env):
    """The recorded 8 x H100 HGX node (vLLM 0.11.0, NCCL 2.27.3; 18 NVLinks a GPU to the
    NVSwitch, multicast not recorded) with NCCL variables added to the engine's environment."""
    doc = host_doc("hgx-h100")
    return facts("hgx-h100", env={**(doc.get("env") or {}), **env})


def test_fc406_nccl_connected_at_init_is_certain_on_nvswitch(ckpts) -> None:
    """NCCL_CUMEM_ENABLE=0 turns NCCL's runtime connect off (src/init.cc): the TP 8 pynccl
    communicator's 24 channels of ring/tree buffers (576 MiB on a middle rank) are on the GPU
    at vLLM's snapshot. With the 0.52 GiB in use and the context, 1.43 GiB is certain: at 0.99
    (0.8 GiB of slack) vLLM raises — an error whose fix leaves room for the high end too
    (NVLS's 256 MiB, multicast being unknown, and custom all-reduce's 16 MiB)."""
    f = _h100(NCCL_CUMEM_ENABLE="0")
    kw = {"model": ckpts["llama-3-8b"], "tensor_parallel_size": 8}
    (r,) = assert_fires("FC406", f, gpu_memory_utilization=0.99, **kw)
    assert r.severity.value == "error"
    assert r.evidence["pre_snapshot_certain_bytes"] == 350 * 2**20 + 576 * 2**20
    assert r.evidence["pre_snapshot_bytes"] == 350 * 2**20 + (576 + 16 + 256) * 2**20 + 16 * 2 * 8 * 64
    util = float(r.fix.split()[-1])
    assert_silent("FC406", f, gpu_memory_utilization=util, **kw)


def test_fc406_lazy_nccl_is_only_a_warning(ckpts) -> None:
    """NCCL 2.27's default (cuMem on) connects on first use: nothing of the communicator is
    certain at the snapshot, so a utilization only its derived size tips is a warning."""
    f = _h100()
    (r,) = assert_fires("FC406", f, model=ckpts["llama-3-8b"], tensor_parallel_size=8, gpu_memory_utilization=0.985)
    assert r.severity.value == "warning"
    assert r.evidence["pre_snapshot_certain_bytes"] == 350 * 2**20


def test_fc406_kv_cache_memory_bytes_bypasses_utilization(ckpts) -> None:
    f = _with_gpus(memory_used_bytes=40 * GiB)
    assert statuses(f, "FC406", model=ckpts["qwen2-7b"], kv_cache_memory_bytes=8 * GiB) == {"skip"}


def test_fc402_kv_cache_memory_bytes_is_the_budget(ckpts) -> None:
    """--kv-cache-memory-bytes replaces the utilization: 1 GiB of KV holds no 128K sequence
    of this Qwen2-7B (56 KiB a token, 7 GiB), 8 GiB does."""
    f = facts("b300")
    (r,) = assert_fires("FC402", f, model=ckpts["qwen2-7b"], kv_cache_memory_bytes=GiB)
    assert "1.0 GiB is left" in r.message
    assert_silent("FC402", f, model=ckpts["qwen2-7b"], kv_cache_memory_bytes=8 * GiB)


def test_fc401_cpu_offload_takes_weights_off_the_gpu(ckpts) -> None:
    """--cpu-offload-gb moves that many GiB of each rank's weights to CPU memory."""
    from flightcheck import evaluate
    from flightcheck._vocabulary.intent import Intent

    base = evaluate(facts("b300"), Intent(model=ckpts["qwen2-7b"])).memory
    off = evaluate(facts("b300"), Intent(model=ckpts["qwen2-7b"], cpu_offload_gb=4)).memory
    assert base["per_rank"]["weights_bytes"] - off["per_rank"]["weights_bytes"] == 4 * GiB


def test_memory_block_reports_vllm_kv_capacity(ckpts) -> None:
    """kv_tokens as vLLM logs "GPU KV cache size": whole blocks of 16 tokens; the summary
    line carries the max concurrency at max_model_len."""
    from flightcheck import evaluate
    from flightcheck._vocabulary.intent import Intent

    rep = evaluate(facts("b300"), Intent(model=ckpts["qwen2-7b"], max_model_len=16384))
    mem = rep.memory
    per_tok = mem["per_rank"]["kv_bytes_per_token"]
    blocks = mem["per_rank"]["kv_budget_bytes"] // (16 * per_tok)
    assert mem["kv_blocks"] == blocks and mem["kv_tokens"] == blocks * 16
    assert mem["max_concurrency"] == round(blocks / (16384 // 16), 2)
    assert mem["batch"]["max_num_batched_tokens"] == 16384  # a B300 has >= 160 GiB (vLLM 0.33)
    assert f"max concurrency {mem['max_concurrency']:.2f}x at max_model_len" in rep.summaries["FC4"]


def _h100_used(used: list[int]):
    doc = host_doc("b300")
    gpus = copy.deepcopy(doc["gpus"])
    for g, u in zip(gpus, used, strict=False):
        g.update(
            name="NVIDIA H100 80GB HBM3", memory_total_bytes=80 * GiB, memory_used_bytes=u, memory_reserved_bytes=0
        )
    return gpus


def test_fc407_sglang_unbalanced_free_memory_is_an_error() -> None:
    """12 GiB held on GPU 3 of 8: its 68 GiB free is below 0.9 x 80 GiB, so SGLang's
    _check_tp_memory_balance raises (distributed/bootstrap.py)."""
    node = facts("b300", gpus=_h100_used([0, 0, 0, 12 * GiB, 0, 0, 0, 0]))
    [r] = assert_fires("FC407", node, engine="sglang", tensor_parallel_size=8)
    assert r.severity.value == "error" and r.subject == "gpu:3"
    assert "memory capacity is unbalanced" in r.message and "-i 3" in r.fix and "--query-compute-apps" in r.fix
    assert r.evidence["ratio"] == 0.85


def test_fc407_only_a_warning_when_sglang_check_is_off() -> None:
    doc = host_doc("b300")
    node = facts("b300", gpus=_h100_used([0, 0, 0, 12 * GiB, 0, 0, 0, 0]))
    off = facts(
        "b300",
        gpus=_h100_used([0, 0, 0, 12 * GiB, 0, 0, 0, 0]),
        env={**doc["env"], "SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK": "false"},
    )
    [r] = assert_fires("FC407", off, engine="sglang", tensor_parallel_size=8)
    assert r.severity.value == "warning"
    assert statuses(node, "FC407", tensor_parallel_size=8) == {"skip"}  # vLLM
    assert statuses(node, "FC407", engine="sglang", tensor_parallel_size=1) == {"skip"}


def test_fc407_does_not_stop_sglang_on_evenly_used_or_nearly_even_gpus() -> None:
    """The same 6 GiB on every GPU, or 7 GiB more on one (73 >= 0.9 x 80): SGLang starts."""
    for used in ([6 * GiB] * 8, [0, 7 * GiB, 0, 0, 0, 0, 0, 0]):
        res = results(facts("b300", gpus=_h100_used(used)), engine="sglang", tensor_parallel_size=8)["FC407"]
        assert {r.status.value for r in res} == {"pass"}, [r.message for r in res]


def test_fc401_and_fc402_suggest_tp_within_the_node_and_pp_across(ckpts) -> None:
    """On 8-GPU nodes a suggested TP never exceeds 8 (FC202 would then refuse it, asking for
    ``-tp 8``): TP within the node, pipeline stages across nodes."""
    f = h200()
    for code, tp in (("FC401", 4), ("FC402", 8)):
        (r,) = assert_fires(code, f, model=ckpts["kimi-k2-instruct"], tensor_parallel_size=tp)
        tps = [int(x) for x in re.findall(r"-tp (\d+)", r.fix)]
        assert tps and max(tps) <= 8, (code, r.fix)
