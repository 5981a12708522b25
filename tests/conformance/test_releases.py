"""Conformance across releases (issue 21, item 7): flightcheck's release reader against the
REAL parsers of older releases (vLLM 0.6.0, the oldest the atlas reads; vLLM 0.10.2; SGLang
0.4.0, the oldest SGLang read). The newest (vLLM 0.33.0, SGLang 0.5.23) are the main
conformance venv's (test_reader_golden.py, tests/launch/test_reader_agreement.py).

The venvs come from ``scripts/release_venvs.sh`` (.ci/run builds them); without them these
tests skip. Each release reads its own era's lines (tests/conformance/corpus/
release_commands.jsonl, sources recorded per line) and every line of the engine's
conformance corpus (written for the newest release: most are refusals in an old one).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

from support.release_agreement import RELEASES, compare, corpus, read_with_release, venv_root, words

#: Disagreements left, by cause: (release, a pattern of the difference, why), each read in
#: the release's source; none may make flightcheck stop a line the release takes. None is
#: left: vLLM 0.6.0's required model_tag, 0.8.5 .. 0.11.0's refused ``serve --model``, 0.6.0's
#: quantization and 0.10.2's reasoning-parser choices, SGLang 0.4.0's missing ``sglang serve``
#: and its DeprecatedAction options are read from each release's source by
#: scripts/gen_release_atlas.py (tests/knowledge/test_release_atlas.py,
#: tests/launch/test_release_read.py).
CAUSES: list[tuple[str, str, str]] = []


def _python(name: str) -> Path:
    root = venv_root()
    if root is None:
        why = os.environ.get("FLIGHTCHECK_RELEASE_VENVS_UNAVAILABLE")  # .ci/run: the script's exit 75
        pytest.skip(f"no release venvs: {why}" if why else "no release venvs (run scripts/release_venvs.sh)")
    python = root / name / "bin" / "python"
    if not (root / name / ".flightcheck-release").is_file() or not python.is_file():
        pytest.skip(f"release venv {root / name} not built (scripts/release_venvs.sh)")
    return python


@pytest.fixture(scope="module")
def readings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return {}


def _read(name: str, readings: dict[str, Any], cwd: Path) -> list[tuple[dict[str, Any], list[str], dict[str, Any]]]:
    if name not in readings:
        python = _python(name)
        rows = [(r, words(r["cmd"])) for r in corpus(name)]
        rows = [(r, w) for r, w in rows if w]
        docs = read_with_release(python, RELEASES[name][0], [w for _, w in rows], cwd)
        readings[name] = [(r, w, d) for (r, w), d in zip(rows, docs, strict=True)]
    out: list[tuple[dict[str, Any], list[str], dict[str, Any]]] = readings[name]
    return out


@pytest.mark.parametrize("name", list(RELEASES))
def test_the_release_reader_agrees_with_the_release(
    name: str, readings: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no --config / template files here, for either side
    engine, release = RELEASES[name]
    rows = _read(name, readings, tmp_path)
    assert rows, name
    for _, _, doc in rows:
        assert doc["engine_version"] == release, doc
        assert doc["error_stage"] != "reader", doc  # the driver itself never fails
    causes = [re.compile(pattern) for rel, pattern, _ in CAUSES if rel == name]
    unexplained, counts = [], {"accepted": 0, "refused": 0, "agree": 0, "explained": 0}
    for row, line, doc in rows:
        diff = compare(engine, release, line, doc)
        counts["refused" if doc["error"] else "accepted"] += 1
        if not diff:
            counts["agree"] += 1
        elif all(any(c.search(d) for c in causes) for d in diff):
            counts["explained"] += 1
        else:
            unexplained.append(f"{row['cmd'][:160]}\n    {diff}")
    print(f"{name}: {len(rows)} lines, {counts}")
    assert counts["accepted"] >= 10, counts  # the corpus exercises accepted lines, not only refusals
    assert not unexplained, f"{name} {counts}: disagreements without a cause in CAUSES:\n" + "\n".join(unexplained)
