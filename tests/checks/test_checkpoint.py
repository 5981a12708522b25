"""FC501–FC511: what the checkpoint checks say about a checkpoint on disk."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.evaluation import counting_bug, facts, results


def test_fc501_a_bug_while_reading_is_unknown_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An exception inside the reader makes FC4xx/FC5xx 'unknown' (exit 3), read once, no traceback."""
    import importlib

    load_mod = importlib.import_module("flightcheck._checkpoint.load")  # the module, not the function
    calls: list = []
    monkeypatch.setattr(load_mod, "resolve", counting_bug(calls))
    res = results(facts("b300"), model=str(tmp_path))
    assert len(calls) == 1
    assert {r.status.value for r in res["FC501"]} == {"unknown"} and "synthetic" in res["FC501"][0].message
    assert {r.status.value for r in res["FC401"]} == {"skip"}
