"""Bundled example nodes, so a newcomer without a GPU sees what flightcheck does.

Each example is a complete facts snapshot (nothing is collected live) plus the launch
flags it is meant to be checked with; flags given on the command line win.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from .._errors import UsageError

#: name -> (snapshot file, default intent flags, one line on what it shows)
EXAMPLES: dict[str, tuple[str, list[str], str]] = {
    "b300": ("b300.json", ["--engine", "vllm", "-tp", "8"], "healthy 8x HGX B300 node with the CUDA 13.1 toolkit"),
    "b300-no-toolkit": (
        "b300-no-toolkit.json",
        ["--engine", "vllm", "-tp", "8"],
        "driver + fabric manager only: FlashInfer would JIT after the load and die",
    ),
    "b300-multicast-401": (
        "b300-multicast-401.json",
        ["--engine", "vllm", "-tp", "8"],
        "after a warm reboot the multicast bind fails with CUDA error 401: ready with the fallback plan",
    ),
    "h100-hgx": (
        "h100-hgx.json",
        ["--engine", "vllm", "-tp", "8"],
        "8x HGX H100 (R570, CUDA 12.8), passive run: the multicast probe has not run (FC309)",
    ),
}


def load_example(name: str) -> tuple[list[dict[str, Any]], list[str]]:
    """([snapshot dict], default flags) for a bundled example.

    Raises:
        UsageError: no example of that name.
    """
    if name not in EXAMPLES:
        raise UsageError(f"--example {name!r}: expected one of {', '.join(sorted(EXAMPLES))}")
    filename, flags, _ = EXAMPLES[name]
    text = resources.files(__name__).joinpath(filename).read_text(encoding="utf-8")
    return [json.loads(text)], list(flags)
