"""How vLLM's parser reads a command line (vllm/utils/argparse_utils.py
``FlexibleArgumentParser``, vllm/entrypoints/cli/serve.py): the option types the built-in
reader converts, the engine record's fields it copies, JSON-object options and their dotted
spellings, and the plugin switch.
"""

from __future__ import annotations

from typing import Any

# ---- reader: how vLLM 0.33's parser reads a command line --------------------------------
# (vllm/utils/argparse_utils.py FlexibleArgumentParser.parse_args / _pull_args_from_config,
# vllm/entrypoints/cli/serve.py; the option table itself is data/vllm_0.33.0_args.json)

#: The first release that refuses a path-like chat template that does not exist before it
#: starts (``validate_parsed_serve_args`` -> ``validate_chat_template``,
#: vllm/entrypoints/openai/cli_args.py and vllm/scripts.py): absent in 0.6.0-0.6.2, present
#: in 0.6.3, 0.8.5, 0.10.2 and 0.33.0 (wheels read; 0.6.0 checked with its real parser).
READER_CHAT_TEMPLATE_CHECKED_FROM = "0.6.3"
#: The first release whose every config record refuses an unknown key ('Unexpected keyword
#: argument'): vllm/config/utils.py ``config`` merges ``ConfigDict(extra="forbid")`` from
#: 0.16.0 (read in the 0.8.5-0.33.0 wheels; before it only some records forbid extras:
#: MultiModalConfig from 0.11.1, CompilationConfig 0.13.0-0.15.1). The real 0.10.2 parser
#: takes ``--speculative-config '{"enforce_eager": true}'``. Older releases' keys are not judged.
READER_RECORD_KEYS_CHECKED_FROM = "0.16.0"

#: ``-O3`` / ``-O=3`` / ``-O 3`` become this option.
READER_OPT_LEVEL = "--optimization-level"
READER_OPT_SHORT = "-O"
#: the word vLLM 0.8.5 vllm/utils.py .. 0.11.0 vllm/utils/__init__.py
#: FlexibleArgumentParser.parse_args refuses after ``serve`` (``any(arg == '--model' ...)``).
READER_MODEL_OPTION = "--model"
#: the names the model is served under: ``nargs="+"`` (vllm/engine/arg_utils.py
#: ``ModelConfig.served_model_name``; data/vllm_0.33.0_args.json), the values rendered
#: joined by a space.
SERVED_NAME_FLAG = "--served-model-name"
#: the check FlexibleArgumentParser makes: served names but no positional model.
READER_SERVED_NAME = r"^--served[-_]model[-_]name(=.+|$)"
#: parser type (as the table names it) -> how the built-in reader converts the value.
READER_TYPES: dict[str, str] = {
    "int": "int",
    "float": "float",
    "str": "str",
    "json.loads": "json",
    "vllm.utils.argparse_utils.human_readable_int": "hr_int",
    "vllm.utils.argparse_utils.human_readable_int_or_auto": "hr_int_or_auto",
    "vllm.engine.arg_utils.union_dict_and_str": "dict_or_str",
}
#: engine record attribute -> Intent field (what the reader copies when the line sets it).
READER_FIELDS: dict[str, str] = {
    "model": "model",
    "revision": "revision",
    "tensor_parallel_size": "tensor_parallel_size",
    "pipeline_parallel_size": "pipeline_parallel_size",
    "data_parallel_size": "data_parallel_size",
    "data_parallel_size_local": "data_parallel_size_local",
    "prefill_context_parallel_size": "prefill_context_parallel_size",
    "decode_context_parallel_size": "decode_context_parallel_size",
    "enable_expert_parallel": "enable_expert_parallel",
    "max_model_len": "max_model_len",
    "kv_cache_dtype": "kv_cache_dtype",
    "gpu_memory_utilization": "gpu_memory_utilization",
    "quantization": "quantization",
    "dtype": "dtype",
    "enforce_eager": "enforce_eager",
    "load_format": "load_format",
    "max_num_batched_tokens": "max_num_batched_tokens",
    "max_num_seqs": "max_num_seqs",
    "kv_cache_memory_bytes": "kv_cache_memory_bytes",
    "cpu_offload_gb": "cpu_offload_gb",
    "hf_overrides": "hf_overrides",
    "nnodes": "nnodes",
    "download_dir": "download_dir",
    "distributed_executor_backend": "distributed_executor_backend",
}
#: options whose value the table types loosely (``optional_type``) but the engine reads
#: as a number: dest -> converter kind.
READER_LOOSE_NUMBERS: dict[str, str] = {
    "kv_cache_memory_bytes": "hr_int",
    "max_num_batched_tokens": "hr_int",
}
#: options whose value vLLM validates as JSON of a config record (an invalid document
#: stops the parse): ``optional_type`` of a pydantic config in vllm/engine/arg_utils.py.
READER_JSON_STRICT: tuple[str, ...] = ("kv_transfer_config",)
#: the chat templates vLLM ships (vllm/transformers_utils/chat_templates/): a path-like
#: --chat-template that exists neither here nor there is refused
#: (vllm/renderers/chat_utils/chat_template.py, run by validate_parsed_serve_args).
READER_BUILTIN_CHAT_TEMPLATES: frozenset[str] = frozenset(
    {
        "template_basic.jinja",
        "template_blip2.jinja",
        "template_chatml.jinja",
        "template_deepseek_ocr.jinja",
        "template_deepseek_vl2.jinja",
        "template_kimi_audio.jinja",
        "template_minicpmv45.jinja",
    }
)

