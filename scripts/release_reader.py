# mypy: disable-error-code="import-not-found"
"""Read launch lines with an OLDER engine release's own parser (one of the release venvs
``scripts/release_venvs.sh`` builds); one JSON document per line.

    <release venv python> scripts/release_reader.py vllm|sglang < argvs.jsonl

stdin: one JSON array (the shell words of one launch, from ``vllm`` / ``python -m ...`` on)
per line; stdout: one JSON object per line, in order: ``engine_version``, ``form``,
``error`` / ``error_stage`` (None when the release takes the line) and the fields of
:data:`FIELDS` as the release read them. Standard library plus the engine; never imports
flightcheck. (The conformance release's reader is ``src/flightcheck/_collect/engine_reader.py``;
the old releases' entry points differ, so they are read here, each as its own code does.)

How each release's launchers parse (read in the wheels):

* vLLM 0.6.0 ``vllm serve`` (``vllm/scripts.py:main``): a ``FlexibleArgumentParser`` with
  required subparsers; ``serve`` has a required positional ``model_tag`` and ``--config``,
  then ``make_arg_parser`` (``vllm/entrypoints/openai/cli_args.py``); ``serve()`` raises
  when ``--model`` differs from ``EngineArgs.model`` and then sets ``model = model_tag``.
  ``python -m vllm.entrypoints.openai.api_server`` (its ``__main__``): a plain
  ``FlexibleArgumentParser`` + ``make_arg_parser``, nothing else before ``run_server``.
* vLLM 0.10.2 ``vllm serve`` (``vllm/entrypoints/cli/main.py:main``): subparsers with
  ``dest="subparser"``, ``ServeSubcommand.subparser_init`` (``vllm/entrypoints/cli/serve.py``),
  then ``ServeSubcommand.validate`` (``validate_parsed_serve_args``) and, in ``cmd``,
  ``model = model_tag`` when the positional is given. ``api_server``'s ``__main__``: parser,
  ``make_arg_parser``, ``validate_parsed_serve_args``.
* SGLang 0.4.0 ``python -m sglang.launch_server`` (``sglang/launch_server.py``):
  ``prepare_server_args(argv)`` (``sglang/srt/server_args.py``): ``argparse.ArgumentParser()``
  + ``ServerArgs.add_cli_args``, ``parse_args``, ``ServerArgs.from_cli_args``. The release
  has no ``sglang serve``.

What counts as the release refusing the line: argparse's exit (stage ``parse``) and the
launcher's own checks before the engine starts (stage ``validate``). The record's
``__post_init__`` (``from_cli_args``) asks the machine (GPU memory, the model's files):
its failure is ``resolve_error``, not a refusal, and the fields then come from the parsed
namespace (they are the same: ``from_cli_args`` copies the namespace's attributes).
"""

from __future__ import annotations

import argparse
import contextlib
import enum
import importlib.metadata
import io
import json
import os
import re
import sys

#: canonical field -> (vLLM attribute, SGLang attribute); None: no such setting
FIELDS = {
    "model": ("model", "model_path"),
    "served_model_name": ("served_model_name", "served_model_name"),
    "tensor_parallel_size": ("tensor_parallel_size", "tp_size"),
    "pipeline_parallel_size": ("pipeline_parallel_size", "pp_size"),
    "data_parallel_size": ("data_parallel_size", "dp_size"),
    "data_parallel_size_local": ("data_parallel_size_local", None),
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
    "cpu_offload_gb": ("cpu_offload_gb", None),
    "trust_remote_code": ("trust_remote_code", "trust_remote_code"),
    "enable_dp_attention": (None, "enable_dp_attention"),
}


def jsonable(value: object) -> object:
    if isinstance(value, enum.Enum):
        return jsonable(value.value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    return str(value)


@contextlib.contextmanager
def captured_stderr():
    saved, buf = sys.stderr, io.StringIO()
    sys.stderr = buf
    try:
        yield buf
    finally:
        sys.stderr = saved


def message(exc: BaseException, err: io.StringIO) -> str:
    if isinstance(exc, SystemExit):
        lines = [ln for ln in err.getvalue().splitlines() if ": error: " in ln]
        if lines:
            return lines[-1].split(": error: ", 1)[1].strip()
        return f"the parser exited with status {exc.code}"
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:600]


_MODULES = {
    "vllm": {"vllm.entrypoints.openai.api_server": "api_server", "vllm.entrypoints.cli.main": "vllm serve"},
    "sglang": {"sglang.launch_server": "launch_server", "sglang.cli.main": "sglang serve"},
}


def split(engine: str, words: list[str]) -> tuple[str, list[str]]:
    """(form, the words after the launcher); form "unknown" when no launcher this reads is
    in the line (the shell's own words before it, ``nohup``, ``env K=V``, are skipped)."""
    for i, word in enumerate(words):
        nxt = words[i + 1 : i + 2]
        if os.path.basename(word) == engine and nxt == ["serve"]:
            return f"{engine} serve", words[i + 2 :]
        if re.fullmatch(r"python(\d+(\.\d+)?)?", os.path.basename(word)) and nxt == ["-m"]:
            form = _MODULES[engine].get(words[i + 2] if i + 2 < len(words) else "")
            if form == f"{engine} serve":
                return (form, words[i + 4 :]) if words[i + 3 : i + 4] == ["serve"] else ("unknown", words)
            if form is not None:
                return form, words[i + 3 :]
    return "unknown", words


