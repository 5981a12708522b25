"""The Ray fan-out's logic against a fake ``ray`` module (which nodes, how they are named,
what a failed / late / bogus answer becomes), and the node side of it without Ray
(FLIGHTCHECK_FACTS, the checkpoint section, CUDA_VISIBLE_DEVICES as the node has it)."""

from __future__ import annotations

import json
import os
import socket
import sys
import types
from typing import Any

import pytest

from flightcheck._cluster import node as node_side
from flightcheck._cluster import ray_fanout
from flightcheck._vocabulary.errors import UsageError
from flightcheck._vocabulary.facts import loads
from flightcheck._vocabulary.intent import Intent
from support.evaluation import host_doc


class FakeTaskError(Exception):
    """Like RayTaskError: the task's own exception is in ``cause``."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(f"ray::flightcheck-collect() (pid=1, ip=10.0.0.2)\nTraceback ...\n{cause!r}")
        self.cause = cause


class FakeRay(types.ModuleType):
    """Just enough of ``ray`` for the fan-out: nodes, remote/options, wait, get, cancel."""

    def __init__(self, nodes: list[dict[str, Any]], answers: dict[str, Any]) -> None:
        super().__init__("ray")
        self._nodes, self.answers = nodes, answers
        self.inited: dict[str, Any] | None = None
        self.submitted: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
        self.cancelled: list[tuple[str, bool]] = []
        self.shut = False
        self.waited: float | None = None

    def is_initialized(self) -> bool:
        return self.inited is not None

    def init(self, **kw: Any) -> None:
        if self.answers.get("init_error"):
            raise ConnectionError("Could not find any running Ray instance.\nmore text")
        self.inited = kw

    def shutdown(self) -> None:
        self.shut = True

    def nodes(self) -> list[dict[str, Any]]:
        return self._nodes

    def remote(self, fn: Any) -> Any:
        ray = self

        class Remote:
            def options(self, **opts: Any) -> Any:
                self.opts = opts
                return self

            def remote(self, fields: dict[str, Any]) -> str:
                node_id = self.opts["scheduling_strategy"].node_id
                ray.submitted.append((node_id, self.opts, fields))
                return node_id  # the "object ref" is the node id

        assert fn is node_side.ray_task
        return Remote()

    def wait(self, refs: list[str], num_returns: int, timeout: float) -> tuple[list[str], list[str]]:
        self.waited = timeout
        ready = [r for r in refs if self.answers[r] != "hang"]
        return ready, [r for r in refs if r not in ready]

    def get(self, ref: str) -> Any:
        answer = self.answers[ref]
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def cancel(self, ref: str, force: bool = False) -> None:
        self.cancelled.append((ref, force))


class Strategy:
    def __init__(self, node_id: str, soft: bool) -> None:
        self.node_id, self.soft = node_id, soft


def install(monkeypatch: pytest.MonkeyPatch, fake: FakeRay) -> None:
    util = types.ModuleType("ray.util")
    strategies = types.ModuleType("ray.util.scheduling_strategies")
    strategies.NodeAffinitySchedulingStrategy = Strategy  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "ray", fake)
    monkeypatch.setitem(sys.modules, "ray.util", util)
    monkeypatch.setitem(sys.modules, "ray.util.scheduling_strategies", strategies)


def ray_node(node_id: str, host: str, gpus: int = 8, alive: bool = True) -> dict[str, Any]:
    return {
        "NodeID": node_id,
        "NodeManagerHostname": host,
        "Alive": alive,
        "Resources": {"CPU": 64.0, **({"GPU": float(gpus)} if gpus else {})},
    }


def snapshot(hostname: str) -> dict[str, Any]:
    doc = host_doc("b300")
    doc["host"]["hostname"] = hostname
    return {"facts": json.dumps(doc), "hostname": hostname, "duration_s": 0.8}


def test_one_pinned_task_per_gpu_node_and_what_each_answer_becomes(monkeypatch):
    nodes = [
        ray_node("aaaa1111", "head", gpus=0),  # CPU-only head: vLLM puts no rank there
        ray_node("bbbb2222", "gpu-node"),
        ray_node("cccc3333", "gpu-node"),  # two raylets on one host
        ray_node("dddd4444", "gpu-3"),
        ray_node("eeee5555", "gpu-4"),
        ray_node("ffff6666", "gpu-5"),
        ray_node("9999dead", "gone", alive=False),
    ]
    answers = {
        "bbbb2222": snapshot("gpu-node"),
        "cccc3333": FakeTaskError(ModuleNotFoundError("No module named 'flightcheck'")),
        "dddd4444": "hang",
        "eeee5555": {"facts": '{"host": {"cpu_count": "lots"}}'},
        "ffff6666": snapshot("gpu-5"),
    }
    fake = FakeRay(nodes, answers)
    install(monkeypatch, fake)
    got = ray_fanout.gather("10.0.0.1:6379", Intent(model="/models/M", tensor_parallel_size=8, nnodes=4), timeout=30)
    # pinned hard, no CPU asked, never retried; the dead node and the CPU-only head get no task
    assert sorted(n for n, _, _ in fake.submitted) == ["bbbb2222", "cccc3333", "dddd4444", "eeee5555", "ffff6666"]
    for _, opts, fields in fake.submitted:
        assert opts["scheduling_strategy"].soft is False and opts["num_cpus"] == 0 and opts["max_retries"] == 0
        assert fields["model"] == "/models/M"  # each node reads its own copy for the checkpoint section
    assert fake.inited["address"] == "10.0.0.1:6379" and fake.shut and fake.waited == 30
    assert got.skipped == {"head": "no GPU resource: vLLM places no rank there"}
    assert sorted(got.nodes) == ["gpu-5", "gpu-node-bbbb2222"]
    assert got.unreachable == {
        "gpu-node-cccc3333": "collection failed: ModuleNotFoundError: No module named 'flightcheck'",
        "gpu-3": "no answer within 30s (--timeout)",
        "gpu-4": got.unreachable["gpu-4"],
    }
    assert (
        got.unreachable["gpu-4"].startswith("sent an invalid snapshot:")
        and "host.cpu_count" in got.unreachable["gpu-4"]
    )
    assert fake.cancelled == [("dddd4444", True)]  # the hung worker is killed, not left behind


def test_without_gpu_resources_every_alive_node_is_asked(monkeypatch):
    fake = FakeRay([ray_node("aaaa1111", "laptop", gpus=0)], {"aaaa1111": snapshot("laptop")})
    install(monkeypatch, fake)
    got = ray_fanout.gather("auto", Intent(), timeout=5)
    assert list(got.nodes) == ["laptop"] and got.skipped == {}


def test_an_existing_connection_is_reused_and_left_open(monkeypatch):
    fake = FakeRay([ray_node("aaaa1111", "n1")], {"aaaa1111": snapshot("n1")})
    fake.inited = {"address": "already"}
    install(monkeypatch, fake)
    ray_fanout.gather("auto", Intent(), timeout=5)
    assert fake.inited == {"address": "already"} and not fake.shut


def test_no_cluster_and_no_ray_are_usage_errors(monkeypatch):
    fake = FakeRay([], {"init_error": True})
    install(monkeypatch, fake)
    with pytest.raises(
        UsageError, match=r"--ray auto: cannot connect to a Ray cluster: Could not find any running Ray instance\.$"
    ):
        ray_fanout.gather("auto", Intent(), timeout=5)
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(UsageError, match=r"pip install 'flightcheck\[ray\]'"):
        ray_fanout.gather("auto", Intent(), timeout=5)


def test_nothing_listening_fails_fast_instead_of_retrying_for_minutes(monkeypatch):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again when the block ends: nothing listens there
    install(monkeypatch, FakeRay([], {}))
    with pytest.raises(UsageError, match=f"nothing answers at 127.0.0.1:{port}"):
        ray_fanout.gather(f"127.0.0.1:{port}", Intent(), timeout=5)
    monkeypatch.setenv("RAY_ADDRESS", f"ray://127.0.0.1:{port}")
    with pytest.raises(UsageError, match="nothing answers"):
        ray_fanout.gather("auto", Intent(), timeout=5)


# ------------------------------------------------------------------ the node side


def test_facts_files_from_the_environment(tmp_path):
    from flightcheck._collect import env_facts_files

    assert env_facts_files({}) == []
    env = {"FLIGHTCHECK_FACTS": os.pathsep.join(["/a.json", "", " ", "/b.json"])}
    assert env_facts_files(env) == ["/a.json", "/b.json"]


def test_collect_node_honours_flightcheck_facts_and_records_an_unreadable_model(tmp_path):
    doc = host_doc("b300")
    recorded = {k: doc[k] for k in ("driver", "gpus", "fabric_manager", "imex")}
    path = tmp_path / "node.json"
    path.write_text(json.dumps(recorded))
    env = {**os.environ, "FLIGHTCHECK_FACTS": str(path), "CUDA_VISIBLE_DEVICES": "0,1"}
    missing = tmp_path / "no-such-model"
    facts = loads(node_side.collect_node({"model": str(missing), "tensor_parallel_size": 2, "future_field": 1}, env))
    assert facts.driver.version == doc["driver"]["version"] and len(facts.gpus) == 8  # from the node's file
    assert facts.host and facts.host.hostname == socket.gethostname()  # the rest collected live
    assert facts.visible_devices == "0,1" and facts.env["FLIGHTCHECK_FACTS"] == str(path)
    # the model is not on this node: FC802 will name the node, and its other facts survive
    assert facts.checkpoint is not None and facts.checkpoint.files is None
    assert facts.unavailable["checkpoint"] == f"model {missing} not found on this node"
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(UsageError, match="bad.json"):
        node_side.collect_node({}, {**os.environ, "FLIGHTCHECK_FACTS": str(bad)})


@pytest.mark.parametrize(("original", "expected"), [(None, None), (["0", "1", "2", "3"], "0,1,2,3"), ([], "")])
def test_worker_env_restores_the_nodes_cuda_visible_devices(monkeypatch, original, expected):
    worker = types.ModuleType("ray._private.worker")
    worker.global_worker = types.SimpleNamespace(original_visible_accelerator_ids={"GPU": original})  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "ray._private.worker", worker)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # what an old Ray sets for a task without GPUs
    assert node_side.worker_env().get("CUDA_VISIBLE_DEVICES") == expected


def test_worker_env_outside_ray_is_the_environment(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray._private.worker", None)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    assert node_side.worker_env()["CUDA_VISIBLE_DEVICES"] == "2,3"


def test_ray_task_returns_the_snapshot_as_json(monkeypatch, tmp_path):
    monkeypatch.setenv(node_side.DELAY_ENV, "0.01")
    monkeypatch.setitem(sys.modules, "ray._private.worker", None)
    doc = host_doc("b300")
    path = tmp_path / "gpus.json"
    path.write_text(json.dumps({"gpus": doc["gpus"], "driver": doc["driver"]}))
    monkeypatch.setenv("FLIGHTCHECK_FACTS", str(path))
    answer = node_side.ray_task({"engine": "vllm"})
    assert answer["hostname"] == socket.gethostname() and answer["duration_s"] >= 0.01
    assert loads(answer["facts"]).gpus[0].name == doc["gpus"][0]["name"]
