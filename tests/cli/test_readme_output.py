"""The README's report excerpts are real output: each block is what the command it names
prints today (a stale excerpt promises a report the tool no longer gives)."""

from __future__ import annotations

import re

from support import REPO, ckptgen
from support.cli import cli

README = (REPO / "README.md").read_text()
BLOCKS = re.findall(r"```text\n(.*?)```", README, re.DOTALL)


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.strip().splitlines()]


def test_the_no_toolkit_report_is_printed_whole() -> None:
    proc = cli("check", "--example", "b300-no-toolkit")
    assert proc.returncode == 1
    assert "(`flightcheck check --example b300-no-toolkit`)" in README
    assert _lines(BLOCKS[0]) == _lines(proc.stdout)


def test_the_multicast_excerpt_is_lines_of_the_real_report() -> None:
    proc = cli("check", "--example", "b300-multicast-401")
    assert proc.returncode == 0
    real = _lines(proc.stdout)
    excerpt = _lines(BLOCKS[1])
    assert "FC304 multicast-bind-failed" in BLOCKS[1] and len(excerpt) > 10
    assert [line for line in excerpt if line not in real] == []


def test_the_memory_excerpt_is_the_kimi_k2_report(tmp_path) -> None:
    # the README's launch: Kimi-K2-Instruct's 61 shards (sparse files, real headers) at TP 8
    # with a 128k context on the B300 example
    model = ckptgen.write_checkpoint(tmp_path / "Kimi-K2-Instruct", ckptgen.load_config("kimi-k2-instruct"), shards=61)
    proc = cli("check", "--example", "b300", "--model", str(model), "-tp", "8", "--max-model-len", "128k")
    real = _lines(proc.stdout)
    excerpt = _lines(BLOCKS[2])
    assert excerpt[0].startswith("[✓] Memory fit — weights 121.0 GiB") and "Memory per GPU" in BLOCKS[2]
    assert [line for line in excerpt if line and line not in real] == []
