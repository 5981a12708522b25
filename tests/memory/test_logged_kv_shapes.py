"""The KV shapes of the architectures sourced for points the accuracy bench cannot score
(tests/fixtures/memory: no weights or GPU total logged) against what those launches did
log: vLLM's "X GiB KV cache is needed" for one max_model_len sequence, and the bytes a
token behind "GPU KV cache size" — MLA's latent cache (DeepSeek-V2-Lite, DeepSeek-R1),
GQA MoE (Qwen3-Coder-480B-A35B, Qwen3-Coder-30B-A3B) — and vLLM 0.14 - 0.16's check of the
whole model's KV against the smallest worker with pipeline parallelism
(``vllm.PP_KV_CHECK_WHOLE_MODEL``), which point 27's log shows."""

from __future__ import annotations

from typing import Any

import pytest

from flightcheck import evaluate
from flightcheck._checkpoint import load
from flightcheck._knowledge import vllm
from flightcheck._memory import build
from flightcheck._memory.budget import release
from flightcheck._memory.config import parse
from flightcheck._memory.kv import kv_shape
from flightcheck._memory.weights import stage_layers
from flightcheck._vocabulary.facts import from_dict
from flightcheck._vocabulary.intent import Intent
from support.ckptgen import load_config, write_checkpoint
from support.evaluation import evaluated, host_doc
from support.memory_accuracy import ARCH, GiB, _config
from support.memory_accuracy import load as load_points

#: vLLM prints the needed KV with format_gib: two decimals (0.10 - 0.13) or one (point 27)
PRINTED = 0.005


def _cfg(index: int) -> tuple[dict[str, Any], Any]:
    points, configs = load_points()
    p = points[index]
    return p, parse(_config(configs[ARCH[p["model"]]]))


@pytest.mark.parametrize("index", [25, 26, 41])
def test_kv_needed_for_one_sequence_is_what_the_failed_launch_logged(index: int) -> None:
    """Qwen3-Coder-480B-A35B at TP 1 (25, 26: '62.00 GiB KV cache is needed' for 262,144
    tokens: 62 layers x 2 x 8 KV heads x 128 x 2 bytes) and DeepSeek-V2-Lite-Chat (41: 0.95 GiB
    for 32,768 tokens: 27 layers x (512 + 64) x 2 bytes of MLA latent, on every rank)."""
    p, cfg = _cfg(index)
    shape = kv_shape(cfg, range(cfg.layers), p["tp"] or 1, p["kv_cache_dtype"] or "auto")
    assert abs(shape.bytes_for(p["max_model_len"]) / GiB - p["logged"]["kv_needed_gib"]) <= PRINTED


def test_mla_latent_is_not_split_by_tensor_parallelism() -> None:
    """DeepSeek-R1-0528 at TP 8 (point 71, vLLM 0.11.2): 635,648 tokens for 41.60 GiB is
    about 70,271 bytes a token per rank, the whole 61 x (512 + 64) x 2 = 70,272 latent — not an
    eighth of it, as GQA heads would be."""
    p, cfg = _cfg(71)
    shape = kv_shape(cfg, range(cfg.layers), p["tp"], "auto")
    assert shape.full == 61 * 576 * 2
    lg = p["logged"]
    # the budget is printed to 0.01 GiB and the capacity is whole blocks
    assert abs(lg["available_kv_gib"] * GiB / shape.full - lg["kv_tokens"]) <= PRINTED * GiB / shape.full + 64


def test_the_first_pp_stage_binds_deepseek_v2_lite_capacity() -> None:
    """DeepSeek-V2-Lite at TP 2 x PP 2 (point 42): vLLM gives the first stage 14 of the 27
    layers (``get_pp_indices``, as ``stage_layers``), its ranks print 12.13 GiB and the last
    stage's 11.33 GiB (the point's note); the capacity is the smaller block count: 12.13 GiB /
    (14 x 1,152 bytes) = 807,5xx tokens, the 807,792 logged, where the last stage alone would
    hold 812,000."""
    p, cfg = _cfg(42)
    first, last = stage_layers(cfg.layers, 2)
    assert (len(first), len(last)) == (14, 13)
    per_first = kv_shape(cfg, first, 2, "auto").full
    per_last = kv_shape(cfg, last, 2, "auto").full
    assert (per_first, per_last) == (14 * 1152, 13 * 1152)
    tokens = p["logged"]["kv_tokens"]
    assert abs(12.13 * GiB / per_first - tokens) <= PRINTED * GiB / per_first + 16
    assert p["logged"]["available_kv_gib"] * GiB / per_last - tokens > 4000  # the last stage does not bind


def test_vllm_0_15_checks_the_whole_models_kv_with_pipeline_parallelism() -> None:
    """Point 27 (vLLM 0.15.2rc1, PP 2 split 16 / 32 layers): '24.0 GiB KV cache is needed' for
    262,144 tokens is all 48 layers of Qwen3-Coder-30B-A3B (48 x 2 x 4 x 128 x 2 bytes), not a
    stage's 8 or 16 GiB — 0.14.0 - 0.16.x check the merged specs against the smallest worker."""
    p, cfg = _cfg(27)
    v = release(p["vllm_version"])
    assert vllm.pp_kv_check_whole_model(v)
    whole = kv_shape(cfg, range(cfg.layers), 1, "auto").bytes_for(p["max_model_len"]) / GiB
    assert abs(whole - p["logged"]["kv_needed_gib"]) <= PRINTED
    assert kv_shape(cfg, range(32), 1, "auto").bytes_for(p["max_model_len"]) / GiB == 16.0


