# mypy: disable-error-code="import-not-found"
"""Read one engine launch line with the ENGINE's own parser; print one JSON object.

Run as a child with the engine's interpreter (never imported by flightcheck, and it never
imports flightcheck: standard library plus the engine itself)::

    <engine python> engine_reader.py --spec SPEC [--timeout S] -- <argv>
    <engine python> engine_reader.py --spec SPEC --batch [--timeout S] < argvs.jsonl

(``--batch``: one JSON array per stdin line, one JSON document per stdout line, in order;
the engine is imported once.)

The script knows no engine. ``SPEC`` is a JSON object the parent builds from the engine's
``ReaderRules.child`` (``_knowledge/<engine>/reader.py``, ``_knowledge.engines.reader_spec``):
the console script and ``python -m`` modules that name the engine, its subcommand, where
its parser, validation and record live (``module:attribute`` paths), which of the two
reading procedures below applies, the record's attribute of each canonical field, the
engine fields reported by name and the environment the engine's import wants here. Where
the paths point, and why, is written beside each engine's spec, with the releases read.

``<argv>`` is either what follows ``<cli> <subcommand>``, or the whole command
(``<cli> <subcommand> ...``, ``python -m <module> ...``; leading ``KEY=VALUE`` words are
dropped; a bare argv starting with the subcommand counts as the subcommand).

The two procedures (``SPEC["procedure"]``), by mechanism:

* ``"parsed"``: the engine builds an argparse parser (a top parser with the subcommand's
  parser in its subparsers, or a plain one wrapped by a factory), parses the whole argv
  (the subcommand first), validates the namespace, copies a positional model into the
  model field, and builds its record from the namespace (a class method); a record that
  cannot be built leaves the namespace's fields (``resolve_error``), and a record whose
  model differs from the namespace's (an offline snapshot) keeps the model as spelled.
* ``"prepared"``: the argv goes through the engine's backend dispatch (a model-type
  override taken out, a positional model normalised, a request built and a backend
  chosen, plugins loaded), and, for the backend the reader reads, through the engine's
  prepare function; the record is that function's raw result, described against a parser
  the record class builds.

The child never touches the network (HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE set before
the engine is imported) and never initialises an accelerator (the SPEC's environment
picks the CPU platform where the engine has one; nothing is allocated).

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
import importlib
import io
import json
import math
import os
import re
import sys
import threading
import time
from typing import Any

READER_VERSION = 1
DEFAULT_TIMEOUT_S = 120.0

#: Destinations whose names mark a collective / multicast / graph setting: all such
#: settings the installed engine has are reported under ``comm_flags``.
COMM_PATTERN = re.compile(
    r"nvls|symm_mem|mscclpp|layernorm_sp|a2a|all2all|dp_attention|attn_dp|allreduce|"
    r"all_reduce|cuda_graph|cudagraph|nccl|expert_parallel|eplb|dbo"
)
#: Never copied into the output.
SECRET = re.compile(r"api_key|token$|hf_token|password|secret|watermark_key")
#: the keys every SPEC has (a usage error names the first one missing)
SPEC_KEYS = (
    "engine",
    "package",
    "cli",
    "subcommand",
    "modules",
    "default_form",
    "procedure",
    "forms",
    "fields",
    "engine_fields",
)


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


def load(path: str) -> Any:
    """The object at ``module:attr.attr`` (a module alone without the colon)."""
    module, _, attrs = path.partition(":")
    obj: Any = importlib.import_module(module)
    for attr in attrs.split(".") if attrs else ():
        obj = getattr(obj, attr)
    return obj


def split_command(spec: dict, argv: list[str]) -> tuple[str, list[str], list[str]]:
    """(form, argv for the engine, leading KEY=VALUE words dropped)."""
    words = list(argv)
    env_words: list[str] = []
    while words and _ENV_WORD.match(words[0]) and len(words) > 1:
        env_words.append(words.pop(0))
    modules: dict = spec["modules"]
    if words and os.path.basename(words[0]) == spec["cli"]:
        words = words[1:]
    elif len(words) >= 3 and _is_python(words[0]) and words[1] == "-m":
        module, rest = words[2], words[3:]
        if module in modules:
            if modules[module] is not None:  # an entry point of its own: no subcommand
                return modules[module], rest, env_words
            words = rest
    if words[:1] == [spec["subcommand"]]:
        words = words[1:]
    return spec["default_form"], words, env_words


def pick(record: object, namespace: object, name: str | None) -> tuple[bool, object]:
    if name is None:
        return False, None
    for src in (record, namespace):
        if src is not None and hasattr(src, name):
            return True, getattr(src, name)
    return False, None


def describe(doc: dict, spec: dict, record: object, namespace: object, parser) -> None:
    """Fill the canonical fields, the engine fields, comm flags and non-defaults."""
    absent = []
    for key, name in spec["fields"].items():
        have, value = pick(record, namespace, name)
        doc[key] = jsonable(value) if have else None
        if not have:
            absent.append(key)
    doc["absent_in_engine"] = absent
    fields = {}
    for name in spec["engine_fields"]:
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


# --------------------------------------------------------------------------- shared by both procedures


def engine_version(doc: dict, spec: dict) -> bool:
    """Put the installed engine's version in ``doc``; False (with the error) when it is absent."""
    import importlib.metadata

    package = spec["package"]
    try:
        doc["engine_version"] = importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        doc.update(error=f"{package} is not installed for this interpreter ({sys.executable})", error_stage="import")
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


