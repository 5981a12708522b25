"""The memory model against real vLLM startup logs (tests/fixtures/memory/).

Each point gives the launch (GPU, layout, utilization, length, batch limits, version) and
what vLLM logged. The model's inputs come from the point — the logged "Model loading took
N GiB" is the weights per rank (the question is the budget left for KV, not the weights) —
and from ``model_configs.json`` (the architectures' config.json figures, each with its
source). Points without a sourced config, a known GPU total or the weights are excluded
with the reason. ``bench/memory_accuracy.py`` prints the table; tests/memory asserts on it.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flightcheck._knowledge import cublas, nccl, vllm
from flightcheck._knowledge.gpus import sm_count
from flightcheck._memory.bound import bound_terms
from flightcheck._memory.budget import (
    NEAR_MISS,
    Batch,
    Interconnect,
    act_quant_span,
    activations,
    communication,
    default_reserve,
    forward_peak,
    length_cost,
    logits_allgather,
    model_runner,
    moe_backend_span,
    release,
    runner_span,
    sampler_install_span,
    sampler_span,
    v0_peak,
)
from flightcheck._memory.config import dtype_size, parse
from flightcheck._memory.kv import capacity, kv_shape
from flightcheck._memory.weights import Layout, stage_layers

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "memory"
GiB = 1 << 30

#: model id in the log -> model_configs.json key (same architecture)
ARCH = {
    "Qwen2-7B-Instruct": "qwen2-7b",
    "meta-llama/Meta-Llama-3.1-8B-Instruct": "llama-3-8b",
    "meta-llama/Llama-3.1-8B-Instruct": "llama-3-8b",
    "meta-llama/Meta-Llama-3-8B-Instruct": "llama-3-8b",
    "meta-llama/Meta-Llama-3-8B": "llama-3-8b",
    "gpt-oss-120b": "gpt-oss-120b",
    "openai/gpt-oss-120b": "gpt-oss-120b",
    "openai/gpt-oss-20b": "gpt-oss-20b",
    # the Kaggle copy of openai/gpt-oss-120b (point 112: 'Resolved architecture: GptOssForCausalLM',
    # quantization=mxfp4, and the 65.9651 GiB of Marlin-padded weights point 29 logs for it)
    "/kaggle/input/gpt-oss-120b/transformers/default/1": "gpt-oss-120b",
    "Qwen/Qwen3-30B-A3B": "qwen3-30b-a3b",
    "Qwen/Qwen3-30B-A3B-Instruct-2507": "qwen3-30b-a3b",
    "Qwen/Qwen3-235B-A22B-FP8": "qwen3-235b-a22b",
    "Qwen/Qwen3-32B": "qwen3-32b",
    "microsoft/Phi-3-mini-4k-instruct": "phi-3-mini-4k",
    # an abliterated fine-tune of gpt-oss-20b: the weights are edited, not the architecture
    # (its 13.7193 GiB of weights are gpt-oss-20b's 13.72 of point 39)
    "huihui-ai/Huihui-gpt-oss-20b-mxfp4-abliterated-v2": "gpt-oss-20b",
    # a full fine-tune of Llama 3.1 8B: its 14.9889 GiB of weights are Llama-3.1-8B's (points 6, 20)
    "NousResearch/Hermes-3-Llama-3.1-8B": "llama-3-8b",
    "Qwen/Qwen2.5-7B-Instruct": "qwen2.5-7b",
    "Qwen/Qwen3-0.6B": "qwen3-0.6b",
    # the 2507 instruct release of Qwen3-235B-A22B: the same architecture (point 69)
    "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8": "qwen3-235b-a22b",
    # a merged fine-tune of Qwen2.5-3B (point 74: 36,864 B of KV a token, Qwen2.5-3B's)
    "train/checkpoints/qwen25-3b-distill-merged": "qwen2.5-3b",
    # DeepSeek's distillation into Qwen2.5-32B (its architecture), FP8 weights
    "DeepSeek-R1-Distill-Qwen-32B-FP8": "qwen2.5-32b",
    # AWQ 4-bit weights of the Qwen3-30B-A3B architecture (point 76)
    "cpatonn/Qwen3-30B-A3B-Thinking-2507-AWQ-4bit": "qwen3-30b-a3b",
    "Qwen/Qwen3-Coder-30B-A3B-Instruct": "qwen3-30b-a3b",
    "Qwen/Qwen2.5-3B": "qwen2.5-3b",
    "Qwen/Qwen3-8B": "qwen3-8b",
    "Qwen/Qwen3-4B": "qwen3-4b",
    # DeepSeek's distillation into Qwen2.5-14B (its architecture)
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B": "qwen2.5-14b",
    # FP8 weights (compressed-tensors): the architecture, KV and activations are Llama-3.3-70B's
    "RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic": "llama-3.3-70b",
    # a merged DPO fine-tune of Llama-3.1-8B-Instruct (point 85: 'Resolved architecture:
    # LlamaForCausalLM', 14.99 GiB of weights, Llama-3.1-8B's)
    "models/final_dpo": "llama-3-8b",
    # AWQ 4-bit weights of Qwen2.5-14B-Instruct: point 13's log prints 'Resolved architecture:
    # Qwen2ForCausalLM'; the architecture, KV and activations are Qwen2.5-14B's
    "Qwen/Qwen2.5-14B-Instruct-AWQ": "qwen2.5-14b",
    # FP8 weights of Qwen3-Coder-30B-A3B-Instruct (mapped above): point 27's '24.0 GiB KV cache
    # is needed' for 262,144 tokens is 48 layers x 2 x 4 KV heads x 128 x 2 bytes, Qwen3-30B-A3B's
    "Qwen/Qwen3-Coder-30B-A3B-Instruct-FP8": "qwen3-30b-a3b",
    # INT8 w8a8 weights of Llama 3.1 70B Instruct, whose figures (maxtext
    # src/maxtext/configs/models/llama3.1-70b.yml, commit e591f30c: 80 layers, 8192 hidden,
    # 64 heads, 8 KV heads, head_dim 128, mlp 28672, vocab 128256) are llama-3.3-70b's
    "neuralmagic/Meta-Llama-3.1-70B-Instruct-quantized.w8a8": "llama-3.3-70b",
    # the FP8 release of Qwen3-Coder-480B-A35B-Instruct (model_configs.json cites its figures)
    "Qwen/Qwen3-Coder-480B-A35B-Instruct-FP8": "qwen3-coder-480b-a35b",
    # DeepSeek-R1 and its 0528 update are DeepseekV3ForCausalLM checkpoints (MLA, 61 layers):
    # the DeepSeek-V3 architecture (model_configs.json, from a copy of R1's config.json)
    "deepseek-ai/DeepSeek-R1": "deepseek-v3",
    "deepseek-ai/DeepSeek-R1-0528": "deepseek-v3",
    # the chat fine-tune of DeepSeek-V2-Lite: the same architecture (point 41's 0.95 GiB for
    # 32,768 tokens is 27 layers x 576 x 2 bytes)
    "deepseek-ai/DeepSeek-V2-Lite": "deepseek-v2-lite",
    "deepseek-ai/DeepSeek-V2-Lite-Chat": "deepseek-v2-lite",
    # vision-language models (the encoder's profile-run terms: _memory.budget.encoder_terms)
    "ybelkada/llava-1.5-7b-hf-awq": "llava-1.5-7b",  # AWQ weights of llava-hf/llava-1.5-7b-hf
    "mistralai/Mistral-Small-3.2-24B-Instruct-2506": "mistral-small-3.2-24b",
    "Qwen/Qwen3-VL-30B-A3B-Instruct": "qwen3-vl-30b-a3b",
    # the Qwen3-30B-A3B directory the post of points 97-98 mounts (its title and volume name it)
    "/qwen/qwen3-30b-a3b": "qwen3-30b-a3b",
    "unsloth/Llama-3.2-3B-Instruct": "llama-3.2-3b",
    # Q8_0 GGUF weights of Llama-3.2-3B-Instruct (point 100): the architecture is Llama-3.2-3B's
    "lmstudio-community/Llama-3.2-3B-Instruct-GGUF (Q8_0)": "llama-3.2-3b",
    # a local copy of Meta-Llama-3.1-8B-Instruct (point 105: 'Resolved architecture: LlamaForCausalLM',
    # 14.9889 GiB of weights, Llama-3.1-8B's of points 6, 20)
    "/home/jupyter/models/Meta-Llama-3.1-8B-Instruct": "llama-3-8b",
    # a local copy of Qwen/Qwen3-VL-30B-A3B-Instruct (point 104: 'Resolved architecture:
    # Qwen3VLMoeForConditionalGeneration'), the architecture of point 24
    "/home/zp/work/models/Qwen/Qwen3-VL-30B-A3B-Instruct": "qwen3-vl-30b-a3b",
    "microsoft/phi-1_5": "phi-1.5",
    "facebook/opt-125m": "opt-125m",
    # an SFT of Rho-1's 1B model, a TinyLlama-1.1B architecture (point 111: its logged KV bytes
    # a token, 22,528, are 22 layers x 2 x 4 KV heads x 64 x 2)
    "realtreetune/rho-1b-sft-GSM8K": "tinyllama-1.1b",
    # a merged LoRA fine-tune of Phi-4-mini-instruct (point 114: 131,077 B of KV a token, Phi-4-mini's)
    "microsoft/Phi-4-mini-instruct (merged LoRA fine-tune)": "phi-4-mini",
    # DeepSeek-Coder-V2-Lite is pre-trained on from a DeepSeek-V2-Lite checkpoint: 27 layers, 6 of
    # 64 experts (point 115's note cites the model card and public notes)
    "deepseek-ai/DeepSeek-Coder-V2-Lite-Instruct": "deepseek-v2-lite",
    "Qwen/Qwen2.5-1.5B-Instruct": "qwen2.5-1.5b",
    # the math fine-tune keeps Qwen2.5-1.5B's architecture (point 117's KV bytes a token)
    "Qwen/Qwen2.5-Math-1.5B": "qwen2.5-1.5b",
    # AutoRound GPTQ 4-bit weights of microsoft/phi-4 (point 118's KV bytes a token)
    "kaitchup/Phi-4-AutoRound-GPTQ-4bit": "phi-4",
    # DeepSeek's distillation into Qwen2.5-Math-7B, Qwen2.5-7B's shape (point 119's KV bytes a token)
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B": "qwen2.5-7b",
    # held-out points 126-137 (SEARCHES.md, "a genuinely held-out measurement set"):
    "Qwen/Qwen2.5-72B-Instruct": "qwen2.5-72b",
    # bitsandbytes 4-bit weights of Qwen2.5-7B-Instruct (point 127)
    "/home/sancelot/Qwen2.5-7B-Instruct-bnb-4bit": "qwen2.5-7b",
    # DeepSeek-V2.5: a DeepseekV2ForCausalLM checkpoint of DeepSeek-V2's 236B architecture
    "deepseek-ai/DeepSeek-V2.5": "deepseek-v2",
    # the merged DPO fine-tune of Llama-3.1-8B-Instruct of point 85, served as 'models/merged'
    # (point 130: the same project's 14.99 GiB of weights, 'Resolved architecture: LlamaForCausalLM')
    "models/merged": "llama-3-8b",
    # AWQ 4-bit and online-FP8 weights of Llama 3 / 3.1 70B: the llama-3.3-70b architecture (80
    # layers, 8 KV heads; point 131's 163,840 B of KV a token a rank at TP 2)
    "TechxGenus/Meta-Llama-3-70B-Instruct-AWQ": "llama-3.3-70b",
    "meta-llama/Llama-3.1-70B-Instruct": "llama-3.3-70b",
    "Qwen/Qwen2.5-0.5B": "qwen2.5-0.5b",
    # held-out round 3 (SEARCHES.md): the instruct fine-tune keeps Qwen2.5-0.5B's architecture (point 142:
    # 1,629,520 tokens for 18.65 GiB is 12,288 B a token, 24 layers x 2 x 2 KV heads x 64 x 2)
    "Qwen/Qwen2.5-0.5B-Instruct": "qwen2.5-0.5b",
    # held-out round 4 (SEARCHES.md): the llm-d-planner v0.19.0 sweep spells the RedHat FP8 repo
    # in lower case, and its INT8 w8a8 sibling; both LlamaForCausalLM, Llama-3.3-70B's shape
    "RedHatAI/Llama-3.3-70B-Instruct-fp8-dynamic": "llama-3.3-70b",
    "redhatai/Llama-3.3-70B-Instruct-quantized.w8a8": "llama-3.3-70b",
    # a Qwen2.5-72B fine-tune ('Resolved architecture: Qwen2ForCausalLM'; point 151: 67.82 GiB a
    # rank at TP 2 and 163,840 B of KV a token a rank, Qwen2.5-72B's)
    "moonshotai/Kimi-Dev-72B": "qwen2.5-72b",
    "microsoft/phi-4": "phi-4",
    # RedHat's GPTQ w4a16, INT8 w8a8 and FP8-dynamic checkpoints of Llama-3.1-8B-Instruct and
    # Qwen2.5-7B-Instruct (points 164-167): the architecture and KV shape are the base models'
    "RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16": "llama-3-8b",
    "RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w8a8": "llama-3-8b",
    "RedHatAI/Qwen2.5-7B-Instruct-fp8-dynamic": "qwen2.5-7b",
    "RedHatAI/Qwen2.5-7B-Instruct-quantized.w8a8": "qwen2.5-7b",
}
#: per-rank weights derived for a point that does not log them, from another point's logged
#: weights of the same checkpoint at another TP: ``(point, TP, GiB replicated on every rank)``.
#: Point 33 (Qwen3-235B-A22B-FP8 at TP 4) from point 15 (the same checkpoint at TP 8 + EP,
#: 27.6656 GiB, vLLM 0.10.0): what splits over TP 4 (q / o projections, the experts' 1536-wide
#: intermediate by 4, the vocabulary-sharded embedding and LM head, the 128 x 128 block scales)
#: is twice TP 8's share (EP 8 holds 16 of 128 whole experts: 1/8 of the same bytes), and each
#: rank keeps at both TPs one of the 4 KV heads (k / v_proj: 2 x 128 x 4096 FP8), the bf16 router
#: (128 x 4096) and the norms: 94 x (1 MiB + 1 MiB + 16.5 KiB) + 8 KiB = 0.185 GiB
#: (model_configs.json's qwen3-235b-a22b figures; config.json's quantization_config: FP8 blocks of
#: 128 x 128, the router and norms unquantized, vllm/model_executor/models/qwen3_moe.py
#: ``Qwen3MoeSparseMoeBlock.gate`` a ReplicatedLinear with quant_config None, 0.9.2 - 0.33.0)
DERIVED_WEIGHTS = {33: (15, 8, 0.185)}


def derived_weights(points: list[dict[str, Any]], i: int) -> float | None:
    """Point ``i``'s per-rank weights from ``DERIVED_WEIGHTS``: the split part scaled by TP."""
    if i not in DERIVED_WEIGHTS:
        return None
    src, src_tp, replicated = DERIVED_WEIGHTS[i]
    logged = points[src]["logged"]["model_loading_gib"]
    tp = points[i]["tp"] or 1
    return (logged - replicated) * src_tp / tp + replicated


