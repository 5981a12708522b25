"""FC401–FC406: for each error check, a launch the engine serves that it must not stop
(docs/what-stops-a-launch.md), on checkpoints generated from published configs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from support.ckptgen import load_config, write_checkpoint
from support.evaluation import evaluated, facts, host_doc, results


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("nostop")
    return {
        name: str(write_checkpoint(root / name, load_config(name), shards=shards))
        for name, shards in (("llama-3-8b", 4), ("qwen2-7b", 4))
    }


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))


def stops(code: str, node: Any, **intent: Any) -> list:
    got = evaluated(code, results(node, **intent).get(code, []))
    assert {r.status.value for r in got} & {"pass", "skip", "fail"}, got
    return [
        (r.status.value, r.message)
        for r in got
        if r.status.value in ("fail", "unknown") and r.severity.value == "error"
    ]


def allow_long():
    doc = host_doc("b300")
    return facts("b300", env={**doc["env"], "VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"})


def test_fc401_does_not_stop_an_8b_model_on_one_gpu(ckpts) -> None:
    assert stops("FC401", facts("b300"), model=ckpts["llama-3-8b"], tensor_parallel_size=1) == []


def test_fc402_does_not_stop_the_models_own_window(ckpts) -> None:
    assert stops("FC402", facts("b300"), model=ckpts["llama-3-8b"], max_model_len=8192) == []


def test_fc404_does_not_stop_tp_over_the_kv_heads(ckpts) -> None:
    """Llama-3-8B has 8 KV heads: at TP 16 vLLM replicates each over two ranks (TP divides
    by the KV heads), and 32 attention heads divide by 16."""
    assert stops("FC404", facts("b300"), model=ckpts["llama-3-8b"], tensor_parallel_size=16, nnodes=2) == []


def test_fc404_does_not_stop_qwen2_7b_at_tp4(ckpts) -> None:
    assert stops("FC404", facts("b300"), model=ckpts["qwen2-7b"], tensor_parallel_size=4) == []


def test_fc406_does_not_stop_a_gpu_another_process_leaves_room_on(ckpts) -> None:
    """8 GiB in use by another process on each B300 (268 GiB): at the default 0.92 the
    ~21 GiB outside vLLM's share still holds it, the CUDA context and TP 4's buffers."""
    doc = host_doc("b300")
    gpus = [{**g, "memory_used_bytes": 8 << 30} for g in doc["gpus"]]
    node = facts("b300", gpus=gpus)
    assert stops("FC406", node, model=ckpts["qwen2-7b"], tensor_parallel_size=4) == []


def test_fc406_does_not_stop_tp8_on_nvswitch_at_a_utilization_vllm_serves(ckpts) -> None:
    """8 x H100 on NVSwitch (vLLM 0.11.0, NCCL 2.27.3), TP 8 at 0.97 with NCCL connecting
    at init (NCCL_CUMEM_ENABLE=0): the 2.4 GiB outside vLLM's share holds the 0.52 GiB in use,
    the context and the pynccl communicator's derived high end (24 channels of ring/tree
    buffers, NVLS, custom all-reduce: 1.7 GiB in all), so vLLM starts; at 0.98 only the NVLS
    part (multicast not recorded) would tip it, which is no stop either."""
    doc = host_doc("hgx-h100")
    node = facts("hgx-h100", env={**(doc.get("env") or {}), "NCCL_CUMEM_ENABLE": "0"})
    kw = {"model": ckpts["llama-3-8b"], "tensor_parallel_size": 8}
    assert stops("FC406", node, gpu_memory_utilization=0.97, **kw) == []
    assert stops("FC406", node, gpu_memory_utilization=0.98, **kw) == []
    # NCCL's default (cuMem on): connected on first use, nothing certain beyond the context
    assert stops("FC406", facts("hgx-h100"), gpu_memory_utilization=0.985, **kw) == []


def test_fc405_does_not_stop_a_longer_len_with_the_engine_override(ckpts) -> None:
    """VLLM_ALLOW_LONG_MAX_MODEL_LEN=1: vLLM accepts the longer length (vllm/config/model.py)."""
    assert stops("FC405", allow_long(), model=ckpts["llama-3-8b"], max_model_len=16384) == []


def test_fc402_does_not_stop_a_shortfall_within_the_estimates_error(ckpts) -> None:
    """A max_model_len whose KV needs 0.1 GiB more than the predicted budget: the budget's
    median error on public startup logs is 0.16 GiB, and the same launch has logged both
    sides of its need, so vLLM may start. FC402 warns with the fix; it does not stop. Short
    by 0.5 GiB, it stops."""
    from flightcheck import evaluate
    from flightcheck._vocabulary.intent import Intent

    node = facts("hgx-h100")
    kw: dict[str, Any] = {"model": ckpts["llama-3-8b"], "tensor_parallel_size": 1, "gpu_memory_utilization": 0.5}
    per = evaluate(node, Intent(max_model_len=8192, **kw)).memory["per_rank"]
    per_token, budget = per["kv_bytes_per_token"], per["kv_budget_bytes"]
    near = int((budget + 0.1 * 2**30) // per_token)
    assert stops("FC402", node, max_model_len=near, **kw) == []
    (r,) = [r for r in results(node, max_model_len=near, **kw)["FC402"] if r.status.value == "fail"]
    # the bound's high end holds it: a warning that names the range (bound.bound_terms)
    assert r.severity.value == "warning" and "the budget per GPU is between" in r.message
    assert 0 < r.evidence["kv_shortfall_bytes"] <= 2**30 // 4 and "--max-model-len" in r.fix
    # a stop only past the bound's high end (bound.bound_terms) by more than the estimate's error
    high = per["kv_budget_high_bytes"]
    assert high > budget
    far = int((high + 0.5 * 2**30) // per_token)
    ((status, message),) = stops("FC402", node, max_model_len=far, **kw)
    assert status == "fail" and "is left per GPU after" in message


@pytest.mark.parametrize("gpus", ["none-recorded", "empty"])
def test_no_gpu_gives_clean_memory_verdicts_not_a_crash(ckpts, gpus: str) -> None:
    """A host without a driver (``gpus`` null with its reason, or ``gpus: []``, as a
    ``CUDA_VISIBLE_DEVICES`` selecting nothing leaves it): the memory model is still
    computed from the checkpoint; FC401-FC405 are skipped or unknown with a reason, never
    "check crashed" (the batch size fell back to a class attribute, not the default)."""
    doc = host_doc("b300")
    doc["gpus"] = None if gpus == "none-recorded" else []
    if gpus == "none-recorded":
        doc.setdefault("unavailable", {})["gpus"] = "NVML Shared Library Not Found"
    from flightcheck._vocabulary.facts import from_dict

    got = results(from_dict(doc), model=ckpts["llama-3-8b"], tensor_parallel_size=1)
    for code in ("FC401", "FC402", "FC403", "FC404", "FC405"):
        for r in got.get(code, []):
            assert "crash" not in r.message, (code, r.message)
            assert r.status.value != "fail" or r.severity.value != "error", (code, r.message)
    assert {r.status.value for r in got["FC404"]} == {"pass"}  # the layout needs no GPU facts


def test_fc402_does_not_stop_a_shortfall_an_unknown_release_may_cover(ckpts) -> None:
    """No vLLM release known: the budget is a bound over the releases' rules (0.92 utilization
    from 0.20.0, the CUDA-graph estimate not subtracted before it: ``bound.bound_terms``).
    Short by 0.4 GiB at the point, inside the high end: a warning naming the bound, not a
    stop; short beyond the high end (+ the estimate's error), a stop."""
    import copy

    from flightcheck import evaluate
    from flightcheck._vocabulary.facts import from_dict
    from flightcheck._vocabulary.intent import Intent

    doc = copy.deepcopy(host_doc("hgx-h100"))
    doc["python"]["packages"]["vllm"] = None
    node = from_dict(doc)
    kw: dict[str, Any] = {"model": ckpts["llama-3-8b"], "tensor_parallel_size": 1}
    memory = evaluate(node, Intent(max_model_len=8192, **kw)).memory
    per, bound = memory["per_rank"], memory["kv_budget_bound"]
    assert bound["terms"]["release_unknown"]["above_bytes"] > 2**30 // 2
    assert bound["low_bytes"] <= per["kv_budget_bytes"] < bound["high_bytes"] == per["kv_budget_high_bytes"]
    per_token, budget = per["kv_bytes_per_token"], per["kv_budget_bytes"]
    near = int((budget + 0.4 * 2**30) // per_token)
    assert stops("FC402", node, max_model_len=near, **kw) == []
    (r,) = [r for r in results(node, max_model_len=near, **kw)["FC402"] if r.status.value == "fail"]
    assert r.severity.value == "warning" and "release unknown" in r.message and "between" in r.message
    far = int((bound["high_bytes"] + 0.5 * 2**30) // per_token)
    ((status, _message),) = stops("FC402", node, max_model_len=far, **kw)
    assert status == "fail"
