"""No module under src/ is longer than 800 lines: a module that grows past it holds more
than one concern and is split by concern (the engine knowledge into ``_knowledge/vllm/``,
``_knowledge/sglang/``; a check family into one module per component)."""

from __future__ import annotations

from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
LIMIT = 800


def test_no_module_over_the_limit() -> None:
    modules = sorted(SRC.rglob("*.py"))
    assert len(modules) > 50  # the tree is there (a wrong root would pass vacuously)
    lengths = {p.relative_to(SRC).as_posix(): len(p.read_text(encoding="utf-8").splitlines()) for p in modules}
    over = {name: n for name, n in lengths.items() if n > LIMIT}
    assert not over, f"modules over {LIMIT} lines (split them by concern): {over}"