def new_document(spec: dict, form: str, engine_argv: list[str], env_words: list[str]) -> dict:
    """The document of one reading before the engine is asked: the same keys whether or not
    the engine accepts the line."""
    return {
        "reader": "engine",
        "reader_version": READER_VERSION,
        "engine": spec["engine"],
        "engine_version": None,
        "python": sys.version.split()[0],
        "form": form,
        "engine_argv": engine_argv,
        "env_words": env_words,
        "error": None,
        "error_stage": None,
        **{key: None for key in spec["fields"]},
    }


def read(doc: dict, spec: dict, form: str, argv: list[str]) -> None:
    """Read ``argv`` by the SPEC's procedure, the installed engine's version first."""
    if not engine_version(doc, spec):
        return
    how = spec["forms"][form]
    # What the engine's own code sees in sys.argv (its option builders may read it).
    sys.argv = [*how["argv0"], *argv]
    (read_parsed if spec["procedure"] == "parsed" else read_prepared)(doc, spec, form, how, argv)


def read_in_process(spec: dict, argv: list[str]) -> dict:
    """Read ``argv`` with the engine already imported in THIS process (flightcheck's plugin,
    inside the engine's server): the same document as the child's, with ``"in_process": true``. No
    watchdog (the engine is already imported; parsing does not wait on anything), no fd games;
    ``sys.argv`` is put back as it was."""
    t0 = time.monotonic()
    form, engine_argv, env_words = split_command(spec, argv)
    doc = new_document(spec, form, engine_argv, env_words)
    doc["in_process"] = True
    saved_argv = list(sys.argv)
    try:
        read(doc, spec, form, engine_argv)
    except Exception as exc:  # noqa: BLE001 - the reader's own bug: still a document
        refused(doc, exc, "reader")
    finally:
        sys.argv = saved_argv
    doc["elapsed_s"] = round(time.monotonic() - t0, 3)
    return doc


# --------------------------------------------------------------------------- "parsed"


def read_parsed(doc: dict, spec: dict, form: str, how: dict, argv: list[str]) -> None:
    """A parser built, the argv parsed and validated, the record made from the namespace."""
    stage = "import"
    try:
        for path in how["imports"]:
            load(path)
        parser_class = load(how["parser"])
        stage = "build"
        sub = how.get("subcommand")
        if sub is not None:
            command_class = load(sub["class"])
            top = parser_class(description=how["description"])
            subparsers = top.add_subparsers(required=False, dest=sub["dest"])
            command = command_class()
            parser = command.subparser_init(subparsers)
            parse_argv = [spec["subcommand"], *argv]
            validate = command.validate
        else:
            top = parser = load(how["wrap"])(parser_class(description=how["description"]))
            parse_argv = list(argv)
            validate = load(how["validate"])
    except Exception as exc:  # noqa: BLE001 - an engine that cannot even build its parser here
        refused(doc, exc, stage)
        return
    platform = how.get("platform")
    if platform is not None:
        path, key = platform
        try:
            doc[key] = type(load(path)).__name__
        except Exception as exc:  # noqa: BLE001 - whatever the engine raises is the answer
            doc[key] = one_line(f"{type(exc).__name__}: {exc}")

    stage = "parse"
    try:
        with captured_stderr() as err:
            args = top.parse_args(parse_argv)
        stage = "validate"
        validate(args)  # what the engine's main does before dispatching
    except (SystemExit, Exception) as exc:  # noqa: BLE001 - whatever the engine raises is the answer
        refused(doc, exc, stage, err)
        return

    model = spec["fields"]["model"]
    positional = how.get("positional_model")
    if positional is not None and getattr(args, positional, None) is not None:
        setattr(args, model, getattr(args, positional))  # the positional wins over the flag
    record = None
    try:
        record_class, method = how["record"]
        record = getattr(load(record_class), method)(args)
        doc["resolved_by"] = f"{record_class.rpartition(':')[2]}.{method}"
        if getattr(record, model, None) != getattr(args, model, None):
            # HF_HUB_OFFLINE: a cached model id became its snapshot directory.
            doc["model_local_path"] = getattr(record, model)
            record = _with_model(record, model, getattr(args, model))
    except Exception as exc:  # noqa: BLE001 - whatever the engine raises is the answer
        doc["resolved_by"] = "parser"
        doc["resolve_error"] = one_line(f"{type(exc).__name__}: {exc}")
        record = None
    describe(doc, spec, record, args, parser)


class _with_model:
    """A read-only view of a record with its model field as the launch spelled it."""

    def __init__(self, record: object, name: str, model: object) -> None:
        self._record, self._name, self._model = record, name, model

    def __getattr__(self, name: str):
        if name == self._name:
            return self._model
        return getattr(self._record, name)


