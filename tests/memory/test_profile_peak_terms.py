"""The profile run's smaller terms: the V1 runner's two hidden-state copies and Triton top-k/top-p's
cached buffer under the sampler's peak (vllm.v1_sampler_hidden,
vllm.triton_sampler_buffer_bytes), torch's cuBLAS / cuBLASLt workspaces under the whole profile
(cublas), the board's SM count (gpus.sm_count), and the non-torch point by whether the profile holds
the CUDA-graph estimate's captures (vllm.graph_profile_in_budget, budget.non_torch_point)."""

from __future__ import annotations

import msgspec

from flightcheck._knowledge import cublas, gpus, vllm
from flightcheck._memory.budget import (
    NON_TORCH,
    NON_TORCH_NO_GRAPH_PROFILE,
    Batch,
    forward_peak,
    non_torch_point,
    profile_peak,
    sampler_peak,
)
from flightcheck._memory.config import parse
from flightcheck._memory.weights import Layout
from flightcheck._vocabulary.version import release
from support.memory_accuracy import load

GiB = 1 << 30
MiB = 1 << 20
# the sourced config.json figures the accuracy corpus scores with (tests/fixtures/memory/model_configs.json)
_, CONFIGS = load()
LLAMA_8B, QWEN_72B = (CONFIGS[k]["config"] for k in ("llama-3-8b", "qwen2.5-72b"))


def _batch(v: str, **kw: object) -> Batch:
    return Batch(tokens=8192, seqs=1024, sampler=vllm.sampler_kind(release(v)), release=release(v), **kw)  # type: ignore[arg-type]


def test_the_blas_workspaces_follow_torch_defaults_and_its_variables() -> None:
    # parseChosenWorkspaceSize: ":4096:8" on exactly cc 9.0, ":4096:2:16:8" elsewhere; cuBLASLt 1 MiB
    assert cublas.cublas_workspace_bytes("9.0") == 32 * MiB
    assert cublas.cublas_workspace_bytes("10.0") == cublas.cublas_workspace_bytes("8.0") == 8 * MiB + 128 * 1024
    assert cublas.cublas_workspace_bytes(None) == 8 * MiB + 128 * 1024
    assert cublas.blas_workspaces_bytes("9.0") == 33 * MiB
    # CUBLAS_WORKSPACE_CONFIG's :SIZE:COUNT pairs (the deterministic ":16:8" is 128 KiB)
    assert cublas.cublas_workspace_bytes("9.0", {"CUBLAS_WORKSPACE_CONFIG": ":16:8"}) == 128 * 1024
    assert cublas.cublas_workspace_bytes("9.0", {"CUBLAS_WORKSPACE_CONFIG": ":4096:2:16:8"}) == 8 * MiB + 128 * 1024
    # unparsable: torch warns and keeps the default
    assert cublas.cublas_workspace_bytes("9.0", {"CUBLAS_WORKSPACE_CONFIG": "lots"}) == 32 * MiB
    # cuBLASLt capped at cuBLAS's size; unified ("1" only) shares cuBLAS's
    assert cublas.blas_workspaces_bytes("9.0", {"CUBLAS_WORKSPACE_CONFIG": ":16:8"}) == 256 * 1024
    assert cublas.blas_workspaces_bytes("9.0", {"CUBLASLT_WORKSPACE_SIZE": "4096"}) == 36 * MiB
    assert cublas.blas_workspaces_bytes("9.0", {"CUBLASLT_WORKSPACE_SIZE": "x"}) == 33 * MiB
    assert cublas.blas_workspaces_bytes("9.0", {"TORCH_CUBLASLT_UNIFIED_WORKSPACE": "1"}) == 32 * MiB
    assert cublas.blas_workspaces_bytes("9.0", {"TORCH_CUBLASLT_UNIFIED_WORKSPACE": "true"}) == 33 * MiB


def test_sm_counts_by_board_name() -> None:
    assert gpus.sm_count("NVIDIA H100 80GB HBM3") == 132
    assert gpus.sm_count("NVIDIA H100 PCIe") == 114  # the longer key wins over "h100"
    assert gpus.sm_count("NVIDIA L40S") == 142 and gpus.sm_count("NVIDIA L4") == 58
    assert gpus.sm_count("NVIDIA A10G") == 80 and gpus.sm_count("NVIDIA A10") == 72
    assert gpus.sm_count("NVIDIA RTX PRO 6000 Blackwell Server Edition") == 188
    assert gpus.sm_count("NVIDIA Mystery 9000") is None and gpus.sm_count(None) is None


def test_triton_buffer_by_rows_release_and_sms() -> None:
    v19, v30 = release("0.19.0"), release("0.30.0")
    # one vocabulary row of float32 per program: min(next_power_of_2(min(sms, rows)), sms)
    assert vllm.triton_sampler_buffer_bytes(v19, 1024, 128256, 132) == 132 * 128256 * 4
    assert vllm.triton_sampler_buffer_bytes(v19, 100, 1000, 132) == 128 * 1000 * 4
    assert vllm.triton_sampler_buffer_bytes(v19, 20, 1000, 16) == 16 * 1000 * 4
    # below 8 rows 0.17 - 0.29 sort instead; 0.30.0 takes Triton for any
    assert vllm.triton_sampler_buffer_bytes(v19, 4, 1000, 132) == 0
    assert vllm.triton_sampler_buffer_bytes(v30, 4, 1000, 132) == 4 * 1000 * 4
    assert vllm.triton_sampler_buffer_bytes(v19, 0, 1000, 132) == 0