def _vllm_parsers(form: str):
    """(top parser, serve parser, argv prefix, post-parse check) of the installed vLLM."""
    import importlib.util

    ServeSubcommand = None
    if importlib.util.find_spec("vllm.entrypoints.cli") is not None:  # 0.10.x (0.6.x: vllm/scripts.py)
        from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.entrypoints.openai.cli_args import make_arg_parser
    from vllm.utils import FlexibleArgumentParser

    if form == "api_server":
        parser = make_arg_parser(FlexibleArgumentParser(description="vLLM OpenAI-Compatible RESTful API server."))
        check = None
        with contextlib.suppress(ImportError):
            from vllm.entrypoints.openai.cli_args import validate_parsed_serve_args as check
        return parser, parser, [], check
    top = FlexibleArgumentParser(description="vLLM CLI")
    if ServeSubcommand is not None:
        subparsers = top.add_subparsers(required=False, dest="subparser")
        cmd = ServeSubcommand()
        serve = cmd.subparser_init(subparsers)

        def check(args):
            cmd.validate(args)
            if getattr(args, "model_tag", None) is not None:  # ServeSubcommand.cmd
                args.model = args.model_tag

        return top, serve, ["serve"], check
    # 0.6.x: vllm/scripts.py main() and serve(), as written there
    from vllm.engine.arg_utils import EngineArgs

    subparsers = top.add_subparsers(required=True)
    serve = subparsers.add_parser("serve", usage="vllm serve <model_tag> [options]")
    serve.add_argument("model_tag", type=str)
    serve.add_argument("--config", type=str, default="", required=False)
    serve = make_arg_parser(serve)

    def check(args):
        if args.model != EngineArgs.model:
            raise ValueError(
                "With `vllm serve`, you should provide the model as a positional argument "
                "instead of via the `--model` option."
            )
        args.model = args.model_tag

    return top, serve, ["serve"], check


def read_vllm(doc: dict, words: list[str]) -> tuple[object, object]:
    form, argv = split("vllm", words)
    doc["form"] = form
    if form == "unknown":
        doc.update(error="no vLLM launcher this reads", error_stage="form")
        return None, None
    top, _serve, prefix, check = _vllm_parsers(form)
    sys.argv = ["vllm", *prefix, *argv]
    stage = "parse"
    with captured_stderr() as err:
        try:
            args = top.parse_args([*prefix, *argv])
            stage = "validate"
            if check is not None:
                check(args)
        except (SystemExit, Exception) as exc:  # noqa: BLE001 - whatever the release raises is the answer
            doc.update(error=message(exc, err), error_stage=stage)
            return None, None
    from vllm.engine.arg_utils import AsyncEngineArgs

    try:
        with captured_stderr():
            record = AsyncEngineArgs.from_cli_args(args)
    except Exception as exc:  # noqa: BLE001 - the machine's answer, not the parser's
        doc["resolve_error"] = message(exc, io.StringIO())
        record = None
    return record, args


def read_sglang(doc: dict, words: list[str]) -> tuple[object, object]:
    form, argv = split("sglang", words)
    doc["form"] = form
    if form != "launch_server":
        doc.update(error=f"sglang {doc['engine_version']} has no {form!r} launcher", error_stage="parse")
        return None, None
    from sglang.srt.server_args import ServerArgs

    # prepare_server_args, step by step: its parse is the refusal, __post_init__ asks the GPU
    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    sys.argv = ["sglang/launch_server.py", *argv]
    with captured_stderr() as err:
        try:
            args = parser.parse_args(argv)
        except (SystemExit, Exception) as exc:  # noqa: BLE001
            doc.update(error=message(exc, err), error_stage="parse")
            return None, None
    try:  # ServerArgs.from_cli_args first copies tensor_parallel_size -> tp_size, data_parallel_size -> dp_size
        with captured_stderr():
            ServerArgs.from_cli_args(args)
    except Exception as exc:  # noqa: BLE001 - __post_init__ asks the GPU: the machine's answer
        doc["resolve_error"] = message(exc, io.StringIO())
    return None, args  # the raw input (the record's __post_init__ fills GPU-sized defaults)


def main() -> int:
    engine = sys.argv[1]
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    os.environ["HF_HUB_OFFLINE"] = os.environ["TRANSFORMERS_OFFLINE"] = "1"
    col = 0 if engine == "vllm" else 1
    out = sys.stdout
    for line in sys.stdin:
        if not line.strip():
            continue
        words = json.loads(line)
        doc: dict = {"engine": engine, "engine_version": importlib.metadata.version(engine), "words": words}
        doc.update(error=None, error_stage=None)
        saved = list(sys.argv)
        try:
            with contextlib.redirect_stdout(sys.stderr):
                record, ns = (read_vllm if engine == "vllm" else read_sglang)(doc, words)
        except Exception as exc:  # noqa: BLE001 - the driver's own failure is still a document
            doc.update(error=message(exc, io.StringIO()), error_stage="reader")
            record = ns = None
        finally:
            sys.argv = saved
        for key, names in FIELDS.items():
            name = names[col]
            value = None
            for src in (record, ns):
                if name is not None and src is not None and hasattr(src, name):
                    value = getattr(src, name)
                    break
            doc[key] = jsonable(value)
        if ns is not None and record is not None and getattr(ns, "model", None) is not None:
            doc["model"] = jsonable(ns.model)  # as spelled (HF_HUB_OFFLINE may swap in a path)
        out.write(json.dumps(doc) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