# --------------------------------------------------------------------------- "prepared"


def read_prepared(doc: dict, spec: dict, form: str, how: dict, argv: list[str]) -> None:
    """The argv dispatched to a backend, then through the engine's prepare function."""
    stage = "import"
    try:
        loaded = {key: load(path) for key, path in how["imports"]}
    except Exception as exc:  # noqa: BLE001 - whatever the engine raises is the answer
        refused(doc, exc, stage)
        return

    stage = "dispatch"
    dispatch = how.get("dispatch")
    try:
        with captured_stderr() as err:
            if dispatch is not None:
                module = loaded["dispatch"]
                backend_name, dispatch_argv = getattr(module, dispatch["model_type"])(argv)
                dispatch_argv, positional = getattr(module, dispatch["positional"])(dispatch_argv)
                request = loaded["request"](
                    argv=tuple(dispatch_argv),
                    model_path=loaded["model_path"](dispatch_argv),
                    model_path_is_positional=positional,
                )
                registry = getattr(module, dispatch["registry"])()
                loaded["plugins"]()
                if backend_name == dispatch["auto"]:
                    backend = registry.auto_detect(request).name
                else:
                    backend = registry.get(backend_name).name
                doc[dispatch["key"]] = backend
                if backend != dispatch["serves"]:
                    doc.update(
                        error=f"{form} dispatches this launch to the {backend!r} backend, "
                        "not the language-model server this reader reads",
                        error_stage=stage,
                    )
                    return
                argv = list(dispatch_argv)
            else:
                loaded["plugins"]()
            doc["engine_argv"] = list(argv)
            stage = "parse"
            record = loaded["prepare"](list(argv))
    except (SystemExit, Exception) as exc:  # noqa: BLE001 - whatever the engine raises is the answer
        refused(doc, exc, stage, err)
        return
    doc["resolved_by"] = how["resolved_by"]
    options = how["options"]
    parser = argparse.ArgumentParser(prog=options["prog"])
    getattr(loaded["record"], options["method"])(parser)
    describe(doc, spec, record, None, parser)


# --------------------------------------------------------------------------- main


def read_one(out: Output, spec: dict, rest: list[str], timeout: float) -> None:
    """Read one launch line and emit its document (the watchdog ends the process on a hang)."""
    t0 = time.monotonic()
    form, engine_argv, env_words = split_command(spec, rest)
    out.begin(new_document(spec, form, engine_argv, env_words))
    dog = Watchdog(timeout, lambda extra: out.emit({**extra, "elapsed_s": round(time.monotonic() - t0, 3)}))
    dog.start()
    # Backstop that needs no GIL: should the engine hold it past the deadline, faulthandler's
    # C thread dumps the stacks to stderr and ends the process (no JSON then, but no hang).
    faulthandler.dump_traceback_later(timeout + 10, exit=True)
    saved_argv = list(sys.argv)
    try:
        read(out.doc, spec, form, engine_argv)
    except BaseException as exc:  # noqa: BLE001 - the reader's own bug: still one JSON object
        refused(out.doc, exc, "reader")
    finally:
        sys.argv = saved_argv
    dog.cancel()
    faulthandler.cancel_dump_traceback_later()
    out.doc["elapsed_s"] = round(time.monotonic() - t0, 3)
    out.emit()


def _spec(text: str) -> dict:
    """The SPEC of ``--spec``; argparse's error (a usage error) when it is not one."""
    try:
        spec = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from None
    if not isinstance(spec, dict):
        raise argparse.ArgumentTypeError("not a JSON object")
    missing = [k for k in SPEC_KEYS if k not in spec]
    if missing:
        raise argparse.ArgumentTypeError(f"no {missing[0]!r}")
    if spec["procedure"] not in ("parsed", "prepared"):
        raise argparse.ArgumentTypeError(f"unknown procedure {spec['procedure']!r}")
    return spec


def main(argv: list[str] | None = None) -> int:
    """One line after ``--``; or ``--batch``: one JSON array (an argv) per stdin line, one
    JSON document per stdout line, in order, all in one process (the engine imported once).
    ``--timeout`` is per line."""
    words = list(sys.argv[1:] if argv is None else argv)
    head, rest = (words[: words.index("--")], words[words.index("--") + 1 :]) if "--" in words else (words, [])
    opts = argparse.ArgumentParser(prog="engine_reader.py", add_help=True)
    opts.add_argument("--spec", type=_spec, required=True, help="the engine's reader spec (JSON)")
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
    spec = ns.spec

    for key in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        os.environ[key] = "1"
    for key, value in spec.get("env", {}).items():
        os.environ[key] = value
    os.environ["DO_NOT_TRACK"] = "1"
    for key, value in spec.get("env_defaults", {}).items():
        os.environ.setdefault(key, value)
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
            read_one(out, spec, item, ns.timeout)
    else:
        read_one(out, spec, rest, ns.timeout)
    sys.stderr.flush()
    # Engine imports may leave non-daemon threads behind: do not wait for them.
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
