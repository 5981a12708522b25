"""Release strings as comparable tuples (``"0.10.1.1"`` -> ``(0, 10, 1, 1)``), for every
release gate of the vLLM knowledge.
"""

from __future__ import annotations


def _release(text: str) -> tuple[int, ...]:
    """A release constant of this package as a tuple (``_vocabulary.version.release``)."""
    from flightcheck._vocabulary.version import release

    r = release(text)
    assert r is not None, text  # the constants above are releases
    return r
