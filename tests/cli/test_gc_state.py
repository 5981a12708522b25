"""``main()`` runs without cyclic garbage collection (start-up speed, bench/bench_checkpoint.py)
but hands the collector back as it found it: tests, the vLLM plugin's host and anything
else that calls it in-process keep their own setting."""

from __future__ import annotations

import gc

import pytest

from flightcheck._cli.main import main


@pytest.mark.parametrize("enabled", [True, False])
def test_main_restores_the_collector(enabled: bool, capsys: pytest.CaptureFixture[str]) -> None:
    was = gc.isenabled()
    try:
        gc.enable() if enabled else gc.disable()
        assert main(["rules", "--format", "json"]) == 0
        assert gc.isenabled() is enabled
        assert main(["check", "--no-such-flag"]) == 2  # an error path too
        assert gc.isenabled() is enabled
    finally:
        gc.enable() if was else gc.disable()
    assert '"FC101"' in capsys.readouterr().out


def test_main_runs_without_cyclic_collection(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []
    from flightcheck._cli import commands

    monkeypatch.setitem(commands.HANDLERS, "rules", lambda args: seen.append(gc.isenabled()) or 0)
    assert main(["rules"]) == 0
    assert seen == [False]
