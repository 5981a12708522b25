"""FC801–FC805: for each error check, a multi-node launch the engine serves that it must
not stop (docs/what-stops-a-launch.md), on the recorded node snapshots of
tests/fixtures/cluster."""

from __future__ import annotations

import copy
import json
from typing import Any

from flightcheck import Intent
from flightcheck._checks.cluster.evaluate import evaluate_cluster
from flightcheck._vocabulary.facts import from_dict
from support import FIXTURES
from support.evaluation import evaluated


def doc(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / "cluster" / f"{name}.json").read_text())


def stops(code: str, *docs: dict[str, Any], **intent: Any) -> list:
    nodes = {d["host"]["hostname"]: from_dict(d) for d in docs}
    intent.setdefault("nnodes", len(nodes))
    report = evaluate_cluster(nodes, Intent(**intent))
    got = evaluated(code, [r for r in report.checks if r.code == code])
    return [
        (r.status.value, r.message)
        for r in got
        if r.status.value in ("fail", "unknown") and r.severity.value == "error"
    ]


def test_fc801_does_not_stop_nodes_that_differ_only_in_the_other_engine() -> None:
    """vLLM is launched; SGLang (installed next to it) differs between the nodes."""
    a, b = doc("hgx-b300-a"), doc("hgx-b300-b")
    a["python"]["packages"]["sglang"] = "0.5.20"
    b["python"]["packages"]["sglang"] = "0.5.23"
    assert stops("FC801", a, b, tensor_parallel_size=8, pipeline_parallel_size=2) == []


def test_fc802_does_not_stop_copies_that_differ_in_documentation() -> None:
    a, b = doc("hgx-b300-a"), doc("hgx-b300-b")
    b["checkpoint"]["files"]["README.md"] = 4242
    assert stops("FC802", a, b, tensor_parallel_size=8, pipeline_parallel_size=2) == []


def test_fc803_does_not_stop_every_node_answering() -> None:
    a = doc("hgx-b300-a")
    c = copy.deepcopy(a)
    c["host"]["hostname"] = "gpu-b300-099"
    assert stops("FC803", a, c, tensor_parallel_size=8, pipeline_parallel_size=2) == []


def test_fc805_does_not_stop_pipeline_stages_across_a_split_domain() -> None:
    """TP 4 inside each tray: only pipeline stages cross the split, over the network."""
    a, b = doc("gb200-tray-03"), doc("gb200-tray-04")
    for g in b["gpus"]:
        g["fabric"]["cluster_uuid"] = "0c9a3e11-5d7f-4b2a-8e64-1f3b5a7c9d20"
    assert stops("FC805", a, b, tensor_parallel_size=4, pipeline_parallel_size=2) == []
