"""The memory rules of _knowledge/vllm/ and sglang/ against the installed engines:
vLLM's default gpu_memory_utilization, whether its CUDA-graph estimate comes off the KV
budget, its batch defaults per GPU for the OpenAI server and the offline LLM class
(``EngineArgs.get_batch_defaults`` with the platform stood in for), and SGLang's prefill CUDA-graph sizes."""

from __future__ import annotations

import json
import subprocess

from flightcheck._knowledge import sglang, vllm
from flightcheck._knowledge.vllm import memory_moe, memory_tp

PROBE = r"""
import json, os
os.environ.pop("VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS", None)
from unittest import mock
import vllm.envs as envs
from vllm.config.cache import CacheConfig
from vllm.engine import arg_utils
from vllm.usage.usage_lib import UsageContext
import dataclasses
out = {"util": {f.name: f.default for f in dataclasses.fields(CacheConfig)}["gpu_memory_utilization"].default,
       "estimate_cudagraphs": bool(envs.VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS)}
tiers = {}
GPUS = (
    (268, "nvidia b300", (10, 3)), (140, "nvidia h200", (9, 0)), (79, "nvidia h100 80gb hbm3", (9, 0)),
    (79, "nvidia a100-sxm4-80gb", (8, 0)), (119, "nvidia gb10", (12, 1)), (23, "nvidia geforce rtx 4090", (8, 9)),
)
for gib, name, cc in GPUS:
    fake = mock.MagicMock()
    fake.get_device_total_memory.return_value = gib << 30
    fake.get_device_name.return_value = name
    fake.is_device_capability.side_effect = lambda c, cc=cc: tuple(c) == cc
    fake.is_tpu.return_value = False
    fake.is_cpu.return_value = False
    with mock.patch.object(arg_utils, "current_platform", fake):
        t, s = arg_utils.EngineArgs.get_batch_defaults(1)
    api, llm = UsageContext.OPENAI_API_SERVER, UsageContext.LLM_CLASS
    tiers[f"{gib}|{name}|{cc[0]}.{cc[1]}"] = [t[api], s[api], t[llm], s[llm]]
out["tiers"] = tiers
from sglang.srt.arg_groups.cuda_graph_hook import generate_prefill_cuda_graph_batch_sizes
out["sglang_prefill"] = {str(n): generate_prefill_cuda_graph_batch_sizes(n) for n in (2048, 4096, 8192, 16384)}
print(json.dumps(out))
"""


