"""From tokenised engine arguments (and its ``--config`` file) to the launch's Intent.

Precedence is the engines': the command line over the config file over defaults. A value
that cannot be read (``-tp eight``, a ``--kv-cache-dtype`` flightcheck does not know) is
reported in ``Intent.unparsed`` and left at its default; the engine gets it untouched.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from flightcheck._knowledge import engines as F
from flightcheck._knowledge import sglang, vllm
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
                path = cmd.config
                tokens, data = config_tokens(path)
                cmd.config_data = data
                opts, _ = tokenize(tokens, cmd.engine, source="config")
            except UsageError as exc:
                cmd.config_problem = str(exc)  # the engine refuses to start: FC711 blocks
    return opts + cli_opts, positionals, problems


def read_intent(cmd: EngineCommand) -> None:
    """Fill ``cmd.intent`` from its arguments."""
    opts, positionals, unparsed = engine_opts(cmd)
    table = F.fields_for(cmd.engine)
    fields: dict[str, Any] = {"engine": cmd.engine}
    seen_flags: list[str] = []
    dp_attention = False
    for opt in opts:
        # a secret's value (--api-key, --hf-token) never reaches a report
        rendered = opt.flag if opt.value is None else f"{opt.flag}={F.REDACTED if F.is_secret(opt.flag) else opt.value}"
        if rendered not in seen_flags:
            seen_flags.append(rendered)
        if opt.flag == sglang.DP_ATTENTION_FLAG:
            dp_attention = True
        if cmd.engine == "vllm" and opt.flag in vllm.BOOLS:
            name, value = vllm.BOOLS[opt.flag]
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
    if cmd.form == "vllm-cli" and positionals:
        fields["model"] = positionals[0][1]
    if cmd.engine == "sglang" and dp_attention:
        # DP attention splits the TP group; it does not add GPUs
        fields["data_parallel_size"] = 1
    fields["engine_flags"] = seen_flags
    fields["unparsed"] = unparsed
    fields["config_problem"] = cmd.config_problem
    cmd.intent = Intent(**fields)
