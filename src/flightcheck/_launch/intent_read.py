"""From the engine arguments (and its ``--config`` file) to the launch's Intent.

The built-in reader parses the way the engine's own parser does (:mod:`.engine_args`:
argparse built from the engine's generated option table, with the engine's
pre-processing). A line that parser refuses is one the engine refuses: the reason goes to
``Intent.refused`` (FC703), and the Intent is then read leniently, token by token, so the
other checks still see the layout. Precedence is the engines': the command line over the
config file over defaults. A value flightcheck cannot use (a ``--kv-cache-dtype`` it does
not know) is reported in ``Intent.unparsed`` and left at its default.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from flightcheck._knowledge import engines as F
from flightcheck._knowledge import sglang
from flightcheck._knowledge.vllm.command import launch_options
from flightcheck._launch.tokens import Opt, config_tokens, tokenize
from flightcheck._vocabulary.errors import UsageError
from flightcheck._vocabulary.intent import Intent

if TYPE_CHECKING:
    from flightcheck._launch.command import EngineCommand


def _valid(field_name: str, value: Any) -> str | None:
    """None when ``value`` is acceptable for the Intent field, else why not."""
    try:
        Intent(**{field_name: value})
    except UsageError as exc:
        return str(exc)
    return None


def engine_opts(cmd: EngineCommand) -> tuple[list[Opt], list[tuple[int, str]], list[str]]:
    """Options of the config file then of the command line (later wins), the command
    line's positionals, and what could not be read."""
    args = cmd.argv[cmd.start :]
    cli_opts, positionals = tokenize(args, cmd.engine)
    problems: list[str] = []
    opts: list[Opt] = []
    config = [o for o in cli_opts if o.flag == "--config"]
    if len(config) > 1:
        problems.append("--config given more than once")
    elif config:
        cmd.config = config[0].value
        if not cmd.config:
            cmd.config_problem = "--config without a file"
        else:
            try:
                tokens = _read_config(cmd, cmd.config)
                opts, _ = tokenize(tokens, cmd.engine, source="config")
            except UsageError as exc:
                cmd.config_problem = str(exc)  # the engine refuses to start: FC711 blocks
    return opts + cli_opts, positionals, problems


def _read_config(cmd: EngineCommand, path: str) -> list[str]:
    """``--config``'s tokens, read once per command (the parser and the lenient reading of
    a refused line both ask; a FIFO would give nothing, after its 3 s bound, the second time).

    Raises:
        UsageError: it cannot be read or parsed.
    """
    if cmd.config_read is None or cmd.config_read[0] != path:
        try:
            tokens, data = config_tokens(path, cmd.engine or "vllm")
        except UsageError as exc:
            cmd.config_read = (path, str(exc))
            raise
        cmd.config_data = data
        cmd.config_read = (path, tokens)
    got = cmd.config_read[1]
    if isinstance(got, str):
        raise UsageError(got)
    return list(got)


def read_intent(cmd: EngineCommand) -> None:
    """Fill ``cmd.intent`` from its arguments, as the engine's own parser reads them."""
    from flightcheck._launch import engine_args

    assert cmd.engine is not None
    unparsed: list[str] = []

    def load_config(path: str) -> list[str]:
        cmd.config = path
        try:
            return _read_config(cmd, path)
        except UsageError as exc:
            raise engine_args.Refused(str(exc)) from None

    try:
        parsed = engine_args.parse(
            cmd.engine, cmd.argv[cmd.start :], serve=cmd.form.endswith("-cli"), load_config=load_config
        )
    except engine_args.Refused as exc:
        read_intent_leniently(cmd)
        cmd.intent.refused = [str(exc)]
        cmd.intent.reader = "built-in"
        return
    refused: list[str] = []
    fields = intent_fields(cmd.engine, cmd.form, parsed.values, {d for d, _, _ in parsed.given}, unparsed, refused)
    fields["engine_flags"] = _rendered(cmd.engine, parsed.given)
    fields["unparsed"] = unparsed
    fields["refused"] = refused
    fields["reader"] = "built-in"
    cmd.intent = read_options(Intent(**fields))


