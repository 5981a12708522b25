"""Bundled example nodes, so a newcomer without a GPU sees what flightcheck does.

Each example is a complete facts snapshot (nothing is collected live) plus the launch
it is meant to be checked with (Intent fields); flags given on the command line win.
"""

from __future__ import annotations

from typing import Any

from flightcheck._vocabulary.errors import UsageError

_VLLM_TP8: dict[str, Any] = {"engine": "vllm", "tensor_parallel_size": 8}

#: name -> (snapshot file, default intent fields, one line on what it shows)
EXAMPLES: dict[str, tuple[str, dict[str, Any], str]] = {
    "b300": ("b300.json", _VLLM_TP8, "healthy 8x HGX B300 node with the CUDA 13.1 toolkit"),
    "b300-no-toolkit": (
        "b300-no-toolkit.json",
        _VLLM_TP8,
        "driver + fabric manager only: FlashInfer would JIT after the load and die",
    ),
    "b300-multicast-401": (
        "b300-multicast-401.json",
        _VLLM_TP8,
        "after a warm reboot the multicast bind fails with CUDA error 401: ready with the fallback plan",
    ),
    "h100-hgx": (
        "h100-hgx.json",
        _VLLM_TP8,
        "8x HGX H100 (R570, CUDA 12.8), passive run: the multicast probe has not run (FC309)",
    ),
}


def load_example(name: str | None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """([snapshot dict], default intent fields) for a bundled example; ([], {}) for None
    (no ``--example`` given).

    Raises:
        UsageError: no example of that name.
    """
    if name is None:
        return [], {}
    if name not in EXAMPLES:
        raise UsageError(f"--example {name!r}: expected one of {', '.join(sorted(EXAMPLES))}")
    import json
    from importlib import resources  # ~10 ms to import: only when an example is asked for

    filename, fields, _ = EXAMPLES[name]
    text = resources.files(__name__).joinpath(filename).read_text(encoding="utf-8")
    return [json.loads(text)], dict(fields)
