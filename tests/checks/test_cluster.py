"""Cross-node checks FC801-FC805 on recorded node snapshots (tests/fixtures/cluster).

The fixtures are two HGX B300 nodes (each its own NVLink fabric, a local fabric manager)
and two GB200 NVL72 trays (one multi-node NVLink domain, IMEX active), each with a
``checkpoint`` section for the same 4-shard model. Every check is shown to fire on a
realistic fault and to stay silent on the healthy set.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from flightcheck import Intent
from flightcheck._checks.cluster.evaluate import ClusterReport, evaluate_cluster
from flightcheck._vocabulary.facts import from_dict
from support import FIXTURES
from support.evaluation import crashes

FIX = FIXTURES / "cluster"
SHARD3 = "model-00003-of-00004.safetensors"


def doc(name: str) -> dict[str, Any]:
    """A fresh copy of a recorded node snapshot."""
    return json.loads((FIX / f"{name}.json").read_text())


def hgx() -> tuple[dict[str, Any], dict[str, Any]]:
    return doc("hgx-b300-a"), doc("hgx-b300-b")


def gb200() -> tuple[dict[str, Any], dict[str, Any]]:
    return doc("gb200-tray-03"), doc("gb200-tray-04")


def run(
    *docs: dict[str, Any], unreachable: dict[str, str] | None = None, expected: int | None = None, **intent: Any
) -> ClusterReport:
    nodes = {d["host"]["hostname"]: from_dict(d) for d in docs}
    intent.setdefault("nnodes", len(nodes) + len(unreachable or {}))
    return evaluate_cluster(nodes, Intent(**intent), unreachable=unreachable, expected=expected)


def results(report: ClusterReport, code: str) -> list:
    got = [r for r in report.checks if r.code == code]
    assert got, f"{code} was not evaluated"
    return got


def failing(report: ClusterReport, code: str) -> list:
    return [r for r in results(report, code) if r.status.value == "fail"]


def test_two_healthy_nodes_no_cross_node_failure():
    report = run(*hgx(), tensor_parallel_size=8, pipeline_parallel_size=2)
    assert not [r for r in report.checks if r.status.value == "fail"], [r.message for r in report.checks]
    statuses = {r.code: r.status.value for r in report.checks}
    assert statuses == {"FC801": "pass", "FC802": "pass", "FC803": "pass", "FC804": "pass", "FC805": "skip"}
    assert "2 nodes hold the same copy: 9 files" in results(report, "FC802")[0].message
    assert report.verdict == "ready" and report.exit_code == 0
    assert set(report.nodes) == {"gpu-b300-017", "gpu-b300-018"}
    # each node was evaluated as `check` would, with its own facts
    assert all(rep.checks for rep in report.nodes.values())


def test_literally_identical_snapshots_stay_silent():
    a = doc("hgx-b300-a")
    b = copy.deepcopy(a)
    b["host"]["hostname"] = "gpu-b300-099"  # a copied file
    report = run(a, b, tensor_parallel_size=8, pipeline_parallel_size=2)
    assert not [r for r in report.checks if r.status.value == "fail"]
    assert crashes(report.checks) == []


def test_hgx_nodes_reporting_one_nonzero_fabric_uuid_are_still_separate_islands():
    # Whether HGX B200/B300 report a real cluster UUID is not confirmed; even if two did,
    # each runs its own fabric manager and no IMEX: no multi-node domain is implied.
    a, b = hgx()
    for d in (a, b):
        for g in d["gpus"]:
            g["fabric"].update(cluster_uuid="c41f0e3a-6b2d-4e91-9f57-2a8d13b0e6c4", clique_id=32766)
    assert results(run(a, b, tensor_parallel_size=16), "FC805")[0].status.value == "skip"


def test_fc801_names_the_node_and_both_driver_versions():
    a, b = hgx()
    b["driver"]["version"] = "580.95.05"
    report = run(a, b, tensor_parallel_size=8, pipeline_parallel_size=2)
    [f] = failing(report, "FC801")
    assert f.subject == "node:gpu-b300-018"
    assert (
        "gpu-b300-018" in f.message
        and "580.95.05" in f.message
        and "590.48.01" in f.message
        and "gpu-b300-017" in f.message
    )
    assert f.evidence["driver"] == {"node": "580.95.05", "reference": "590.48.01", "reference_nodes": ["gpu-b300-017"]}
    assert "driver 590.48.01" in f.fix
    assert report.exit_code == 1 and report.verdict == "not-ready"


def test_fc801_majority_decides_and_pip_fix_pins_the_reference():
    a, b = hgx()
    c = copy.deepcopy(a)
    c["host"]["hostname"] = "gpu-b300-019"
    b["python"]["packages"]["torch"] = "2.9.0+cu128"
    b["python"]["packages"]["nvidia-nccl-cu13"] = "2.27.7"
    report = run(a, b, c, tensor_parallel_size=8, pipeline_parallel_size=3)
    [f] = failing(report, "FC801")
    assert f.subject == "node:gpu-b300-018"
    assert "torch 2.9.0+cu128 (2.14.0+cu130 on gpu-b300-017, gpu-b300-019)" in f.message
    assert "NCCL nvidia-nccl-cu13 2.27.7" in f.message
    assert f.fix == (
        "/srv/vllm/.venv/bin/python3 -m pip install 'torch==2.14.0+cu130' 'nvidia-nccl-cu13==2.28.9'"
        " --extra-index-url https://download.pytorch.org/whl/cu130"
    )


def test_fc801_compares_the_engine_that_is_launched():
    a, b = hgx()
    b["python"]["packages"]["sglang"] = "0.5.23"  # vllm identical, sglang differs
    a["python"]["packages"]["sglang"] = "0.5.20"
    assert not failing(run(a, b, tensor_parallel_size=8, nnodes=2), "FC801")
    [f] = failing(run(a, b, engine="sglang", tensor_parallel_size=8, nnodes=2), "FC801")
    assert "sglang" in f.message


def test_fc801_ignores_versions_nobody_recorded():
    a, b = hgx()
    b["python"] = None
    report = run(a, b, tensor_parallel_size=8, pipeline_parallel_size=2)
    assert results(report, "FC801")[0].status.value == "pass"
    assert "driver" in results(report, "FC801")[0].message


def test_fc802_names_the_node_and_the_shard_of_another_size():
    a, b = hgx()
    b["checkpoint"]["files"][SHARD3] -= 1 << 20  # truncated copy
    report = run(a, b, tensor_parallel_size=8, pipeline_parallel_size=2)
    [f] = failing(report, "FC802")
    assert f.subject == "node:gpu-b300-018"
    assert SHARD3 in f.message and f"{a['checkpoint']['files'][SHARD3]:,}" in f.message
    assert f.evidence["files"][SHARD3]["issue"] == "size"
    assert f"rsync -a --checksum gpu-b300-017:/models/Kimi-K3-MXFP4/{SHARD3} /models/Kimi-K3-MXFP4/{SHARD3}" in f.fix


def test_fc802_missing_and_header_and_extra_files():
    a, b = hgx()
    c = copy.deepcopy(a)
    c["host"]["hostname"] = "gpu-b300-019"
    del b["checkpoint"]["files"]["tokenizer.json"]
    b["checkpoint"]["header_sha256"][SHARD3] = "0" * 64  # same size, another header
    c["checkpoint"]["files"]["model-00005-of-00005.safetensors"] = 123_456  # left from another revision
    c["checkpoint"]["files"]["README.md"] = 1  # documentation never counts
    report = run(a, b, c, tensor_parallel_size=8, pipeline_parallel_size=3)
    by_subject = {r.subject: r for r in failing(report, "FC802")}
    assert set(by_subject) == {"node:gpu-b300-018", "node:gpu-b300-019"}
    issues_b = {k: v["issue"] for k, v in by_subject["node:gpu-b300-018"].evidence["files"].items()}
    assert issues_b == {"tokenizer.json": "missing", SHARD3: "header"}
    extra = by_subject["node:gpu-b300-019"]
    assert extra.evidence["files"] == {
        "model-00005-of-00005.safetensors": {
            "issue": "extra",
            "node": 123_456,
            "reference": None,
            "reference_nodes": ["gpu-b300-017", "gpu-b300-018"],
        }
    }
    assert "rm /models/Kimi-K3-MXFP4/model-00005-of-00005.safetensors" in extra.fix


def test_fc802_without_sections_skips_and_with_model_needs_them():
    a, b = hgx()
    a["checkpoint"] = b["checkpoint"] = None
    assert results(run(a, b, tensor_parallel_size=8, nnodes=2), "FC802")[0].status.value == "skip"
    a, b = hgx()
    b["checkpoint"] = None
    report = run(a, b, model="/models/Kimi-K3-MXFP4", tensor_parallel_size=8, nnodes=2)
    [r] = results(report, "FC802")
    assert r.status.value == "unknown" and r.subject == "node:gpu-b300-018" and "collect --model" in r.message
    assert report.verdict == "unknown" and report.exit_code == 3
    b["unavailable"]["checkpoint"] = "model /models/Kimi-K3-MXFP4 not found"
    [f] = failing(run(a, b, model="/models/Kimi-K3-MXFP4", tensor_parallel_size=8, nnodes=2), "FC802")
    assert "could not read the model: model /models/Kimi-K3-MXFP4 not found" in f.message


def test_nodes_are_judged_without_reading_the_model_here():
    report = run(*hgx(), model="/nonexistent/model/on/this/machine", tensor_parallel_size=8, nnodes=2)
    for rep in report.nodes.values():
        assert rep.intent.model is None
        assert not [r for r in rep.checks if r.code.startswith(("FC4", "FC5")) and r.status.value == "fail"]
    assert report.intent.model == "/nonexistent/model/on/this/machine"
    assert results(report, "FC802")[0].status.value == "pass"


def test_fc803_unreachable_node_and_missing_snapshots():
    a, b = hgx()
    report = run(
        a,
        b,
        unreachable={"gpu-b300-020": "no answer within 60s (--timeout)"},
        tensor_parallel_size=8,
        pipeline_parallel_size=3,
    )
    [f] = failing(report, "FC803")
    assert f.subject == "node:gpu-b300-020" and "no answer within 60s" in f.message
    assert report.exit_code == 1
    [f] = failing(run(a, b, expected=4, tensor_parallel_size=8, nnodes=4), "FC803")
    assert (
        f.subject == "cluster" and "4 nodes expected (--nnodes), 2 gave facts (gpu-b300-017, gpu-b300-018)" in f.message
    )
    [w] = failing(run(a, b, expected=1, tensor_parallel_size=8), "FC803")
    assert w.severity.value == "warning" and "2 snapshots for --nnodes 1" in w.message
    assert results(run(a, b, expected=2, tensor_parallel_size=8), "FC803")[0].status.value == "pass"


def test_fc804_gpu_count_and_model():
    a, b = hgx()
    b["gpus"] = b["gpus"][:4]
    [f] = failing(run(a, b, tensor_parallel_size=8, pipeline_parallel_size=2), "FC804")
    assert f.severity.value == "warning" and f.subject == "node:gpu-b300-018"
    assert "4x NVIDIA B300 SXM6 AC" in f.message and "8x NVIDIA B300 SXM6 AC" in f.message
    a, b = hgx()
    b["visible_devices"] = "0,1,2,3,4,5"  # the engine sees fewer GPUs there
    [f] = failing(run(a, b, tensor_parallel_size=8, pipeline_parallel_size=2), "FC804")
    assert f.evidence["gpus"] == 6
    a, b = hgx()
    for g in b["gpus"]:
        g["name"] = "NVIDIA B200"
    [f] = failing(run(a, b, tensor_parallel_size=8, pipeline_parallel_size=2), "FC804")
    assert "NVIDIA B200" in f.message
    report = run(a, b, tensor_parallel_size=8, pipeline_parallel_size=2)
    assert report.exit_code == 0  # a warning does not block ...
    strict = evaluate_cluster(
        {d["host"]["hostname"]: from_dict(d) for d in (a, b)},
        Intent(tensor_parallel_size=8, pipeline_parallel_size=2, nnodes=2),
        strict=True,
    )
    assert strict.exit_code == 1  # ... unless --strict


def test_fc805_healthy_nvl72_trays_share_one_domain():
    report = run(*gb200(), tensor_parallel_size=8)
    [r] = results(report, "FC805")
    assert r.status.value == "pass" and "7d2b9c54-1e0f-4a83-b6c1-9e0d4f2a7b31" in r.message


def test_fc805_split_domain_is_an_error_when_tp_spans_nodes():
    a, b = gb200()
    for g in b["gpus"]:
        g["fabric"]["cluster_uuid"] = "0c9a3e11-5d7f-4b2a-8e64-1f3b5a7c9d20"
    [f] = failing(run(a, b, tensor_parallel_size=8), "FC805")
    assert f.severity.value == "error" and f.subject == "node:nvl72-r2-tray04"
    assert (
        "0c9a3e11-5d7f-4b2a-8e64-1f3b5a7c9d20" in f.message and "7d2b9c54" in f.message and "spans nodes" in f.message
    )
    # TP 4 stays inside each tray: only pipeline stages cross the split
    [w] = failing(run(a, b, tensor_parallel_size=4, pipeline_parallel_size=2), "FC805")
    assert w.severity.value == "warning"


def test_fc805_another_clique_or_no_fabric_is_a_split():
    a, b = gb200()
    b["gpus"][2]["fabric"]["clique_id"] = 1
    [f] = failing(run(a, b, tensor_parallel_size=8), "FC805")
    assert "clique 1" in f.message and "clique 32766" in f.message
    a, b = gb200()
    for g in b["gpus"]:
        g["fabric"]["state"] = "in_progress"
    [f] = failing(run(a, b, tensor_parallel_size=8), "FC805")
    assert "reports no multi-node NVLink fabric" in f.message


def test_fc805_node_without_imex_channel():
    a, b = gb200()
    b["imex"] = {"channels": [], "service": "inactive"}
    [f] = failing(run(a, b, tensor_parallel_size=8), "FC805")
    assert f.subject == "node:nvl72-r2-tray04" and "no IMEX channel" in f.message
    assert "mknod /dev/nvidia-caps-imex-channels/channel0" in f.fix and "systemctl restart nvidia-imex" in f.fix
    b["imex"] = None
    [u] = results(run(a, b, tensor_parallel_size=8), "FC805")
    assert u.status.value == "unknown"


def test_fc805_skips_separate_hgx_islands_even_without_imex():
    report = run(*hgx(), tensor_parallel_size=16)  # TP across two HGX nodes goes over the network
    assert results(report, "FC805")[0].status.value == "skip"


@pytest.mark.parametrize("code", ["FC801", "FC802", "FC804", "FC805"])
def test_one_node_has_nothing_to_compare(code):
    report = run(doc("hgx-b300-a"), tensor_parallel_size=8)
    assert results(report, code)[0].status.value == "skip"


def test_node_failures_count_in_the_cluster_verdict():
    a, b = hgx()
    b["host"]["shm_bytes"] = 64 << 20  # container default /dev/shm on one node
    report = run(a, b, tensor_parallel_size=8, pipeline_parallel_size=2)
    assert report.nodes["gpu-b300-018"].verdict == "not-ready" and report.nodes["gpu-b300-017"].verdict == "ready"
    assert not [r for r in report.checks if r.status.value == "fail"]
    assert report.verdict == "not-ready" and report.exit_code == 1


def test_fc802_config_content_and_revision():
    a, b = hgx()
    c = copy.deepcopy(a)
    c["host"]["hostname"] = "gpu-b300-019"
    for d in (a, b, c):
        d["checkpoint"].update(config_sha256="aa" * 32, commit="1f2e3d4c" * 5, model="moonshotai/Kimi-K3")
    b["checkpoint"]["config_sha256"] = "bb" * 32  # config.json edited on one node, same size
    c["checkpoint"]["commit"] = "9" * 40  # another snapshot of the repo in that node's cache
    report = run(a, b, c, tensor_parallel_size=8, pipeline_parallel_size=3)
    by_subject = {r.subject: r for r in failing(report, "FC802")}
    assert by_subject["node:gpu-b300-018"].evidence["files"]["config.json"]["issue"] == "content"
    rev = by_subject["node:gpu-b300-019"]
    assert "revision 999999999999" in rev.message and "1f2e3d4c1f2e" in rev.message
    assert "huggingface-cli download moonshotai/Kimi-K3 --revision " + "1f2e3d4c" * 5 in rev.fix


def test_fc803_missing_ray_nodes_get_a_ray_fix():
    nodes = {d["host"]["hostname"]: from_dict(d) for d in hgx()}
    report = evaluate_cluster(
        nodes, Intent(tensor_parallel_size=8, nnodes=3), expected=3, source={"kind": "ray", "address": "auto"}
    )
    [f] = failing(report, "FC803")
    assert "ray start --address=" in f.fix and "scontrol" not in f.fix


def test_fc805_imex_not_installed_fix_installs_the_drivers_branch():
    a, b = gb200()
    b["imex"] = {"channels": [], "service": "not-installed"}
    [f] = failing(run(a, b, tensor_parallel_size=8), "FC805")
    assert "apt-get install -y nvidia-imex-580 && sudo systemctl enable --now nvidia-imex" in f.fix


def test_fc803_no_node_at_all_is_never_ready():
    report = evaluate_cluster({}, Intent(), source={"kind": "ray", "address": "auto"})
    [f] = failing(report, "FC803")
    assert f.message == "no node gave facts" and report.exit_code == 1
