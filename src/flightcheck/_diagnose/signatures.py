"""The log lines the checks declare (``@check(..., logs=...)``), compiled once.

Each check owns its signatures (see :class:`flightcheck._checks.framework.Log`); this
module only gathers them from the registry and compiles them, on the first diagnosis of
a process. A line is searched once with the union of every pattern; only a line the union
matches is tried against each signature, so a log of ordinary lines costs one search per
candidate line whatever the size of the catalogue.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cache

import msgspec


class Signature(msgspec.Struct, frozen=True):
    """One compiled log signature of one check."""

    code: str
    name: str
    severity: str
    pattern: str
    regex: re.Pattern[str]
    phases: tuple[str, ...]
    note: str
    frames: re.Pattern[str] | None


class Catalogue(msgspec.Struct, frozen=True):
    """Every signature, and their union."""

    signatures: tuple[Signature, ...]
    union: re.Pattern[str]


@cache
def catalogue() -> Catalogue:
    """The signatures of every registered check (node and cluster scope)."""
    from flightcheck._checks.framework import iter_checks

    sigs: list[Signature] = []
    for scope in ("node", "cluster"):
        for chk in iter_checks(scope):
            for log in chk.logs:
                sigs.append(
                    Signature(
                        chk.code,
                        chk.name,
                        chk.severity.value,
                        log.pattern,
                        re.compile(log.pattern),
                        log.phases,
                        log.note,
                        re.compile(log.frames) if log.frames else None,
                    )
                )
    union = re.compile("|".join(f"(?:{s.pattern})" for s in sigs) or r"(?!)")
    return Catalogue(tuple(sigs), union)


def match(msg: str, phase: str | None, frames: Iterable[str] = ()) -> tuple[Signature, str] | None:
    """The signature ``msg`` shows, with the text it matched; None if none.

    Where several match, the longest match is the most specific (``no kernel image ...
    flashinfer`` over ``no kernel image``). A signature limited to phases counts only when
    the line's phase is known and one of them; one limited to frames only when a frame of
    the traceback the line ends (``frames``, outermost first) matches.
    """
    cat = catalogue()
    if cat.union.search(msg) is None:
        return None
    best: tuple[Signature, str] | None = None
    for sig in cat.signatures:
        if sig.phases and phase not in sig.phases:
            continue
        if sig.frames is not None and not any(sig.frames.search(f) for f in frames):
            continue
        m = sig.regex.search(msg)
        if m is not None and (best is None or len(m.group(0)) > len(best[1])):
            best = (sig, m.group(0))
    return best
