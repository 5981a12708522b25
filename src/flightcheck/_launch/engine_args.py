"""The engines' own parsing, rebuilt from their generated tables: the built-in reader.

vLLM and SGLang parse with the standard library's argparse. This module builds an argparse
parser from ``_knowledge/data/<engine>_<version>_args.json`` (every option the installed
engine declared: option strings, nargs, choices, action kind, type, default) and applies
the engine's own pre-processing in front of it:

* vLLM (``FlexibleArgumentParser.parse_args``, vllm/utils/argparse_utils.py): ``--model X``
  moved to the positional slot for ``serve``; a served name without a positional model
  refused; the bare ``--config FILE`` token expanded between the model and the rest (so the
  command line wins); ``_`` -> ``-`` in option names up to the first dot; ``-O3`` / ``-O 3``
  -> ``--optimization-level``; ``--a.b v`` merged into a JSON ``--a``.
* SGLang (sglang/cli/serve.py, ``prepare_server_args``): ``--model-type X`` dropped and a
  leading positional made ``--model-path`` for ``sglang serve``; the bare ``--config FILE``
  expanded in front (``--config=FILE`` is an ordinary option the merger never sees).

argparse then does what it does for the engine: unique-prefix abbreviations
(``--tensor-parallel 8``, ``--mem-frac``), ``nargs``, ``choices``, types, and the errors
the engine would print. Values are converted the way the engine's type functions convert
them where the table names a type flightcheck knows; other types are kept as text.

This is the engine's behaviour at the table's version; when the engine itself is at hand,
:mod:`flightcheck._launch.engine_ask` asks it instead.
"""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from flightcheck._knowledge import argtables, engines, sglang, vllm
from flightcheck._vocabulary.intent import parse_len

_SUPPRESS = "==SUPPRESS=="


class Refused(Exception):
    """The engine's parser would refuse the command line (the message it would print)."""


# --------------------------------------------------------------------------- value types


def _hr_int(text: str) -> int:
    """vLLM's human_readable_int: ``1k`` = 1000, ``1K`` = 1024, decimals with k/m/g/t only."""
    value = text.strip()
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", value)
    if m:
        number, suffix = m.groups()
        if suffix.islower():
            return int(float(number) * {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}[suffix])
        if "." in number:
            raise argparse.ArgumentTypeError(f"Decimals are not allowed with binary suffixes like {suffix}.")
        return int(number) * {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}[suffix]
    return int(value)


def _hr_int_or_auto(text: str) -> int:
    if text.strip().lower() in ("auto", "-1"):
        return -1
    return parse_len(text) if re.search(r"[kKmMgGtT]$", text.strip()) else int(text)


def _si_int(text: str) -> int:
    """SGLang's human_readable_int: SI ``k M G T`` (x1000), IEC ``Ki Mi Gi Ti``; case-sensitive."""
    value = text.strip()
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)", value)
    if m:
        number, suffix = m.groups()
        iec = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
        if suffix in iec:
            if "." in number:
                raise argparse.ArgumentTypeError(f"Decimals are not allowed with IEC suffixes like '{suffix}'.")
            return int(number) * iec[suffix]
        try:
            return int(Decimal(number) * {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}[suffix])
        except InvalidOperation:
            raise argparse.ArgumentTypeError(f"Invalid integer value: '{value}'.") from None
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"Invalid integer value: '{value}'.") from None


def _dict_or_str(text: str) -> Any:
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return value if isinstance(value, dict) else text


def _json(text: str) -> Any:
    return json.loads(text)


_CONVERT: dict[str, Any] = {
    "int": int,
    "float": float,
    "str": str,
    "json": _json,
    "hr_int": _hr_int,
    "hr_int_or_auto": _hr_int_or_auto,
    "si_int": _si_int,
    "dict_or_str": _dict_or_str,
}
for _name, _fn in _CONVERT.items():
    if _name not in ("int", "float", "str"):
        _fn.__name__ = _name.replace("_", " ") if _name != "json" else "loads"


