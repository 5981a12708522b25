"""What the subcommands share: the process start time and the intent built from the flags."""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from flightcheck._vocabulary.intent import Intent

T0 = time.perf_counter()


def intent_from_args(args: argparse.Namespace, base: Any = None) -> Any:
    """Build an Intent from flags; flags given override ``base`` (from an engine command).

    Every intent flag is stored under its Intent field's name, so the fields are the table.
    """
    import dataclasses

    from flightcheck._vocabulary.intent import Intent, parse_len

    fields: dict[str, Any] = dict(base.__dict__) if base is not None else {}
    for f in dataclasses.fields(Intent):
        value = getattr(args, f.name, None)
        if value is not None:
            fields[f.name] = parse_len(value) if f.name == "max_model_len" else value
    _check_flags(args, fields)
    return Intent(**fields)


def _check_flags(args: argparse.Namespace, fields: dict[str, Any]) -> None:
    """What argparse cannot say: an empty --model is not "no model", a --quantization the
    engine does not know is refused (the engine would refuse it too), and a relative
    --python is the caller's (the engine's children run elsewhere, e.g. in ``/``).

    Raises:
        UsageError: a bad value.
    """
    import os
    import shutil

    from flightcheck._knowledge import engines
    from flightcheck._vocabulary.errors import UsageError

    if getattr(args, "model", None) is not None and not args.model.strip():
        raise UsageError("--model: empty (give a model directory or a Hugging Face repo id)")
    quant = getattr(args, "quantization", None)
    if quant is not None:
        engine = fields.get("engine") or "vllm"
        known = engines.quantizations(engine)
        if known and quant not in known:
            close = sorted(k for k in known if k.lower().startswith(quant.lower()[:3]))[:4]
            hint = f" (did you mean {', '.join(close)}?)" if close else f" (one of {len(known)} {engine} knows)"
            flag = engines.module(engine).FLAG["quantization"]
            raise UsageError(f"{flag} {quant!r}: not a quantization {engine} knows{hint}")
    python = getattr(args, "python", None)
    if python is not None:
        if not python.strip():
            raise UsageError("--python: empty")
        if os.sep in python:
            fields["python"] = os.path.abspath(python)
        else:  # a bare name: the one PATH finds here, as the shell would
            found = shutil.which(python)
            if found:
                fields["python"] = os.path.abspath(found)


def example_without_deep(args: argparse.Namespace, intent: Intent) -> Intent:
    """``--example NAME --deep``: an example has no live host to probe (its snapshot holds
    the probes' recorded results). Said in one line; the verdict is the example's, not
    "unknown" for probes that cannot run."""
    import sys

    if getattr(args, "example", None) and intent.deep:
        sys.stderr.write(
            f"flightcheck: --deep ignored: the example {args.example} has no live host to probe"
            " (its recorded probe results are used)\n"
        )
        intent.deep = args.deep = False  # args too: a settled reading is built from them again
    return intent
