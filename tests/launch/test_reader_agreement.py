"""flightcheck's built-in reader against the engines' own readings of real command lines.

The golden files were made by scripts/gen_reader_golden.py with vllm 0.33.0 and sglang
0.5.23 (tests/conformance/test_reader_golden.py checks they still match the engines); this
test needs no engine. Shell variables stay literal on both sides (``$MODEL`` is the model
``$MODEL``; ``--port $PORT`` is refused, as the engine refuses it).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.reader_agreement import GOLDEN, compare, golden

CORPUS = GOLDEN.parent / "corpus"
#: Lines where the built-in reading is allowed to differ from the engine's, with why.
#: (Empty at vllm 0.33.0 / sglang 0.5.23: every line agrees.)
KNOWN: dict[str, dict[str, str]] = {"vllm": {}, "sglang": {}}


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_golden_files_follow_the_corpus(engine: str) -> None:
    corpus = [json.loads(line)["cmd"] for line in (CORPUS / f"{engine}_commands.jsonl").read_text().splitlines()]
    assert [g["cmd"] for g in golden(engine)] == corpus, "rerun scripts/gen_reader_golden.py"


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_builtin_reader_agrees_with_the_engine(engine: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # as the golden files were made: no --config / template files here
    rows = golden(engine)
    unexplained: list[str] = []
    disagreeing = 0
    for g in rows:
        diff = compare(engine, g)
        if diff:
            disagreeing += 1
            if g["cmd"] not in KNOWN[engine]:
                unexplained.append(f"{g['cmd'][:160]}\n    {diff}")
    rate = (len(rows) - disagreeing) / len(rows)
    assert rate >= 0.97, f"{engine}: {rate:.1%} agreement\n" + "\n".join(unexplained)
    assert not unexplained, "disagreements without a reason in KNOWN:\n" + "\n".join(unexplained)
