"""The plugin probes multicast by default where the launch reaches it, once per boot.

The warm-reboot failure: the fabric manager and NVML say Completed/Success, only a bind
fails (CUDA error 401). Each test loads the plugin through its entry point as vLLM calls it
(``support.plugin_driver.plugin``), with the fake libcuda of tests/fakes/fake_libcuda.c on
LD_LIBRARY_PATH (it fails or hangs where told and logs every call, so "did it probe" is
read from its log) and a fake ``systemctl`` that gives the fabric manager's start time.
The host itself (B300 GPUs, driver, NVSwitch) is a recorded snapshot: this machine has no
GPU. Apart from that snapshot (``FLIGHTCHECK_FACTS``) no flightcheck variable is set unless
the test is about one.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from support import FAKES
from support.evaluation import host_doc
from support.launch import FALLBACK_ENV
from support.plugin_driver import VLLM, plugin

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler to build the fake libcuda")


@pytest.fixture(scope="session")
def libcuda(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("libcuda-plugin")
    src = FAKES / "fake_libcuda.c"
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-o", str(out / "libcuda.so.1"), str(src)], check=True)
    return out


def host(tmp_path: Path, name: str = "host.json", **sections: Any) -> Path:
    """The B300 node as NVML and the fabric manager report it after a warm reboot: healthy,
    and no multicast probe recorded (the plugin must run it)."""
    doc = host_doc("b300")
    doc.pop("multicast_probe")
    doc["unavailable"] = {k: v for k, v in doc.get("unavailable", {}).items() if not k.startswith("multicast")}
    doc.update(sections)
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


class Node:
    """One node across launches: its cache, the fake driver's log, the fabric manager's start."""

    def __init__(self, tmp_path: Path, libdir: Path) -> None:
        self.tmp, self.libdir = tmp_path, libdir
        self.bin = tmp_path / "bin"
        self.bin.mkdir(exist_ok=True)
        self.log = tmp_path / "calls.log"
        self.fm_started("81234567")

    def fm_started(self, us: str) -> None:
        p = self.bin / "systemctl"
        p.write_text(
            f"#!/bin/sh\necho LoadState=loaded\necho ActiveState=active\necho ActiveEnterTimestampMonotonic={us}\n"
        )
        p.chmod(p.stat().st_mode | stat.S_IEXEC)

    def launch(self, argv: list[str], facts: Path, **env: str) -> tuple[subprocess.CompletedProcess[str], Any]:
        self.log.unlink(missing_ok=True)
        full = {
            "LD_LIBRARY_PATH": str(self.libdir),
            "FAKE_CUDA_LOG": str(self.log),
            "PATH": os.pathsep.join([str(self.bin), os.environ.get("PATH", "")]),
            "XDG_CACHE_HOME": str(self.tmp / "cache"),
            **env,
        }
        return plugin(self.tmp, argv, [facts], **full)

    def probed(self) -> bool:
        return self.log.exists() and "cuMulticastBindMem" in self.log.read_text()

    def report(self) -> dict[str, Any]:
        return json.loads((self.tmp / "report.json").read_text())


@pytest.fixture
def node(tmp_path, libcuda) -> Node:
    return Node(tmp_path, libcuda)


@pytest.fixture
def serve(tiny_model) -> list[str]:
    return [VLLM, "serve", tiny_model, "-tp", "8", "--port", "8000"]


def fc(report: dict[str, Any], code: str) -> dict[str, Any]:
    return next(c for c in report["checks"] if c["code"] == code)


def test_a_failing_bind_gets_the_fallback_with_no_flightcheck_variable_set(node, serve, tmp_path):
    """The issue's done-when: plugin installed, nothing set, bind fails -> the fallback plan
    is in this process's environment before vLLM parses its arguments (before any weight)."""
    proc, out = node.launch(serve, host(tmp_path), FAKE_CUDA_FAIL="cuMulticastBindMem:401")
    assert out is not None and out["outcome"] == "returned", proc.stderr[-3000:]
    assert node.probed(), "the plugin did not run the multicast probe"
    for name, value in FALLBACK_ENV.items():
        assert out["env"][name] == value
    assert "FC304" in proc.stderr and "multicast probe on 8 GPUs: FAILED at bind: CUDA error 401" in proc.stderr
    assert [k for k in out["env"] if k.startswith("FLIGHTCHECK_")] == ["FLIGHTCHECK_FACTS", "FLIGHTCHECK_PLUGIN_DONE"]
    assert "torch" not in {m.split(".")[0] for m in out["modules"]}


def test_one_probe_per_boot_and_any_key_change_probes_again(node, serve, tmp_path):
    facts = host(tmp_path)
    report = {"FLIGHTCHECK_REPORT": str(tmp_path / "report.json"), "FAKE_CUDA_FAIL": "cuMulticastBindMem:401"}
    node.launch(serve, facts, **report)
    assert node.probed()
    first = node.report()
    assert first["timings"]["probe_s"] > 0 and fc(first, "FC304")["status"] == "fail"

    proc, out = node.launch(serve, facts, **report)  # the same boot, fabric manager, driver, GPUs
    assert not node.log.exists(), "a second launch on the same boot must not touch the driver"
    assert out["env"]["TORCH_SYMM_MEM_DISABLE_MULTICAST"] == "1", proc.stderr[-2000:]
    second = node.report()
    assert fc(second, "FC304")["status"] == "fail" and "from the cache" in fc(second, "FC304")["message"]
    assert second["timings"]["probe_s"] < first["timings"]["probe_s"]

    node.fm_started("99000000")  # the fabric manager restarted (the reset sequence does)
    node.launch(serve, facts, **report)
    assert node.probed()
    node.launch(serve, facts, **report)
    assert not node.log.exists()

    gpus = host_doc("b300")["gpus"]
    gpus[3]["uuid"] = "GPU-0b3e5d21-9c4a-4f7b-a2e8-7d10c6f5ffff"  # a GPU swapped
    node.launch(serve, host(tmp_path, "swapped.json", gpus=gpus), **report)
    assert node.probed()

    driver = {**host_doc("b300")["driver"], "version": "590.99.01"}  # another driver
    node.launch(serve, host(tmp_path, "driver.json", driver=driver), **report)
    assert node.probed()


