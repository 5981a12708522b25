"""SGLang 0.5.23's own memory and config functions against flightcheck's copies of them.

One child of the conformance venv's interpreter resolves real ``ServerArgs`` records
(``ServerArgs.resolve_once``, the whole resolution pipeline) with the GPU memory query
stood in for: ``memory_hook.get_device_memory_capacity`` returns the grid's size, and
``cuda_graph_config.default_prefill_backend`` returns what it returns on CUDA
(``Backend.BREAKABLE if is_cuda()``) — the only two answers the host without a GPU would
give differently. It also derives the context length of several config.json shapes with
SGLang's ``ModelConfig`` and turns --config mappings into words with SGLang's
``ConfigArgumentMerger`` (built on its own parser). Modules the --no-deps install lacks
and that only the quantization registry imports (``gguf``) are stood in for by mock
modules, and the child says which.

The grid: GPU sizes 24, 48, 80, 96, 141, 180, 192, 275 GiB x TP 1/2/4/8 x PP 1/2 x MLA or
not (issue 11), every point within 0.002 of SGLang's value.

The attention-backend grid resolves the same records with the GPU's architecture said to
SGLang the way it asks (runtime_context.py ``override_platform``: is_sm90 / is_sm100 /
is_sm120 / is_blackwell / is_hopper_with_cuda_12_3 / device_sm / device_capability, every
probe of utils/common.py it reads through ``get_platform()``; torch.cuda's
get_device_capability patched too) for SM 9.0, 10.0, 10.3, 12.0 x MLA (DeepSeek-V3's
config) or not x 80/141/180/275 GiB x TP 1/8, and compares the backend, page size,
prefill graph and fraction with ``_knowledge.sglang.attention_backends``.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from flightcheck._knowledge import sglang
from flightcheck._launch.tokens import sglang_config_words
from flightcheck._memory.config import parse
from flightcheck._vocabulary.errors import UsageError

GIB = (24, 48, 80, 96, 141, 180, 192, 275)
TPS = (1, 2, 4, 8)
PPS = (1, 2)

STANDARD = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "num_hidden_layers": 32,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "torch_dtype": "bfloat16",
    "rope_theta": 500000.0,
}
MLA = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "model_type": "deepseek_v3",
    "hidden_size": 7168,
    "intermediate_size": 18432,
    "moe_intermediate_size": 2048,
    "num_attention_heads": 128,
    "num_key_value_heads": 128,
    "num_hidden_layers": 61,
    "first_k_dense_replace": 3,
    "n_routed_experts": 256,
    "n_shared_experts": 1,
    "num_experts_per_tok": 8,
    "n_group": 8,
    "topk_group": 4,
    "kv_lora_rank": 512,
    "q_lora_rank": 1536,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "vocab_size": 129280,
    "max_position_embeddings": 163840,
    "rope_scaling": {
        "beta_fast": 32,
        "beta_slow": 1,
        "factor": 40,
        "mscale": 1.0,
        "mscale_all_dim": 1.0,
        "original_max_position_embeddings": 4096,
        "type": "yarn",
    },
    "rope_theta": 10000,
    "torch_dtype": "bfloat16",
}
#: Qwen2-VL-7B's config.json (its vision_config has no num_hidden_layers: SGLang's 24)
VISION = {
    "architectures": ["Qwen2VLForConditionalGeneration"],
    "model_type": "qwen2_vl",
    "hidden_size": 3584,
    "intermediate_size": 18944,
    "num_attention_heads": 28,
    "num_key_value_heads": 4,
    "num_hidden_layers": 28,
    "vocab_size": 152064,
    "max_position_embeddings": 32768,
    "torch_dtype": "bfloat16",
    "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
    "vision_config": {
        "depth": 32,
        "embed_dim": 1280,
        "hidden_size": 3584,
        "num_heads": 16,
        "in_chans": 3,
        "spatial_patch_size": 14,
        "temporal_patch_size": 2,
    },
    "image_token_id": 151655,
    "video_token_id": 151656,
    "vision_start_token_id": 151652,
}
_LLAMA = {k: v for k, v in STANDARD.items() if k not in ("max_position_embeddings", "rope_theta")}
_QWEN2 = {**_LLAMA, "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2"}
#: config.json shapes for the default context length (name -> config)
CONTEXT_SHAPES: dict[str, dict[str, Any]] = {
    "llama3-rope": {
        **_LLAMA,
        "max_position_embeddings": 131072,
        "rope_scaling": {
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
            "rope_type": "llama3",
        },
    },
    "yarn-without-original": {
        **_QWEN2,
        "max_position_embeddings": 32768,
        "rope_scaling": {"factor": 4.0, "type": "yarn"},
    },
    "linear-rope": {**_LLAMA, "max_position_embeddings": 4096, "rope_scaling": {"factor": 2.0, "type": "linear"}},
    "dynamic-rope": {
        **_LLAMA,
        "max_position_embeddings": 4096,
        "rope_scaling": {"factor": 4.0, "rope_type": "dynamic"},
    },
    "seq-length-first": {**_QWEN2, "max_position_embeddings": 32768, "seq_length": 8192},
    "max-seq-len": {**_LLAMA, "max_position_embeddings": 65536, "max_seq_len": 16384},
    "model-max-length": {**_LLAMA, "max_position_embeddings": 65536, "model_max_length": 20000},
    "max-sequence-length-and-linear": {
        **_LLAMA,
        "max_position_embeddings": 4096,
        "max_sequence_length": 3000,
        "rope_scaling": {"factor": 2.0, "type": "linear"},
    },
    "plain": {**_QWEN2, "max_position_embeddings": 40960},
    "mla-yarn-original": MLA,
}
#: --config mappings (their keys must exist in SGLang's parser)
CONFIGS: dict[str, dict[str, Any]] = {
    "store-true-false": {"trust-remote-code": False, "enable-metrics": True, "tp-size": 2},
    "boolean-optional": {"enable-tf32-matmul": False},
    "deprecated-store-true": {"enable-dp-attention": False, "tp-size": 2},
    "underscores": {"trust_remote_code": True, "mem_fraction_static": 0.8},
    "lists-and-json": {"json-model-override-args": {"rope_theta": 1}, "context-length": 8192},
    "none": {"served-model-name": None},
}

CHILD = r"""
import importlib.abc, importlib.machinery, importlib.util, json, sys, types
STOOD_IN = []
class _Empty(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    # only modules the --no-deps install lacks, and only the quantization registry's
    NAMES = ("gguf",)
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in self.NAMES:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None
    def create_module(self, spec):
        from unittest import mock
        STOOD_IN.append(spec.name)
        m = mock.MagicMock(name=spec.name)
        m.__path__, m.__spec__ = [], spec
        return m
    def exec_module(self, module):
        pass
for n in _Empty.NAMES:
    if importlib.util.find_spec(n) is None:
        sys.meta_path.append(_Empty())
        break
from unittest import mock
import argparse
import sglang.srt.arg_groups.memory_hook as mh
import sglang.srt.model_executor.cuda_graph_config as cgc
from sglang.srt.server_args import ServerArgs
from sglang.srt.arg_groups.overrides import resolution_result, use_mla_backend
from sglang.srt.configs.model_config import ModelConfig
from sglang.srt.utils.server_args_config_parser import ConfigArgumentMerger

job = json.loads(sys.stdin.read())
out = {"fractions": {}, "context": {}, "config": {}}
for key, (path, gib, kw) in job["fractions"].items():
    with mock.patch.object(mh, "get_device_memory_capacity", lambda device=None, m=gib * 1024.0: m), \
         mock.patch.object(cgc, "default_prefill_backend", lambda: cgc.Backend.BREAKABLE):
        sa = ServerArgs(model_path=path, device="cuda", **kw)
        try:
            sa.resolve_once()
            out["fractions"][key] = [resolution_result(sa, "mem_fraction_static"), use_mla_backend(sa)]
        except Exception as exc:
            out["fractions"][key] = f"{type(exc).__name__}: {exc}"[:300]
from sglang.srt.runtime_context import override_platform
import torch
def _facts(sm):
    major, minor = sm
    return dict(is_cuda=True, is_hip=False, is_npu=False, is_xpu=False, is_musa=False, is_mps=False,
                is_sm90=major == 9, is_sm100=major == 10, is_sm110=major == 11, is_sm120=major == 12,
                is_sm100_or_sm110=major in (10, 11), is_blackwell=major in (10, 11, 12),
                is_hopper_with_cuda_12_3=major == 9, has_flashinfer=True,
                device_sm=major * 10 + minor, device_capability=(major, minor))
for key, (path, gib, kw, sm) in job.get("arch", {}).items():
    with override_platform(**_facts(sm)), \
         mock.patch.object(torch.cuda, "get_device_capability", lambda *a, c=tuple(sm): c), \
         mock.patch.object(mh, "get_device_memory_capacity", lambda device=None, m=gib * 1024.0: m), \
         mock.patch.object(cgc, "default_prefill_backend", lambda: cgc.Backend.BREAKABLE):
        sa = ServerArgs(model_path=path, device="cuda", **kw)
        try:
            sa.resolve_once()
            r = lambda name: resolution_result(sa, name)
            attn = r("attention_backend")
            out["fractions"][key] = [
                r("mem_fraction_static"), use_mla_backend(sa),
                r("prefill_attention_backend") or attn, r("decode_attention_backend") or attn,
                r("page_size"), str(r("cuda_graph_config").prefill.backend),
            ]
        except Exception as exc:
            out["fractions"][key] = f"{type(exc).__name__}: {exc}"[:300]
import inspect
from sglang.srt.arg_groups import model_override_base as mob
own = set()
for arch, fns in mob._MODEL_OVERRIDE_FNS.items():
    if any(k in inspect.getsource(fn) for fn in fns for k in ("attention_backend", "page_size")):
        own.add(arch)
for arch, const in mob.MODEL_OVERRIDES.items():
    if any(k in key for key in const for k in ("attention_backend", "page_size")):
        own.add(arch)
out["own_backend_archs"] = sorted(own)
out["own_backend_predicates"] = [inspect.getsource(p) for p, fn in mob._PREDICATE_OVERRIDE_FNS
                                 if "attention_backend" in inspect.getsource(fn)]
for name, path in job["context"].items():
    try:
        out["context"][name] = ModelConfig(path).context_len
    except Exception as exc:
        out["context"][name] = f"{type(exc).__name__}: {exc}"[:300]
parser = argparse.ArgumentParser()
ServerArgs.add_cli_args(parser)
merger = ConfigArgumentMerger(parser)
for name, path in job["config"].items():
    try:
        out["config"][name] = merger.merge_config_with_args(["--config", path])
    except Exception as exc:
        out["config"][name] = f"{type(exc).__name__}: {exc}"[:300]
out["stood_in"] = sorted(set(STOOD_IN))
print(json.dumps(out))
"""


def _model(root: Path, name: str, config: dict[str, Any]) -> str:
    d = root / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps(config))
    return str(d)


#: extra launches (name -> model, GiB, ServerArgs fields, flightcheck's keyword arguments)
EXTRAS: dict[str, tuple[str, int, dict[str, Any], dict[str, Any]]] = {
    "disable-cuda-graph": ("std", 80, {"disable_cuda_graph": True}, {"decode_graphs": False, "prefill_graphs": False}),
    "disable-cuda-graph-mla-141": (
        "mla",
        141,
        {"disable_cuda_graph": True, "tp_size": 8},
        {"decode_graphs": False, "prefill_graphs": False},
    ),
    "chunked-2048": ("std", 80, {"chunked_prefill_size": 2048}, {"chunked_prefill": 2048}),
    "chunked-16384-48": ("std", 48, {"chunked_prefill_size": 16384}, {"chunked_prefill": 16384}),
    "max-running-64": ("std", 141, {"max_running_requests": 64}, {"max_running": 64}),
    "max-running-64-24": ("std", 24, {"max_running_requests": 64}, {"max_running": 64}),
    "attn-dp-2": ("std", 80, {"tp_size": 2, "attn_dp_size": 2}, {"attn_dp": 2}),
    "attn-dp-8-mla": ("mla", 141, {"tp_size": 8, "attn_dp_size": 8}, {"attn_dp": 8}),
    "llama-2-path": ("llama-2-7b", 80, {}, {"llama2": True}),
    "vision-model": ("vlm", 80, {}, {"vision": (24, 3584), "prefill_graphs": False}),
    "deepep-mla": ("mla", 141, {"tp_size": 8, "moe_a2a_backend": "deepep"}, {"deepep": True}),
    "a2a-mooncake": ("std", 80, {"moe_a2a_backend": "mooncake"}, {"prefill_graphs": False}),
    "two-batch-overlap": ("std", 141, {"enable_two_batch_overlap": True}, {"prefill_graphs": False}),
    "pp2-prefill-breakable-192": (
        "std",
        192,
        {"pp_size": 2, "cuda_graph_backend_prefill": "breakable"},
        {"prefill_locked": True},
    ),
    "pp2-prefill-breakable": (
        "std",
        80,
        {"pp_size": 2, "cuda_graph_backend_prefill": "breakable"},
        {"prefill_locked": True},
    ),
}


#: Kimi-K3's config.json (tests/fixtures/models): its own backend rule on SM 10.0 / 10.3
KIMI_K3: dict[str, Any] = json.loads((Path(__file__).parents[1] / "fixtures" / "models" / "kimi-k3.json").read_text())
#: the attention-backend grid: compute capabilities (SGLang's platform facts and
#: torch.cuda.get_device_capability patched to each) x MLA or not x GPU sizes x TP
ARCH_SMS = ("9.0", "10.0", "10.3", "12.0")
ARCH_GIB = (80, 141, 180, 275)
ARCH_TPS = (1, 8)
#: launches whose backend flags change the choice (name -> SM, model, GiB, ServerArgs
#: fields, flightcheck's canonical flags)
ARCH_EXTRAS: dict[str, tuple[str, str, int, dict[str, Any], list[str]]] = {
    "sm100-mla-flashinfer": (
        "10.0",
        "mla",
        180,
        {"attention_backend": "flashinfer"},
        ["--attention-backend=flashinfer"],
    ),
    "sm100-mla-prefill-breakable": (
        "10.0",
        "mla",
        180,
        {"cuda_graph_backend_prefill": "breakable"},
        ["--cuda-graph-backend-prefill=breakable"],
    ),
    "sm100-mla-page-32": ("10.0", "mla", 141, {"page_size": 32}, ["--page-size=32"]),
    "sm103-mla-split": (
        "10.3",
        "mla",
        275,
        {"prefill_attention_backend": "flashinfer", "decode_attention_backend": "trtllm_mla", "tp_size": 8},
        ["--prefill-attention-backend=flashinfer", "--decode-attention-backend=trtllm_mla", "--tp=8"],
    ),
    "sm100-mla-same-split": (
        "10.0",
        "mla",
        180,
        {"prefill_attention_backend": "trtllm_mla", "decode_attention_backend": "trtllm_mla"},
        ["--prefill-attention-backend=trtllm_mla", "--decode-attention-backend=trtllm_mla"],
    ),
    "sm100-std-fa4": ("10.0", "std", 180, {"attention_backend": "fa4"}, ["--attention-backend=fa4"]),
    "sm120-mla-trtllm": ("12.0", "mla", 80, {"attention_backend": "trtllm_mla"}, ["--attention-backend=trtllm_mla"]),
    "sm90-std-fp8-e5m2": ("9.0", "std", 80, {"kv_cache_dtype": "fp8_e5m2"}, ["--kv-cache-dtype=fp8_e5m2"]),
    "sm100-k3": ("10.0", "k3", 180, {"tp_size": 8}, ["--tp=8"]),
    "sm103-k3": ("10.3", "k3", 275, {"tp_size": 8}, ["--tp=8"]),
    "sm90-k3": ("9.0", "k3", 141, {"tp_size": 8}, ["--tp=8"]),
    "sm100-k3-flashinfer": (
        "10.0",
        "k3",
        180,
        {"tp_size": 8, "attention_backend": "flashinfer"},
        ["--tp=8", "--attention-backend=flashinfer"],
    ),
    "sm90-mla-trtllm-refused": (
        "9.0",
        "mla",
        141,
        {"attention_backend": "trtllm_mla"},
        ["--attention-backend=trtllm_mla"],
    ),
    "sm100-mla-e5m2-refused": ("10.0", "mla", 180, {"kv_cache_dtype": "fp8_e5m2"}, ["--kv-cache-dtype=fp8_e5m2"]),
}


def _sm(text: str) -> list[int]:
    major, minor = text.split(".")
    return [int(major), int(minor)]


@pytest.fixture(scope="module")
def engine_answers(engine_python: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("sglang-memory")
    paths = {
        "std": _model(root, "std", STANDARD),
        "mla": _model(root, "mla", MLA),
        "llama-2-7b": _model(root, "llama-2-7b", STANDARD),
        "vlm": _model(root, "vlm", VISION),
        "k3": _model(root, "k3", KIMI_K3),
    }
    fractions: dict[str, Any] = {}
    for kind in ("std", "mla"):
        for gib in GIB:
            for tp in TPS:
                for pp in PPS:
                    fractions[f"{kind}|{gib}|{tp}|{pp}"] = (paths[kind], gib, {"tp_size": tp, "pp_size": pp})
    for name, (kind, gib, fields, _) in EXTRAS.items():
        fractions[name] = (paths[kind], gib, fields)
    arch: dict[str, Any] = {}
    for sm in ARCH_SMS:
        for kind in ("std", "mla"):
            for gib in ARCH_GIB:
                for tp in ARCH_TPS:
                    arch[f"arch|{sm}|{kind}|{gib}|{tp}"] = (paths[kind], gib, {"tp_size": tp}, _sm(sm))
    for name, (sm, kind, gib, fields, _) in ARCH_EXTRAS.items():
        arch[name] = (paths[kind], gib, fields, _sm(sm))
    context = {name: _model(root, f"ctx-{name}", cfg) for name, cfg in CONTEXT_SHAPES.items()}
    configs = {}
    for name, doc in CONFIGS.items():
        p = root / f"{name}.yaml"
        import yaml

        p.write_text(yaml.safe_dump(doc, sort_keys=False))
        configs[name] = str(p)
    job = {"fractions": fractions, "arch": arch, "context": context, "config": configs}
    run = subprocess.run(
        [engine_python, "-c", CHILD],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        check=False,
        timeout=1500,
        cwd=root,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    got: dict[str, Any] = json.loads(run.stdout.strip().splitlines()[-1])
    got["_paths"] = configs
    return got


def test_mem_fraction_static_grid_matches_sglang(engine_answers: dict[str, Any]) -> None:
    got = engine_answers["fractions"]
    assert engine_answers["stood_in"] in ([], ["gguf"])
    wrong = []
    for kind in ("std", "mla"):
        for gib in GIB:
            for tp in TPS:
                for pp in PPS:
                    key = f"{kind}|{gib}|{tp}|{pp}"
                    answer = got[key]
                    assert isinstance(answer, list), f"{key}: SGLang raised {answer}"
                    frac, mla = answer
                    assert mla is (kind == "mla"), key  # SGLang's own MLA verdict on the config
                    mine = sglang.mem_fraction_static(gib * 1024, tp, pp, kind == "mla")
                    if abs(mine - frac) > 0.002:
                        wrong.append((key, frac, mine))
    assert not wrong, wrong
    assert len(GIB) * len(TPS) * len(PPS) * 2 == 128


@pytest.mark.parametrize("name", sorted(EXTRAS))
def test_mem_fraction_static_terms_match_sglang(engine_answers: dict[str, Any], name: str) -> None:
    kind, gib, fields, kwargs = EXTRAS[name]
    answer = engine_answers["fractions"][name]
    assert isinstance(answer, list), f"SGLang raised {answer}"
    frac, mla = answer
    assert mla is (kind == "mla")
    if "vision" in kwargs:  # the vision_config as flightcheck reads it from config.json
        assert parse(VISION).vision == kwargs["vision"]
    mine = sglang.mem_fraction_static(
        gib * 1024, fields.get("tp_size", 1), fields.get("pp_size", 1), kind == "mla", **kwargs
    )
    assert abs(mine - frac) <= 0.002, (frac, mine)


@pytest.mark.parametrize("name", sorted(CONTEXT_SHAPES))
def test_default_context_length_matches_sglang(engine_answers: dict[str, Any], name: str) -> None:
    assert engine_answers["context"][name] == sglang.context_length(CONTEXT_SHAPES[name])


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_config_words_match_sglang(engine_answers: dict[str, Any], name: str) -> None:
    path = engine_answers["_paths"][name]
    answer = engine_answers["config"][name]
    if isinstance(answer, str):  # SGLang refuses the file: so must the reading
        assert answer.startswith("ValueError: Unsupported config option"), answer
        with pytest.raises(UsageError, match="SGLang refuses the option"):
            sglang_config_words(CONFIGS[name], path)
    else:
        assert answer == sglang_config_words(CONFIGS[name], path)


def _architectures(kind: str) -> list[str]:
    return list({"mla": MLA, "std": STANDARD, "k3": KIMI_K3}[kind]["architectures"])


def _agrees(key: str, answer: Any, sm: str, kind: str, gib: int, tp: int, flags: list[str]) -> list[Any]:
    """What differs between SGLang's resolution and flightcheck's for one launch."""
    cfg = parse({"mla": MLA, "std": STANDARD, "k3": KIMI_K3}[kind])
    choice = sglang.attention_backends(sm, cfg.mla, _architectures(kind), flags)
    assert choice is not None
    if isinstance(answer, str):  # SGLang refuses the launch: so must flightcheck's choice
        return [] if choice.refusal is not None and choice.refusal in answer else [(key, answer, choice)]
    frac, mla, prefill, decode, page, prefill_graph = answer
    assert mla is cfg.mla, key
    wrong: list[Any] = []
    if kind != "k3":  # the fraction of a vision model is the plain grid's business
        opts = sglang.fraction_options(flags)
        mine = sglang.mem_fraction_static(gib * 1024, tp, 1, cfg.mla, **opts)  # type: ignore[arg-type]
        if abs(mine - frac) > 0.002:
            wrong.append((key, "fraction", frac, mine))
    if (choice.prefill, choice.decode, choice.page_size or 1) != (prefill, decode, page) or choice.refusal:
        wrong.append((key, "backend", (prefill, decode, page), choice))
    # Kimi-K3's prefill graphs are off on every GPU for another reason (cuda_graph_hook.py:
    # "incompatible with KDA hybrid linear attention"), which the trtllm_mla rule is not
    off_elsewhere = kind == "k3"
    if choice.prefill_graphs_off is not (prefill_graph == "disabled") and not (
        off_elsewhere and not choice.prefill_graphs_off
    ):
        wrong.append((key, "prefill graph", prefill_graph, choice.prefill_graphs_off))
    return wrong


def test_attention_backend_grid_matches_sglang(engine_answers: dict[str, Any]) -> None:
    """SM 9.0 / 10.0 / 10.3 / 12.0 x MLA or not x 80-275 GiB x TP 1/8: SGLang's backend,
    page size, prefill graph and fraction are flightcheck's; the fraction is the
    architecture-free one of the plain grid (memory settings run before the backend)."""
    got = engine_answers["fractions"]
    wrong: list[Any] = []
    seen: set[tuple[str, str, str]] = set()
    for sm in ARCH_SMS:
        for kind in ("std", "mla"):
            for gib in ARCH_GIB:
                for tp in ARCH_TPS:
                    key = f"arch|{sm}|{kind}|{gib}|{tp}"
                    answer = got[key]
                    assert isinstance(answer, list), f"{key}: SGLang raised {answer}"
                    wrong += _agrees(key, answer, sm, kind, gib, tp, [f"--tp={tp}"])
                    seen.add((sm, kind, answer[2]))
    assert not wrong, wrong
    # the product's main case: DeepSeek-V3 on B200 / B300 is trtllm_mla without prefill graphs
    assert ("10.0", "mla", "trtllm_mla") in seen and ("10.3", "mla", "trtllm_mla") in seen
    assert got["arch|10.0|mla|180|8"][5] == "disabled"
    assert got["arch|10.0|mla|180|8"][0] == got["arch|9.0|mla|180|8"][0]  # the reserve stays in f
    assert len(seen) >= 6  # fa3, trtllm_mla, triton, trtllm_mha, flashinfer at least


@pytest.mark.parametrize("name", sorted(ARCH_EXTRAS))
def test_attention_backend_flags_match_sglang(engine_answers: dict[str, Any], name: str) -> None:
    sm, kind, gib, fields, flags = ARCH_EXTRAS[name]
    answer = engine_answers["fractions"][name]
    if name.endswith("-refused"):
        assert isinstance(answer, str), answer
    assert _agrees(name, answer, sm, kind, gib, fields.get("tp_size", 1), flags) == []


def test_own_backend_architectures_are_sglangs(engine_answers: dict[str, Any]) -> None:
    """The architectures whose model override writes a backend or a page size: flightcheck
    models the DeepSeek family's and Kimi-K3's, and says "unknown" for every other one."""
    modelled = sglang.DEEPSEEK_FAMILY_ARCHS | {sglang.KIMI_K3_ARCH}
    assert set(engine_answers["own_backend_archs"]) - modelled == sglang.OWN_BACKEND_ARCHS
    (predicate,) = engine_answers["own_backend_predicates"]
    assert all(part in predicate for part in sglang.OWN_BACKEND_ARCH_PARTS)
