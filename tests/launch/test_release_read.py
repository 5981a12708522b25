"""The command read with the options of the release that will run it (issue 21, items 2-3).

The built-in reader reads a line with the conformance release's table first; once the facts
name the installed release, ``release_read.for_release`` reads it again with that release's
options from the release atlas (every vLLM release from 0.6.0, SGLang from 0.4.0, read
from the wheels)."""

from __future__ import annotations

import json

import pytest

from flightcheck._knowledge import argtables, atlas, vllm
from flightcheck._launch import parse_command
from flightcheck._launch.release_read import for_release


def _read(line: list[str], installed: str):
    cmd = parse_command(line)
    return for_release(cmd, cmd.intent, installed)


def _later(engine: str) -> str:
    major, minor = atlas.releases(engine)[-1].split(".")[:2]
    return f"{major}.{int(minor) + 1}.0"


def test_a_flag_an_older_release_has_is_read_with_its_options() -> None:
    """--swap-space left vLLM before 0.33: the 0.33 table refuses it, 0.8.5 reads it."""
    line = ["vllm", "serve", "M", "--swap-space", "4", "-tp", "8"]
    assert parse_command(line).intent.refused == ["unrecognized arguments: --swap-space 4"]
    for release in ("0.6.0", "0.8.5", "0.8.5.post1"):
        intent = _read(line, release)
        assert intent.refused == [] and intent.reader_release == release and intent.reader_relation == "exact"
        assert intent.reader_note is None


def test_a_bad_flag_of_an_older_release_is_named_with_its_own_options() -> None:
    intent = _read(["vllm", "serve", "M", "--tensor-paralel-size", "8"], "0.8.5")
    assert intent.refused == ["unrecognized arguments: --tensor-paralel-size 8"]
    # a value outside that release's choices
    intent = _read(["vllm", "serve", "M", "--kv-cache-dtype", "fp4"], "0.6.0")
    assert intent.refused and "--kv-cache-dtype" in intent.refused[0] and "invalid choice" in intent.refused[0]


def test_a_healthy_line_of_every_release_read_is_accepted() -> None:
    for release in atlas.releases("vllm"):
        intent = _read(["vllm", "serve", "M", "-tp", "8", "--max-model-len", "8192", "--max-num-seqs", "64"], release)
        assert intent.refused == [], release
    for release in atlas.releases("sglang"):
        line = [
            "python",
            "-m",
            "sglang.launch_server",
            "--model-path",
            "M",
            "--tp",
            "8",
            "--mem-fraction-static",
            "0.8",
        ]
        intent = _read(line, release)
        assert intent.refused == [], release


def _strings(engine: str, release: str) -> set[str]:
    return {s for o in atlas.options(engine, release) for s in o["option_strings"]}


def test_an_sglang_0_5_15_line_is_read_with_0_5_15s_options() -> None:
    """SGLang 0.5.11-0.5.22 publish cp312 wheels only (read into the atlas since): the flags
    0.5.15 added are taken, and refused by the releases before it."""
    added = _strings("sglang", "0.5.15") - _strings("sglang", "0.5.14") - _strings("sglang", "0.5.10.post1")
    assert {"--enable-tf32-matmul", "--dcp-size", "--decode-context-parallel-size"} <= added
    line = ["python", "-m", "sglang.launch_server", "--model-path", "M", "--tp", "8"]
    line += ["--enable-tf32-matmul", "--dcp-size", "2"]
    for release in ("0.5.15", "0.5.15.post1", "0.5.22"):
        intent = _read(line, release)
        assert intent.refused == [] and intent.reader_release == release and intent.reader_relation == "exact"
    for release in ("0.5.10.post1", "0.5.14"):
        intent = _read(line, release)
        assert intent.reader_release == release and intent.reader_relation == "exact"
        assert intent.refused and "--enable-tf32-matmul" in intent.refused[0] and "--dcp-size" in intent.refused[0]


