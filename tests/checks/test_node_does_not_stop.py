"""FC2xx, FC3xx, FC6xx, FC7xx: for each error check, a launch the engine serves that it must
not stop (docs/what-stops-a-launch.md): the near miss of the check's own failure, on the
recorded hosts of tests/fixtures/hosts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from flightcheck._vocabulary.facts import from_dict
from support.evaluation import evaluated, facts, host_doc, results
from support.toolchain import sections


def host(name: str = "hgx-b300", **sections_: Any) -> dict[str, Any]:
    d = host_doc(name)
    d.update(sections_)
    return d


def gpus(name: str = "hgx-b300", **fields: Any) -> list[dict[str, Any]]:
    out = host_doc(name)["gpus"]
    for g in out:
        g.update(fields)
    return out


def driver_minor_behind() -> dict[str, Any]:
    """torch cu131 on a driver that supports CUDA 13.0: same major, served through minor
    version compatibility (FC203 warns)."""
    d = host("hgx-b300")
    d["driver"]["cuda_version"] = "13.0"
    d["python"]["torch_cuda"] = "13.1"
    return d


def torch_sm100_on_b300() -> dict[str, Any]:
    """torch built for sm_100 (no sm_103): its cubins run on compute 10.3 (same major,
    minor not above)."""
    d = host("hgx-b300")
    d["python"]["torch_arch_list"] = ["sm_80", "sm_90", "sm_100", "sm_120"]
    return d


def a_little_memory_in_use() -> dict[str, Any]:
    """Another process holds 10 GiB of a 275 GiB GPU; the engine claims 90%."""
    g = gpus()
    g[3]["memory_used_bytes"] = 10 << 30
    return host(gpus=g)


def mig_on_a_gpu_not_used() -> dict[str, Any]:
    g = gpus()
    g[7]["mig_enabled"] = True
    return host(gpus=g, visible_devices="0,1,2,3")


def lost_gpu_not_used() -> dict[str, Any]:
    g = gpus()
    g[6] = {"index": 6, "error": "GPU is lost (fell off the bus; Xid 79)"}
    return host(gpus=g, visible_devices="0,1,2,3")


def pcie_without_a_fabric() -> dict[str, Any]:
    """A PCIe L40S box: no NVSwitch, no fabric, no fabric manager."""
    return host("pcie-l40s")


def two_hgx_nodes() -> dict[str, Any]:
    """Two HGX B300 nodes over the network: two NVLink islands, no IMEX needed."""
    return host("hgx-b300")


def fabric_manager_same_version() -> dict[str, Any]:
    return host("hgx-b300")


def shm_docker_default_one_rank() -> dict[str, Any]:
    """docker's 64 MiB /dev/shm and one GPU: no ranks talk over /dev/shm."""
    d = host("h200-single")
    d["host"]["shm_bytes"] = 64 << 20
    return d


def engine_in_its_own_venv() -> dict[str, Any]:
    """vLLM installed in the engine's interpreter, not in flightcheck's."""
    d = host_doc("hgx-b300")
    d.update(sections("healthy-cu131"))
    return d


Scenario = tuple[str, Callable[[], dict[str, Any]], dict[str, Any]]
SCENARIOS: dict[str, Scenario] = {
    "FC201": ("a_driver_nvml_answers", lambda: host("hgx-b300"), {"tensor_parallel_size": 8}),
    "FC202": (
        "cuda_visible_devices_selecting_enough",
        lambda: host(visible_devices="4,5,6,7"),
        {"tensor_parallel_size": 4},
    ),
    "FC203": ("a_driver_one_minor_behind", driver_minor_behind, {"tensor_parallel_size": 8}),
    "FC204": ("torch_built_for_sm100_on_b300", torch_sm100_on_b300, {"tensor_parallel_size": 8}),
    "FC206": ("a_little_memory_in_use", a_little_memory_in_use, {"tensor_parallel_size": 8}),
    "FC208": ("mig_on_a_gpu_the_launch_does_not_use", mig_on_a_gpu_not_used, {"tensor_parallel_size": 4}),
    "FC210": ("a_lost_gpu_the_launch_does_not_use", lost_gpu_not_used, {"tensor_parallel_size": 4}),
    "FC301": ("a_pcie_box_without_a_fabric", pcie_without_a_fabric, {"tensor_parallel_size": 4}),
    "FC302": ("a_pcie_box_without_a_fabric", pcie_without_a_fabric, {"tensor_parallel_size": 4}),
    "FC306": ("two_hgx_nodes_over_the_network", two_hgx_nodes, {"tensor_parallel_size": 16, "nnodes": 2}),
    "FC308": ("a_fabric_manager_of_the_driver_version", fabric_manager_same_version, {"tensor_parallel_size": 8}),
    "FC601": ("docker_shm_with_one_rank", shm_docker_default_one_rank, {"tensor_parallel_size": 1}),
    "FC701": ("an_engine_in_its_own_venv", engine_in_its_own_venv, {"tensor_parallel_size": 8}),
}


@pytest.mark.parametrize("code", sorted(SCENARIOS), ids=lambda c: f"{c}-{SCENARIOS[c][0]}")
def test_fcnnn_does_not_stop_a_servable_launch(code: str) -> None:
    _name, make, intent = SCENARIOS[code]
    got = evaluated(code, results(from_dict(make()), **intent).get(code, []))
    bad = [
        (r.status.value, r.message)
        for r in got
        if r.status.value in ("fail", "unknown") and r.severity.value == "error"
    ]
    assert bad == []


def test_fc601_does_not_stop_a_large_shm_in_kubernetes() -> None:
    h = host_doc("b300")["host"]
    h.update(shm_bytes=16 << 30, container="kubernetes")
    assert {r.status.value for r in results(facts(host=h), tensor_parallel_size=8)["FC601"]} == {"pass"}


def _stops(doc: dict[str, Any], code: str, **intent: Any) -> list[tuple[str, str]]:
    got = results(from_dict(doc), **intent).get(code, [])
    assert got, f"{code} was not evaluated"
    return [
        (r.status.value, r.message)
        for r in got
        if r.status.value in ("fail", "unknown") and r.severity.value == "error"
    ]


def test_tp1_inside_one_mig_instance_is_not_stopped() -> None:
    """vLLM runs TP 1 in one MIG instance (its CI does): neither the MIG-enabled GPU it is
    on (CUDA_VISIBLE_DEVICES naming the instance's MIG- UUID) nor the instance's UUID,
    which NVML's GPU list does not hold, is a stop."""
    g = gpus()
    g[0]["mig_enabled"] = True
    doc = host(gpus=g, visible_devices="MIG-4b2c9f1e-0000-5a5a-9c9c-123456789abc")
    for code in ("FC202", "FC208"):
        assert _stops(doc, code, tensor_parallel_size=1) == [], code
    plain = host(gpus=g, visible_devices="0")
    assert _stops(plain, "FC208", tensor_parallel_size=1) == []


def test_tp_across_two_mig_instances_is_fc208_not_fc202() -> None:
    """Two MIG instances for TP 2: the stop is MIG's (no NCCL peer path between instances),
    not "matches no GPU"."""
    g = gpus()
    g[0]["mig_enabled"] = True
    doc = host(
        gpus=g, visible_devices="MIG-aaaaaaaa-0000-0000-0000-000000000001,MIG-aaaaaaaa-0000-0000-0000-000000000002"
    )
    assert _stops(doc, "FC202", tensor_parallel_size=2) == []
    (stop,) = _stops(doc, "FC208", tensor_parallel_size=2)
    assert "MIG" in stop[1]
