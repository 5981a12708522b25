"""``flightcheck cluster --ray`` against a real local Ray cluster.

One head node is started per module (``ray start --head --block`` on free ports, in its own
process group and temp dir); a second node that never answers in time (its collection
sleeps, through the test hook in its ``ray start`` environment) joins for the FC803 test.
Both are stopped by killing their own process groups: ``ray stop`` would stop every Ray
process on the machine, including ones this test did not start.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from support import REPO
from support.cli import cli

pytest.importorskip("ray")

RAY = str(Path(sys.executable).with_name("ray"))
HOOK_DELAY = "FLIGHTCHECK_TEST_COLLECT_DELAY_S"


_HANDED_OUT: set[int] = set()


def free_port() -> int:
    """A free port never handed out before in this run: the kernel may give a just-closed
    port again, and Ray refuses two of its components on one port (a CI run once got the
    GCS and the dashboard on the same one)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port


class RayNode:
    """One ``ray start --block`` process (and everything it spawns, same process group)."""

    def __init__(self, args: list[str], log: Path, env: dict[str, str]) -> None:
        self.log = log
        self.proc = subprocess.Popen(
            [
                RAY,
                "start",
                "--block",
                "--disable-usage-stats",
                "--num-cpus=1",
                "--num-gpus=0",
                "--node-ip-address=127.0.0.1",
                f"--dashboard-agent-listen-port={free_port()}",
                *args,
            ],
            stdout=log.open("w"),
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )

    def wait_started(self, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if "Ray runtime started" in self.log.read_text(errors="replace"):
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.3)
        raise RuntimeError(f"ray start did not come up: {self.log.read_text(errors='replace')[-2000:]}")

    def stop(self) -> None:
        """SIGTERM to ``ray start --block``, which then stops what it started (about 2 s);
        SIGKILL to the process group for anything left."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()


def kill_leftovers(marker: str) -> None:
    """Kill processes whose command line names this test's Ray temp dir (workers)."""
    for pid_dir in Path("/proc").glob("[0-9]*"):
        try:
            cmd = (pid_dir / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmd and int(pid_dir.name) != os.getpid():
            try:
                os.kill(int(pid_dir.name), signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[dict]:
    """A one-node Ray cluster whose node overrides its host facts through FLIGHTCHECK_FACTS."""
    tmp = Path(tempfile.mkdtemp(prefix="fcray", dir="/tmp"))  # short: Ray's socket paths have a length limit
    facts_file = tmp / "recorded-host.json"
    facts_file.write_text(json.dumps({"host": {"hostname": "recorded-host", "shm_bytes": 64 << 20}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", HOOK_DELAY))}
    env["FLIGHTCHECK_FACTS"] = str(facts_file)
    port = free_port()
    nodes: list[RayNode] = []
    t0 = time.monotonic()
    # every listening port free and chosen here: two test runs on one machine must not collide
    head = RayNode(
        [
            "--head",
            f"--port={port}",
            "--include-dashboard=false",
            f"--dashboard-port={free_port()}",
            f"--ray-client-server-port={free_port()}",
            f"--temp-dir={tmp}",
        ],
        tmp / "head.log",
        env,
    )
    nodes.append(head)
    try:
        head.wait_started()
        info = {
            "address": f"127.0.0.1:{port}",
            "tmp": tmp,
            "env": env,
            "nodes": nodes,
            "started_s": time.monotonic() - t0,
        }
        yield info
    finally:
        for node in reversed(nodes):
            node.stop()
        kill_leftovers(str(tmp))
        subprocess.run(["rm", "-rf", str(tmp)], check=False)


def run_cluster(address: str, *args: str, timeout: float = 180) -> tuple[subprocess.CompletedProcess[str], dict]:
    proc = cli("cluster", "--ray", address, "--format", "json", *args, timeout=timeout)
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc, json.loads(proc.stdout)


def test_one_ray_node_is_collected_there_and_judged_here(ray_cluster):
    proc, rep = run_cluster(ray_cluster["address"], "-tp", "2", "--timeout", "120")
    assert rep["schema"] == "flightcheck.cluster-report/v1"
    assert rep["source"] == {"kind": "ray", "address": ray_cluster["address"], "timeout_s": 120.0}
    assert rep["unreachable"] == {} and rep["skipped"] == {}
    [(name, node)] = rep["nodes"].items()
    assert name == socket.gethostname()  # named by the Ray node's hostname
    # collected on the node, with the node's own FLIGHTCHECK_FACTS laid over the live facts
    assert node["host"] == "recorded-host"
    [shm] = [c for c in node["checks"] if c["code"] == "FC601"]
    assert shm["status"] == "fail" and "/dev/shm is 64 MiB" in shm["message"]
    # ... and the rest collected live there (the env section names the facts file)
    statuses = {c["code"]: c["status"] for c in rep["checks"]}
    assert statuses["FC803"] == "pass" and statuses["FC801"] == "skip"
    assert proc.returncode == rep["exit_code"] == 1  # FC601 blocks: exit codes as for `check`
    print(
        f"\nray: head started in {ray_cluster['started_s']:.1f}s, "
        f"one-node collection {rep['timings']['collect_s']:.1f}s"
    )


def test_the_ray_recipe_refuses_to_serve_on_a_node_that_is_not_ready(ray_cluster, tmp_path):
    recipe = REPO / "recipes" / "ray" / "preflight-and-serve.sh"
    fc = tmp_path / "flightcheck"
    fc.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m flightcheck "$@"\n')
    vllm = tmp_path / "vllm"
    vllm.write_text(f"#!/bin/sh\ntouch {tmp_path}/vllm-started\n")
    fc.chmod(0o755)
    vllm.chmod(0o755)
    env = {
        **os.environ,
        "RAY_ADDRESS": ray_cluster["address"],
        "FLIGHTCHECK": str(fc),
        "VLLM": str(vllm),
        "TP": "2",
        "PP": "1",
    }
    proc = subprocess.run(
        ["bash", str(recipe), "/models/absent"], capture_output=True, text=True, env=env, timeout=180, check=False
    )
    # the node's recorded /dev/shm (64 MiB, through FLIGHTCHECK_FACTS) cannot hold 2 ranks
    assert proc.returncode == 1 and "FC601" in proc.stdout and "Verdict: not ready" in proc.stdout
    assert "not starting vLLM" in proc.stderr and not (tmp_path / "vllm-started").exists()


def test_fc803_a_node_that_does_not_answer(ray_cluster):
    env = {**ray_cluster["env"], HOOK_DELAY: "300"}  # this node's collection sleeps past any timeout
    env.pop("FLIGHTCHECK_FACTS")
    slow = RayNode([f"--address={ray_cluster['address']}"], ray_cluster["tmp"] / "slow.log", env)
    ray_cluster["nodes"].append(slow)
    slow.wait_started()
    t0 = time.monotonic()
    proc, rep = run_cluster(ray_cluster["address"], "-tp", "1", "--timeout", "8")
    took = time.monotonic() - t0
    assert len(rep["nodes"]) == 1, rep["unreachable"]  # the head still answered
    [(late, why)] = rep["unreachable"].items()
    assert why == "no answer within 8s (--timeout)"
    [f] = [c for c in rep["checks"] if c["code"] == "FC803" and c["status"] == "fail"]
    assert f["subject"] == f"node:{late}" and "gave no facts" in f["message"] and f["severity"] == "error"
    assert proc.returncode == 1 and rep["verdict"] == "not-ready"
    # both nodes share this machine's hostname, so each is told apart by its Ray node id
    assert late != next(iter(rep["nodes"])) and late.startswith(socket.gethostname() + "-")
    print(f"\nray: second node joined, FC803 run took {took:.1f}s with --timeout 8")