def _value(row: dict) -> list[str]:
    if row["nargs"] == 0 or row["action"] in ("store_true", "store_false", "BooleanOptionalAction", "count"):
        return []
    if row.get("choices"):
        return [next(str(c) for c in row["choices"] if c is not None)]
    if row.get("record") or row["option_strings"][0].endswith("-config"):
        return ["{}"]
    return [{"int": "1", "float": "0.5", "json": "{}", "hr_int": "1", "hr_int_or_auto": "1"}.get(row["type"], "x")]


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_every_option_of_every_release_is_accepted_by_its_own_reading(engine: str) -> None:
    """Each release's own options, each with a value of its type, never refused."""
    head = ["vllm", "serve", "M"] if engine == "vllm" else ["python", "-m", "sglang.launch_server", "--model-path", "M"]
    for release in atlas.releases(engine):
        if release == argtables.TABLE_VERSION[engine]:
            continue  # read with the import-based table (tests/conformance/test_engine_reader.py)
        for row in atlas.options(engine, release):
            if not row["option_strings"] or row["option_strings"][0] in ("--model", "--model-path", "--config"):
                continue
            if row.get("required") or (engine == "vllm" and row["option_strings"][0] in ("--chat-template",)):
                continue
            line = [*head, row["option_strings"][0], *_value(row)]
            intent = _read(line, release)
            if row.get("refuses"):  # its own action raises (SGLang 0.4.0 DeprecatedAction): refused as such
                assert intent.refused == [row["refuses"]], (release, line, intent.refused)
                continue
            assert intent.refused == [] or "VLLMValidationError" in intent.refused[0], (release, line, intent.refused)


def test_newer_than_the_newest_release_read_uses_its_rules_and_says_so() -> None:
    newest, later = atlas.releases("vllm")[-1], _later("vllm")
    intent = _read(["vllm", "serve", "M", "--no-such-flag", "3"], later)
    assert intent.reader_release == newest and intent.reader_relation == "newer-than-newest"
    assert intent.reader_note is not None and f"rules of vLLM {newest} applied to {later}" in intent.reader_note
    assert intent.refused == ["unrecognized arguments: --no-such-flag 3"]  # FC703 then warns (tests/checks)


def test_older_than_the_oldest_release_read_is_one_note() -> None:
    intent = _read(["vllm", "serve", "M", "--swap-space", "4"], "0.4.0")
    assert intent.reader_release is None and intent.reader_relation == "older-than-oldest"
    oldest = atlas.releases("vllm")[0]
    assert intent.reader_note == (
        f"vLLM 0.4.0 is older than the oldest release read ({oldest}): its command line is not judged"
    )


def test_nested_config_records_are_validated_by_release() -> None:
    """vLLM refuses an unknown key of a nested record ('Unexpected keyword argument'); the
    0.33 table used to check only the top-level keys."""
    bad = json.dumps({"mode": 3, "pass_config": {"unknown_pass": True}})
    for line in (
        ["vllm", "serve", "M", "--compilation-config", bad],
        ["vllm", "serve", "M", "-cc.pass_config.unknown_pass", "true"],
    ):
        refused = parse_command(line).intent.refused  # the conformance release's reading
        assert refused and "PassConfig" in refused[0] and "unknown_pass" in refused[0], line
    good = json.dumps({"mode": 3, "pass_config": {"eliminate_noops": True}})
    assert parse_command(["vllm", "serve", "M", "--compilation-config", good]).intent.refused == []
    assert parse_command(["vllm", "serve", "M", "-cc.pass_config.eliminate_noops", "true"]).intent.refused == []
    # a release that reads pass_config as a record judges it by its own fields
    with_records = [r for r in atlas.releases("vllm") if "PassConfig" in atlas.records("vllm", r)]
    assert with_records
    for release in with_records:
        fields = atlas.records("vllm", release)["PassConfig"]
        name = next(f if isinstance(f, str) else f[0] for f in fields)
        ok = json.dumps({"pass_config": {name: None}})
        assert _read(["vllm", "serve", "M", "--compilation-config", ok], release).refused == [], release
        bad_here = json.dumps({"pass_config": {"unknown_pass": True}})  # "mode" was "level" before 0.11
        refused = _read(["vllm", "serve", "M", "--compilation-config", bad_here], release).refused
        if atlas.version_key(release) >= atlas.version_key(vllm.READER_RECORD_KEYS_CHECKED_FROM):
            assert refused and "unknown_pass" in refused[0], release
        else:  # not every record of that release forbids extras (the real 0.10.2 takes them): not judged
            assert refused == [], release


def test_a_release_between_two_read_uses_the_older_ones_options() -> None:
    # no vLLM 0.8.6 was released: 0.8.5.post1 speaks for it
    intent = _read(["vllm", "serve", "M", "--swap-space", "4"], "0.8.6")
    assert intent.reader_relation == "between" and intent.reader_release == "0.8.5.post1"
    assert intent.refused == []


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_the_parser_of_every_release_read_builds(engine: str) -> None:
    from flightcheck._launch import engine_args

    for release in atlas.releases(engine):
        parser = engine_args.release_parser(engine, release)
        strings = {s for o in atlas.options(engine, release) for s in o["option_strings"]}
        assert strings <= set(parser._option_string_actions), release


