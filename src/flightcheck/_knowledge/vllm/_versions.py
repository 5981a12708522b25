"""Release strings as comparable tuples (``"0.10.1.1"`` -> ``(0, 10, 1, 1)``), for every
release gate of the vLLM knowledge.
"""

from __future__ import annotations

import re

from flightcheck._vocabulary.version import release


def _release(text: str) -> tuple[int, ...]:
    """A release constant as a tuple (``_vocabulary.version.release``, the one reader)."""
    r = release(text)
    assert r is not None, text  # the knowledge's constants are releases
    return r


#: The newest vLLM release whose wheel the release-bound rules were read in; a newer one
#: gets the newest rules and a note that says so.
NEWEST_READ = "0.33.0"


def beyond_read(version: str | None, newest: str = NEWEST_READ, engine: str = "vLLM") -> str | None:
    """``"rules of vLLM 0.33.0 applied to 0.40.0"`` when ``version`` is newer than the newest
    release read (a dev build or a local tag counts by its release), else None."""
    text = str(version or "").split("+", 1)[0]
    m = re.match(r"\d+(?:\.\d+)*", text)
    if m is None or _release(m.group(0)) <= _release(newest):
        return None
    return f"rules of {engine} {newest} applied to {text} (newer than the newest release read)"