def test_the_whole_model_check_by_version() -> None:
    """[0.14.0, 0.17.0), read in the wheels (vllm.PP_KV_CHECK_WHOLE_MODEL); unknown: per stage."""
    assert not vllm.pp_kv_check_whole_model((0, 13, 0))
    assert vllm.pp_kv_check_whole_model((0, 14, 0))
    assert vllm.pp_kv_check_whole_model((0, 15, 2))
    assert vllm.pp_kv_check_whole_model((0, 16, 0))
    assert not vllm.pp_kv_check_whole_model((0, 17, 0))
    assert not vllm.pp_kv_check_whole_model((0, 33, 0))
    assert not vllm.pp_kv_check_whole_model(None)


@pytest.fixture(scope="module")
def qwen_moe(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(write_checkpoint(tmp_path_factory.mktemp("pp") / "q", load_config("qwen3-30b-a3b"), shards=2))


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))


def test_fc402_uses_the_whole_model_only_where_vllm_does(qwen_moe: str) -> None:
    """Qwen3-30B-A3B at PP 2 on 44 GiB boards: one 131,072-token sequence needs 6 GiB a stage
    and 12 GiB for the whole model, with about 10 GiB of KV budget per stage. vLLM 0.15.1 refuses
    it (the whole model against the smallest worker); 0.13.0 and 0.17.0 serve it (each stage
    against its own). Without PP all three versions check the same."""
    ck = load(qwen_moe, cache_env={"FLIGHTCHECK_NO_CACHE": "1"})
    total = int(44.42 * GiB)

    def fit(version: str, pp: int = 2):
        intent = Intent(model=qwen_moe, pipeline_parallel_size=pp)
        m = build(ck, intent, total=total, engine_version=version)
        return m.fit(max_len=131072)

    old, window, new = fit("0.13.0"), fit("0.15.1"), fit("0.17.0")
    assert old is not None and window is not None and new is not None
    assert 6 * GiB <= old.kv_budget and window.kv_budget < 12 * GiB  # the case the versions split on
    assert old.kv_need == new.kv_need == 6 * GiB and old.kv_fits and new.kv_fits
    assert window.kv_need == 12 * GiB and not window.kv_fits
    # the length vLLM 0.15.1 would accept is the whole model's, half the per-stage one
    assert window.max_model_len_fit < old.max_model_len_fit
    # the stage still allocates its own 24 layers (the token capacity)
    assert window.shape.full == old.shape.full == 24 * 2 * 4 * 128 * 2


def _l40s(version: str):
    doc = host_doc("pcie-l40s")
    doc["python"]["packages"]["vllm"] = version
    return from_dict(doc)


def _fc402_at_budget(path: str, version: str, budget: float) -> tuple[list, dict[str, Any]]:
    """FC402's failures for Qwen3-30B-A3B at PP 2 and 40,960 tokens on the L40S host with
    ``version`` installed, at the utilization that leaves ``budget`` bytes of KV per stage."""
    kw: dict[str, Any] = {"model": path, "pipeline_parallel_size": 2, "max_model_len": 40960}
    first = evaluate(_l40s(version), Intent(gpu_memory_utilization=0.9, **kw)).memory
    probe, total = first["per_rank"], first["gpu"]["memory_total_bytes"]
    util = round(0.9 + (budget - probe["kv_budget_bytes"]) / total, 4)
    report = evaluate(_l40s(version), Intent(gpu_memory_utilization=util, **kw))
    got = evaluated("FC402", [r for r in report.checks if r.code == "FC402"])
    fails = [r for r in got if r.status.value == "fail"]
    return fails, report.memory["per_rank"]


def test_fc402_stops_the_pp_launch_vllm_0_15_refuses_and_not_on_other_releases(qwen_moe: str) -> None:
    """One 40,960-token sequence of Qwen3-30B-A3B: 1.875 GiB for a stage's 24 layers, 3.75 GiB
    for the whole model. With 2.8 GiB of KV budget per stage, vLLM 0.15.1 refuses the PP 2 launch
    (FC402 stops it, and says why); 0.13.0 and 0.17.0 serve it (FC402 passes)."""
    fails, per = _fc402_at_budget(qwen_moe, "0.15.1", 2.8 * GiB)
    (r,) = fails
    assert r.severity.value == "error" and "every pipeline stage" in r.message
    # the check's bytes a token are the whole model's; a stage still caches its own 24 layers
    assert r.evidence["kv_bytes_per_token"] == 48 * 2 * 4 * 128 * 2
    assert per["kv_bytes_per_token"] == 24 * 2 * 4 * 128 * 2
    assert abs(per["kv_budget_bytes"] - 2.8 * GiB) < 0.01 * GiB
    for version in ("0.13.0", "0.17.0"):
        fails, per = _fc402_at_budget(qwen_moe, version, 2.8 * GiB)
        assert fails == [], version
        assert abs(per["kv_budget_bytes"] - 2.8 * GiB) < 0.01 * GiB