# Disagreements the cross-release conformance (tests/conformance/test_releases.py, the real
# vLLM 0.6.0 / 0.10.2 parsers) found, each fixed; the expected readings are those parsers'.


def test_vllm_0_10_2_skip_validation_flags_are_read_as_their_inner_type() -> None:
    """vllm/config/scheduler.py 0.10.2: ``enable_chunked_prefill: SkipValidation[bool]`` is a
    BooleanOptionalAction flag (the atlas read it as a str option: a false FC703)."""
    line = ["vllm", "serve", "M", "--enable-chunked-prefill", "--max-num-batched-tokens", "2048"]
    assert _read(line, "0.10.2").refused == []
    assert _read(["vllm", "serve", "M", "--no-enable-chunked-prefill"], "0.10.2").refused == []
    intent = _read(["vllm", "serve", "M", "--max-num-seqs", "128"], "0.10.2")
    assert intent.refused == [] and intent.max_num_seqs == 128


def test_vllm_0_10_2_quantization_takes_any_name() -> None:
    """vllm/config/__init__.py 0.10.2: ``QuantizationMethods = Any`` (the TYPE_CHECKING else
    branch) when the parser is built: ``--quantization ascend`` (a plugin's) is accepted."""
    assert _read(["vllm", "serve", "M", "--quantization", "ascend"], "0.10.2").refused == []
    # 0.6.0 lists its own choices: vllm/engine/arg_utils.py ``[*QUANTIZATION_METHODS, None]``,
    # the keys of vllm/model_executor/layers/quantization/__init__.py's dict literal
    assert _read(["vllm", "serve", "M", "--quantization", "awq"], "0.6.0").refused == []
    refused = _read(["vllm", "serve", "M", "--quantization", "ascend"], "0.6.0").refused
    assert refused and "invalid choice" in refused[0] and "--quantization" in refused[0]
    # 0.8.5's list is built at import (list(get_args(...)), plugins may add): not judged
    assert _read(["vllm", "serve", "M", "--quantization", "ascend"], "0.8.5").refused == []


def test_vllm_0_10_2_model_loader_extra_config_is_any_dict() -> None:
    """vllm/config/__init__.py 0.10.2 LoadConfig: ``model_loader_extra_config: Union[dict,
    TensorizerConfig]``: a plain dict is taken (not validated as a TensorizerConfig)."""
    line = ["vllm", "serve", "M", "--model-loader-extra-config", '{"enable_multithread_load": true, "num_threads": 8}']
    assert _read(line, "0.10.2").refused == []


