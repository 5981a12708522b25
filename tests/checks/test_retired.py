"""Codes are never reused: the registry against the ledger of every code given out
(tests/fixtures/catalogue/ledger.json), the retired pairings of
src/flightcheck/_checks/retired.py, and the contract's catalogue
(tests/fixtures/catalogue/contract.json, copied from the product spec)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from flightcheck._checks import load_all, retired
from flightcheck._checks.framework import REGISTRY, check
from flightcheck._checks.retired import FORMER, Former, refusal
from flightcheck._cli.main import main
from flightcheck._vocabulary.results import WARNING
from support import FIXTURES

load_all()
LEDGER: dict[str, str] = json.loads((FIXTURES / "catalogue" / "ledger.json").read_text())["codes"]
CONTRACT: dict[str, dict[str, Any]] = json.loads((FIXTURES / "catalogue" / "contract.json").read_text())["checks"]


def test_every_registered_code_is_in_the_ledger_with_its_name() -> None:
    """A new check adds its line to the ledger; a code that changes its name is a reuse."""
    new = sorted(c for c in REGISTRY if c not in LEDGER)
    assert new == [], f"add {new} to tests/fixtures/catalogue/ledger.json (append-only)"
    renamed = {c: (LEDGER[c], chk.name) for c, chk in REGISTRY.items() if LEDGER[c] != chk.name}
    assert renamed == {}, f"codes that changed meaning (ledger, now): {renamed}"


def test_a_code_gone_from_the_registry_is_retired() -> None:
    gone = sorted(set(LEDGER) - set(REGISTRY))
    unretired = [c for c in gone if retired.retired_code(c) is None]
    assert unretired == [], f"{unretired} left the registry: retire them in src/flightcheck/_checks/retired.py"


def test_no_registered_check_reuses_a_retired_code_or_name() -> None:
    assert {c: refusal(c, chk.name) for c, chk in REGISTRY.items() if refusal(c, chk.name)} == {}
    for f in FORMER:
        if f.now is None:
            assert f.code not in REGISTRY and all(chk.name != f.name for chk in REGISTRY.values()), f
        else:  # renumbered: the name lives under its new code only, the old code means something else
            assert REGISTRY[f.now].name == f.name and LEDGER[f.now] == f.name, f
            assert f.code not in REGISTRY or REGISTRY[f.code].name != f.name, f


def test_fc703_keeps_engine_refuses_command_and_its_old_name_stays_fc711() -> None:
    assert (REGISTRY["FC703"].name, REGISTRY["FC711"].name) == ("engine-refuses-command", "engine-config-unreadable")
    (f,) = [f for f in FORMER if f.code == "FC703"]
    assert (f.name, f.now) == ("engine-config-unreadable", "FC711") and "ee0b03d" in f.when


def test_the_decorator_refuses_what_the_ledger_retired(monkeypatch: pytest.MonkeyPatch) -> None:
    def func(ctx: object) -> None:
        """x"""

    with pytest.raises(RuntimeError, match="belongs to FC711"):
        check("FC799", "engine-config-unreadable", WARNING)(func)
    gone = Former("FC798", "old-check", None, "2026-12-01, commit 0000000", "merged into FC701")
    monkeypatch.setattr(retired, "FORMER", (*FORMER, gone))
    with pytest.raises(RuntimeError, match="FC798 is retired"):
        check("FC798", "brand-new-name", WARNING)(func)
    with pytest.raises(RuntimeError, match="the name old-check is retired"):
        check("FC797", "old-check", WARNING)(func)
    assert "FC797" not in REGISTRY and "FC798" not in REGISTRY and "FC799" not in REGISTRY


def test_explain_says_a_retired_code_is_retired(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    gone = Former("FC798", "old-check", None, "2026-12-01, commit 0000000", "merged into FC701")
    monkeypatch.setattr(retired, "FORMER", (*FORMER, gone))
    assert main(["explain", "FC798"]) == 2
    err = capsys.readouterr().err
    assert "FC798 is retired: it was old-check" in err and "merged into FC701" in err and "Traceback" not in err
    assert main(["explain", "FC703"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("FC703 engine-refuses-command") and "Formerly: FC703 was engine-config-unreadable" in out


@pytest.mark.parametrize("code", sorted(CONTRACT))
def test_the_contracts_codes_keep_their_meaning(code: str) -> None:
    """Name and severity as the contract gives them (FC207/FC304: the declared severity is
    the first one the contract names; the check raises it where the contract says)."""
    chk = REGISTRY[code]
    assert chk.name == CONTRACT[code]["name"]
    assert chk.severity.value == CONTRACT[code]["severity"].split()[0].strip(",")
    assert LEDGER[code] == CONTRACT[code]["name"]


def test_the_catalogue_lists_the_former_codes() -> None:
    from flightcheck._cli.commands import rules_markdown

    page = rules_markdown(sorted(REGISTRY.values(), key=lambda c: c.code))
    former = page[page.index("## Former codes") :]
    assert "| FC703 | engine-config-unreadable | FC711 | 2026-12-01, commit ee0b03d |" in former