#: the point's GPU -> the _gpu_totals_gib key
GPU = {
    "NVIDIA A100 80GB": "A100 80GB",
    "NVIDIA A100 40GB": "A100 40GB",
    "NVIDIA A100 40GB (inferred: 39.56 GiB CUDA total)": "A100 40GB",
    "NVIDIA A100 (40GB inferred)": "A100 40GB",
    # an A100 whose variant the source leaves out: 13.72 GiB of weights + 36.56 GiB of KV at
    # utilization 0.65 (point 39) need >= 77 GiB, which only the 80 GB board has
    "NVIDIA A100": "A100 80GB",
    "NVIDIA L4": "L4",
    "NVIDIA H100 80GB HBM3": "H100 80GB",
    "NVIDIA H100": "H100 80GB",
    # point 112: the board Kaggle's AIMO3 notebooks run on, inferred from the log (its note)
    "NVIDIA H100 80GB (inferred)": "H100 80GB",
    "NVIDIA H200": "H200",
    "NVIDIA GeForce RTX 3090": "RTX 24GB",
    "NVIDIA GeForce RTX 4090": "RTX 24GB",
    "NVIDIA GeForce RTX 3090 (WSL)": "RTX 24GB (WSL)",
    # points 141-142: an RTX 4090 under WSL2; their logs give the total (23.99 GiB)
    "NVIDIA GeForce RTX 4090 (WSL)": "RTX 24GB (WSL)",
    "NVIDIA GB10 (DGX Spark)": "GB10",
    # the RTX 3090 of github.com/TheBuccaneer/vllm-offload-profiles, whose OOM message gives its total
    "NVIDIA GeForce RTX 3090 (23.54 GiB host)": "RTX 3090 (23.54)",
    "NVIDIA L40S": "L40S",
    "NVIDIA RTX PRO 6000 Blackwell Server Edition": "RTX PRO 6000 Blackwell",
    # points 121-122: a host named 'rtxpro6000' whose board variant is not printed; its log gives the total
    "NVIDIA RTX PRO 6000 Blackwell (variant not stated)": "RTX PRO 6000 Blackwell",
    # point 82: an 80 GB A800 (cc 8.0 on the 8192-token tier); nvidia-smi gives A800-SXM4-80GB and
    # A100-SXM4-80GB the same 81920 MiB, so the A100 80GB's CUDA total
    "NVIDIA A800 80GB (inferred)": "A100 80GB",
    # point 85: the board its repository names; the CUDA total is inferred (model_configs.json)
    "NVIDIA RTX 6000 Ada Generation (inferred)": "48 GB (49140 MiB)",
    # point 86: cc < 8.0 and more than 16 GB (the note gives the evidence)
    "Tesla V100 32GB (inferred)": "V100 32GB",
    "NVIDIA GeForce RTX 3060 12GB": "RTX 3060 12GB",
}
#: the point's GPU name as vLLM's batch defaults see it
TORCH_NAME = {"A100 80GB": "NVIDIA A100-SXM4-80GB", "A100 40GB": "NVIDIA A100-SXM4-40GB"}
#: per point GPU names whose batch tier differs from their total's key (an A800 is not an "a100")
TORCH_NAME_BY_GPU = {"NVIDIA A800 80GB (inferred)": "NVIDIA A800-SXM4-80GB"}
#: NVML's memory.total where it differs from CUDA's: DGX Spark's GB10 has none (nvidia-smi
#: prints "Not Supported"; the script of point 11 reads "Total GPU Memory: 0 MB"), so vLLM's
#: batch defaults fall back to 0 — see vllm.batch_defaults
NVML_TOTAL_GIB = {"GB10": 0.0}
COMPUTE_CAPABILITY = {"GB10": "12.1", "H100 80GB": "9.0", "H200": "9.0"}