# ---- reader: the engine's own parser, asked in a child (``_collect/engine_reader.py``) -----
#
# The child knows no engine: the parent passes it this spec (``engines.reader_spec``).
# Where vLLM's entry points are (read in the 0.33.0 wheel):
#
# * ``vllm/entrypoints/cli/main.py``: ``vllm`` is a ``FlexibleArgumentParser`` with
#   subparsers (``dest="subparser"``); ``ServeSubcommand.subparser_init`` in
#   ``vllm/entrypoints/cli/serve.py`` builds ``serve`` with ``make_arg_parser``
#   (``vllm/entrypoints/common/cli_args.py``: positional ``model_tag``, ``--headless``,
#   ``--config``, ``FrontendArgs`` and ``AsyncEngineArgs.add_cli_args`` from
#   ``vllm/engine/arg_utils.py``). The whole argv, ``serve`` first, goes through the TOP
#   parser's ``FlexibleArgumentParser.parse_args`` (``vllm/utils/argparse_utils.py``), which
#   moves ``--model X`` to the positional slot, expands ``--config x.yaml``, turns ``-O3``
#   into ``--optimization-level 3``, ``_`` into ``-`` in option names and ``--a.b v`` into
#   JSON. ``main`` then runs ``ServeSubcommand.validate`` (``validate_parsed_serve_args``);
#   ``ServeSubcommand.cmd`` copies ``model_tag`` into ``model`` before
#   ``AsyncEngineArgs.from_cli_args``.
# * ``vllm/entrypoints/launchers/api_server/entry.py:main`` (what ``python -m
#   vllm.entrypoints.openai.api_server`` runs): a plain ``FlexibleArgumentParser`` +
#   ``make_arg_parser``, no subcommand, and nothing copies ``model_tag`` into ``model``.
# * ``VLLM_TARGET_DEVICE=cpu`` (unless set): vLLM's platform choice,
#   ``vllm/platforms/__init__.py``; with HF_HUB_OFFLINE, ``EngineArgs.__post_init__`` swaps
#   an uncached model id for its local snapshot and raises when there is none (the child
#   reports ``resolve_error`` and the namespace's fields then).