def test_settings_are_read_again_by_the_release_when_the_newest_refused_the_line() -> None:
    """--num-scheduler-steps left vLLM after 0.6: the 0.33.0 reading refuses the line and reads
    it leniently (no abbreviations); 0.6.0's parser takes ``--tensor 4`` as
    --tensor-parallel-size 4 (argparse's allow_abbrev, vllm/utils.py FlexibleArgumentParser)."""
    line = ["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "M"]
    line += ["--num-scheduler-steps", "10", "--tensor", "4", "--max_model_len", "4096"]
    assert parse_command(line).intent.refused
    intent = _read(line, "0.6.0")
    assert intent.refused == []
    assert intent.tensor_parallel_size == 4 and intent.max_model_len == 4096 and intent.model == "M"


def test_vllm_0_10_2_reads_O3_as_a_compilation_level() -> None:
    """vllm/utils/__init__.py 0.10.2 FlexibleArgumentParser: ``-O3`` is ``-O.level=3`` (-O is
    --compilation-config); the release has no --optimization-level (0.33's spelling): no FC703."""
    for line in (["vllm", "serve", "M", "-O3"], ["vllm", "serve", "M", "-O", "3"], ["vllm", "serve", "M", "-O=3"]):
        assert _read(line, "0.10.2").refused == [], line
    # 0.6.0 has no -O at all: refused, as its parser refuses it
    assert _read(["vllm", "serve", "M", "-O3"], "0.6.0").refused
    # the conformance release keeps its own reading
    assert parse_command(["vllm", "serve", "M", "-O3"]).intent.refused == []


def test_the_chat_template_is_checked_only_by_releases_that_check_it() -> None:
    """validate_parsed_serve_args (chat template path) is in vLLM 0.6.3 and later
    (vllm/entrypoints/openai/cli_args.py); 0.6.0's real parser takes a missing template."""
    line = ["vllm", "serve", "M", "--chat-template", "llama-2-chat.jinja"]
    assert _read(line, "0.6.0").refused == []
    refused = _read(line, "0.10.2").refused
    assert refused and "chat template" in refused[0]


def test_vllm_0_10_2_record_keys_are_not_judged() -> None:
    """vllm/config/utils.py forbids unknown record keys for every record from 0.16.0; the real
    0.10.2 parser takes ``--speculative-config '{"enforce_eager": true}'``."""
    line = ["vllm", "serve", "M", "--speculative-config", '{"method": "mtp", "enforce_eager": true}']
    assert _read(line, "0.10.2").refused == []
    refused = _read(line, "0.33.0").refused  # the exact conformance release: judged by its table
    assert refused == parse_command(line).intent.refused


def test_vllm_serve_model_option_is_judged_by_each_releases_handling() -> None:
    """``vllm serve --model X``: vLLM 0.6.0 vllm/scripts.py has a required positional model_tag
    and leaves --model an option (refused: no model_tag); 0.8.5 vllm/utils.py .. 0.11.0
    vllm/utils/__init__.py FlexibleArgumentParser.parse_args raise on a ``--model`` word;
    0.11.1 and later (0.33.0 vllm/utils/argparse_utils.py) move it to the positional."""
    line = ["vllm", "serve", "--model", "M", "-tp", "2"]
    refused = _read(line, "0.6.0").refused
    assert refused == ["the following arguments are required: model_tag"]
    for release in ("0.8.5", "0.10.2", "0.11.0"):
        refused = _read(line, release).refused
        assert refused and "you should provide the model as a positional argument" in refused[0], release
        # ``--model=M`` is no ``--model`` word: that check passes it
        assert _read(["vllm", "serve", "M2", "--model=M"], release).refused == [], release
    for release in ("0.11.1", "0.20.0"):
        assert _read(line, release).refused == [], release
    assert parse_command(line).intent.refused == []  # the conformance release moves it too
    # the positional stays accepted everywhere, and the module form has no positional
    for release in ("0.6.0", "0.8.5", "0.10.2", "0.11.0", "0.11.1"):
        assert _read(["vllm", "serve", "M", "-tp", "2"], release).refused == [], release
        assert _read(["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "M"], release).refused == []


def test_vllm_0_10_2_reasoning_parser_choices_are_the_registered_ones() -> None:
    """vllm/engine/arg_utils.py 0.10.2 ``choices=list(ReasoningParserManager.reasoning_parsers)``:
    the names vllm/reasoning/*.py register (``@ReasoningParserManager.register_module``) when
    vllm/reasoning/__init__.py imports them."""
    assert _read(["vllm", "serve", "M", "--reasoning-parser", "deepseek_r1"], "0.10.2").refused == []
    assert _read(["vllm", "serve", "M", "--reasoning-parser", "openai_gptoss"], "0.10.2").refused == []
    refused = _read(["vllm", "serve", "M", "--reasoning-parser", "gpt_oss"], "0.10.2").refused
    assert refused and "invalid choice" in refused[0]
    # 0.10.1 registered the same parser as "GptOss" (vllm/reasoning/gptoss_reasoning_parser.py)
    assert _read(["vllm", "serve", "M", "--reasoning-parser", "GptOss"], "0.10.1").refused == []


def test_sglang_0_4_0_refuses_sglang_serve_and_its_deprecated_flags() -> None:
    """SGLang 0.4.0's wheel has no sglang/cli (only ``python -m sglang.launch_server``) and
    sglang/srt/server_args.py's DeprecatedAction raises ``ValueError(self.help)`` once given."""
    serve = ["sglang", "serve", "--model-path", "M", "--tp", "2"]
    refused = _read(serve, "0.4.0").refused
    assert refused and "has no 'sglang serve' launcher" in refused[0]
    module = ["python", "-m", "sglang.launch_server", "--model-path", "M", "--tp", "2"]
    assert _read(module, "0.4.0").refused == []
    for flag in ("--disable-flashinfer-sampling", "--disable-flashinfer", "--enable-overlap-schedule"):
        refused = _read([*module, flag], "0.4.0").refused
        assert refused and refused[0].startswith(f"ValueError: '{flag}' is deprecated"), flag
    # releases not regenerated from their wheels keep the newest handling: never a new stop
    assert _read(serve, "0.5.23").refused == []
    assert atlas.serve_launcher("sglang", "0.5.23") and atlas.serve_launcher("vllm", "0.6.0")