def test_a_repaired_node_is_not_served_the_old_failure(node, serve, tmp_path):
    facts = host(tmp_path)
    rep = {"FLIGHTCHECK_REPORT": str(tmp_path / "report.json")}
    node.launch(serve, facts, FAKE_CUDA_FAIL="cuMulticastBindMem:401", **rep)
    node.fm_started("120000000")  # stop fm, nvidia-smi -r, start fm
    proc, out = node.launch(serve, facts, **rep)
    assert node.probed() and "TORCH_SYMM_MEM_DISABLE_MULTICAST" not in out["env"], proc.stderr[-2000:]
    assert fc(node.report(), "FC304")["status"] == "pass"


def test_no_switch_for_the_path_stops_before_the_load(node, tmp_path):
    """Beam's all-reduce workspace binds multicast with no switch: a failing bind stops."""
    model = tmp_path / "Beam"
    model.mkdir()
    (model / "config.json").write_text(
        json.dumps({"architectures": ["BeamForCausalLM"], "hidden_size": 4096, "torch_dtype": "bfloat16"})
    )
    argv = [VLLM, "serve", str(model), "-tp", "8"]
    rep = {"FLIGHTCHECK_REPORT": str(tmp_path / "report.json")}
    proc, out = node.launch(argv, host(tmp_path), FAKE_CUDA_FAIL="cuMulticastBindMem:401", **rep)
    assert out["outcome"] == "exit:1" and node.probed(), proc.stderr[-2000:]
    r = fc(node.report(), "FC304")
    assert (r["status"], r["severity"]) == ("fail", "error") and "Beam" in r["message"]


@pytest.mark.parametrize(
    "argv_tail,sections,why",
    [
        (["-tp", "1"], {}, "one GPU"),
        (["-tp", "8"], {"fabric_manager": {"nvswitch_system": False, "service": "not-installed"}}, "no NVSwitch"),
        (["-tp", "8"], {"env": {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                                "VLLM_ALLREDUCE_USE_SYMM_MEM": "0", "VLLM_FLASHINFER_ALLREDUCE_BACKEND": "trtllm"}},
         "no multicast path"),
    ],
)  # fmt: skip
def test_no_probe_where_no_multicast_is_reached_and_the_report_says_why(
    node, tiny_model, tmp_path, argv_tail, sections, why
):
    env = sections.pop("env", None) or {}
    if env:  # live (the plugin's process) and recorded, whichever the engine's environment is read from
        sections["env"] = {**(host_doc("b300").get("env") or {}), **env}
    rep = {"FLIGHTCHECK_REPORT": str(tmp_path / "report.json")}
    proc, out = node.launch([VLLM, "serve", tiny_model, *argv_tail], host(tmp_path, **sections), **rep, **env)
    assert out["outcome"] == "returned", proc.stderr[-2000:]
    assert not node.log.exists(), "no probe (not even cuInit) where no multicast path is reached"
    doc = node.report()
    assert doc["timings"]["probe_s"] == 0.0
    r = fc(doc, "FC304")
    assert r["status"] == "skip" and why in r["message"]


def test_a_hang_is_cut_by_the_budget_and_is_unknown_never_a_stop(node, serve, tmp_path):
    rep = {"FLIGHTCHECK_REPORT": str(tmp_path / "report.json"), "FLIGHTCHECK_PROBE_TIMEOUT": "2"}
    proc, out = node.launch(serve, host(tmp_path), FAKE_CUDA_HANG="cuMulticastBindMem", **rep)
    assert out["outcome"] == "returned", proc.stderr[-2000:]
    doc = node.report()
    r = fc(doc, "FC304")
    assert r["status"] == "unknown" and "no answer within 2s" in r["message"]
    assert 2 <= doc["timings"]["probe_s"] < 15
    assert "TORCH_SYMM_MEM_DISABLE_MULTICAST" not in out["env"]  # inconclusive: no plan either
    node.launch(serve, host(tmp_path), **rep)
    assert node.probed(), "a timeout is never cached"


def test_probe_switch_off_and_force(node, serve, tmp_path):
    facts = host(tmp_path)
    rep = {"FLIGHTCHECK_REPORT": str(tmp_path / "report.json")}
    _proc, out = node.launch(serve, facts, FLIGHTCHECK_PROBE="0", FAKE_CUDA_FAIL="cuMulticastBindMem:401", **rep)
    assert not node.log.exists() and "TORCH_SYMM_MEM_DISABLE_MULTICAST" not in out["env"]
    assert "FLIGHTCHECK_PROBE=0" in fc(node.report(), "FC304")["message"]
    node.launch(serve, facts, **rep)  # probes and caches an ok verdict
    assert node.probed()
    node.launch(serve, facts, FLIGHTCHECK_PROBE="1", **rep)  # forced: probes although cached
    assert node.probed()
    proc, _out = node.launch(serve, facts, FLIGHTCHECK_PROBE="maybe", **rep)
    assert "FLIGHTCHECK_PROBE='maybe'" in proc.stderr and not node.log.exists()  # auto: the cached verdict