#: vision models left unscored, and why (the generic reason otherwise)
NOT_SOURCED = {
    36: (
        "no sourced config.json figures (public copies of Llama-3.2-11B-Vision's config found give its vision_config "
        "but not all of its text_config); and a V0 launch (main after 0.6.6), whose encoder-decoder profile run "
        "(max_num_seqs dummy sequences with their images, the 36.63 GiB peak it logs) is not modelled: "
        "vllm.ENCODER_PROFILED_SINCE"
    ),
    7: (
        "Gemma 4 (26B-A4B): no sourced config.json figures added — its text model's global_head_dim / "
        "num_global_key_value_heads / attention_k_eq_v KV layout is not read by _memory.config, and its image "
        "size competes with the video and audio items vLLM's gemma4_mm.py profiles"
    ),
    21: "Gemma 4 (E4B): no sourced config.json figures added (see 7); the GPU is not named either",
    40: "Gemma 4 (26B-A4B): no sourced config.json figures added (see 7)",
}
#: points the model misses by more than max(3 %, 0.5 GiB), and why (printed by the bench;
#: tests/memory/test_accuracy.py asserts this list is exactly the misses). Point 34 (V0 at PR
#: #10511) left it when V0's sort sampler was modelled (vllm.V0_FLASHINFER_SAMPLER_OPT_IN): its
#: logged activation peak of 1.26 GiB is now modelled as 1.22 (0.78 before), and it is +1.57 GiB
#: against a tolerance of 1.60 — with the log's non_torch_memory of 1.79 GiB at TP 1 against 0.25
#: modelled: that build runs PR 10511's memory_profiling (0.6.5's rules, memory_v0), which counts
#: torch's reserved-but-free blocks as non-torch; the bound's allocator_cache term holds it
RESIDUALS = {
    2: (
        "TP 2 across two nodes (Ray) in 0.10.1.1, whose snapshot precedes the distributed init "
        "(vllm.SNAPSHOT_AFTER_DISTRIBUTED_SINCE): the TP group's pynccl communicator, torch's NCCL communicator "
        "for the TP device group and custom all-reduce's buffers count inside the budget. NCCL's per-rank size is "
        "derived on one node (flightcheck._knowledge.nccl: NVSwitch or an NVLink pair, points 15 and 16); "
        "across nodes the connections go over NCCL's network transport (src/transport/net.cc, "
        "nccl.multinode_communicator_bytes), whose buffers sit on the GPU only with GPUDirect RDMA — 20 MiB a "
        "channel and peer — on as many channels as the NICs carry (up to MAXCHANNELS): the log names neither "
        "(no NCCL_DEBUG lines), so the certain part the point counts is 0 and the bound's nccl_in_budget term "
        "reaches 5.00 GiB below it for the two communicators, which holds the logged value (0.88 GiB of network "
        "buffers is about 22 channels of GPUDirect connections to the one peer: not checkable from the log). "
        "The same launch on one node (points 3, 4) is within 0.02 GiB"
    ),
    15: (
        "Qwen3-235B-A22B-FP8 at TP 4 on 8 x H100 NVSwitch in 0.10.0 (snapshot before the distributed init): "
        "+1.07 GiB, 0.003 GiB past 3% of its 35.65 (within 5%). The TP group's two NCCL communicators are "
        "counted at their certain ring / tree connections (1.14 GiB, flightcheck._knowledge.nccl); NVLS "
        "(0.5 GiB more for the two) only in the bound, the log not showing multicast support: with it the "
        "point is +0.57. It moved from +1.00 when the non-torch point became 0.125 GiB here (budget.non_torch_point: "
        "0.10.0 profiles no graph capture; 0.25 before) and the BLAS workspaces and the sampler run's "
        "hidden-state copies (0.05 GiB) were counted"
    ),
    11: (
        "GB10 (DGX Spark, unified memory) in 0.13.0: vLLM's snapshot takes free memory from psutil's "
        "'available' on cc 12.1 (vllm/utils/mem_utils.py MemorySnapshot.measure, 0.13.0 wheel), so host "
        "memory the process and the OS take between the baseline and the profile (this log compiles "
        "with torch.compile for 50 s) counts as non-torch memory inside the budget; its size is the "
        "host's, not in vLLM's code (not modelled)"
    ),
    33: (
        "no release printed (vllm issue 21348, 2025-07-22, between the 0.9.2 and 0.10.0 releases), no sampler "
        "line and no interconnect: the unknown-release point takes each release rule's conservative side — the "
        "sort sampler (38 B a vocabulary element for 1024 dummy requests x 151,936: vllm.sampler_kind), which a "
        "maintainer's reply names as the cause of the small budget — but the communicators after the snapshot "
        "(0.11.0 on), while 0.9.2 / 0.10.0 count the TP group's NCCL buffers inside the budget: derived for 4 x "
        "H100 on NVSwitch (as point 15's host) they are 1.14 - 1.39 GiB, and with 0.9.2's rules, the sort and "
        "that interconnect the point is 8.93 - 9.18 GiB (+0.8 - 1.1). The bound (release_unknown) holds the "
        "logged value. Weights derived from point 15's (DERIVED_WEIGHTS)"
    ),
    123: (
        "held out; see 124. At 65536 batched tokens: the prefill MoE buffers (modular TritonExperts unchunked from "
        "0.18.0, the FP8 copies, the separate output from 0.11.1: vllm.memory_moe) give the post's own 8192 -> 65536 "
        "growth (8.70 GiB modelled, 8.70 logged, both less the CUDA-graph estimate); the constant part is 124's, and "
        "the CUDA-graph estimate logged 1.10 GiB against the point's 0.5"
    ),
    124: (
        "Qwen3-235B-A22B-Instruct-2507-FP8 at TP 4 + EP on 4 x H100 SXM, 0.20.0, Triton MoE, 8192 batched tokens, the "
        "CUDA-graph estimate off: vLLM's non-KV memory besides the weights is 3.68 GiB (the post's table gives 4.08 "
        "for 'prefill activation + fixed workspace'), the point's 2.99 (activations 1.27, FlashInfer's all-reduce "
        "fusion workspace 1.5: vllm.fusion_workspace, non-torch 0.25). The post attributes ~2.8 GiB to "
        "'FlashInfer/DeepGEMM/TRTLLM-allreduce fixed workspaces'; the ~0.7 GiB left is TP 4 non-torch memory the "
        "single-rank point does not count (the issue's TP >= 2 breakdowns in V1: ~2.1 GiB a rank at TP 2 and TP 4; "
        "flightcheck._knowledge.vllm.memory_tp). Within 5 %, inside the bound"
    ),
    125: (
        "see 124: the same ~0.7 GiB at TP 4 in 0.20.0 plus the CUDA-graph estimate, logged 1.10 GiB against the "
        "point's 0.5; inside the bound (cuda_graphs up to 1.5 GiB)"
    ),
    58: (
        "the source's own figures for this row do not add up at the utilization it states (0.9): "
        "ceil(0.9 x 79.18) - 64.38 weights - 7.38 peak activation - 0.13 non-torch = -0.63 GiB, yet it "
        "logs 3.33 GiB and a launch that ran; at 0.95 the same figures give 3.33 exactly (75.23 - 64.38 "
        "- 7.38 - 0.13), and the model predicts 3.26. The utilization is recorded as the source prints it "
        "(not corrected), so the point stays a residual"
    ),
    92: (
        "GB10 (DGX Spark, unified memory), 0.19.2.dev0, next to a co-resident vLLM: the logged 4.85 GiB exceeds "
        "ceil(0.49 x 121.69) - 56.88 GiB of logged weights = 2.75 GiB, so vLLM's own non-KV total came out 2.1 GiB "
        "below its weights: the activation peak plus the non-torch increase was negative. On cc 12.1 the snapshot's "
        "free memory is psutil's 'available' host memory (vllm/utils/mem_utils.py MemorySnapshot.measure, "
        "shared_sysmem_device_mem_sms, 0.19.0 wheel) and the non-torch increase is the change of (total - available "
        "- torch reserved) between the baseline and the profile, so host memory freed meanwhile (by the OS or the "
        "co-resident guard process) shrinks it below zero; how much is the host's, not in vLLM's code (not "
        "modelled; see 11)"
    ),
    93: (
        "RTX 3060 12GB on a desktop host, 0.19.0: the logged 8.03 GiB exceeds ceil(0.75 x 11.63) - 1.12 GiB of "
        "logged weights = 7.61 GiB, so vLLM's non-KV total came out below the weights alone: its non-torch increase "
        "was negative. vllm/utils/mem_utils.py MemorySnapshot.measure (0.19.0 wheel) takes the device-wide "
        "cudaMemGetInfo, so non-torch memory = total - free - torch reserved includes other processes, and memory "
        "another process released between the baseline and the profile (this launch downloaded its weights for 708 s "
        "in between; the host's first attempt found 2.6 GiB held by others) enlarges the budget. Its size is the "
        "host's, not in vLLM's code (not modelled). The same host's next launch (94), without the download, is "
        "within 0.09 GiB"
    ),
    113: (
        "DeepSeek-R1 (FP8, MLA, MoE) at TP 8 on 8 x H200 in 0.7.3 (V0), the driver's figures: the model "
        "counts 5.11 GiB of activations and 0.25 + 1.14 GiB of non-torch memory where the log has 6.37 and 7.16. "
        "Derived from the code and counted: V0's baseline precedes init_worker_distributed_environment "
        "(worker/worker.py init_device, 0.7.3), so the TP group's pynccl communicator and torch's device-group "
        "communicator (made by the profile run's logits gather to the driver, logits_processor.py / "
        "parallel_state.py GroupCoordinator.gather) with every ring and tree connected at init "
        "(NCCL_CUMEM_ENABLE=0, vllm/__init__.py) and custom all-reduce's buffers are inside: 1.14 GiB "
        "(flightcheck._knowledge.nccl, 24 channels, the driver a chain's end), plus the gather's P2P receives "
        "from the 7 other ranks on p2pnChannelsPerPeer 32 channels each at 10 MiB (nccl.gather_bytes: paths.cc, "
        "enqueue.cc, p2p.cc at v2.21.5-1): 2.19 GiB, the driver (NCCL's rank 0, the chain's head) binding. NVLS "
        "only in the bound: the log "
        "does not show multicast support, and NCCL 2.21.5 (the NCCL of torch 2.5.1, which 0.7.3 pins) sizes it "
        "nChannels x 2 x (1 MiB + NVLS_MEM_ALIGN_SIZE 2 MiB) x nHeads = 1.125 GiB a communicator (nvls.cc at "
        "v2.21.5-1; 256 MiB from 2.22): the bound's nccl_in_budget reaches 2.25 GiB below the point. About "
        "1.4 GiB more non-torch memory "
        "is not derived. Activations: the profile's 32,000 tokens over 1024 dummy prompts; V0's sort sampler on "
        "1024 x 129,280 logits is 4.68 GiB, fused_moe's three separate workspaces of 0.7.3 "
        "(vllm.fused_moe_cache13_shared) with the shared expert's output held through them "
        "(deepseek_v2.py DeepseekV2MoE.forward: shared_output is computed first) about 5.3 GiB — the forward "
        "pass's shared-expert output is not modelled, and the rest of the 6.37 GiB is not derived"
    ),
    135: (
        "held out: Meta-Llama-3-8B on an A100 40GB, V0 (0.6.6.post1 by its line sites), the launch's flags not in "
        "the source. Its logged activation peak is 9.37 GiB where V0's default batch (8192 tokens, 256 sequences) "
        "gives 1.22 — and the same model in V0 at PR 10511's defaults (point 34) logs 1.26. The peak is V0's sort "
        "sampler's (vllm.SAMPLER_BYTES_NATIVE, 38 B a vocabulary element over max_num_seqs dummy requests): "
        "at --max-num-seqs 2048 the model gives 9.36 GiB of activations and a budget of 10.98 GiB (-0.14 against "
        "the logged 11.12). The point is scored as recorded (the defaults the source implies), not on a batch "
        "read back from its own output, so it stays a residual"
    ),
    138: (
        "held out: Qwen3-32B on one RTX PRO 6000 Blackwell, 0.27.1 (the V2 model runner, vllm.memory_runner: no "
        "CUDA-graph estimate, a logits-only dummy sampler, 0.58 GiB of penalties state at 1024 requests), at "
        "utilization 0.426 with 61.03 GiB of weights: vLLM's non-KV memory besides the weights came to 3.86 GiB "
        "(0.426 x 95.01 + 24.42 - 61.03) where the same card's TP 2 run (139) logs 1.66 and is within 0.2 GiB. "
        "What the extra ~1.7 GiB at TP 1 is — with the weights alone above the requested memory — is not derived; "
        "from 0.27.0 the blocks torch keeps reserved after the profile count twice (vllm."
        "consumed_counts_allocator_cache: the free-memory drop and the peak over what stays allocated), which at "
        "TP 1's full-width segments may be it: the bound's allocator_cache term (up to the 1.33 GiB peak) holds it"
    ),
    140: (
        "held out: the same model at PP 2 over PCIe, 0.27.1, stage 0's figure: vLLM kept 0.85 GiB more than the "
        "point besides the weights. Stage 0 runs no sampler (the V2 runner builds it, and its penalties state, on "
        "the last PP rank only: v1/worker/gpu/model_runner.py load_model), so the point's sampler peak does not "
        "bind there; what stage 0 holds instead — the PP send / receive buffers over PCIe, the intermediate "
        "tensors of 8192 tokens (0.16 GiB) — is not derived. The engine sizes the cache by the smallest budget "
        "over the workers and the 56,640 tokens logged are stage 0's 6.92 GiB, so the last stage (sampler, "
        "penalties) had no less: stage 0 holds at least what the last holds — the model keeps one reserve for "
        "every stage rather than drop the sampler's share where this one point says something as large takes its "
        "place. Inside the bound (allocator_cache, as 138)"
    ),
    157: (
        "held out (round 4, the llm-d-planner 0.19.0 sweep on one H100): Qwen3-30B-A3B at TP 1, 8192 tokens, "
        "+0.52 GiB (3.4%: within 5%, not 3%). The log's breakdown puts it in the activations: 2.68 GiB logged "
        "against 2.17 modelled (fused_moe's Triton workspaces, vllm.memory_moe, 0.19.0), non-torch within 0.02. "
        "The same sweep's DeepSeek-V2-Lite (156, MoE + MLA) is 0.44 GiB short there too. Not derived, and no "
        "activation rule was changed for these points"
    ),
}


