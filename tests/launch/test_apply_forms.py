"""The fallback rewrites every spelling the engine's parser accepts (issue 10, item 5).

``apply_plan`` finds a plan step's flag on the command line with the built-in reader's
table-driven resolution (``engine_args.occurrences``): unique-prefix abbreviations
(``--tensor-parallel 8``, ``--enable-expert-par``), ``--flag=value``, vLLM's ``_``
spelling, short aliases, both sides of a boolean pair, ``nargs='+'`` values and the
``--a.b v`` JSON form. tests/conformance/test_apply_conformance.py parses the rewritten
lines with vLLM's real parser.
"""

from __future__ import annotations

import pytest

from flightcheck._launch import parse_command
from flightcheck._launch.apply import apply_plan
from flightcheck._launch.engine_args import occurrences, resolve_option
from flightcheck._vocabulary.plan import build_plan
from flightcheck._vocabulary.results import CheckResult, PlanStep, Severity, Status


def plan_of(*steps: PlanStep):
    steps = tuple(PlanStep(s.kind, s.name, s.value, s.why, "FC304") for s in steps)
    res = CheckResult("FC304", "name", Status.FAIL, Severity.WARNING, "host", "m", "f", {}, steps)
    return build_plan([res])


DROP_EP = PlanStep("drop_arg", "--enable-expert-parallel", None, "why")
A2A = PlanStep("add_arg", "--all2all-backend", "allgather_reducescatter", "why")
FUSION = PlanStep("add_arg", "--compilation-config.pass_config.fuse_allreduce_rms", "false", "why")


@pytest.mark.parametrize(
    "word, dest",
    [
        ("--tensor-parallel", "tensor_parallel_size"),
        ("--tensor_parallel_size=8", "tensor_parallel_size"),
        ("-tp", "tensor_parallel_size"),
        ("--enable-expert-par", "enable_expert_parallel"),
        ("--disable-expert-parallel", "enable_expert_parallel"),
        ("--all2all=naive", "all2all_backend"),
    ],
)
def test_options_resolve_as_argparse_resolves_them(word: str, dest: str) -> None:
    found = resolve_option("vllm", word)
    assert found is not None and found[0].dest == dest


def test_an_ambiguous_prefix_or_unknown_word_is_no_option() -> None:
    assert resolve_option("vllm", "--enable") is None  # many --enable-* options: argparse refuses it
    assert resolve_option("vllm", "--no-such-flag-anywhere") is None
    assert resolve_option("vllm", "-5") is None  # a negative number is a value


@pytest.mark.parametrize(
    "spelling",
    [["--enable-expert-parallel"], ["--enable-expert-par"], ["-ep"], ["--enable_expert_parallel"]],
)
def test_drop_matches_every_spelling_and_keeps_the_rest(spelling: list[str]) -> None:
    argv = ["vllm", "serve", "m", "--served-model-name", "a", "b", *spelling, "--tensor-parallel", "8"]
    launch = apply_plan(plan_of(DROP_EP), parse_command(argv), {})
    assert launch.argv == ["vllm", "serve", "m", "--served-model-name", "a", "b", "--tensor-parallel", "8"]
    assert [c.what for c in launch.changes] == ["drop --enable-expert-parallel"]


@pytest.mark.parametrize(
    "given",
    [
        ["--all2all-backend", "deepep_low_latency"],
        ["--all2all-backend=deepep_low_latency"],
        ["--all2all", "deepep_low_latency"],
        ["--all2all_backend=deepep_low_latency"],
    ],
)
def test_add_replaces_every_spelling_of_the_option(given: list[str]) -> None:
    argv = ["vllm", "serve", "m", *given, "-tp", "8"]
    launch = apply_plan(plan_of(A2A), parse_command(argv), {})
    assert launch.argv == ["vllm", "serve", "m", "-tp", "8", "--all2all-backend", "allgather_reducescatter"]


def test_add_keeps_an_abbreviated_spelling_that_already_says_it() -> None:
    argv = ["vllm", "serve", "m", "--all2all=allgather_reducescatter"]
    launch = apply_plan(plan_of(A2A), parse_command(argv), {})
    assert launch.argv == argv and launch.changes == []


def test_a_dotted_step_replaces_only_its_key() -> None:
    argv = [
        "vllm",
        "serve",
        "m",
        "--compilation_config.pass_config.fuse_allreduce_rms=true",
        "--compilation-config.mode",
        "3",
    ]
    launch = apply_plan(plan_of(FUSION), parse_command(argv), {})
    assert launch.argv == [
        "vllm",
        "serve",
        "m",
        "--compilation-config.mode",
        "3",
        "--compilation-config.pass_config.fuse_allreduce_rms",
        "false",
    ]


def test_occurrences_take_values_by_the_tables_nargs() -> None:
    args = ["m", "--served-model-name", "a", "b", "--enable-expert-par", "-O3", "--max-model-len=32k"]
    found = [(o.dest, o.start, o.stop, o.value) for o in occurrences("vllm", args)]
    assert found == [
        ("served_model_name", 1, 4, "a b"),
        ("enable_expert_parallel", 4, 5, None),
        ("optimization_level", 5, 6, "3"),
        ("max_model_len", 6, 7, "32k"),
    ]


def test_a_negative_spelling_does_not_already_say_the_positive() -> None:
    step = PlanStep("add_arg", "--enable-expert-parallel", None, "why")
    argv = ["vllm", "serve", "m", "--disable-expert-par"]
    launch = apply_plan(plan_of(step), parse_command(argv), {})
    assert launch.argv == ["vllm", "serve", "m", "--enable-expert-parallel"]
