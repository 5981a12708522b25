"""How SGLang's parser reads a command line (sglang/cli/serve.py,
sglang/srt/server_args.py ``prepare_server_args``, the ``--config`` file parser): the
option types the built-in reader converts and the fields it copies.
"""

from __future__ import annotations

# ---- reader: how SGLang 0.5.23's parser reads a command line ----------------------------
# (sglang/cli/serve.py, sglang/srt/server_args.py prepare_server_args,
# sglang/srt/utils/server_args_config_parser.py, sglang/srt/arg_groups/overrides.py;
# the option table itself is data/sglang_0.5.23_args.json)

READER_MODEL_PATH = "--model-path"
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
