"""The package version (kept in one place; pyproject.toml carries the same string), and the
one way flightcheck compares the releases of what it checks (engines, FlashInfer, torch).

Versions are read with ``packaging`` (PEP 440: ``0.33.0rc1``, ``0.34.0.dev12+g1a2b``,
``0.7.2.post1``, ``2.14.0+cu130``). A release gate compares the *release* part only: a dev
or rc build of X has X's features (the engines branch their release from the code the dev
builds run: vLLM's ``0.34.0rc1`` is 0.34.0's code), and a post release is its base release
(``0.7.2.post1`` is 0.7.2 re-tagged, as FlashInfer publishes them). An unreadable version
is None, and a gate on it is unknown (None), never true or false.
"""

from __future__ import annotations

from packaging.version import InvalidVersion, Version

__version__ = "0.1.0"

Release = tuple[int, ...]


def parse(text: str | None) -> Version | None:
    """A parsed version (local tags such as ``+cu130`` kept), or None when unparsable."""
    if not text:
        return None
    try:
        return Version(text)
    except InvalidVersion:
        return None


def release(text: str | None) -> Release | None:
    """The release tuple of a version string (``"0.34.0rc1"`` -> ``(0, 34, 0)``), or None."""
    v = parse(text)
    return tuple(v.release) if v is not None else None


def at_least(text: str | None, since: str) -> bool | None:
    """Whether release ``text`` has what came in ``since`` (None: the version is unknown).
    ``(0, 33)`` and ``(0, 33, 0)`` are the same release."""
    v, floor = release(text), release(since)
    if v is None:
        return None
    if floor is None:
        raise ValueError(f"not a release: {since!r}")
    return _padded(v, len(floor)) >= _padded(floor, len(v))


def in_span(text: str | None, since: str, until: str | None = None) -> bool | None:
    """Whether release ``text`` is in ``[since, until)`` (None: unknown)."""
    first = at_least(text, since)
    if first is None or until is None:
        return first
    return first and not at_least(text, until)


def _padded(r: Release, n: int) -> Release:
    return r + (0,) * max(0, n - len(r))
