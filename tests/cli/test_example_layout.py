"""An example's TP 8 is the example's, not the engine's default (TP 1): the report says so."""

from __future__ import annotations

import json

from support.cli import cli


def test_the_example_layout_is_named_in_the_headline_and_the_json() -> None:
    text = cli("check", "--example", "b300").stdout.splitlines()[0]
    assert text.endswith("vllm, TP 8 (the example's layout; the engine's default is TP 1)"), text
    doc = json.loads(cli("check", "--example", "b300", "--format", "json").stdout)
    assert doc["intent"]["layout_from"] == "example"
    assert doc["intent"]["tensor_parallel_size"] == 8


def test_a_layout_given_on_the_command_line_is_not_the_example_s() -> None:
    text = cli("check", "--example", "b300", "-tp", "4").stdout.splitlines()[0]
    assert text.endswith("vllm, TP 4"), text
    doc = json.loads(cli("check", "--example", "b300", "-tp", "8", "--format", "json").stdout)
    assert "layout_from" not in doc["intent"]
