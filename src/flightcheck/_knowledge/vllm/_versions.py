"""Release strings as comparable tuples (``"0.10.1.1"`` -> ``(0, 10, 1, 1)``), for every
release gate of the vLLM knowledge.
"""

from __future__ import annotations


def _release(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split("."))
