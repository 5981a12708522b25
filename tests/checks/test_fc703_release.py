"""FC703 judged by the installed release (issue 21, item 3): a bad flag of an older vLLM is
named with that release's options (fail), a release past the newest one read gets the
newest rules and a warning naming the flag (never exit 3), one older than the oldest read
one note (unknown)."""

from __future__ import annotations

from flightcheck._launch import parse_command
from flightcheck._launch.release_read import for_release
from support.evaluation import assert_fires, facts, statuses
from support.toolchain import sections


def _node(vllm: str):
    doc = sections("healthy-cu131")
    doc["python"]["packages"]["vllm"] = vllm
    return facts("b300", **doc)


def _intent(line: str, installed: str) -> dict:
    cmd = parse_command(line.split())
    intent = for_release(cmd, cmd.intent, installed)
    keys = ("reader", "refused", "reader_release", "reader_relation", "reader_note", "tensor_parallel_size")
    return {k: getattr(intent, k) for k in keys}


def test_fc703_names_a_bad_flag_of_an_older_release_with_its_own_options() -> None:
    fields = _intent("vllm serve M -tp 8 --tensor-paralel-size 8", "0.8.5")
    (r,) = assert_fires("FC703", _node("0.8.5"), **fields)
    assert r.severity.value == "error"
    assert r.message.startswith("vllm 0.8.5 will refuse this command: unrecognized arguments: --tensor-paralel-size")
    assert r.evidence["rules_release"] == "0.8.5" and r.evidence["relation"] == "exact"


def test_fc703_passes_a_flag_the_older_release_has() -> None:
    fields = _intent("vllm serve M -tp 8 --swap-space 4", "0.8.5")
    assert statuses(_node("0.8.5"), "FC703", **fields) == {"pass"}


def test_fc703_past_the_newest_release_is_a_warning_naming_the_flag_with_the_note() -> None:
    fields = _intent("vllm serve M -tp 8 --brand-new-flag 1", "9.0.0")
    (r,) = assert_fires("FC703", _node("9.0.0"), **fields)
    assert r.severity.value == "warning" and r.status.value == "fail"
    assert "--brand-new-flag" in r.message and "applied to 9.0.0" in r.message
    ok = _intent("vllm serve M -tp 8", "9.0.0")
    results = statuses(_node("9.0.0"), "FC703", **ok)
    assert results == {"pass"}


def test_fc703_between_two_releases_read_is_a_warning() -> None:
    """A release the atlas did not read (no wheel on the index) is read with the nearest
    older one's options: what those lack may be new in it, so never a stop."""
    fields = _intent("vllm serve M -tp 8 --brand-new-flag 1", "0.8.6")
    assert fields["reader_relation"] == "between"
    (r,) = assert_fires("FC703", _node("0.8.6"), **fields)
    assert r.severity.value == "warning" and "rules of vLLM 0.8.5.post1 applied to 0.8.6" in r.message


def test_fc703_older_than_the_oldest_release_read_is_unknown_with_one_note() -> None:
    fields = _intent("vllm serve M -tp 8 --swap-space 4", "0.4.0")
    (r,) = [x for x in assert_fires_any("FC703", _node("0.4.0"), **fields)]
    assert r.status.value == "unknown" and "older than the oldest release read" in r.message


def assert_fires_any(code: str, f, **intent):
    from support.evaluation import results

    return [r for r in results(f, **intent)[code]]
