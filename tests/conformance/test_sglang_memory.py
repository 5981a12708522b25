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


@pytest.fixture(scope="module")
def engine_answers(engine_python: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("sglang-memory")
    paths = {
        "std": _model(root, "std", STANDARD),
        "mla": _model(root, "mla", MLA),
        "llama-2-7b": _model(root, "llama-2-7b", STANDARD),
        "vlm": _model(root, "vlm", VISION),
    }
    fractions: dict[str, Any] = {}
    for kind in ("std", "mla"):
        for gib in GIB:
            for tp in TPS:
                for pp in PPS:
                    fractions[f"{kind}|{gib}|{tp}|{pp}"] = (paths[kind], gib, {"tp_size": tp, "pp_size": pp})
    for name, (kind, gib, fields, _) in EXTRAS.items():
        fractions[name] = (paths[kind], gib, fields)
    context = {name: _model(root, f"ctx-{name}", cfg) for name, cfg in CONTEXT_SHAPES.items()}
    configs = {}
    for name, doc in CONFIGS.items():
        p = root / f"{name}.yaml"
        import yaml

        p.write_text(yaml.safe_dump(doc, sort_keys=False))
        configs[name] = str(p)
    job = {"fractions": fractions, "context": context, "config": configs}
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
