"""The engine command is read once: ``_launch`` fills the Intent's typed fields (the
speculative config, the multimodal limits and switches: ``READ_ONCE_FIELDS``), and nothing
outside ``_launch`` reads ``intent.engine_flags`` for values (an AST scan of src/).

The readers not yet moved to typed fields are listed with how many reads each holds, so
that the list can only shrink: a new read of the raw flags anywhere fails here."""

from __future__ import annotations

import ast
from pathlib import Path

from flightcheck._knowledge import vllm
from flightcheck._launch.command import parse_command
from flightcheck._vocabulary.intent import READ_ONCE_FIELDS, Intent

PKG = Path(__file__).resolve().parents[1] / "src" / "flightcheck"

#: file (under src/flightcheck) -> reads of ``.engine_flags`` still there: SGLang's memory
#: options (fraction_options, mm_reservation_bytes, the attention backend) and vLLM's
#: ``--enforce-eager`` for a leniently read line in _memory; the multicast fallback's
#: flag map (``flag_values``); the Intent's own redaction; FC712's ``--all2all-backend``.
REMAINING = {
    "_checks/engine/flashinfer_api.py": 1,
    "_memory/__init__.py": 4,
    "_checks/fabric/fallback.py": 1,
    "_vocabulary/intent.py": 2,
}


def _reads(path: Path) -> int:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return sum(
        1
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr == "engine_flags" and isinstance(node.ctx, ast.Load)
    )


def test_nothing_outside_launch_reads_the_raw_flags() -> None:
    found = {}
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG).as_posix()
        if rel.startswith("_launch/"):
            continue
        n = _reads(path)
        if n:
            found[rel] = n
    assert found, "the scan found no read at all: wrong root?"
    grown = {k: v for k, v in found.items() if v > REMAINING.get(k, 0)}
    assert not grown, f"read the Intent's typed fields, not intent.engine_flags: {grown}"


def test_the_read_once_fields_match_the_reader() -> None:
    assert tuple(vllm.LAUNCH_OPTION_FIELDS) == READ_ONCE_FIELDS
    assert set(READ_ONCE_FIELDS) <= set(Intent.__dataclass_fields__)


def test_both_readers_fill_them_once() -> None:
    spec = '{"method": "ngram", "num_speculative_tokens": 3}'
    line = [
        "vllm", "serve", "m", "--speculative-config", spec, "--limit-mm-per-prompt", '{"image": 1}',
        "--limit-mm-per-prompt.video", "0", "--skip-mm-profiling", "--mm-encoder-tp-mode", "data",
    ]  # fmt: skip
    built_in = parse_command(line, None).intent
    assert built_in.speculative_config == {"method": "ngram", "num_speculative_tokens": 3}
    assert built_in.speculative_error is None
    # vLLM's semantics: the dotted keys, appended after all other arguments, replace the JSON
    assert built_in.limit_mm_per_prompt == {"video": 0}
    assert built_in.mm_profiling_off == "--skip-mm-profiling" and built_in.mm_encoder_tp_mode == "data"
    # a line the engine's parser refuses is read token by token: the same fields
    lenient = parse_command([*line, "--tensor-parallel-size", "two"], None).intent
    assert lenient.refused and lenient.speculative_config == built_in.speculative_config
    assert lenient.limit_mm_per_prompt == {"video": 0}
    refused = parse_command(["vllm", "serve", "m", "--speculative-config", "{not json"], None).intent
    assert refused.speculative_config is None and refused.speculative_error


def test_the_report_keeps_its_intent_block() -> None:
    it = parse_command(["vllm", "serve", "m", "--speculative-config", '{"method": "ngram"}'], None).intent
    block = it.to_dict()
    assert not set(READ_ONCE_FIELDS) & set(block)
    assert any(f.startswith("--speculative-config=") for f in block["engine_flags"])