@dataclass
class Row:
    index: int
    model: str
    gpu: str
    version: str | None
    outcome: str
    logged_gib: float | None
    predicted_gib: float | None = None
    logged_tokens: int | None = None
    predicted_tokens: int | None = None
    kv_need_gib: float | None = None  # one max_model_len sequence
    #: the token capacity flightcheck computes from the *logged* KV budget (block-rounded,
    #: minus the null block, by vLLM's rules): the conversion alone, free of the budget's error
    tokens_from_logged: int | None = None
    #: the binding rank's budget where the logged figure is another rank's (V0's driver
    #: worker, vllm.V0_SAMPLER_ON_DRIVER_ONLY): FC402 and the token capacity use it
    binding_gib: float | None = None
    #: the TP group's NCCL communicators + custom all-reduce inside the budget (before vLLM
    #: 0.11), (low, high) GiB, where the point records its interconnect (``interconnect``)
    comm_gib: tuple[float, float] | None = None
    excluded: str | None = None
    #: the KV budget's [low, high] bound (``bound.bound_terms``), GiB
    low_gib: float | None = None
    high_gib: float | None = None
    #: per-term (predicted, logged) GiB where the log breaks the profile down
    terms: dict[str, tuple[float, float]] | None = None
    #: the bound's terms, (below, above) GiB
    bound_terms: dict[str, tuple[float, float]] | None = None
    #: held out (tests/fixtures/memory/SEARCHES.md): scored apart from the corpus
    held_out: bool = False

    @property
    def width_gib(self) -> float | None:
        if self.low_gib is None or self.high_gib is None:
            return None
        return self.high_gib - self.low_gib

    @property
    def inside(self) -> bool | None:
        """The logged budget lies inside the reported [low, high] bound."""
        if self.logged_gib is None or self.low_gib is None or self.high_gib is None:
            return None
        return self.low_gib - 0.005 <= self.logged_gib <= self.high_gib + 0.005

    @property
    def inside_tolerance(self) -> bool | None:
        """Inside the bound widened by the point's own tolerance, max(3 %, 0.5 GiB): the bound
        holds only the facts not known before the launch, not the estimate's error."""
        if self.logged_gib is None or self.low_gib is None or self.high_gib is None:
            return None
        tol = max(0.03 * abs(self.logged_gib), 0.5)
        return self.low_gib - tol <= self.logged_gib <= self.high_gib + tol

    @property
    def error_gib(self) -> float | None:
        if self.logged_gib is None or self.predicted_gib is None:
            return None
        return self.predicted_gib - self.logged_gib

    @property
    def within(self) -> bool | None:
        """Within max(3 %, 0.5 GiB) of the logged available KV memory."""
        e = self.error_gib
        if e is None or self.logged_gib is None:
            return None
        return abs(e) <= max(0.03 * abs(self.logged_gib), 0.5)

    @property
    def predicted_fail(self) -> bool | None:
        """FC402's verdict: one max-length sequence does not fit what is left."""
        budget = self.binding_gib if self.binding_gib is not None else self.predicted_gib
        if budget is None or self.kv_need_gib is None:
            return None
        return self.kv_need_gib > budget

    @property
    def predicted_stop(self) -> bool | None:
        """FC402 as an error (a stop): short by more than the estimate's error
        (``_memory.budget.NEAR_MISS``); a smaller shortfall is a warning."""
        budget = self.binding_gib if self.binding_gib is not None else self.predicted_gib
        if budget is None or self.kv_need_gib is None:
            return None
        return self.kv_need_gib - budget > NEAR_MISS / GiB


