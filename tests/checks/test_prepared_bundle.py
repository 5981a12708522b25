"""FC131 and the prepared-node path of FC101/FC103: a driver-only 8x B300 node (no nvcc, no
ninja) with a `flightcheck prepare` bundle installed for FlashInfer."""

from __future__ import annotations

import pytest

from support.evaluation import assert_fires, assert_silent, evaluated, facts, results
from support.toolchain import sections

TP1 = {"tensor_parallel_size": 1}
MODULES = ("sampling", "topk", "fmha_gen")  # the bundled node serves an MLA model


def node(
    *,
    arch: str = "10.3a",
    flashinfer: str = "0.7.2.post1",
    cuda: str = "13.0",
    present: bool = True,
    modules: tuple[str, ...] = MODULES,
    complete: bool = True,
):
    doc = sections("driver-only")
    doc["toolchain"]["prepared_bundle"] = {
        "record": "/venv/lib/python3.11/site-packages/flashinfer/data/aot/flightcheck-bundle.json",
        "arch": arch,
        "flashinfer": flashinfer,
        "torch_cuda": cuda,
        "nvcc": "13.0",
        "complete": complete,
        "modules": [{"name": m, "archs": [arch], "present": present} for m in modules],
    }
    return facts("b300", **doc)


def test_fc131_does_not_stop_a_fitting_bundle_and_fc101_fc103_stand_down() -> None:
    got = evaluated("FC131", results(node(), **TP1)["FC131"])
    assert [r.status.value for r in got] == ["pass"], [(r.status.value, r.message) for r in got]
    assert "10.3a" in got[0].message
    for code in ("FC101", "FC103"):
        r = evaluated(code, results(node(), **TP1)[code])
        assert {x.status.value for x in r} <= {"pass", "skip"}, (code, [(x.status.value, x.message) for x in r])
        assert "prepared bundle" in r[0].message


def test_without_the_bundle_the_driver_only_node_still_fails_fc101() -> None:
    assert_fires("FC101", facts("b300", **sections("driver-only")), **TP1)


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"arch": "10.0a"}, "error 209"),  # a B200 bundle on a B300
        ({"cuda": "12.9"}, "error 35"),
        ({"flashinfer": "0.7.1"}, "FlashInfer 0.7.1"),
        ({"present": False}, "no longer where"),
    ],
)
def test_a_bundle_that_does_not_fit_is_refused_before_the_load(kwargs: dict, words: str) -> None:
    failing = assert_fires("FC131", node(**kwargs), **TP1)
    assert words in failing[0].message
    assert failing[0].severity.value == "error"
    # and it no longer makes FC101 stand down: the node has no nvcc
    assert_fires("FC101", node(**kwargs), **TP1)


def test_a_bundle_lacking_a_module_of_the_launch_warns_and_names_it() -> None:
    failing = assert_fires("FC131", node(modules=("sampling",)), **TP1)
    assert "topk" in failing[0].message and failing[0].severity.value == "warning"
    assert "nothing can compile them here" in failing[0].message
    # TP 8 on SM 10.3 also reaches the all-reduce fusion modules
    failing = assert_fires("FC131", node(), tensor_parallel_size=8)
    assert "trtllm_comm" in failing[0].message


def test_fc131_does_not_stop_a_node_without_a_bundle() -> None:
    assert_silent("FC131", facts("b300", **sections("jit-cache-cu130")), **TP1)
    assert_silent("FC131", facts("b300", **sections("healthy-cu131")), tensor_parallel_size=8)


def test_fc131_does_not_stop_for_a_module_the_node_can_still_compile() -> None:
    """The bundle lacks topk but the node has a toolkit: FlashInfer compiles it; a warning only."""
    doc = sections("healthy-cu131")
    doc["toolchain"]["prepared_bundle"] = {
        "record": "/r.json",
        "arch": "10.3a",
        "flashinfer": doc["python"]["packages"]["flashinfer-python"],
        "torch_cuda": doc["python"]["torch_cuda"],
        "complete": True,
        "modules": [{"name": m, "archs": ["10.3a"], "present": True} for m in ("sampling", "fmha_gen")],
    }
    got = evaluated("FC131", results(facts("b300", **doc), **TP1)["FC131"])
    assert all(r.severity.value == "warning" for r in got if r.status.value == "fail")
    assert "will be JIT-compiled" in got[0].message