def _table_release() -> tuple[int, ...] | None:
    """The vLLM release the built-in reader's tables come from (FC703 judges only it)."""
    from flightcheck._knowledge import argtables

    return release_tuple(argtables.TABLE_VERSION.get("vllm"))


def release_tuple(text: object) -> tuple[int, ...] | None:
    """``"0.33.0"`` (or ``"0.33.0+cpu"``) as (0, 33, 0); None when it is not a release."""
    import re

    m = re.match(r"(\d+(?:\.\d+)*)", text) if isinstance(text, str) else None
    return tuple(int(p) for p in m.group(1).split(".")) if m else None


def _rendered(engine: str, given: list[tuple[str, str, Any]]) -> list[str]:
    """The options the line set, canonically spelled (``--tensor-parallel-size=8``)."""
    import json

    out: list[str] = []
    for dest, option, value in given:
        if not option:
            continue
        flag = F.canonical(option, engine)
        if F.is_secret(dest) and not isinstance(value, bool):
            text = f"{flag}={F.REDACTED}"  # never a secret value in the report (one rule: is_secret)
        elif isinstance(value, bool):
            text = flag
        elif isinstance(value, dict) or (isinstance(value, list) and not all(isinstance(v, str) for v in value)):
            text = f"{flag}={json.dumps(value)}"  # a JSON option reads back as the JSON the engine got
        elif isinstance(value, list):
            text = f"{flag}={' '.join(value)}"
        else:
            text = f"{flag}={value}"
        if text not in out:
            out.append(text)
    return out


def _set(fields: dict[str, Any], name: str, value: Any, where: str, unparsed: list[str]) -> None:
    why = _valid(name, value)
    if name == "hf_overrides" and not isinstance(value, dict):
        why = "not a JSON object"
    if why:
        if why.startswith("--"):
            why = why.split(": ", 1)[1] if ": " in why else why.split(" ", 1)[-1]
        unparsed.append(f"{where} {value!r}: {why}")
        fields.pop(name, None)
        return
    fields[name] = value


def intent_fields(
    engine: str,
    form: str,
    values: dict[str, Any],
    given: set[str],
    unparsed: list[str],
    refused: list[str] | None = None,
) -> dict[str, Any]:
    """Intent fields from the engine's parsed values (``given``: the settings the line set).
    ``refused`` collects what the engine refuses at startup though its parser took it.

    Shared by the built-in reader and the reading of the engine's own answer."""
    from flightcheck._launch import engine_args

    fields: dict[str, Any] = {"engine": engine}
    rules = F.get(engine).reader
    table = rules.intent_fields
    for dest, name in table.items():
        if dest not in given or dest not in values:
            continue
        value = values[dest]
        if value is None:
            continue
        if dest in rules.loose_numbers and isinstance(value, str):
            try:
                value = engine_args.convert(rules.loose_numbers[dest], value)
            except ValueError:
                unparsed.append(f"{dest} {value!r}: not a number")
                continue
        if name == "kv_cache_dtype":
            value = rules.kv_dtype_aliases.get(value, value)
        if name == "hf_overrides" and isinstance(value, str):
            import json

            try:
                value = json.loads(value)
            except ValueError:
                pass
            if value == {}:
                continue
        if name == "cpu_offload_gb":
            value = float(value)
        if name == "gpu_memory_utilization" and refused is not None:
            # the parser takes any float; vLLM's CacheConfig refuses it at startup (FC703)
            why = F.get(engine).memory.utilization_refusal(value, _table_release())
            if why:
                refused.append(why)
                continue
        _set(fields, name, value, dest, unparsed)
    if rules.preprocess == "flexible":
        # vLLM's ServeSubcommand.cmd: the positional model_tag wins over --model; the api_server
        # entry point never copies it (vllm/entrypoints/launchers/api_server/entry.py).
        # A line that names no model leaves it None (the engine's default model; checks
        # that need the model then skip, as before).
        tag = values.get("model_tag") if form.endswith("-cli") else None
        model = tag if tag is not None else (values.get("model") if "model" in given else None)
        if model is not None:
            fields["model"] = model
    if rules.derives_expert_parallel:
        if values.get("enable_dp_attention") and values.get("attn_dp_size", 1) == 1:
            # the deprecated spelling: DP attention splits the TP group (attn_dp_size),
            # dp_size no longer counts replicas (arg_groups/parallel_hook.py)
            fields["data_parallel_size"] = 1
        ep = values.get("ep_size") or 1
        tp = values.get("tp_size") or 1
        if ep > 1 or (values.get("moe_a2a_backend") in sglang.A2A_EP_SPANNING_BACKENDS and tp > 1):
            fields["enable_expert_parallel"] = True
    return fields