def test_memory_rules_match_the_installed_engines(conformance, engine_python: str, tmp_path) -> None:
    run = subprocess.run(
        [engine_python, "-c", PROBE], capture_output=True, text=True, check=False, timeout=300, cwd=tmp_path
    )
    assert run.returncode == 0, run.stderr[-2000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    v = tuple(int(x) for x in conformance.pinned_versions()["vllm"].split("."))
    assert vllm.default_utilization(v) == got["util"]
    assert vllm.cudagraphs_in_budget(v, {}) is got["estimate_cudagraphs"]
    for key, (tokens, seqs, llm_tokens, llm_seqs) in got["tiers"].items():
        gib, name, cc = key.split("|")
        assert vllm.batch_defaults(v, int(gib) << 30, name, cc) == (tokens, seqs), key
        # the offline LLM class's defaults (vllm.LLM_CLASS_TOKENS)
        assert vllm.batch_defaults(v, int(gib) << 30, name, cc, llm_class=True) == (llm_tokens, llm_seqs), key
    for n, sizes in got["sglang_prefill"].items():
        assert sglang.prefill_graph_sizes(int(n)) == sizes


SAMPLER_PROBE = r"""
import inspect, json, os
os.environ.pop("VLLM_USE_FLASHINFER_SAMPLER", None)
import vllm.envs as envs
from vllm.v1.sample.ops import topk_topp_sampler
from vllm.v1.worker import gpu_model_runner, gpu_worker
dummy = inspect.getsource(gpu_model_runner.GPUModelRunner._dummy_sampler_run)
init = inspect.getsource(gpu_worker.Worker.init_device)
print(json.dumps({
    "flashinfer_default": bool(envs.VLLM_USE_FLASHINFER_SAMPLER),
    "triton_top_k_top_p": "apply_top_k_top_p_triton" in inspect.getsource(topk_topp_sampler.apply_top_k_top_p),
    "warms_native": "generators=" in dummy and "manual_seed" in dummy,
    "snapshot_after_distributed": init.index("init_worker_distributed_environment") < init.index("MemorySnapshot("),
}))
"""


def test_sampler_and_snapshot_rules_match_the_installed_vllm(conformance, engine_python: str, tmp_path) -> None:
    """The profile run's sampler (Triton top-k/top-p, FlashInfer on by default with the
    native path warmed too) and the snapshot after the distributed init, as
    ``vllm.sampler_kind`` / ``vllm.comm_in_budget`` say for the installed release."""
    run = subprocess.run(
        [engine_python, "-c", SAMPLER_PROBE], capture_output=True, text=True, check=False, timeout=300, cwd=tmp_path
    )
    assert run.returncode == 0, run.stderr[-2000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    v = tuple(int(x) for x in conformance.pinned_versions()["vllm"].split("."))
    assert got["triton_top_k_top_p"] and got["warms_native"] and got["flashinfer_default"]
    assert vllm.sampler_kind(v) == "triton"
    assert got["snapshot_after_distributed"] and not vllm.comm_in_budget(v)


PP_CHECK_PROBE = r"""
import inspect, json
from vllm.v1.core import kv_cache_planning
src = inspect.getsource(kv_cache_planning.get_kv_cache_configs)
print(json.dumps({
    "whole_model_against_smallest": "min(available_memory)" in src,
    "per_worker_projected": "_project_kv_cache_groups_to_worker" in src
    and "for groups, avail_mem in zip(projected_groups_per_worker" in src,
}))
"""


def test_pp_kv_check_matches_the_installed_vllm(conformance, engine_python: str, tmp_path) -> None:
    """With PP, the installed vLLM checks one max_model_len sequence per worker against that
    worker's own layers (``_project_kv_cache_groups_to_worker``), not the whole model against
    the smallest worker as 0.14 - 0.16 did: ``vllm.pp_kv_check_whole_model`` is off for it."""
    run = subprocess.run(
        [engine_python, "-c", PP_CHECK_PROBE], capture_output=True, text=True, check=False, timeout=300, cwd=tmp_path
    )
    assert run.returncode == 0, run.stderr[-2000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    v = tuple(int(x) for x in conformance.pinned_versions()["vllm"].split("."))
    assert got["per_worker_projected"] and not got["whole_model_against_smallest"]
    assert vllm.pp_kv_check_whole_model(v) is got["whole_model_against_smallest"]


ENCODER_PROBE = r"""
import dataclasses, inspect, json
from types import SimpleNamespace
from vllm.config.multimodal import MultiModalConfig
from vllm.config import scheduler
from vllm.multimodal.encoder_budget import MultiModalBudget
from vllm.v1.core.encoder_cache_manager import compute_mm_encoder_budget
from vllm.v1.worker import gpu_model_runner
run = inspect.getsource(gpu_model_runner.GPUModelRunner.profile_run)
sched = inspect.getsource(scheduler)
cases = []
for tpi, tokens, seqs, max_len in ((576, 2048, 256, 4096), (3025, 8192, 1024, 16000), (16384, 8192, 256, 65536),
                                   (576, 8192, 1, 1200), (280, 2496, 32, 262144)):
    cfg = SimpleNamespace(max_num_encoder_input_tokens=tokens, encoder_cache_size=tokens,
                          disable_chunked_mm_input=False, max_num_batched_tokens=tokens, enable_chunked_prefill=True)
    compute, cache = compute_mm_encoder_budget(cfg, {"image": tpi})
    b = object.__new__(MultiModalBudget)
    b.encoder_compute_budget, b.encoder_cache_size = compute, cache
    b.mm_limits, b.max_model_len, b.max_num_reqs, b.scheduler_config = {"image": 10**6}, max_len, seqs, cfg
    cases.append([tpi, tokens, seqs, max_len, b._get_max_items("image", tpi)[1]])
print(json.dumps({
    "encoder_first": run.index("embed_multimodal") < run.index("_dummy_run(") < run.index("_dummy_sampler_run("),
    "outputs_held": "self.encoder_cache[" in run
                    and run.index("encoder_cache.clear()") > run.index("_dummy_sampler_run("),
    "budget_is_batch": "self.encoder_cache_size = self.max_num_batched_tokens" in sched
                       and "self.max_num_encoder_input_tokens = self.max_num_batched_tokens" in sched,
    "tp_mode": {f.name: f.default for f in dataclasses.fields(MultiModalConfig)}["mm_encoder_tp_mode"],
    "items": cases,
}))
"""


def test_vision_encoder_profile_rules_match_the_installed_vllm(conformance, engine_python: str, tmp_path) -> None:
    """The vision encoder in ``profile_run`` (``_memory.budget.encoder_terms``): encoded
    before the forward pass, its outputs held in ``encoder_cache`` until after the sampler;
    the encoder budget is the batch (``max_num_batched_tokens``); the items per batch are
    ``vllm.encoder_items`` (vLLM's own ``_get_max_items`` on the same inputs); the tower's
    layers split over TP by default."""
    run = subprocess.run(
        [engine_python, "-c", ENCODER_PROBE], capture_output=True, text=True, check=False, timeout=300, cwd=tmp_path
    )
    assert run.returncode == 0, run.stderr[-2000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    v = tuple(int(x) for x in conformance.pinned_versions()["vllm"].split("."))
    assert vllm.encoder_profiled(v)
    assert got["encoder_first"] and got["outputs_held"] and got["budget_is_batch"]
    assert got["tp_mode"] == "weights"
    for tpi, tokens, seqs, max_len, items in got["items"]:
        assert vllm.encoder_items(tpi, tokens, seqs, max_len) == items, (tpi, tokens, seqs, max_len)


FUSION_PROBE = r"""
import ast, importlib.util, inspect, json
from vllm.config import vllm as vllm_config
from vllm.distributed.device_communicators import cuda_communicator
from flashinfer.comm import mnnvl
enable = inspect.getsource(vllm_config.enable_allreduce_rms_fusion)
setup = inspect.getsource(mnnvl.SymmDeviceMemory)
init = inspect.getsource(cuda_communicator.CudaCommunicator.__init__)
# the pass module is read as text: importing it needs vLLM's compiled ops (torch.ops._C),
# which a CPU-only venv lacks
spec = importlib.util.find_spec("vllm.compilation.passes.fusion.allreduce_rms_fusion")
tree = ast.parse(open(spec.origin, encoding="utf-8").read())
# the backend choice and the standalone all-reduce's default, read as text too
fi_ar = open(
    importlib.util.find_spec("vllm.distributed.device_communicators.flashinfer_all_reduce").origin, encoding="utf-8"
).read()
resolve = fi_ar[fi_ar.index("def _resolve_fi_ar_backend") :]
resolve = resolve[: resolve.index("\ndef ", 10)]
envs_src = open(importlib.util.find_spec("vllm.envs").origin, encoding="utf-8").read()
table = next(
    ast.literal_eval(node.value)
    for node in tree.body
    if isinstance(node, (ast.Assign, ast.AnnAssign))
    and "FI_ALLREDUCE_FUSION_MAX_SIZE_MB"
    in ast.unparse(node.targets[0] if isinstance(node, ast.Assign) else node.target)
)
print(json.dumps({
    "table": {str(k): {str(t): m for t, m in v.items()} for k, v in table.items()},
    "needs_dp_pp_1": "pipeline_parallel_size == 1" in enable and "data_parallel_size == 1" in enable,
    "hopper_blackwell": "is_device_capability(90)" in enable and "is_device_capability_family(100)" in enable,
    "mc_rounding_only_with_multicast": "if self._enable_multicast:" in setup
    and setup.index("if self._enable_multicast:") < setup.index("CU_MULTICAST_GRANULARITY_RECOMMENDED"),
    "custom_ar_and_symm_mem_in_init": "CustomAllreduce(" in init and "SymmMemCommunicator(" in init,
    "mnnvl_first_on_one_node": 'backend = "mnnvl"' in resolve and "allow_trtllm_fallback = True" in resolve,
    "standalone_fi_ar_default_on": 'os.getenv("VLLM_ALLREDUCE_USE_FLASHINFER", "1")' in envs_src,
}))
"""


def test_allreduce_fusion_workspace_rules_match_the_installed_vllm(conformance, engine_python: str, tmp_path) -> None:
    """The newest release's side of ``vllm.fusion_workspace`` (vllm/config/vllm.py
    ``enable_allreduce_rms_fusion``, the pass's size table, FlashInfer's ``SymmDeviceMemory``
    rounding only multicast buffers to the multicast granularity) and custom all-reduce / symmetric
    memory made in ``CudaCommunicator.__init__`` (before the snapshot, ``vllm.memory_tp``)."""
    from flightcheck._knowledge.vllm.memory_tp import FI_FUSION_MAX_SIZE_MB, fusion_release

    run = subprocess.run(
        [engine_python, "-c", FUSION_PROBE], capture_output=True, text=True, check=False, timeout=300, cwd=tmp_path
    )
    assert run.returncode == 0, run.stderr[-2000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    v = tuple(int(x) for x in conformance.pinned_versions()["vllm"].split("."))
    table = FI_FUSION_MAX_SIZE_MB["0.33.0"]
    assert got["table"] == {str(k): {str(t): m for t, m in row.items()} for k, row in table.items()}
    assert got["hopper_blackwell"] and not got["needs_dp_pp_1"]
    assert got["mc_rounding_only_with_multicast"] and got["custom_ar_and_symm_mem_in_init"]
    assert vllm.fusion_rule(v) is True
    # "auto" -> mnnvl on one node with the trtllm fallback, and the standalone FlashInfer all-reduce
    # on by default (memory_tp.FUSION_BY_RELEASE, 0.25.0 / 0.29.0 on)
    rule = fusion_release(v)
    assert got["mnnvl_first_on_one_node"] and rule.mnnvl_first
    assert got["standalone_fi_ar_default_on"] and rule.standalone


ACT_QUANT_PROBE = r"""
import inspect, json
from vllm.config import vllm as config_vllm
from vllm.model_executor import custom_op
from vllm.model_executor.layers.activation import SiluAndMul
from vllm.model_executor.layers.quantization.input_quant_fp8 import QuantFP8
from vllm.model_executor.kernels.linear.scaled_mm.ScaledMMLinearKernel import FP8ScaledMMLinearKernel
from vllm.model_executor.kernels import linear as kernels
from vllm.platforms.interface import PlatformEnum
import importlib.util, pathlib, re
# platforms/cuda.py imports vllm._C (absent without a GPU build): read it as text
cuda_py = pathlib.Path(importlib.util.find_spec("vllm.platforms.cuda").origin).read_text()
supports_fp8 = re.search(r"def supports_fp8\(cls\)[^\n]*\n(?:\s+.*\n){1,4}", cuda_py)
import torch._inductor.config as inductor_config
from torch._inductor import ir
post = inspect.getsource(config_vllm.VllmConfig.__post_init__)
native = inspect.getsource(QuantFP8.forward_native) + inspect.getsource(QuantFP8)
reuse = inspect.getsource(ir.StorageBox.should_realize_on_reuse)
print(json.dumps({
    "registered": custom_op.op_registry.get("quant_fp8") is QuantFP8
    and custom_op.op_registry.get("silu_and_mul") is SiluAndMul,
    "linear_quantizes_through_it": "self.quant_fp8(" in inspect.getsource(FP8ScaledMMLinearKernel.apply_weights),
    "none_under_inductor": 'custom_ops.append("none")' in post and '"inductor"' in post,
    "blocked_turns_it_on": 'custom_ops.append("+quant_fp8")' in post and "has_blocked_weights" in post,
    "native_is_torch": ".to(_FP8_DTYPE)" in native and "abs().max(" in native,
    "reads_threshold": inductor_config.realize_reads_threshold,
    "cpu_only_heavy_rule": "is_cpu(self.data)" in reuse and "realize_reads_threshold" in reuse,
    "marlin_after": [k.__name__ for k in kernels._POSSIBLE_FP8_KERNELS[PlatformEnum.CUDA]],
    "fp8_needs_89": bool(supports_fp8) and "has_device_capability(89)" in supports_fp8.group(0),
}))
"""


def test_fp8_activation_rule_matches_the_installed_vllm(conformance, engine_python: str, tmp_path) -> None:
    """The installed release's side of ``vllm.fp8_activation_stored_as_fp8``: its FP8 linear
    kernels quantize through the ``quant_fp8`` CustomOp, custom ops are off under Inductor
    (forward_native: torch ops Inductor traces into the silu-mul), blocked weights turn the op
    back on, and the engine's torch realizes a pointwise read by a few users only on the CPU's
    heavy-op rule or past ``realize_reads_threshold`` (4); below cc 8.9 Marlin's weight-only FP8
    runs instead."""
    run = subprocess.run(
        [engine_python, "-c", ACT_QUANT_PROBE], capture_output=True, text=True, check=False, timeout=300, cwd=tmp_path
    )
    assert run.returncode == 0, run.stderr[-2000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert got == {
        "registered": True,
        "linear_quantizes_through_it": True,
        "none_under_inductor": True,
        "blocked_turns_it_on": True,
        "native_is_torch": True,
        "reads_threshold": 4,
        "cpu_only_heavy_rule": True,
        "marlin_after": got["marlin_after"],
        "fp8_needs_89": True,
    }
    # the kernels that quantize the input come first; Marlin (weight-only FP8) only where they
    # cannot run: torch's scaled-mm needs supports_fp8 (cc 8.9), CUTLASS FP8 the same capability
    order = got["marlin_after"]
    marlin = order.index("MarlinFP8ScaledMMLinearKernel")
    assert order.index("CutlassFP8ScaledMMLinearKernel") < marlin
    assert order.index("PerTensorTorchFP8ScaledMMLinearKernel") < marlin
    v = tuple(int(x) for x in conformance.pinned_versions()["vllm"].split("."))
    assert vllm.fp8_activation_stored_as_fp8(v, v0=False, eager=False, compute_capability="9.0") is True
    assert vllm.fp8_activation_stored_as_fp8(v, v0=False, eager=True, compute_capability="9.0") is False
    # Marlin's weight-only FP8 below cc 8.9: the input is not quantized
    assert vllm.fp8_activation_stored_as_fp8(v, v0=False, eager=False, compute_capability="8.6") is False


PROFILER_PROBE = r"""
import inspect, json, math
from vllm import envs
from vllm.config.cache import CacheConfig
from vllm.distributed.device_communicators import cuda_communicator, pynccl
from vllm.v1.core import kv_cache_utils
from vllm.v1.worker import gpu_worker
refused = {}
for value in (0.0, -0.5, 1.5, math.nan, math.inf, 0.5, 1.0):
    try:
        CacheConfig(gpu_memory_utilization=value)
        refused[repr(value)] = False
    except Exception:
        refused[repr(value)] = True
print(json.dumps({
    "refused": refused,
    "tokens_by_concurrency": "int(max_concurrency * max_model_len)"
    in inspect.getsource(kv_cache_utils.get_kv_cache_capacity),
    "peak_holds_estimate": "transient_peak_headroom + cudagraph_memory_estimate_applied"
    in inspect.getsource(gpu_worker.Worker.determine_available_memory),
    "pynccl_warmup": "self.all_reduce(data)" in inspect.getsource(pynccl.PyNcclCommunicator),
    "all_gather_overridden": "all_gather" in vars(cuda_communicator.CudaCommunicator),
    "moe_chunk_variable": hasattr(envs, "VLLM_FUSED_MOE_CHUNK_SIZE"),
}))
"""


def test_profiler_rules_match_the_installed_vllm(conformance, engine_python: str, tmp_path) -> None:
    """The installed release's side of the profiler rules: the utilization range
    (``vllm.utilization_refusal``, pydantic's check when CacheConfig is built), the KV tokens
    logged by concurrency, the logged peak holding the CUDA-graph estimate, pynccl's warm-up
    all-reduce at init, the logits all-gather routed through pynccl (not torch's group) and
    fused_moe without a chunk size."""
    run = subprocess.run(
        [engine_python, "-c", PROFILER_PROBE], capture_output=True, text=True, check=False, timeout=300, cwd=tmp_path
    )
    assert run.returncode == 0, run.stderr[-2000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    v = tuple(int(x) for x in conformance.pinned_versions()["vllm"].split("."))
    for text, refused in got["refused"].items():
        value = float(text)
        assert (vllm.utilization_refusal(value, v) is not None) is refused, text
    assert got["tokens_by_concurrency"] and v >= vllm._release(vllm.KV_TOKENS_BY_CONCURRENCY_SINCE)
    assert got["peak_holds_estimate"] and vllm.logged_peak_holds_cudagraph_estimate(v)
    assert got["pynccl_warmup"] and v in {vllm._release(r) for r in memory_tp.PYNCCL_WARMUP_AT_INIT}
    assert got["all_gather_overridden"] and not vllm.logits_allgather_torch_group(v)
    assert not got["moe_chunk_variable"] and memory_moe.fused_moe_chunk(v) is None
    assert memory_moe.modular_triton(v)


#: what the probes that read the installed modules as text start with
TEXT_PRELUDE = r"""
import importlib.util, json, pathlib
def text(mod):
    return pathlib.Path(importlib.util.find_spec(mod).origin).read_text()
def block(src, name):
    # "def <name>" up to the next def at its own indentation (the end of the source else)
    i = src.index("def " + name)
    end = src.find("\n" + src[src.rfind("\n", 0, i) + 1 : i] + "def ", i)
    return src[i : end if end >= 0 else len(src)]
"""

RUNNER_PROBE = (
    TEXT_PRELUDE
    + r"""
import re
config = text("vllm.config.vllm")
runner = text("vllm.v1.worker.gpu.model_runner")
penalties = text("vllm.v1.worker.gpu.sample.penalties")
states = text("vllm.v1.worker.gpu.states")
mem = text("vllm.utils.mem_utils")
use_v2 = block(config, "use_v2_model_runner")
j = runner.index("def profile_cudagraph_memory")
print(json.dumps({
    "default_rule_gone": "_is_default_v2_model_runner_model" not in use_v2 and "return True" in use_v2,
    "estimates_graphs": "return 0\n" not in runner[j : j + 400],
    "sampler_warmup_pass": "for_sampler_warmup" in runner,
    "bin_counts": bool(re.search(r"output_bin_counts = torch\.zeros\(\s*max_num_reqs, (self\.)?vocab_size, "
                                 r"dtype=torch\.int32", penalties)),
    "all_token_ids": "(self.max_num_reqs, self.max_model_len)" in states,
    "token_ids_in_host_memory": "uva_instead_of_gpu=not use_dense_all_token_ids" in states
                                and bool(re.search(r"use_dense_all_token_ids = \(\s*self\.speculative_config is not "
                                                   r"None and self\.speculative_config\.use_ngram\(\)", runner)),
    "total_consumed": "non_kv_cache_memory = result.total_consumed" in mem,
    "reserved_counted_twice": bool(re.search(r"total_consumed = \(\s*result\.before_create\.free_memory - "
                                             r"result\.after_profile\.free_memory", mem))
                              and bool(re.search(r"transient_peak_headroom = \(\s*result\.after_profile\.torch_peak "
                                                 r"- result\.after_profile\.torch_allocated", mem)),
}))
"""
)


def test_v2_runner_rules_match_the_installed_vllm(conformance, engine_python: str, tmp_path) -> None:
    """The installed release's side of ``vllm.memory_runner`` (its files read as text: the V2
    runner's modules import vllm._C): every model takes the V2 runner, which estimates the CUDA
    graphs, warms the sampler with real sampling parameters, and keeps per-request state the
    budget counts through ``total_consumed``."""
    run = subprocess.run(
        [engine_python, "-c", RUNNER_PROBE], capture_output=True, text=True, check=False, timeout=300, cwd=tmp_path
    )
    assert run.returncode == 0, run.stderr[-2000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert got == dict.fromkeys(got, True), got
    v = tuple(int(x) for x in conformance.pinned_versions()["vllm"].split("."))
    assert vllm.v2_runner(v, architectures=("Qwen3MoeForCausalLM",), moe=True, quantized=True) is True
    assert not vllm.v2_skips_cudagraph_estimate(v) and not vllm.v2_sampler_holds_logits_only(v)
    assert vllm.v2_persistent_bytes(v, 2, 64) == 2 * 4 * (64 + 2)
    assert vllm.consumed_counts_allocator_cache(v)
    assert vllm.v2_token_ids_on_gpu(v, "ngram") and not vllm.v2_token_ids_on_gpu(v, None)


DTYPE_PROBE = (
    TEXT_PRELUDE
    + r"""
import re
src = text("vllm.config.model")
i = src.index("_STR_DTYPE_TO_TORCH_DTYPE = {")
table = dict(re.findall(r'"(\w+)": torch\.(\w+)', src[i : src.index("}", i)]))
auto = block(src, "_resolve_auto_dtype")
print(json.dumps({
    "table": table,
    "auto_downcasts_float32": "if config_dtype == torch.float32:\n        config_dtype = preferred_dtype" in auto,
}))
"""
)


def test_model_dtype_rule_matches_the_installed_vllm(conformance, engine_python: str, tmp_path) -> None:
    """``vllm.model_dtype`` against the installed release's config/model.py (read as text):
    the ``--dtype`` spellings and the dtype each names, and "auto"'s float32 downcast."""
    run = subprocess.run(
        [engine_python, "-c", DTYPE_PROBE], capture_output=True, text=True, check=False, timeout=300, cwd=tmp_path
    )
    assert run.returncode == 0, run.stderr[-2000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert got["table"] == vllm.MODEL_DTYPES
    assert got["auto_downcasts_float32"] and vllm.model_dtype("auto", "float32") in ("bfloat16", "float16")


PEAK_TERMS_PROBE = (
    TEXT_PRELUDE
    + r"""
runner = text("vllm.v1.worker.gpu_model_runner")
worker = text("vllm.v1.worker.gpu_worker")
triton = text("vllm.v1.sample.ops.topk_topp_triton")
sampler = text("vllm.v1.sample.ops.topk_topp_sampler")
det = block(worker, "determine_available_memory").split("\n")
def indent(line):
    return len(line) - len(line.lstrip())
w = next(n for n, ln in enumerate(det) if ln.strip().startswith("with") and "memory_profiling(" in ln + det[n + 1])
g = next(n for n, line in enumerate(det) if "profile_cudagraph_memory()" in line)
h = next(n for n in range(w, len(det)) if det[n].rstrip().endswith(":"))  # the with's header ends
# the graph estimate is inside the block while every line of the body before it is indented past the with
graphs_inside = all(indent(line) > indent(det[w]) for line in det[h + 1 : g] if line.strip())
route = block(sampler, "apply_top_k_top_p(")
torch_dir = pathlib.Path(importlib.util.find_spec("torch").origin).parent
blas = (torch_dir / "lib" / "libtorch_cuda.so").read_bytes()
print(json.dumps({
    "indexed_copy": "return hidden_states, hidden_states[logit_indices_device]" in runner,
    "rand_like": "hidden_states = torch.rand_like(hidden_states)" in runner,
    "triton_buffer": "size = min(next_power_of_2(NUM_PROGRAMS), num_sm)" in triton
    and "buffer = logits.new_empty((size, vocab_size))" in triton
    and "_TRITON_BUFFER_CACHE[buf_key] = buffer" in triton,
    "triton_any_rows": "if HAS_TRITON:" in route and "logits.shape[0] >= 8" not in route,
    "graphs_in_profile": graphs_inside,
    "torch_blas_workspaces": all(s in blas for s in (
        b"Could not parse CUBLAS_WORKSPACE_CONFIG", b"invalid CUBLASLT_WORKSPACE_SIZE",
        b"TORCH_CUBLASLT_UNIFIED_WORKSPACE")),
}))
"""
)


def test_profile_peak_terms_match_the_installed_vllm(conformance, engine_python: str, tmp_path) -> None:
    """The sampler run's hidden-state copies, Triton top-k/top-p's cached buffer and its routing
    (``vllm.v1_sampler_hidden``, ``vllm.triton_sampler_buffer_bytes``), the graph estimate's
    captures inside the profile (``vllm.graph_profile_in_budget``) and torch's BLAS workspace
    variables (``cublas``) in the installed release and its torch, read as text."""
    run = subprocess.run(
        [engine_python, "-c", PEAK_TERMS_PROBE], capture_output=True, text=True, check=False, timeout=300, cwd=tmp_path
    )
    assert run.returncode == 0, run.stderr[-2000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    v = tuple(int(x) for x in conformance.pinned_versions()["vllm"].split("."))
    assert got["indexed_copy"] and got["rand_like"] and vllm.v1_sampler_hidden(v) == (True, 2)
    assert got["triton_buffer"] and got["triton_any_rows"]
    assert vllm.triton_sampler_buffer_bytes(v, 4, 1000, 132) == 4 * 1000 * 4
    assert vllm.graph_profile_in_budget(v, eager=False) is got["graphs_in_profile"]
    assert got["torch_blas_workspaces"]