def convert(kind: str, text: str) -> Any:
    """Convert ``text`` as the engine's type function of ``kind`` would."""
    return _CONVERT[kind](text)


# --------------------------------------------------------------------------- actions


class _Given:
    """What the command line set, in order: (dest, option as written, value)."""

    def __init__(self) -> None:
        self.items: list[tuple[str, str, Any]] = []


def _note(namespace: argparse.Namespace, dest: str, option: str | None, value: Any) -> None:
    given: _Given = namespace._given_
    given.items.append((dest, option or "", value))


class _Store(argparse.Action):
    def __call__(self, parser: Any, namespace: argparse.Namespace, values: Any, option_string: Any = None) -> None:
        setattr(namespace, self.dest, values)
        if option_string is not None or values is not self.default:
            _note(namespace, self.dest, option_string, values)


class _Append(argparse.Action):
    def __call__(self, parser: Any, namespace: argparse.Namespace, values: Any, option_string: Any = None) -> None:
        items = list(getattr(namespace, self.dest, None) or [])
        items.append(values)
        setattr(namespace, self.dest, items)
        _note(namespace, self.dest, option_string, values)


class _Const(argparse.Action):
    def __init__(self, *args: Any, negatives: frozenset[str] = frozenset(), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.negatives = negatives

    def __call__(self, parser: Any, namespace: argparse.Namespace, values: Any, option_string: Any = None) -> None:
        value = self.const if option_string not in self.negatives else (not self.const)
        setattr(namespace, self.dest, value)
        _note(namespace, self.dest, option_string, value)


class _Refuse(argparse.Action):
    """An option whose own action raises once given (an atlas row's ``refuses``: SGLang 0.4.0
    sglang/srt/server_args.py DeprecatedAction ``raise ValueError(self.help)``)."""

    def __init__(self, *args: Any, message: str = "", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.message = message

    def __call__(self, parser: Any, namespace: argparse.Namespace, values: Any, option_string: Any = None) -> None:
        raise Refused(self.message)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:
        raise Refused(message)

    def exit(self, status: int = 0, message: str | None = None) -> Any:
        raise Refused(message or f"the engine's parser exited with status {status}")


def _bool_strings(strings: list[str]) -> tuple[list[str], frozenset[str]]:
    """All strings of a BooleanOptionalAction / vLLM EnableDisableAction, and the negatives."""
    positives = [s for s in strings if not s.startswith("--no-")]
    if positives and positives[0].startswith("--enable-"):
        positives = [s for s in positives if not s.startswith("--disable-")]
    elif positives and positives[0].startswith("--disable-"):
        positives = [s for s in positives if not s.startswith("--enable-")]
    negatives = {s for s in strings if s not in positives}
    for s in positives:
        if s.startswith("--"):
            negatives.add("--no-" + s[2:])
        for prefix, inverse in (("--enable-", "--disable-"), ("--disable-", "--enable-")):
            if s.startswith(prefix):
                negatives.add(inverse + s.removeprefix(prefix))
    return positives, frozenset(negatives)


def build_parser(engine: str, rows: list[dict[str, Any]] | None = None) -> argparse.ArgumentParser:
    """An argparse parser with every option of the engine's generated table (or of
    ``rows``: another release's options, from the release atlas)."""
    types = engines.get(engine).reader.types
    allow_abbrev = bool(argtables.table(engine).get("allow_abbrev", True))
    parser = _Parser(prog=f"{engine} serve", add_help=False, allow_abbrev=allow_abbrev)
    for opt in argtables.options(engine) if rows is None else rows:
        strings, dest, action, nargs = opt["option_strings"], opt["dest"], opt["action"], opt["nargs"]
        if action == "help" or not dest:
            continue
        default = argparse.SUPPRESS if opt["default"] == _SUPPRESS else opt["default"]
        kind = types.get(opt["type"] or "", "str")
        if rows is not None:  # an atlas row: its type is already one of the reader's kinds
            kind = "str" if opt.get("record") else (opt["type"] if opt["type"] in _CONVERT else "str")
        kwargs: dict[str, Any] = {"dest": dest, "default": default}
        if not strings:  # a positional (vLLM's model_tag)
            parser.add_argument(dest, nargs=nargs, action=_Store, default=default)
            continue
        if action == "BooleanOptionalAction":
            positives, negatives = _bool_strings(strings)
            if rows is not None:  # another release: its spellings may pair --enable-x with a --disable-x of its own
                taken = set(parser._option_string_actions)
                positives = [p for p in positives if p not in taken]
                negatives = frozenset(n for n in negatives if n not in taken and n not in positives)
                if not positives:
                    continue
            parser.add_argument(
                *positives, *sorted(negatives), action=_Const, nargs=0, const=True, negatives=negatives, **kwargs
            )
            continue
        if opt.get("refuses"):
            parser.add_argument(*strings, action=_Refuse, nargs=nargs, message=opt["refuses"], **kwargs)
            continue
        if nargs == 0 or action in ("store_true", "store_false", "store_const", "count"):
            const = {"store_true": True, "store_false": False}.get(action, opt.get("const"))
            parser.add_argument(*strings, action=_Const, nargs=0, const=const, **kwargs)
            continue
        if nargs is not None:
            kwargs["nargs"] = nargs
        if opt["choices"] is not None:
            kwargs["choices"] = opt["choices"]
        parser.add_argument(
            *strings,
            action=_Append if action == "append" else _Store,
            type=_CONVERT[kind],
            required=bool(opt["required"]),
            **kwargs,
        )
    return parser


_PARSERS: dict[str, argparse.ArgumentParser] = {}


def release_parser_rows(engine: str, release: str) -> list[dict[str, Any]]:
    """``release``'s options, from the release atlas."""
    from flightcheck._knowledge import atlas

    return atlas.options(engine, release)


def release_parser(engine: str, release: str) -> argparse.ArgumentParser:
    """The parser of ``release`` (a release the atlas read), built once."""
    from flightcheck._knowledge import atlas

    key = f"{engine}=={release}"
    if key not in _PARSERS:
        _PARSERS[key] = build_parser(engine, atlas.options(engine, release))
    return _PARSERS[key]


def _record_of(release: str | None) -> dict[str, str]:
    """dest -> the config record class its JSON is validated as, in ``release`` (the
    table's release when None), from the release atlas."""
    from flightcheck._knowledge import atlas

    rel = release if release is not None else argtables.TABLE_VERSION["vllm"]
    return {o["dest"]: o["record"] for o in atlas.options("vllm", rel) if o.get("record")}


def _nested_records(option: str, dest: str, doc: dict[str, Any], release: str | None) -> None:
    """A JSON config record's keys, nested records included, against the record's fields as
    ``release`` declares them (pydantic refuses an unknown key at any depth: 'Unexpected
    keyword argument'). A record the atlas does not know is not judged."""
    from flightcheck._knowledge import atlas

    rel = release if release is not None else argtables.TABLE_VERSION["vllm"]
    records = atlas.records("vllm", rel)
    cls = _record_of(release).get(dest)
    stack: list[tuple[str, Any, str]] = [(cls, doc, "")] if cls else []
    while stack:
        name, value, path = stack.pop()
        fields = records.get(name)
        if fields is None or not isinstance(value, dict):
            continue
        known = {f if isinstance(f, str) else f[0]: (None if isinstance(f, str) else f[1]) for f in fields}
        unknown = sorted(k for k in value if k not in known)
        if unknown and (path or release is not None):  # the table's own top-level check stands
            where = f" in {path[1:]}" if path else ""
            raise Refused(
                f"argument {option}: validation error for {name}{where}: Unexpected keyword argument {unknown}"
            )
        for key, nested in known.items():
            if nested and key in value:
                stack.append((nested, value[key], f"{path}.{key}"))


def parser_for(engine: str) -> argparse.ArgumentParser:
    if engine not in _PARSERS:
        _PARSERS[engine] = build_parser(engine)
    return _PARSERS[engine]


# --------------------------------------------------------------------------- pre-processing


@dataclass
class Parsed:
    """One command line as the engine's parser reads it."""

    values: dict[str, Any] = field(default_factory=dict)  # dest -> value (defaults included)
    given: list[tuple[str, str, Any]] = field(default_factory=list)  # (dest, option as written, value)
    argv: list[str] = field(default_factory=list)  # what the parser was handed
    config: str | None = None  # the --config file the engine expands


ConfigLoader = Any  # Callable[[str], list[str]]: a --config file as flag tokens


def _vllm_args(
    args: list[str],
    serve: bool,
    load_config: ConfigLoader,
    parsed: Parsed,
    opt_level: bool = True,
    model_option: str | None = None,
) -> list[str]:
    """FlexibleArgumentParser.parse_args before argparse (vllm/utils/argparse_utils.py).
    ``opt_level`` False: a release without ``--optimization-level`` (vLLM 0.10.2
    vllm/utils/__init__.py turns ``-O3`` into ``-O.level=3``, -O being --compilation-config):
    ``-O3`` stays the short option with its value. ``model_option``: how the release takes
    ``serve --model X`` (:func:`flightcheck._knowledge.atlas.serve_model`; None: moved to
    the positional, vLLM 0.11.1 and later)."""
    args = list(args)
    if serve and model_option == REFUSED_MODEL and vllm.READER_MODEL_OPTION in args:
        # vLLM 0.8.5 vllm/utils.py .. 0.11.0 vllm/utils/__init__.py parse_args:
        # ``any(arg == '--model' for arg in args)`` raises (``--model=X`` passes)
        raise Refused(
            "ValueError: With `vllm serve`, you should provide the model as a positional argument or in a "
            "config file instead of via the `--model` option."
        )
    if serve and model_option is None:
        idx = next((i for i, a in enumerate(args) if re.match(r"^--model(=.+|$)", a)), None)
        if idx is not None:
            if args[idx] == "--model":
                if idx + 1 >= len(args):
                    raise Refused("argument --model: expected one argument")
                tag, rest = args[idx + 1], idx + 2
            else:
                tag, rest = args[idx].removeprefix("--model="), idx + 1
            args = [tag, *args[:idx], *args[rest:]]
        if (
            args
            and args[0].startswith("-")
            and not any(re.match(r"^--config(=.+|$)", a) for a in args)
            and any(re.match(vllm.READER_SERVED_NAME, a) for a in args)
        ):
            raise Refused("ValueError: `model` should be provided as the first positional argument")
    if "--config" in args:
        if args.count("--config") > 1:
            raise Refused("AssertionError: More than one config file specified!")
        index = args.index("--config")
        if index == len(args) - 1:
            raise Refused("ValueError: No config file specified!")
        parsed.config = args[index + 1]
        config_args = load_config(parsed.config)
        if not serve:
            args = config_args + args[:index] + args[index + 2 :]
        else:
            model_in_cli = bool(args) and not args[0].startswith("-")
            if not model_in_cli and "--model" not in config_args:
                raise Refused(
                    "ValueError: No model specified! Please specify model either as a positional argument "
                    "or in a config file."
                )
            at = 1 if model_in_cli else 0
            args = args[:at] + config_args + args[at:index] + args[index + 2 :]
    out: list[str] = []
    for i, arg in enumerate(args):
        if arg.startswith("--"):
            key, eq, text = arg.partition("=")
            name, dot, tail = key[2:].partition(".")
            out.append("--" + name.replace("_", "-") + dot + tail + eq + text)
        elif arg.startswith(vllm.READER_OPT_SHORT) and arg != vllm.READER_OPT_SHORT and (opt_level or arg[2:3] != "."):
            level = arg[3:] if arg[2:3] == "=" else arg[2:]
            out += [vllm.READER_OPT_LEVEL if opt_level else vllm.READER_OPT_SHORT, level]
        elif opt_level and arg == vllm.READER_OPT_SHORT and i + 1 < len(args) and args[i + 1] in {"0", "1", "2", "3"}:
            out.append(vllm.READER_OPT_LEVEL)
        else:
            out.append(arg)
    # --a.b v (and --a.b=v): merged into one JSON --a
    dicts: dict[str, dict[str, Any]] = {}
    keep: list[str] = []
    skip = False
    for i, arg in enumerate(out):
        if skip:
            skip = False
            continue
        if not (arg.startswith("-") and "." in arg):
            keep.append(arg)
            continue
        name, eq, text = arg.partition("=")
        if eq and "." not in name:  # the dot was in the value
            keep.append(arg)
            continue
        if not eq:
            if i + 1 >= len(out):
                raise Refused(f"IndexError: {arg} without a value")
            text, skip = out[i + 1], True
        if name.endswith("+"):
            name, text = name[:-1], json.dumps(text.split(","))
        key, *keys = name.split(".")
        try:
            value: Any = json.loads(text)
        except ValueError:
            try:
                value = _hr_int(text)
            except ValueError:
                value = text
        node = dicts.setdefault(key, {})
        for k in keys[:-1]:
            nxt = node.get(k)
            if not isinstance(nxt, dict):
                nxt = node[k] = {}
            node = nxt
        if keys:
            node[keys[-1]] = value
    for key, value in dicts.items():
        keep += [key, json.dumps(value)]
    return keep


def _sglang_args(args: list[str], serve: bool, load_config: ConfigLoader, parsed: Parsed) -> list[str]:
    """sglang/cli/serve.py then prepare_server_args' config merge."""
    args = list(args)
    if serve:
        out: list[str] = []
        i = 0
        while i < len(args):  # _extract_model_type_override
            if args[i] == sglang.READER_MODEL_TYPE and i + 1 < len(args):
                i += 2
                continue
            if args[i].startswith(sglang.READER_MODEL_TYPE + "="):
                i += 1
                continue
            out.append(args[i])
            i += 1
        args = out
        if args and not args[0].startswith("-"):  # _normalize_positional_model_path
            args = [sglang.READER_MODEL_PATH, args[0], *args[1:]]
    if "--config" in args:
        if args.count("--config") > 1:
            raise Refused("ValueError: Multiple config files specified! Only one allowed.")
        index = args.index("--config")
        if index == len(args) - 1:
            raise Refused("ValueError: No config file specified")
        parsed.config = args[index + 1]
        args = load_config(parsed.config) + args[:index] + args[index + 2 :]
    return args


def _release_key(release: str) -> tuple[int, ...] | None:
    """A sortable release number (atlas.version_key)."""
    from flightcheck._knowledge import atlas

    return atlas.version_key(release)


def _vllm_validate(ns: argparse.Namespace, release: str | None = None) -> None:
    """What vLLM checks right after parsing: config records (pydantic, unknown keys
    forbidden), strict JSON options, a path-like chat template that does not exist."""
    dataclass_defaults = {
        opt["dest"]: opt["default"]
        for opt in argtables.options("vllm")
        if isinstance(opt["default"], dict) and "__class__" in opt["default"] and release is None
    }
    if release is not None:
        keys_checked = (_release_key(release) or (0,)) >= (_release_key(vllm.READER_RECORD_KEYS_CHECKED_FROM) or (0,))
        dataclass_defaults = {dest: {} for dest in _record_of(release)} if keys_checked else {}
    for dest, _option, value in ns._given_.items:
        if dest in dataclass_defaults and isinstance(value, str):
            try:
                doc = json.loads(value)
            except ValueError:
                continue  # vLLM expands human-readable numbers first: not ours to judge
            known = set(dataclass_defaults[dest]) - {"__class__"}
            if isinstance(doc, dict) and known and set(doc) - known:
                name = dataclass_defaults[dest]["__class__"]
                raise Refused(f"argument {_option}: validation error for {name}: unknown {sorted(set(doc) - known)}")
            if isinstance(doc, dict):
                _nested_records(_option, dest, doc, release)
        if dest in vllm.READER_JSON_STRICT and isinstance(value, str):
            try:
                json.loads(value)
            except ValueError:
                raise Refused(f"argument {_option}: not valid JSON") from None
    template = getattr(ns, "chat_template", None)
    if release is not None and (_release_key(release) or (0,)) < (
        _release_key(vllm.READER_CHAT_TEMPLATE_CHECKED_FROM) or (0,)
    ):
        template = None  # that release checks the template only when the server starts
    if isinstance(template, str) and not any(c in template for c in "{}\n"):
        from pathlib import Path

        if not Path(template).exists() and template not in vllm.READER_BUILTIN_CHAT_TEMPLATES:
            raise Refused(f"VLLMValidationError: the chat template {template} appears path-like, but doesn't exist")


#: atlas.serve_model's answers (scripts/gen_release_atlas.py serve_model_option)
REFUSED_MODEL = "refused"
POSITIONAL_MODEL = "positional"


def parse(
    engine: str,
    args: list[str],
    *,
    serve: bool,
    load_config: ConfigLoader,
    release: str | None = None,
) -> Parsed:
    """Read ``args`` (what follows ``serve`` / the module) as the engine's parser would.

    ``release``: read with that release's options from the release atlas instead of the
    generated table's (:mod:`flightcheck._launch.release_read`).

    Raises:
        Refused: the engine would refuse the line (argparse's message, or the engine's).
    """
    parsed = Parsed()
    model_option: str | None = None
    flexible = engines.get(engine).reader.preprocess == "flexible"
    # the engine's own pre-processing before argparse: vLLM's FlexibleArgumentParser, or
    # SGLang's ServerArgs (``sglang serve``, its --config merge)
    if flexible:
        opt_level = release is None or any(
            vllm.READER_OPT_LEVEL in (o["option_strings"] or []) for o in release_parser_rows(engine, release)
        )
        from flightcheck._knowledge import atlas

        model_option = atlas.serve_model(engine, release) if release is not None and serve else None
        argv = _vllm_args(args, serve, load_config, parsed, opt_level, model_option)
    else:
        argv = _sglang_args(args, serve, load_config, parsed)
    parsed.argv = argv
    namespace = argparse.Namespace()
    given = _Given()
    namespace._given_ = given
    ns = (parser_for(engine) if release is None else release_parser(engine, release)).parse_args(argv, namespace)
    if flexible and model_option == POSITIONAL_MODEL and getattr(ns, "model_tag", None) is None:
        # vLLM 0.6.0 vllm/scripts.py: serve_parser.add_argument("model_tag") has no nargs
        raise Refused("the following arguments are required: model_tag")
    if flexible:  # vLLM validates its arguments after parsing (EngineArgs / the chat template)
        _vllm_validate(ns, release)
    values = dict(vars(ns))
    values.pop("_given_", None)
    parsed.values = values
    parsed.given = given.items
    return parsed


# --------------------------------------------------------------------------- where options sit


@dataclass(frozen=True)
class Occurrence:
    """One option as written on a command line, resolved the way the engine's parser
    resolves it: abbreviations, ``--flag=value``, vLLM's ``_`` spelling and ``--a.b v``."""

    dest: str  # the parser's destination (``tensor_parallel_size``)
    key: str  # dest plus a dotted path for vLLM's ``--a.b v`` form (``compilation_config.pass_config.x``)
    option: str  # the full option string it resolved to (``--tensor-parallel-size``)
    negative: bool  # a ``--no-X`` / ``--disable-X`` spelling of a boolean pair
    start: int  # index into the argument list
    stop: int  # exclusive: the option and the values it takes
    value: str | None  # its value as written (several values joined by spaces); None: a bare flag


@dataclass(frozen=True)
class _OptInfo:
    dest: str
    nargs: Any
    negative: bool
    option: str


def _option_index(engine: str) -> dict[str, _OptInfo]:
    """Every option string of the engine's table (the negatives of boolean pairs included)."""
    cached = _INDEX.get(engine)
    if cached is not None:
        return cached
    index: dict[str, _OptInfo] = {}
    for opt in argtables.options(engine):
        strings, dest, action = opt["option_strings"], opt["dest"], opt["action"]
        if not strings or action == "help" or not dest:
            continue
        if action == "BooleanOptionalAction":
            positives, negatives = _bool_strings(strings)
            for s in positives:
                index[s] = _OptInfo(dest, 0, False, s)
            for s in negatives:
                index[s] = _OptInfo(dest, 0, True, s)
            continue
        nargs = 0 if action in ("store_true", "store_false", "store_const", "count") else opt["nargs"]
        for s in strings:
            index[s] = _OptInfo(dest, nargs, False, s)
    _INDEX[engine] = index
    return index


_INDEX: dict[str, dict[str, _OptInfo]] = {}


def resolve_option(engine: str, word: str) -> tuple[_OptInfo, str, str | None] | None:
    """``word`` (an option as written, ``=value`` allowed) as the engine's parser resolves it:
    (the option, the dotted path after it or "", the ``=`` value or None); None when the
    parser would not take it for one of its options (unknown, ambiguous, a positional)."""
    if not word.startswith("-") or word == "-" or re.fullmatch(r"-\d+(\.\d+)?", word):
        return None
    name, eq, text = word.partition("=")
    explicit = text if eq else None
    dotted = ""
    flexible = engines.get(engine).reader.preprocess == "flexible"
    if flexible and name.startswith("--"):
        # FlexibleArgumentParser: "_" -> "-" in the name up to the first dot; --a.b is JSON for --a
        head, dot, tail = name[2:].partition(".")
        name = "--" + head.replace("_", "-")
        dotted = tail if dot else ""
    elif flexible and name.startswith(vllm.READER_OPT_SHORT) and name != vllm.READER_OPT_SHORT:
        explicit = name[len(vllm.READER_OPT_SHORT) :].lstrip("=") + (f"={text}" if eq else "")
        name = vllm.READER_OPT_LEVEL
    index = _option_index(engine)
    if name in index:
        return index[name], dotted, explicit
    if not name.startswith("--") or not bool(argtables.table(engine).get("allow_abbrev", True)):
        return None
    # argparse's unique-prefix rule (ArgumentParser._get_option_tuples): one option string only
    matches = [s for s in index if s.startswith(name)]
    if len(matches) != 1:
        return None
    return index[matches[0]], dotted, explicit


def _looks_like_option(word: str) -> bool:
    return word.startswith("-") and word != "-" and re.fullmatch(r"-\d+(\.\d+)?", word) is None


def occurrences(engine: str, args: list[str]) -> list[Occurrence]:
    """Every option of ``args`` (what follows ``serve`` / the module), where it sits and the
    tokens its value takes, by the nargs of the engine's table. Unknown options take no value."""
    out: list[Occurrence] = []
    i, n = 0, len(args)
    while i < n:
        word = args[i]
        if word == "--":
            break
        found = resolve_option(engine, word) if _looks_like_option(word) else None
        if found is None:
            i += 1
            continue
        info, dotted, explicit = found
        key = f"{info.dest}.{dotted}" if dotted else info.dest
        if explicit is not None:
            out.append(Occurrence(info.dest, key, info.option, info.negative, i, i + 1, explicit))
            i += 1
            continue
        nargs = None if dotted else info.nargs  # --a.b always takes one value
        j = i + 1
        if nargs is None:
            j = min(i + 2, n)
        elif isinstance(nargs, int):
            j = min(i + 1 + nargs, n)
        elif nargs == "?":
            j = i + 2 if i + 1 < n and not _looks_like_option(args[i + 1]) else i + 1
        else:  # "*" / "+": every following word up to the next option
            while j < n and not _looks_like_option(args[j]):
                j += 1
        value = " ".join(args[i + 1 : j]) if j > i + 1 else None
        out.append(Occurrence(info.dest, key, info.option, info.negative, i, j, value))
        i = j
    return out
