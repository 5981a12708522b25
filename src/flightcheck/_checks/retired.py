"""Codes and names that once meant something else: the ledger that keeps codes from being reused.

A check code is a contract (reports, dashboards, ``flightcheck explain``, the engine-log
lines ``diagnose`` maps to it): once a code has meant one check it never means another.
When a check is removed its code and name are retired here and never declared again; when
a check had to take another code (two branches gave out the same one), the old pairing is
recorded with the code that carries the name now, so the name never moves again.
:func:`flightcheck._checks.framework.check` refuses a declaration that breaks either rule,
and tests/checks/test_retired.py holds the registry to the ledger of every code given out.
"""

from __future__ import annotations

from typing import NamedTuple


class Former(NamedTuple):
    """A pairing of code and name that no longer stands."""

    code: str
    name: str
    #: the code that carries ``name`` now (renumbered), or None: the check is gone and both
    #: its code and its name are retired
    now: str | None
    #: the date and the commit that changed it
    when: str
    why: str


FORMER: tuple[Former, ...] = (
    Former(
        "FC703",
        "engine-config-unreadable",
        "FC711",
        "2026-12-01, commit ee0b03d",
        "FC703 was given out twice within ten minutes: on the security branch to the --config "
        "reader's check (commit 338cf55) and on main to engine-refuses-command (commit 5ecfdf6). "
        "When main was merged into that branch (15d2bcb) main's kept FC703 and the --config check "
        "became FC711.",
    ),
)


def retired_code(code: str) -> Former | None:
    """The entry of ``code`` if it is retired (its check is gone), else None."""
    return next((f for f in FORMER if f.code == code and f.now is None), None)


def refusal(code: str, name: str) -> str | None:
    """Why declaring ``code`` / ``name`` would reuse what the ledger retired; None if it may."""
    for f in FORMER:
        if f.now is None and code == f.code:
            return f"{code} is retired ({f.name}, {f.when}: {f.why}); give the check a new code"
        if f.now is None and name == f.name:
            return f"the name {name} is retired ({f.code}, {f.when}); give the check a new name"
        if f.now is not None and name == f.name and code != f.now:
            return f"the name {name} belongs to {f.now} (it was {f.code} until {f.when}); it does not move again"
    return None