_CLI_ARGS = "vllm.entrypoints.common.cli_args"
_FLEXIBLE = "vllm.utils.argparse_utils:FlexibleArgumentParser"
_PARSED_COMMON: dict[str, Any] = {
    "imports": [f"{_CLI_ARGS}:make_arg_parser", f"{_CLI_ARGS}:validate_parsed_serve_args", _FLEXIBLE],
    "parser": _FLEXIBLE,
    "platform": ["vllm.platforms:current_platform", "vllm_platform"],
    "record": ["vllm.engine.arg_utils:AsyncEngineArgs", "from_cli_args"],
}
#: the engine record's attribute of each canonical field of the child's document (``None``:
#: vLLM has no such setting); the keys, in this order, are every engine's
READER_CANONICAL: dict[str, str | None] = {
    "model": "model",
    "served_model_name": "served_model_name",
    "tensor_parallel_size": "tensor_parallel_size",
    "pipeline_parallel_size": "pipeline_parallel_size",
    "data_parallel_size": "data_parallel_size",
    "data_parallel_size_local": "data_parallel_size_local",
    "prefill_context_parallel_size": "prefill_context_parallel_size",
    "decode_context_parallel_size": "decode_context_parallel_size",
    "enable_expert_parallel": "enable_expert_parallel",
    "expert_parallel_size": None,
    "max_model_len": "max_model_len",
    "kv_cache_dtype": "kv_cache_dtype",
    "gpu_memory_utilization": "gpu_memory_utilization",
    "quantization": "quantization",
    "dtype": "dtype",
    "enforce_eager": "enforce_eager",
    "load_format": "load_format",
    "max_num_batched_tokens": "max_num_batched_tokens",
    "max_num_seqs": "max_num_seqs",
    "kv_cache_memory_bytes": "kv_cache_memory_bytes",
    "cpu_offload_gb": "cpu_offload_gb",
    "hf_overrides": "hf_overrides",
    "nnodes": "nnodes",
    "node_rank": "node_rank",
    "headless": "headless",
    "trust_remote_code": "trust_remote_code",
    "revision": "revision",
    "download_dir": "download_dir",
    "tokenizer": "tokenizer",
}
#: vLLM settings the child reports as they are, by name
READER_ENGINE_FIELDS: tuple[str, ...] = (
    "model_tag",
    "optimization_level",
    "disable_custom_all_reduce",
    "all2all_backend",
    "distributed_executor_backend",
    "data_parallel_rank",
    "data_parallel_start_rank",
    "data_parallel_address",
    "data_parallel_hybrid_lb",
    "data_parallel_external_lb",
    "enable_dbo",
    "enable_eplb",
    "enable_elastic_ep",
    "enable_prefix_caching",
    "enable_chunked_prefill",
    "block_size",
    "attention_backend",
    "api_server_count",
    "enable_sleep_mode",
    "max_num_scheduled_tokens",
)
#: what ``_collect/engine_reader.py`` is told about vLLM (JSON: see the child's docstring)
CHILD_READER: dict[str, Any] = {
    "engine": "vllm",
    "package": "vllm",
    "cli": "vllm",
    "subcommand": "serve",
    # python -m <module>: its own form (no subcommand), or None: the subcommand follows
    "modules": {
        "vllm.entrypoints.openai.api_server": "api_server",
        "vllm.entrypoints.launchers.api_server.entry": "api_server",
        "vllm.entrypoints.cli.main": None,
        "vllm": None,
    },
    "default_form": "vllm serve",
    "procedure": "parsed",
    "forms": {
        "vllm serve": {
            **_PARSED_COMMON,
            "argv0": ["vllm", "serve"],
            "description": "vLLM CLI",
            "subcommand": {"class": "vllm.entrypoints.cli.serve:ServeSubcommand", "dest": "subparser"},
            "positional_model": "model_tag",
        },
        "api_server": {
            **_PARSED_COMMON,
            "argv0": ["vllm/entrypoints/openai/api_server.py"],
            "description": "vLLM OpenAI-Compatible RESTful API server.",
            "wrap": f"{_CLI_ARGS}:make_arg_parser",
            "validate": f"{_CLI_ARGS}:validate_parsed_serve_args",
        },
    },
    "fields": READER_CANONICAL,
    "engine_fields": list(READER_ENGINE_FIELDS),
    # set for every engine's child (a venv may hold several, and one's import pull another's)
    "env": {"VLLM_NO_USAGE_STATS": "1"},
    "env_defaults": {"VLLM_TARGET_DEVICE": "cpu"},
}

# ---- reader: the plugin switch (vllm/plugins/__init__.py load_plugins_by_group) ----------

#: comma list of the general plugins vLLM loads; unset: all installed ones.
PLUGINS_VAR = "VLLM_PLUGINS"
#: flightcheck's entry point name in the ``vllm.general_plugins`` group (pyproject.toml).
PLUGIN_NAME = "flightcheck"


def _json_arg(flags: list[str], flag: str) -> tuple[dict[str, Any] | None, str | None]:
    """A JSON-object flag as vLLM's parser builds it (utils/argparse_utils.py
    ``FlexibleArgumentParser.parse_args``, the same in the 0.10.2 - 0.33.0 wheels): ``--flag
    JSON`` sets the whole object, the last one winning; every ``--flag.a.b value`` is merged
    into one nested object (the value read as JSON when it parses, else as a string), which
    vLLM appends after all other arguments, so that it replaces any ``--flag JSON``.
    (the object or None when not given; an error when vLLM refuses the value)."""
    import json

    doc: dict[str, Any] | None = None
    dotted: dict[str, Any] | None = None
    for item in flags:
        name, _, value = item.partition("=")
        if name == flag:
            try:
                parsed = json.loads(value)
            except ValueError:
                return None, f"{flag} is not JSON"
            if not isinstance(parsed, dict):
                return None, f"{flag} is not a JSON object"
            doc = parsed
        elif name.startswith(flag + "."):
            try:
                v: Any = json.loads(value)
            except ValueError:
                v = value
            *path, last = name[len(flag) + 1 :].split(".")
            if dotted is None:
                dotted = {}
            node = dotted
            for key in path:  # recursive_dict_update: a dict merges, anything else is replaced
                if not isinstance(node.get(key), dict):
                    node[key] = {}
                node = node[key]
            if isinstance(v, dict) and isinstance(node.get(last), dict):
                _merge(node[last], v)
            else:
                node[last] = v
    return (dotted if dotted is not None else doc), None


def _merge(into: dict[str, Any], update: dict[str, Any]) -> None:
    """argparse_utils.py ``recursive_dict_update`` (lists are not concatenated here: only the
    ``--flag.key+`` spelling makes them, which flightcheck does not read)."""
    for k, v in update.items():
        if isinstance(v, dict) and isinstance(into.get(k), dict):
            _merge(into[k], v)
        else:
            into[k] = v
