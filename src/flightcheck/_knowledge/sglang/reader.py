"""How SGLang's parser reads a command line (sglang/cli/serve.py,
sglang/srt/server_args.py ``prepare_server_args``, the ``--config`` file parser): the
option types the built-in reader converts and the fields it copies.
"""

from __future__ import annotations

from typing import Any

# ---- reader: how SGLang 0.5.23's parser reads a command line ----------------------------
# (sglang/cli/serve.py, sglang/srt/server_args.py prepare_server_args,
# sglang/srt/utils/server_args_config_parser.py, sglang/srt/arg_groups/overrides.py;
# the option table itself is data/sglang_0.5.23_args.json)

READER_MODEL_PATH = "--model-path"
#: the name the model is served under: one string (server_args.py ``served_model_name``;
#: data/sglang_0.5.23_args.json)
SERVED_NAME_FLAG = "--served-model-name"
#: ``sglang serve`` takes this out of the argv before dispatching (cli/serve.py).
READER_MODEL_TYPE = "--model-type"
READER_TYPES: dict[str, str] = {
    "int": "int",
    "float": "float",
    "str": "str",
    "json.loads": "json",
    "sglang.srt.utils.common.human_readable_int": "si_int",
    "sglang.srt.utils.common.json_list_type": "json",
}
READER_FIELDS: dict[str, str] = {
    "model_path": "model",
    "revision": "revision",
    "tp_size": "tensor_parallel_size",
    "pp_size": "pipeline_parallel_size",
    "dp_size": "data_parallel_size",
    "dcp_size": "decode_context_parallel_size",
    "context_length": "max_model_len",
    "kv_cache_dtype": "kv_cache_dtype",
    "mem_fraction_static": "gpu_memory_utilization",
    "quantization": "quantization",
    "dtype": "dtype",
    "load_format": "load_format",
    "max_running_requests": "max_num_seqs",
    "cpu_offload_gb": "cpu_offload_gb",
    "json_model_override_args": "hf_overrides",
    "nnodes": "nnodes",
    "download_dir": "download_dir",
}
#: MoE all-to-all backends whose experts span the TP group: SGLang sets EP = TP
#: (``_A2A_EP_SPANNING_BACKENDS`` / ``_a2a_ep_size`` in arg_groups/overrides.py).
A2A_EP_SPANNING_BACKENDS: frozenset[str] = frozenset(
    {
        "megamoe",
        "deepep",
        "deepep_v2",
        "mooncake",
        "nixl",
        "ascend_fuseep",
        "flashinfer",
        "flashinfer_megamoe",
        "mori",
        "pplx",
    }
)


# ---- reader: the engine's own parser, asked in a child (``_collect/engine_reader.py``) -----
#
# The child knows no engine: the parent passes it this spec (``engines.reader_spec``).
# Where SGLang's entry points are (read in the 0.5.23 wheel): ``sglang/cli/main.py`` hands
# everything after ``serve`` to ``sglang/cli/serve.py:serve`` (``--model-type`` removed by
# ``_extract_model_type_override``, a leading positional becomes ``--model-path``
# (``_normalize_positional_model_path``), the backend auto-detected from a ``ServeRequest``
# (``sglang/cli/serve_backends.py``, ``_create_backend_registry``),
# ``sglang.srt.plugins.load_plugins``), whose LLM backend calls
# ``sglang.srt.server_args.prepare_server_args`` (``argparse.ArgumentParser(prog="sglang
# serve")`` + ``ServerArgs.add_cli_args``, ``--config`` merged by
# ``sglang/srt/utils/server_args_config_parser.py``, then ``ServerArgs.from_cli_args``).
# ``sglang/launch_server.py`` calls ``load_plugins`` and ``prepare_server_args`` directly.
# SGLang resolves derived values later (``ServerArgs.resolve_once``), which needs an
# accelerator: the child reports the raw record ``prepare_server_args`` returns.