def read_intent_leniently(cmd: EngineCommand) -> None:
    """Fill ``cmd.intent`` token by token (for a line the engine's parser refuses)."""
    opts, positionals, unparsed = engine_opts(cmd)
    table = F.fields_for(cmd.engine)
    fields: dict[str, Any] = {"engine": cmd.engine}
    rules = F.get(cmd.engine).reader
    seen_flags: list[str] = []
    dp_attention = False
    for opt in opts:
        # a secret's value (--api-key, --hf-token) never reaches a report
        rendered = opt.flag if opt.value is None else f"{opt.flag}={F.REDACTED if F.is_secret(opt.flag) else opt.value}"
        if rendered not in seen_flags:
            seen_flags.append(rendered)
        if opt.flag == rules.dp_attention_flag:
            dp_attention = True
        if opt.flag in rules.bools:
            name, value = rules.bools[opt.flag]
            fields[name] = value
            continue
        if opt.flag not in table:
            continue
        name, convert = table[opt.flag]
        where = f"{opt.given or opt.flag}" + (f" (in {cmd.config})" if opt.source == "config" else "")
        if opt.value is None:
            unparsed.append(f"{where}: no value")
            continue
        try:
            value = convert(opt.value)
            why = _valid(name, value)
        except (ValueError, UsageError) as exc:
            why = str(exc) if isinstance(exc, UsageError) else "not a number"
        if why:
            # the intent's own messages name our flag spelling; say what the command said
            if why.startswith("--"):
                why = why.split(": ", 1)[1] if ": " in why else why.split(" ", 1)[-1]
            unparsed.append(f"{where} {opt.value!r}: {why}")
            fields.pop(name, None)
            continue
        fields[name] = value
    # vLLM: the positional model_tag (argparse takes it anywhere between the flags)
    if rules.preprocess == "flexible" and cmd.form.endswith("-cli") and positionals:
        fields["model"] = positionals[0][1]
    if dp_attention:
        # DP attention splits the TP group; it does not add GPUs
        fields["data_parallel_size"] = 1
    fields["engine_flags"] = seen_flags
    fields["unparsed"] = unparsed
    fields["config_problem"] = cmd.config_problem
    cmd.intent = read_options(Intent(**fields))


def read_options(intent: Intent) -> Intent:
    """Fill ``intent``'s read-once fields (``READ_ONCE_FIELDS``) from its ``engine_flags``:
    the speculative config, the multimodal limits and profiling switches and
    ``--enforce-eager`` with vLLM's semantics (``_knowledge.vllm.command.launch_options``;
    the engines that use them gate that in their memory rules), the flags as a map
    (``option_values``), and the served names, the all-to-all backend and the memory
    rules' options with the engine's own (``ReaderRules.launch_options``). The one place
    the command's flags are read for them: both readers call it; the engine's reading
    keeps the flags, and these with them."""
    flags = intent.engine_flags
    for name, value in launch_options(flags).items():
        setattr(intent, name, value)
    values: dict[str, str | None] = {}
    for item in flags:
        name, eq, value = item.partition("=")
        values[name] = value if eq else None
    intent.option_values = values
    # the engine's own reading of the options its rules need (served names, all-to-all
    # backend, memory options), once
    for name, value in F.get(intent.engine).reader.launch_options(flags).items():
        setattr(intent, name, value)
    return intent
