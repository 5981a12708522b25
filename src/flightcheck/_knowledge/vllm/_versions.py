"""Release strings as comparable tuples (``"0.10.1.1"`` -> ``(0, 10, 1, 1)``), for every
release gate of the vLLM knowledge.
"""

from __future__ import annotations

from flightcheck._vocabulary.version import release


def _release(text: str) -> tuple[int, ...]:
    """A release constant as a tuple (``_vocabulary.version.release``, the one reader)."""
    r = release(text)
    assert r is not None, text  # the knowledge's constants are releases
    return r