def load() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    points = [json.loads(line) for line in (FIXTURES / "vllm_startup_logs.jsonl").read_text().splitlines() if line]
    return points, json.loads((FIXTURES / "model_configs.json").read_text())


def _config(entry: dict[str, Any]) -> dict[str, Any]:
    doc = dict(entry["config"])
    if doc.get("layer_types") == "alternate":  # as transformers' GptOssConfig fills it in
        n = doc["num_hidden_layers"]
        doc["layer_types"] = ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(n)]
    return doc


def evaluate() -> list[Row]:
    points, configs = load()
    gpus = configs["_gpu_totals_gib"]
    rows: list[Row] = []
    weights_seen: dict[tuple[str, str, int], float] = {}
    for p in points:  # the logged weights of a model, GPU and TP, for points that died before logging them
        w = p["logged"].get("model_loading_gib")
        if w:
            # the first point that logs them: point 28 (gpt-oss-120b on an H100, ~0.11.0) takes
            # point 29's 65.9651 GiB (0.10.1.1); the llm-d transcription (point 58) logs 64.38
            # on an H100, which would put point 28 at +1.6 GiB — which MXFP4 path point 28's
            # run took is not in its excerpt
            weights_seen.setdefault((p["model"], GPU.get(p["gpu"] or "", ""), p["tp"] or 1), w)
    for i, p in enumerate(points):
        lg = p["logged"]
        row = Row(i, p["model"], p["gpu"] or "?", p["vllm_version"], p["outcome"], lg.get("available_kv_gib"))
        row.held_out = bool(p.get("held_out"))
        row.logged_tokens = lg.get("kv_tokens")
        rows.append(row)
        arch = ARCH.get(p["model"])
        gpu_key = GPU.get(p["gpu"] or "")
        if arch is None:
            row.excluded = NOT_SOURCED.get(i, "no sourced config.json figures for this architecture")
            continue
        if p.get("enable_lora"):
            # the LoRA manager's buffers and the profile run's dummy adapters are not modelled
            row.excluded = "--enable-lora: LoRA buffers not modelled"
            continue
        if lg.get("total_gpu_memory_gib"):
            total = lg["total_gpu_memory_gib"]
        elif gpu_key:
            total = gpus[gpu_key][0]
        else:
            row.excluded = "GPU total unknown"
            continue
        weights = (
            lg.get("model_loading_gib")
            or weights_seen.get((p["model"], gpu_key or "", p["tp"] or 1))
            or derived_weights(points, i)
        )
        if not weights:
            row.excluded = (
                "weights per rank not logged (flightcheck sizes weights from the checkpoint's "
                "safetensors headers, which the source does not give)"
            )
            continue
        if row.logged_gib is None:
            row.excluded = f"outcome {p['outcome']}, no KV budget logged"
            continue
        # a launch whose fate the source leaves open, or that died of an OOM after logging its
        # budget (point 49: the sampler warm-up after the KV cache was allocated), is scored on
        # the budget it logged (FC402's verdict is asserted only for launches that ran or died
        # for lack of KV room)
        if p["outcome"] not in ("ran", "failed-no-kv-room", "unknown", "failed-oom"):
            row.excluded = f"outcome {p['outcome']}"
            continue
        entry = configs[arch]
        doc = _config(entry)
        if p.get("quantization") == "fp8" and "quantization_config" not in doc:
            # the engine-config line's quantization=fp8: the checkpoint's quantization_config, which the
            # architecture's sourced figures (shared with its bf16 checkpoint) leave out; fused_moe's FP8
            # activation copies follow it (vllm.memory_moe.moe_workspace_bytes)
            doc["quantization_config"] = {"quant_method": "fp8"}
        cfg = parse(doc, None, entry.get("preprocessor_config"), entry.get("video_preprocessor_config"))
        # the dtype vLLM runs the model in (--dtype, as the build does: vllm.model_dtype)
        dtype = vllm.model_dtype(p.get("dtype"), cfg.dtype_name)
        cfg.dtype_name, cfg.dtype_bytes = dtype, dtype_size(dtype, cfg.dtype_bytes)
        tp, pp = p["tp"] or 1, p["pp"] or 1
        layout = Layout(tp, pp)
        # the version the log prints, else the one its log format / line sites date it to
        # (``vllm_version_inferred``, with the evidence in the point's note)
        v = release(p["vllm_version"] or p.get("vllm_version_inferred"))
        length = p["max_model_len"] or cfg.max_position or 0
        cc = p.get("compute_capability") or COMPUTE_CAPABILITY.get(gpu_key or "")
        # the V0 engine (vllm.runs_v0): every release before 0.8.0 unless VLLM_USE_V1=1, and a
        # 0.8 - 0.10.1 launch that falls back to it; ``engine`` records what the log itself
        # shows (its V0 profiler lines, or a V1 engine line), for points whose GPU is not named
        # (97, 98) or whose environment the source does not give
        v0 = p.get("engine") == "V0" or (p.get("engine") != "V1" and vllm.runs_v0(v, cc, p.get("quantization")))
        tokens, seqs = vllm.batch_defaults(
            v,
            # the device memory vLLM's batch defaults read: NVML's, which a GB10 does not report
            int(NVML_TOTAL_GIB.get(gpu_key or "", total) * GiB),
            TORCH_NAME_BY_GPU.get(p["gpu"] or "") or TORCH_NAME.get(gpu_key or "", p["gpu"]),
            cc,
            max_model_len=length,
            v0=v0,
            mla=cfg.mla,
            multimodal=cfg.tower is not None or cfg.vision is not None,
            # the offline LLM class's token defaults (vllm.LLM_CLASS_TOKENS) where the source runs it
            llm_class=p.get("entrypoint") == "llm",
        )
        if not v0:
            # the context's say in the default batch (vllm.batch_by_length), chunked prefill as logged
            tokens, seqs = vllm.batch_by_length(
                v,
                p["max_num_batched_tokens"] or tokens,
                p["max_num_seqs"] or seqs,
                length or None,
                chunked_prefill=p.get("enable_chunked_prefill"),
                tokens_given=bool(p["max_num_batched_tokens"]),
                seqs_given=bool(p["max_num_seqs"]),
            )
        # the model runner (vllm.memory_runner), as batch_for decides it; the sampler the log
        # names ("Using FlashInfer for top-p & top-k sampling" or the PyTorch-native fallback
        # warning), else the version's default
        v2, sampler, cudagraphs = model_runner(
            cfg,
            v,
            v0=v0,
            quantization=p.get("quantization"),
            env=p.get("env"),
            speculative=bool(p.get("speculative_config")),
            sampler=vllm.sampler_kind(v, installed=p["sampler"] == "flashinfer", v0=v0)
            if p.get("sampler")
            else vllm.sampler_kind(v, v0=v0),
            # the point's VLLM_* environment where its source states one (points 123-125)
            cudagraphs=vllm.cudagraphs_in_budget(v, p.get("env")),
        )
        batch = Batch(
            tokens=p["max_num_batched_tokens"] or tokens,
            seqs=p["max_num_seqs"] or seqs,
            cudagraphs=cudagraphs,
            sampler=sampler,
            encoder=vllm.encoder_profiled(v),
            release=v,
            max_model_len=length or None,
            # the MXFP4 MoE backend the log names ('Using Marlin backend', the Marlin FP4 warning),
            # else the release's likeliest for the GPU (vllm.mxfp4_backends)
            mxfp4_backend=p.get("mxfp4_backend") or vllm.mxfp4_backends(v, cc)[0],
            # an FP8 layer's MLP activation under Inductor (vllm.fp8_activation_stored_as_fp8)
            act_fp8=vllm.fp8_activation_stored_as_fp8(
                v,
                v0=v0,
                eager=bool(p["enforce_eager"]),
                env=p.get("env"),
                compile_flags=bool(p.get("compile_flags")),
                compute_capability=cc,
            ),
            online_fp8=p.get("quantization") == "fp8",
            v2_runner=v2,
            v0=v0,
            # the sampler's Triton buffer by the board's SMs, torch's BLAS workspaces by its cc
            # (as batch_for: gpus.sm_count, cublas.blas_workspaces_bytes)
            sms=sm_count(p["gpu"]),
            blas_workspaces=cublas.blas_workspaces_bytes(cc, p.get("env")),
        )
        ic = p.get("interconnect")
        icx = Interconnect(
            (ic or {}).get("nvlinks"),
            (ic or {}).get("nvswitch"),
            (ic or {}).get("compute_capability") or cc,
            (ic or {}).get("multicast"),
            (ic or {}).get("nodes"),
        )
        version = p["vllm_version"] or p.get("vllm_version_inferred")
        # FlashInfer's all-reduce fusion workspace, made after the snapshot (vllm.fusion_workspace)
        fusion = (
            vllm.fusion_workspace(
                v,
                tp=tp,
                pp=pp,
                dp=p.get("dp") or 1,
                compute_capability=icx.compute_capability,
                hidden=cfg.hidden or 0,
                dtype_bytes=cfg.dtype_bytes or 2,
                batched_tokens=batch.tokens,
                eager=bool(p["enforce_eager"]),
                multicast=icx.multicast,
                nodes=icx.nodes,
            )
            if not v0
            else (0, 0, 0)
        )
        reserve, parts = default_reserve(
            cfg, layout, "vllm", eager=bool(p["enforce_eager"]), batch=batch, allreduce_fusion=fusion[1]
        )
        comm_in = None
        peer_delta = 0
        if vllm.comm_in_budget(v) and tp > 1:
            # before 0.11 the snapshot precedes the distributed init: the TP group's two NCCL
            # communicators and custom all-reduce count inside the budget; their derived size
            # (flightcheck._knowledge.nccl) on the binding (middle) rank, the certain low end as
            # the model uses it (NVLS only where the point says multicast was supported); with no
            # interconnect recorded the source pins nothing down (low 0, the bound's high end)
            # V0's logits gather to the driver (nccl.gather_bytes): the driver binds. Only the
            # last PP stage computes logits (worker/model_runner.py execute_model returns before
            # compute_logits when not get_pp_group().is_last_rank, 0.8.3): a PP > 1 point's logged
            # rank (the driver, first stage) makes no gather
            gather = "root" if v0 and vllm.V0_LOGITS_GATHER_P2P and pp == 1 else None
            comm_in = communication(layout, icx, version, {}, vllm.TP_COMMUNICATORS_IN_BUDGET, gather)
            if gather and p.get("logged_worker") == "non-driver":
                peer = communication(layout, icx, version, {}, vllm.TP_COMMUNICATORS_IN_BUDGET, "peer")
                peer_delta = peer.low - comm_in.low
            if ic:
                shown = peer if peer_delta else comm_in
                row.comm_gib = (shown.low / GiB, shown.high / GiB)
            reserve += comm_in.low
            comm_in = communication(layout, icx, version, {}, 1, gather)
        # V1's logits all-gather over torch's group, connected in the profile (budget.logits_allgather)
        gathered = logits_allgather(layout, icx, version, {}) if not v0 else 0
        reserve += gathered
        # the V2 runner's all_token_ids at the launch's length where they are on the GPU
        # (budget.length_cost, as Fit.kv_budget: 0.33.0's n-gram drafting)
        spec = p.get("speculative_config")
        reserve += length_cost(batch, spec.get("method") if isinstance(spec, dict) else None) * length
        util = p["gpu_memory_utilization"] or vllm.default_utilization(v)
        requested = math.ceil(total * GiB * util)
        available = requested - weights * GiB - reserve
        row.predicted_gib = available / GiB
        # the bound the report gives (bound.bound_terms), on the interconnect the point records
        terms = bound_terms(
            engine_version=version,
            total=int(total * GiB),
            utilization_set=bool(p["gpu_memory_utilization"]),
            cudagraphs_counted=batch.cudagraphs and not p["enforce_eager"],
            tp=tp,
            comm=communication(layout, icx, version, {}, 1) if tp > 1 else None,
            lazy_connect=not nccl.connects_at_init({}, vllm.nccl_cumem_forced_off(v)),
            fusion=fusion,
            comm_in_budget=comm_in,
            compute_capability=cc,
            utilization=util,
            activations=parts.get("activations", 0) + parts.get("vision_encoder", 0),
            # no release: the sampler by release is open too, unless the log names it
            release_activations=sampler_span(cfg, layout, batch) if v is None and not p.get("sampler") else None,
            # no release, below 10.0: V0 may run, with its batch rule (vllm.v0_batch) unless the launch set it
            v0_activations=v0_peak(
                cfg,
                layout,
                batch,
                length,
                tokens_given=bool(p["max_num_batched_tokens"]),
                seqs_given=bool(p["max_num_seqs"]),
            )
            if v is None and vllm.unknown_release_may_run_v0(cc)
            else None,
            # 0.8 - 0.11.1: whether FlashInfer's sampler ran is whether it was installed, unless the log says
            sampler_open=sampler_install_span(cfg, layout, batch)
            if parts.get("activations") and not p.get("sampler")
            else 0,
            # the MoE backend the release's oracle picks (vllm.memory_moe): down to the direct layout
            moe_backend=moe_backend_span(cfg, layout, batch),
            act_quant_open=act_quant_span(cfg, layout, batch),
            runner_open=runner_span(cfg, layout, batch),
            counted_after=gathered,
            non_torch=parts["non_torch"],
        )
        row.bound_terms = {k: (t.below / GiB, t.above / GiB) for k, t in terms.items()}
        row.low_gib = row.predicted_gib - sum(t.below for t in terms.values()) / GiB
        row.high_gib = row.predicted_gib + sum(t.above for t in terms.values()) / GiB
        # from 0.27.0 the logged peak holds the CUDA-graph estimate it subtracts
        # (vllm.logged_peak_holds_cudagraph_estimate): compare it with the point's estimate added
        graphs_in_peak = parts.get("cuda_graphs", 0) if vllm.logged_peak_holds_cudagraph_estimate(v) else 0
        breakdown = {
            "activations": (
                (parts.get("activations", 0) + parts.get("vision_encoder", 0) + graphs_in_peak) / GiB,
                lg.get("activation_peak_gib"),
            ),
            "non_torch": (
                # (0.6.4.x logs the CUDA context inside its non-torch figure: vllm.non_torch_from_process_start)
                (parts.get("non_torch", 0) + parts.get("allreduce_fusion", 0) + parts.get("cuda_context", 0)) / GiB,
                lg.get("non_torch_gib"),
            ),
        }
        row.terms = {k: (pr, lgd) for k, (pr, lgd) in breakdown.items() if lgd is not None} or None
        if p.get("logged_worker") == "non-driver" and vllm.V0_SAMPLER_ON_DRIVER_ONLY:
            # the figure is a V0 non-driver worker's (point 32): no dummy sampler run on that
            # rank, so its peak is the forward pass alone; the driver's budget (with the
            # sampler) is the one the engine sizes the cache by, for FC402 and the tokens
            nondriver = reserve - activations(
                cfg, layout, batch.tokens, batch.seqs, batch.sampler, batch.mxfp4_backend, release=batch.release
            )
            nondriver += forward_peak(cfg, layout, batch.tokens, batch.mxfp4_backend, release=batch.release)
            nondriver += peer_delta  # its own NCCL connections: a middle rank's, the gather's send side
            row.binding_gib = row.predicted_gib
            row.predicted_gib = (requested - weights * GiB - nondriver) / GiB
        kv_dtype = p["kv_cache_dtype"] or "auto"
        # the logged worker's own layers size its cache (the stage a PP point records, stage 0
        # unless it says otherwise); the one-sequence check is of the whole model in 0.14 - 0.16
        # (vllm.pp_kv_check_whole_model), of the stage's layers otherwise — as MemoryModel.kv_checked
        stages = stage_layers(cfg.layers, pp)
        shape = kv_shape(cfg, stages[min(p.get("logged_stage") or 0, len(stages) - 1)], tp, kv_dtype)
        whole = pp > 1 and vllm.pp_kv_check_whole_model(v)
        checked = kv_shape(cfg, range(cfg.layers), tp, kv_dtype) if whole else shape
        row.kv_need_gib = checked.bytes_for(length) / GiB if length else None
        if length and available > 0:
            by_conc = v is None or v >= (0, 21)
            row.predicted_tokens = capacity(
                shape,
                available,
                length,
                block=p.get("block_size") or 16,  # --block-size (points 57-67: 128)
                batched_tokens=batch.tokens,
                by_concurrency=by_conc,
            ).tokens
        # vLLM sizes the cache by the smallest budget over the workers; a figure logged by a
        # V0 non-driver worker (point 32) is not the one its token count came from
        logged_ok = row.logged_tokens and row.logged_gib and row.logged_gib > 0
        if length and logged_ok and p.get("logged_worker") != "non-driver":
            row.tokens_from_logged = capacity(
                shape,
                int(row.logged_gib * GiB),
                length,
                block=p.get("block_size") or 16,
                batched_tokens=batch.tokens,
                by_concurrency=v is None or v >= (0, 21),
            ).tokens
    return rows