_SERVER_ARGS = "sglang.srt.server_args"
_PREPARED_IMPORTS: list[list[str]] = [
    ["plugins", "sglang.srt.plugins:load_plugins"],
    ["record", f"{_SERVER_ARGS}:ServerArgs"],
    ["prepare", f"{_SERVER_ARGS}:prepare_server_args"],
]
_PREPARED_COMMON: dict[str, Any] = {
    "resolved_by": "prepare_server_args (raw input; resolution needs an accelerator)",
    "options": {"method": "add_cli_args", "prog": "sglang serve"},
}
#: the record's attribute of each canonical field of the child's document (``None``: SGLang
#: has no such setting); the same keys, in the same order, as vLLM's ``READER_CANONICAL``
READER_CANONICAL: dict[str, str | None] = {
    "model": "model_path",
    "served_model_name": "served_model_name",
    "tensor_parallel_size": "tp_size",
    "pipeline_parallel_size": "pp_size",
    "data_parallel_size": "dp_size",
    "data_parallel_size_local": None,
    "prefill_context_parallel_size": None,
    "decode_context_parallel_size": "dcp_size",
    "enable_expert_parallel": None,
    "expert_parallel_size": "ep_size",
    "max_model_len": "context_length",
    "kv_cache_dtype": "kv_cache_dtype",
    "gpu_memory_utilization": "mem_fraction_static",
    "quantization": "quantization",
    "dtype": "dtype",
    "enforce_eager": None,
    "load_format": "load_format",
    "max_num_batched_tokens": None,
    "max_num_seqs": "max_running_requests",
    "kv_cache_memory_bytes": None,
    "cpu_offload_gb": "cpu_offload_gb",
    "hf_overrides": "json_model_override_args",
    "nnodes": "nnodes",
    "node_rank": "node_rank",
    "headless": None,
    "trust_remote_code": "trust_remote_code",
    "revision": "revision",
    "download_dir": "download_dir",
    "tokenizer": "tokenizer_path",
}
#: SGLang settings the child reports as they are, by name
READER_ENGINE_FIELDS: tuple[str, ...] = (
    "enable_nccl_nvls",
    "enable_symm_mem",
    "enable_torch_symm_mem",
    "enable_mscclpp",
    "enable_layernorm_sp",
    "moe_a2a_backend",
    "enable_dp_attention",
    "dp_size",
    "attn_dp_size",
    "attn_cp_size",
    "moe_dp_size",
    "moe_dense_tp_size",
    "ep_size",
    "enable_flashinfer_allreduce_fusion",
    "enforce_disable_flashinfer_allreduce_fusion",
    "flashinfer_allreduce_fusion_backend",
    "disable_custom_all_reduce",
    "context_length",
    "chunked_prefill_size",
    "max_prefill_tokens",
    "max_total_tokens",
    "disable_cuda_graph",
    "cuda_graph_backend_decode",
    "cuda_graph_backend_prefill",
    "attention_backend",
    "device",
    "dist_init_addr",
    "disaggregation_mode",
    "enable_torch_compile",
    "page_size",
)
#: what ``_collect/engine_reader.py`` is told about SGLang (JSON: see the child's docstring)
CHILD_READER: dict[str, Any] = {
    "engine": "sglang",
    "package": "sglang",
    "cli": "sglang",
    "subcommand": "serve",
    "modules": {"sglang.launch_server": "launch_server", "sglang.cli.main": None, "sglang": None},
    "default_form": "sglang serve",
    "procedure": "prepared",
    "forms": {
        "sglang serve": {
            **_PREPARED_COMMON,
            "argv0": ["sglang", "serve"],
            "imports": [
                *_PREPARED_IMPORTS,
                ["dispatch", "sglang.cli.serve"],
                ["request", "sglang.cli.serve_backends:ServeRequest"],
                ["model_path", "sglang.cli.utils:try_get_model_path"],
            ],
            "dispatch": {
                "model_type": "_extract_model_type_override",
                "positional": "_normalize_positional_model_path",
                "registry": "_create_backend_registry",
                "auto": "auto",
                "serves": "llm",
                "key": "sglang_backend",
            },
        },
        "launch_server": {
            **_PREPARED_COMMON,
            "argv0": ["sglang/launch_server.py"],
            "imports": _PREPARED_IMPORTS,
        },
    },
    "fields": READER_CANONICAL,
    "engine_fields": list(READER_ENGINE_FIELDS),
    "env": {},
    "env_defaults": {},
}