def test_the_sampler_peak_matches_the_0_19_sweep_breakdowns() -> None:
    # the llm-d-planner v0.19.0 sweep on H100 (tests/fixtures/memory points 144 and 150) logs "torch
    # peak memory increase" 1.89 GiB for Llama-3.1-8B and 2.29 GiB for Qwen2.5-72B at 8192 tokens and
    # 1024 sequences: the Triton sampler's 14 B an element, the forward's hidden states, the two
    # copies, the 132-SM buffer and the 33 MiB of BLAS workspaces
    for doc, logged in ((LLAMA_8B, 1.89), (QWEN_72B, 2.29)):
        cfg = parse(doc, None)
        b = _batch("0.19.0", sms=132, blas_workspaces=cublas.blas_workspaces_bytes("9.0"))
        text, _ = profile_peak(cfg, Layout(1, 1), b)
        assert abs(text / GiB - logged) < 0.01, (doc["architectures"], text / GiB)
    cfg = parse(LLAMA_8B, None)
    bare = sampler_peak(cfg, 8192, 1024, "triton")
    v1 = sampler_peak(cfg, 8192, 1024, "triton", v1_runner=True, release=release("0.19.0"), sms=132)
    assert v1 - bare == 2 * 1024 * 4096 * 2 + 132 * 128256 * 4
    # 0.9.0 frees the batch's hidden states and holds two row copies; 0.8.5 one copy, no rand_like
    assert vllm.v1_sampler_hidden(release("0.9.0")) == (False, 2) and vllm.v1_sampler_hidden(release("0.8.5")) == (
        False,
        1,
    )
    assert vllm.v1_sampler_hidden(release("0.9.2")) == (True, 2) and vllm.v1_sampler_hidden(None) == (True, 2)
    old = sampler_peak(cfg, 8192, 1024, "flashinfer", v1_runner=True, release=release("0.8.5"))
    assert old == 1024 * 128256 * 14 + 1024 * 4096 * 2
    # the sort keeps no Triton buffer, only the copies; V0 frees its pruned copy before sampling
    sort = sampler_peak(cfg, 8192, 1024, "sort", v1_runner=True, release=release("0.14.0"), sms=132)
    assert sort - sampler_peak(cfg, 8192, 1024, "sort") == 2 * 1024 * 4096 * 2
    v0 = msgspec.structs.replace(_batch("0.7.3"), v0=True, sampler="sort", blas_workspaces=33 * MiB)
    forward = forward_peak(cfg, Layout(1, 1), 8192, release=release("0.7.3"))
    plain = sampler_peak(cfg, 8192, 1024, "sort")
    assert profile_peak(cfg, Layout(1, 1), v0)[0] == max(forward, plain) + 33 * MiB


def test_the_non_torch_point_by_whether_the_profile_holds_graph_captures() -> None:
    # 0.18.0 - 0.26.x run profile_cudagraph_memory inside memory_profiling, unless eager; from 0.27.0 after it
    assert vllm.graph_profile_in_budget(release("0.17.0"), eager=False) is False
    assert vllm.graph_profile_in_budget(release("0.18.0"), eager=False) is True
    assert vllm.graph_profile_in_budget(release("0.26.0"), eager=False) is True
    assert vllm.graph_profile_in_budget(release("0.19.0"), eager=True) is False
    assert vllm.graph_profile_in_budget(release("0.27.0"), eager=False) is False
    assert vllm.graph_profile_in_budget(release("0.33.0"), eager=False) is False
    assert vllm.graph_profile_in_budget(None, eager=False) is True  # unknown: the larger reserve
    # the V2 runner's estimate captures nothing in 0.20 - 0.28, and from 0.29 it does
    assert vllm.graph_profile_in_budget(release("0.26.0"), eager=False, v2_runner=True) is False
    assert vllm.graph_profile_in_budget(release("0.26.0"), eager=False, v2_runner=False) is True
    assert non_torch_point(_batch("0.19.0"), eager=False) == NON_TORCH
    assert non_torch_point(_batch("0.19.0"), eager=True) == NON_TORCH_NO_GRAPH_PROFILE
    assert non_torch_point(_batch("0.11.0"), eager=False) == NON_TORCH_NO_GRAPH_PROFILE
    assert non_torch_point(_batch("0.30.0"), eager=False) == NON_TORCH_NO_GRAPH_PROFILE
    assert non_torch_point(msgspec.structs.replace(_batch("0.7.3"), v0=True), eager=False) == NON_TORCH_NO_GRAPH_PROFILE
    # kept at NON_TORCH: the V2 runner (0.27.1 logs 0.30 / 0.56 GiB) and 0.6.5 - 0.6.6's cached blocks
    assert non_torch_point(_batch("0.27.1", v2_runner=True), eager=False) == NON_TORCH
    assert non_torch_point(msgspec.structs.replace(_batch("0.6.5"), v0=True), eager=False) == NON_TORCH
