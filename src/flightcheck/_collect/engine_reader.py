# mypy: disable-error-code="import-not-found"
# (vllm and sglang are not installed where flightcheck is type-checked)
"""Read one vLLM / SGLang launch line with the ENGINE's own parser; print one JSON object.

Run as a child with the engine's interpreter (never imported by flightcheck, and it never
imports flightcheck: standard library plus the engine itself)::

    <engine python> engine_reader.py vllm   [--timeout S] -- <argv>
    <engine python> engine_reader.py sglang [--timeout S] -- <argv>
    <engine python> engine_reader.py vllm|sglang --batch [--timeout S] < argvs.jsonl

(``--batch``: one JSON array per stdin line, one JSON document per stdout line, in order;
the engine is imported once.)

``<argv>`` is either what follows ``vllm serve`` / ``sglang serve``, or the whole command:

* vLLM: ``vllm serve ...``, ``python -m vllm.entrypoints.cli.main serve ...``,
  ``python -m vllm.entrypoints.openai.api_server ...`` (leading ``KEY=VALUE`` words are
  dropped; a bare argv starting with ``serve`` counts as the subcommand).
* SGLang: ``sglang serve ...``, ``python -m sglang.launch_server ...``,
  ``python -m sglang.cli.main serve ...``.

Where the entry points are (read from the installed engines, vllm 0.33.0 / sglang 0.5.23):

* ``vllm/entrypoints/cli/main.py``: ``vllm`` is a ``FlexibleArgumentParser`` with
  subparsers (``dest="subparser"``); ``ServeSubcommand.subparser_init`` in
  ``vllm/entrypoints/cli/serve.py`` builds ``serve`` with ``make_arg_parser``
  (``vllm/entrypoints/common/cli_args.py``: positional ``model_tag``, ``--headless``,
  ``--config``, ``FrontendArgs`` and ``AsyncEngineArgs.add_cli_args`` from
  ``vllm/engine/arg_utils.py``). The whole argv, ``serve`` first, goes through the TOP
  parser's ``FlexibleArgumentParser.parse_args`` (``vllm/utils/argparse_utils.py``), which
  moves ``--model X`` to the positional slot, expands ``--config x.yaml``, turns
  ``-O3`` into ``--optimization-level 3``, ``_`` into ``-`` in option names and
  ``--a.b v`` into JSON. ``main`` then runs ``ServeSubcommand.validate``
  (``validate_parsed_serve_args``); ``ServeSubcommand.cmd`` copies ``model_tag`` into
  ``model`` before ``AsyncEngineArgs.from_cli_args``.
* ``vllm/entrypoints/launchers/api_server/entry.py:main`` (what
  ``python -m vllm.entrypoints.openai.api_server`` runs): a plain
  ``FlexibleArgumentParser`` + ``make_arg_parser``, no subcommand, and nothing copies
  ``model_tag`` into ``model`` there.
* ``sglang/cli/main.py`` hands everything after ``serve`` to ``sglang/cli/serve.py:serve``
  (``--model-type`` removed, a leading positional becomes ``--model-path``, backend
  auto-detection, ``sglang.srt.plugins.load_plugins``), whose LLM backend calls
  ``sglang.srt.server_args.prepare_server_args`` (``argparse.ArgumentParser(prog="sglang
  serve")`` + ``ServerArgs.add_cli_args``, ``--config`` merged by
  ``sglang/srt/utils/server_args_config_parser.py``, then ``ServerArgs.from_cli_args``).
  ``sglang/launch_server.py`` calls ``load_plugins`` and ``prepare_server_args`` directly.
  SGLang resolves derived values later (``ServerArgs.resolve_once``), which needs an
  accelerator: this reader reports the raw record ``prepare_server_args`` returns.

The child never touches the network (HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE set before
the engine is imported) and never initialises CUDA (``VLLM_TARGET_DEVICE`` defaults to
``cpu`` here: vLLM's platform choice, ``vllm/platforms/__init__.py``; nothing is
allocated). With HF_HUB_OFFLINE, ``EngineArgs.__post_init__`` swaps an uncached model id
for its local snapshot and raises when there is none: that is reported as
``resolve_error`` and the fields then come from the engine's parsed namespace.

The engine's logs go to stderr; stdout carries exactly one JSON object. A watchdog ends
the child after ``--timeout`` seconds (default 120) with ``"error": "timed out ..."``.
Exit status: 0 with the document (also when the engine rejects the line: ``error`` says
why, ``error_stage`` where), 2 for the reader's own usage errors, 124 on the timeout.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import enum
import faulthandler
import io
import json
import math
import os
import re
import sys
import threading
import time

READER_VERSION = 1
DEFAULT_TIMEOUT_S = 120.0

#: Canonical field -> attribute of the engine's record (vLLM ``AsyncEngineArgs`` or its
#: parsed namespace; SGLang ``ServerArgs``). ``None``: the engine has no such setting.
#: Only names live here; every value is read from the engine.
CANONICAL = {
    "model": ("model", "model_path"),
    "served_model_name": ("served_model_name", "served_model_name"),
    "tensor_parallel_size": ("tensor_parallel_size", "tp_size"),
    "pipeline_parallel_size": ("pipeline_parallel_size", "pp_size"),
    "data_parallel_size": ("data_parallel_size", "dp_size"),
    "data_parallel_size_local": ("data_parallel_size_local", None),
    "prefill_context_parallel_size": ("prefill_context_parallel_size", None),
    "decode_context_parallel_size": ("decode_context_parallel_size", "dcp_size"),
    "enable_expert_parallel": ("enable_expert_parallel", None),
    "expert_parallel_size": (None, "ep_size"),
    "max_model_len": ("max_model_len", "context_length"),
    "kv_cache_dtype": ("kv_cache_dtype", "kv_cache_dtype"),
    "gpu_memory_utilization": ("gpu_memory_utilization", "mem_fraction_static"),
    "quantization": ("quantization", "quantization"),
    "dtype": ("dtype", "dtype"),
    "enforce_eager": ("enforce_eager", None),
    "load_format": ("load_format", "load_format"),
    "max_num_batched_tokens": ("max_num_batched_tokens", None),
    "max_num_seqs": ("max_num_seqs", "max_running_requests"),
    "kv_cache_memory_bytes": ("kv_cache_memory_bytes", None),
    "cpu_offload_gb": ("cpu_offload_gb", "cpu_offload_gb"),
    "hf_overrides": ("hf_overrides", "json_model_override_args"),
    "nnodes": ("nnodes", "nnodes"),
    "node_rank": ("node_rank", "node_rank"),
    "headless": ("headless", None),
    "trust_remote_code": ("trust_remote_code", "trust_remote_code"),
    "revision": ("revision", "revision"),
    "download_dir": ("download_dir", "download_dir"),
    "tokenizer": ("tokenizer", "tokenizer_path"),
}

#: Engine settings reported as they are, by name, when the engine has them.
ENGINE_FIELDS = {
    "vllm": (
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
    ),
    "sglang": (
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
    ),
}

#: Destinations whose names mark a collective / multicast / graph setting: all such
#: settings the installed engine has are reported under ``comm_flags``.
COMM_PATTERN = re.compile(
    r"nvls|symm_mem|mscclpp|layernorm_sp|a2a|all2all|dp_attention|attn_dp|allreduce|"
    r"all_reduce|cuda_graph|cudagraph|nccl|expert_parallel|eplb|dbo"
)
#: Never copied into the output.
SECRET = re.compile(r"api_key|token$|hf_token|password|secret|watermark_key")


# --------------------------------------------------------------------------- helpers


def one_line(text: object, limit: int = 600) -> str:
    s = " ".join(str(text).split())
    return s if len(s) <= limit else s[: limit - 3] + "..."


def jsonable(value: object, depth: int = 0) -> object:
    """A JSON-able copy: containers walked, enums by value, records as dicts, else repr."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if depth > 6:
        return repr(value)
    if isinstance(value, enum.Enum):
        return jsonable(value.value, depth + 1)
    if isinstance(value, dict):
        return {str(k): jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = list(value)
        if isinstance(value, (set, frozenset)):
            items = sorted(items, key=repr)
        return [jsonable(v, depth + 1) for v in items]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        try:
            return {f.name: jsonable(getattr(value, f.name), depth + 1) for f in dataclasses.fields(value)}
        except Exception:  # noqa: BLE001 - a field that cannot be read shows as its repr
            return repr(value)
    fields = getattr(type(value), "__struct_fields__", None)  # msgspec.Struct
    if fields:
        return {name: jsonable(getattr(value, name, None), depth + 1) for name in fields}
    if callable(value):
        return getattr(value, "__qualname__", None) or repr(value)
    return repr(value)


class Watchdog:
    """Ends the process with a JSON error once the deadline passes."""

    def __init__(self, seconds: float, emit) -> None:
        self._timer = threading.Timer(seconds, self._fire, args=(seconds,))
        self._timer.daemon = True
        self._emit = emit

    def _fire(self, seconds: float) -> None:
        self._emit({"error": f"timed out after {seconds:g} s", "error_stage": "timeout"})
        os._exit(124)

    def start(self) -> None:
        self._timer.start()

    def cancel(self) -> None:
        self._timer.cancel()


class Output:
    """Holds the real stdout; the engine writes to stderr while it runs (fd 1 -> fd 2).

    One document per reading: ``begin`` starts one, ``emit`` writes it once (the watchdog
    and the normal path may race; the first wins)."""

    def __init__(self) -> None:
        sys.stdout.flush()
        self._fd = os.dup(1)
        os.dup2(2, 1)
        self._lock = threading.Lock()
        self._done = False
        self.doc: dict = {}

    def begin(self, doc: dict) -> None:
        with self._lock:
            self._done = False
            self.doc = doc

    def emit(self, extra: dict | None = None) -> None:
        with self._lock:
            if self._done:
                return
            self._done = True
            doc = dict(self.doc)
            if extra:
                doc.update(extra)
            data = (json.dumps(doc, sort_keys=False, default=repr) + "\n").encode()
            os.write(self._fd, data)


@contextlib.contextmanager
def captured_stderr():
    """Tee sys.stderr into a buffer (argparse prints its error there before SystemExit)."""
    buf = io.StringIO()
    real = sys.stderr

    class Tee(io.TextIOBase):
        def write(self, s: str) -> int:
            buf.write(s)
            return real.write(s)

        def flush(self) -> None:
            real.flush()

    sys.stderr = Tee()
    try:
        yield buf
    finally:
        sys.stderr = real


def exit_message(exc: SystemExit, text: str) -> str:
    """The message of an argparse exit: the ``prog: error: ...`` line, else the code."""
    lines = [ln for ln in text.splitlines() if ": error: " in ln]
    if lines:
        return one_line(lines[-1].split(": error: ", 1)[1])
    if exc.code in (0, None):
        return "the engine's parser exited with status 0 (help or version requested)"
    return one_line(f"the engine's parser exited with status {exc.code}")


_ENV_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def _is_python(word: str) -> bool:
    return re.fullmatch(r"python(\d+(\.\d+)?)?", os.path.basename(word)) is not None


def split_command(engine: str, argv: list[str]) -> tuple[str, list[str], list[str]]:
    """(form, argv for the engine, leading KEY=VALUE words dropped)."""
    words = list(argv)
    env_words: list[str] = []
    while words and _ENV_WORD.match(words[0]) and len(words) > 1:
        env_words.append(words.pop(0))
    if engine == "vllm":
        if words and os.path.basename(words[0]) == "vllm":
            words = words[1:]
        elif len(words) >= 3 and _is_python(words[0]) and words[1] == "-m":
            module, rest = words[2], words[3:]
            if module in ("vllm.entrypoints.openai.api_server", "vllm.entrypoints.launchers.api_server.entry"):
                return "api_server", rest, env_words
            if module in ("vllm.entrypoints.cli.main", "vllm"):
                words = rest
        if words[:1] == ["serve"]:
            words = words[1:]
        return "vllm serve", words, env_words
    if words and os.path.basename(words[0]) == "sglang":
        words = words[1:]
    elif len(words) >= 3 and _is_python(words[0]) and words[1] == "-m":
        module, rest = words[2], words[3:]
        if module == "sglang.launch_server":
            return "launch_server", rest, env_words
        if module in ("sglang.cli.main", "sglang"):
            words = rest
    if words[:1] == ["serve"]:
        words = words[1:]
    return "sglang serve", words, env_words


def pick(record: object, namespace: object, name: str | None) -> tuple[bool, object]:
    if name is None:
        return False, None
    for src in (record, namespace):
        if src is not None and hasattr(src, name):
            return True, getattr(src, name)
    return False, None


def describe(doc: dict, engine: str, record: object, namespace: object, parser) -> None:
    """Fill the canonical fields, the engine fields, comm flags and non-defaults."""
    col = 0 if engine == "vllm" else 1
    absent = []
    for key, names in CANONICAL.items():
        have, value = pick(record, namespace, names[col])
        doc[key] = jsonable(value) if have else None
        if not have:
            absent.append(key)
    doc["absent_in_engine"] = absent
    fields = {}
    for name in ENGINE_FIELDS[engine]:
        have, value = pick(record, namespace, name)
        if have:
            fields[name] = jsonable(value)
    doc["engine_fields"] = fields
    comm, non_default = {}, {}
    for action in parser._actions if parser is not None else ():
        dest = action.dest
        if dest in ("help", "version", argparse.SUPPRESS):
            continue
        have, value = pick(record, namespace, dest)
        if not have:
            continue
        secret = SECRET.search(dest) is not None
        if COMM_PATTERN.search(dest):
            comm[dest] = "<redacted>" if secret and value else jsonable(value)
        try:
            differs = value != action.default
            differs = bool(differs)
        except Exception:  # noqa: BLE001 - an incomparable value counts as set
            differs = True
        if differs:
            non_default[dest] = "<redacted>" if secret else jsonable(value)
    doc["comm_flags"] = comm
    doc["non_default"] = non_default


# --------------------------------------------------------------------------- shared by both engines


def engine_version(doc: dict, engine: str) -> bool:
    """Put the installed engine's version in ``doc``; False (with the error) when it is absent."""
    import importlib.metadata

    try:
        doc["engine_version"] = importlib.metadata.version(engine)
    except importlib.metadata.PackageNotFoundError:
        doc.update(error=f"{engine} is not installed for this interpreter ({sys.executable})", error_stage="import")
        return False
    return True


def refused(doc: dict, exc: BaseException, stage: str, err: io.StringIO | None = None) -> None:
    """Record why the engine did not take the line: argparse's ``error:`` line for an exit,
    else the exception, and the stage it happened in."""
    if isinstance(exc, SystemExit):
        message = exit_message(exc, err.getvalue() if err is not None else "")
    else:
        message = one_line(f"{type(exc).__name__}: {exc}")
    doc.update(error=message, error_stage=stage)


def new_document(engine: str, form: str, engine_argv: list[str], env_words: list[str]) -> dict:
    """The document of one reading before the engine is asked: the same keys whether or not
    the engine accepts the line."""
    return {
        "reader": "engine",
        "reader_version": READER_VERSION,
        "engine": engine,
        "engine_version": None,
        "python": sys.version.split()[0],
        "form": form,
        "engine_argv": engine_argv,
        "env_words": env_words,
        "error": None,
        "error_stage": None,
        **{key: None for key in CANONICAL},
    }


def read_in_process(engine: str, argv: list[str]) -> dict:
    """Read ``argv`` with the engine already imported in THIS process (the vLLM plugin, inside
    ``vllm serve``): the same document as the child's, with ``"in_process": true``. No
    watchdog (the engine is already imported; parsing does not wait on anything), no fd games;
    ``sys.argv`` is put back as it was."""
    t0 = time.monotonic()
    form, engine_argv, env_words = split_command(engine, argv)
    doc = new_document(engine, form, engine_argv, env_words)
    doc["in_process"] = True
    saved_argv = list(sys.argv)
    try:
        (read_vllm if engine == "vllm" else read_sglang)(doc, form, engine_argv)
    except Exception as exc:  # noqa: BLE001 - the reader's own bug: still a document
        refused(doc, exc, "reader")
    finally:
        sys.argv = saved_argv
    doc["elapsed_s"] = round(time.monotonic() - t0, 3)
    return doc


# --------------------------------------------------------------------------- vLLM


def read_vllm(doc: dict, form: str, argv: list[str]) -> None:
    if not engine_version(doc, "vllm"):
        return
    # What the engine's own code sees in sys.argv (arg_utils.add_cli_args reads it).
    sys.argv = ["vllm", "serve", *argv] if form == "vllm serve" else ["vllm/entrypoints/openai/api_server.py", *argv]
    stage = "import"
    try:
        from vllm.entrypoints.common.cli_args import make_arg_parser, validate_parsed_serve_args
        from vllm.utils.argparse_utils import FlexibleArgumentParser

        stage = "build"
        if form == "vllm serve":
            from vllm.entrypoints.cli.serve import ServeSubcommand

            top = FlexibleArgumentParser(description="vLLM CLI")
            subparsers = top.add_subparsers(required=False, dest="subparser")
            serve_cmd = ServeSubcommand()
            parser = serve_cmd.subparser_init(subparsers)
            parse_argv = ["serve", *argv]
        else:
            top = parser = make_arg_parser(
                FlexibleArgumentParser(description="vLLM OpenAI-Compatible RESTful API server.")
            )
            serve_cmd = None
            parse_argv = list(argv)
    except Exception as exc:  # noqa: BLE001 - an engine that cannot even build its parser here
        refused(doc, exc, stage)
        return
    try:
        from vllm.platforms import current_platform

        doc["vllm_platform"] = type(current_platform).__name__
    except Exception as exc:  # noqa: BLE001 - whatever the engine raises is the answer
        doc["vllm_platform"] = one_line(f"{type(exc).__name__}: {exc}")

    stage = "parse"
    try:
        with captured_stderr() as err:
            args = top.parse_args(parse_argv)
        stage = "validate"
        if serve_cmd is not None:
            serve_cmd.validate(args)  # main() does this before dispatching
        else:
            validate_parsed_serve_args(args)
    except (SystemExit, Exception) as exc:  # noqa: BLE001 - whatever the engine raises is the answer
        refused(doc, exc, stage, err)
        return

    # ServeSubcommand.cmd (vllm/entrypoints/cli/serve.py): the positional wins over --model.
    if form == "vllm serve" and getattr(args, "model_tag", None) is not None:
        args.model = args.model_tag
    record = None
    try:
        from vllm.engine.arg_utils import AsyncEngineArgs

        record = AsyncEngineArgs.from_cli_args(args)
        doc["resolved_by"] = "AsyncEngineArgs.from_cli_args"
        if getattr(record, "model", None) != getattr(args, "model", None):
            # HF_HUB_OFFLINE: a cached model id became its snapshot directory.
            doc["model_local_path"] = record.model
            record = _with_model(record, args.model)
    except Exception as exc:  # noqa: BLE001 - whatever the engine raises is the answer
        doc["resolved_by"] = "parser"
        doc["resolve_error"] = one_line(f"{type(exc).__name__}: {exc}")
        record = None
    describe(doc, "vllm", record, args, parser)


class _with_model:
    """A read-only view of a record with ``model`` as the launch spelled it."""

    def __init__(self, record: object, model: object) -> None:
        self._record, self.model = record, model

    def __getattr__(self, name: str):
        return getattr(self._record, name)


# --------------------------------------------------------------------------- SGLang


def read_sglang(doc: dict, form: str, argv: list[str]) -> None:
    if not engine_version(doc, "sglang"):
        return
    sys.argv = ["sglang", "serve", *argv] if form == "sglang serve" else ["sglang/launch_server.py", *argv]
    stage = "import"
    try:
        from sglang.srt.plugins import load_plugins
        from sglang.srt.server_args import ServerArgs, prepare_server_args

        if form == "sglang serve":
            from sglang.cli import serve as serve_mod
            from sglang.cli.serve_backends import ServeRequest
            from sglang.cli.utils import try_get_model_path
    except Exception as exc:  # noqa: BLE001 - whatever the engine raises is the answer
        refused(doc, exc, stage)
        return

    stage = "dispatch"
    try:
        with captured_stderr() as err:
            if form == "sglang serve":
                backend_name, dispatch_argv = serve_mod._extract_model_type_override(argv)
                dispatch_argv, positional = serve_mod._normalize_positional_model_path(dispatch_argv)
                request = ServeRequest(
                    argv=tuple(dispatch_argv),
                    model_path=try_get_model_path(dispatch_argv),
                    model_path_is_positional=positional,
                )
                registry = serve_mod._create_backend_registry()
                load_plugins()
                if backend_name == "auto":
                    backend = registry.auto_detect(request).name
                else:
                    backend = registry.get(backend_name).name
                doc["sglang_backend"] = backend
                if backend != "llm":
                    doc.update(
                        error=f"sglang serve dispatches this launch to the {backend!r} backend, "
                        "not the language-model server this reader reads",
                        error_stage=stage,
                    )
                    return
                argv = list(dispatch_argv)
            else:
                load_plugins()
            doc["engine_argv"] = list(argv)
            stage = "parse"
            server_args = prepare_server_args(list(argv))
    except (SystemExit, Exception) as exc:  # noqa: BLE001 - whatever the engine raises is the answer
        refused(doc, exc, stage, err)
        return
    doc["resolved_by"] = "prepare_server_args (raw input; resolution needs an accelerator)"
    parser = argparse.ArgumentParser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    describe(doc, "sglang", server_args, None, parser)


# --------------------------------------------------------------------------- main


def read_one(out: Output, engine: str, rest: list[str], timeout: float) -> None:
    """Read one launch line and emit its document (the watchdog ends the process on a hang)."""
    t0 = time.monotonic()
    form, engine_argv, env_words = split_command(engine, rest)
    out.begin(new_document(engine, form, engine_argv, env_words))
    dog = Watchdog(timeout, lambda extra: out.emit({**extra, "elapsed_s": round(time.monotonic() - t0, 3)}))
    dog.start()
    # Backstop that needs no GIL: should the engine hold it past the deadline, faulthandler's
    # C thread dumps the stacks to stderr and ends the process (no JSON then, but no hang).
    faulthandler.dump_traceback_later(timeout + 10, exit=True)
    saved_argv = list(sys.argv)
    try:
        if engine == "vllm":
            read_vllm(out.doc, form, engine_argv)
        else:
            read_sglang(out.doc, form, engine_argv)
    except BaseException as exc:  # noqa: BLE001 - the reader's own bug: still one JSON object
        refused(out.doc, exc, "reader")
    finally:
        sys.argv = saved_argv
    dog.cancel()
    faulthandler.cancel_dump_traceback_later()
    out.doc["elapsed_s"] = round(time.monotonic() - t0, 3)
    out.emit()


def main(argv: list[str] | None = None) -> int:
    """One line after ``--``; or ``--batch``: one JSON array (an argv) per stdin line, one
    JSON document per stdout line, in order, all in one process (the engine imported once).
    ``--timeout`` is per line."""
    words = list(sys.argv[1:] if argv is None else argv)
    head, rest = (words[: words.index("--")], words[words.index("--") + 1 :]) if "--" in words else (words, [])
    opts = argparse.ArgumentParser(prog="engine_reader.py", add_help=True)
    opts.add_argument("engine", choices=["vllm", "sglang"])
    opts.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S)
    opts.add_argument("--batch", action="store_true")
    try:
        with captured_stderr() as err:
            ns = opts.parse_args(head)
            if "--" not in words and not ns.batch:
                opts.error("the launch line goes after '--' (or give --batch and argvs on stdin)")
    except SystemExit as exc:  # the reader's own usage: still one JSON object
        print(
            json.dumps(
                {
                    "reader": "engine",
                    "reader_version": READER_VERSION,
                    "error": exit_message(exc, err.getvalue()),
                    "error_stage": "usage",
                }
            )
        )
        return 2

    for key in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        os.environ[key] = "1"
    os.environ["VLLM_NO_USAGE_STATS"] = "1"
    os.environ["DO_NOT_TRACK"] = "1"
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

    out = Output()
    if ns.batch:
        lines = sys.stdin.read().splitlines()
        for line in lines:
            if not line.strip():
                continue
            try:
                item = json.loads(line)
                if not (isinstance(item, list) and all(isinstance(w, str) for w in item)):
                    raise ValueError("expected a JSON array of strings")
            except ValueError as exc:
                out.begin({"reader": "engine", "reader_version": READER_VERSION})
                out.emit({"error": one_line(f"batch line: {exc}"), "error_stage": "usage"})
                continue
            read_one(out, ns.engine, item, ns.timeout)
    else:
        read_one(out, ns.engine, rest, ns.timeout)
    sys.stderr.flush()
    # Engine imports may leave non-daemon threads behind: do not wait for them.
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
