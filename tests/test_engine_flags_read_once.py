"""The engine command is read once: ``_launch`` fills the Intent's typed fields (the
speculative config, the multimodal limits and switches: ``READ_ONCE_FIELDS``), and nothing
outside ``_launch`` reads ``intent.engine_flags`` for values (an AST scan of src/).

A new read of the raw flags anywhere outside ``_launch`` fails here."""

from __future__ import annotations

import ast
from pathlib import Path

from flightcheck._knowledge import engines, sglang, vllm
from flightcheck._launch.command import parse_command
from flightcheck._vocabulary.intent import ENGINE_OPTION_FIELDS, READ_ONCE_FIELDS, Intent

PKG = Path(__file__).resolve().parents[1] / "src" / "flightcheck"

#: file (under src/flightcheck) -> reads of ``.engine_flags`` still there: none. (The
#: Intent's own redaction in ``_vocabulary/intent.py`` touches the field by name, in
#: ``__setattr__`` and ``to_dict``, never as an attribute read, so it is not counted.)
REMAINING: dict[str, int] = {}


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
    assert _reads(PKG / "_launch" / "intent_read.py"), "the scan found no read at all: wrong root?"
    grown = {k: v for k, v in found.items() if v > REMAINING.get(k, 0)}
    assert not grown, f"read the Intent's typed fields, not intent.engine_flags: {grown}"


def test_the_read_once_fields_match_the_reader() -> None:
    assert READ_ONCE_FIELDS == (*vllm.LAUNCH_OPTION_FIELDS, "option_values", *ENGINE_OPTION_FIELDS)
    assert set(READ_ONCE_FIELDS) <= set(Intent.__dataclass_fields__)
    for name in engines.names():  # every engine's reader gives exactly its fields
        assert tuple(engines.get(name).reader.launch_options([])) == ENGINE_OPTION_FIELDS


def test_the_engine_read_fields_are_typed() -> None:
    vllm_line = [
        "vllm", "serve", "m", "--served-model-name", "a", "b", "--all2all-backend", "deepep_low_latency",
        "--enforce-eager", "--max-model-len", "4096",
    ]  # fmt: skip
    it = parse_command(vllm_line, None).intent
    assert it.served_model_names == ["a", "b"] and it.all2all_backend == "deepep_low_latency"
    assert it.eager_given and it.memory_options == {}
    assert it.option_values["--all2all-backend"] == "deepep_low_latency" and it.option_values["--enforce-eager"] is None
    sglang_line = [
        "sglang", "serve", "--model-path", "m", "--served-model-name", "s", "--moe-a2a-backend", "deepep",
        "--mm-feature-transport", "cuda_ipc", "--attention-backend", "fa3", "--chunked-prefill-size", "4096",
    ]  # fmt: skip
    it = parse_command(sglang_line, None).intent
    assert (it.served_model_names, it.all2all_backend) == (["s"], "deepep")
    mem = it.memory_options
    assert mem["mm_feature_cache"] is True and mem["attention"]["attention"] == "fa3"
    assert mem["fraction"]["chunked_prefill"] == 4096
    # what the memory rules make of them is what they made of the flags
    rules = engines.get("sglang").memory
    assert rules.fraction_options(mem, "m", 8) == sglang.fraction_options(it.engine_flags, "m", 8)
    assert rules.mm_reservation_bytes(mem, {}) == sglang.mm_reservation_bytes(it.engine_flags, {})
    # an Intent read from no command: what a launch with no flags gives
    assert rules.fraction_options({}, "m", None) == sglang.fraction_options([], "m", None)
    assert rules.mm_reservation_bytes({}, {}) == sglang.mm_reservation_bytes([], {})


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