def within5(r: Row) -> bool | None:
    """Within max(5 %, 0.5 GiB) of the logged budget (issue 23's held-out criterion)."""
    e = r.error_gib
    if e is None or r.logged_gib is None:
        return None
    return abs(e) <= max(0.05 * abs(r.logged_gib), 0.5)


def summary(rows: list[Row], held_out: bool | None = None) -> dict[str, Any]:
    """The figures over the scored points (``held_out``: only the held-out set, or only the rest)."""
    scored = [
        r for r in rows if r.excluded is None and r.within is not None and (held_out is None or r.held_out == held_out)
    ]
    widths = [r.width_gib for r in scored if r.width_gib is not None]
    errors = [abs(r.error_gib) for r in scored if r.error_gib is not None]
    tok = [
        abs(r.predicted_tokens - r.logged_tokens) / r.logged_tokens
        for r in scored
        if r.predicted_tokens and r.logged_tokens
    ]
    conv = [
        abs(r.tokens_from_logged - r.logged_tokens) / r.logged_tokens
        for r in scored
        if r.tokens_from_logged and r.logged_tokens
    ]
    return {
        "median_token_error": statistics.median(tok) if tok else None,
        # the token capacity from the logged budget: how exactly the conversion follows vLLM
        "conversion_points": len(conv),
        "conversion_within_3pct": sum(1 for e in conv if e <= 0.03),
        "max_conversion_error": max(conv) if conv else None,
        "points": len(rows),
        "scored": len(scored),
        "within": sum(1 for r in scored if r.within),
        "within5": sum(1 for r in scored if within5(r)),
        "median_width_gib": statistics.median(widths) if widths else None,
        "share_within": (sum(1 for r in scored if r.within) / len(scored)) if scored else 0.0,
        "bounded": sum(1 for r in scored if r.inside is not None),
        "inside": sum(1 for r in scored if r.inside),
        "inside_tolerance": sum(1 for r in scored if r.inside_tolerance),
        "median_abs_error_gib": statistics.median(errors) if errors else None,
        "max_abs_error_gib": max(errors) if errors else None,
    }
