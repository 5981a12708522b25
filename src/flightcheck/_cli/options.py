"""What the subcommands share: the process start time and the intent built from the flags."""

from __future__ import annotations

import argparse
import time
from typing import Any

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
    return Intent(**fields)
