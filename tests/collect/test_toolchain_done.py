"""Issue 2's "done when" for the JIT toolchain, end to end through the CLI on this machine:
a B300 snapshot with only its GPU sections, everything else collected live from the real
nvcc / ninja / compilers and a fake engine venv that has FlashInfer (so JIT is needed)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from support.fake_cuda import fake_nvcc, tool_bin
from support.fake_engine import make_engine
from support.toolchain import CUDA, HAVE_TOOLS, gpu_doc

pytestmark = pytest.mark.skipif(not HAVE_TOOLS, reason="needs nvcc under /usr/local/cuda, ninja and c++")


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    root = tmp_path_factory.mktemp("node")
    (root / "b300-gpus.json").write_text(json.dumps(gpu_doc()))
    engine = make_engine(root / "venv")
    return root, engine


def check(node, *extra: str, **env_over: str | None) -> tuple[int, dict]:
    root, engine = node
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("CUDA_HOME", "CUDA_PATH", "FLASHINFER_NVCC", "FLASHINFER_CUDA_ARCH_LIST")
    }
    env.update(XDG_CACHE_HOME=str(root / "xdg"), FLASHINFER_WORKSPACE_BASE=str(root))
    for k, v in env_over.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    args = [
        "check",
        "--facts",
        str(root / "b300-gpus.json"),
        "-tp",
        "8",
        "--python",
        str(engine),
        "--format",
        "json",
        *extra,
    ]
    proc = subprocess.run(
        [sys.executable, "-m", "flightcheck", *args], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def by_code(report: dict) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for c in report["checks"]:
        out.setdefault(c["code"], []).append(c)
    return out


def failing(report: dict, prefix: str = "FC1") -> set[str]:
    return {c["code"] for c in report["checks"] if c["status"] == "fail" and c["code"].startswith(prefix)}


def test_b300_snapshot_with_the_real_toolkit_has_no_toolchain_failure(node):
    _rc, report = check(node, CUDA_HOME=CUDA)
    checks = by_code(report)
    assert failing(report) == set(), [c for c in report["checks"] if c["status"] == "fail"]
    assert checks["FC101"][0]["status"] == "pass"
    assert re.fullmatch(rf"nvcc \d+\.\d+ at {CUDA}/bin/nvcc", checks["FC101"][0]["message"])
    assert checks["FC102"][0]["message"].endswith("targets 103a")
    assert checks["FC103"][0]["status"] == "pass" and checks["FC111"][0]["status"] == "pass"


def test_fc111_without_cuda_home_the_wrapper_nvcc_leaves_no_libcudart(node):
    # on this machine `which nvcc` is a wrapper script in /usr/local/bin, so FlashInfer would
    # take /usr/local as CUDA home: nvcc runs, the -lcudart link fails
    if os.path.realpath(os.popen("command -v nvcc").read().strip()).startswith(os.path.realpath(CUDA)):
        pytest.skip("the nvcc on PATH here sits inside the toolkit")
    _rc, report = check(node)
    assert not {c for c in failing(report) if c.startswith("FC10")}
    (fc111,) = by_code(report)["FC111"]
    assert fc111["status"] == "fail" and fc111["fix"].startswith("export CUDA_HOME=/usr/local/cuda-")


def test_fc102_fake_nvcc_12_8_first_on_path_fails(node, tmp_path):
    fake = fake_nvcc(tmp_path / "fake-cuda" / "bin" / "nvcc", release="12.8", archs=("90", "100", "101", "120"))
    rc, report = check(node, PATH=f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    assert rc == 1 and report["verdict"] == "not-ready"
    (fc102,) = by_code(report)["FC102"]
    assert fc102["status"] == "fail" and fc102["subject"] == "gpu:0"
    assert f"nvcc 12.8 ({fake})" in fc102["message"] and "103a needs nvcc >= 12.9" in fc102["message"]
    assert fc102["fix"].startswith("export CUDA_HOME=/usr/local/cuda-1")  # a real toolkit on this host


def test_fc105_cuda_home_nonexistent_fails(node):
    rc, report = check(node, CUDA_HOME="/nonexistent")
    assert rc == 1
    (fc105,) = by_code(report)["FC105"]
    assert fc105["status"] == "fail" and fc105["message"] == "CUDA_HOME=/nonexistent does not exist"
    assert fc105["fix"].startswith("export CUDA_HOME=/usr/local/cuda")
    assert "FC101" in failing(report)  # a set CUDA_HOME hides the nvcc on PATH, as in FlashInfer


def test_fc103_path_without_ninja_fails(node, tmp_path):
    bindir = tool_bin(tmp_path / "bin", "nvcc", "c++", "cc", "gcc", "g++", "as", "ld")
    _rc, report = check(node, PATH=str(bindir), CUDA_HOME=CUDA)
    (fc103,) = by_code(report)["FC103"]
    assert fc103["status"] == "fail" and fc103["message"].startswith("no ninja on the engine's PATH")
    # the fake engine is vLLM 0.33 without flashinfer-cubin: vLLM disables FlashInfer instead
    assert "disables FlashInfer at startup" in fc103["message"] and fc103["severity"] == "warning"
    assert fc103["fix"].startswith("apt-get install -y ninja-build")
    assert by_code(report)["FC101"][0]["status"] == "pass"


def test_fc109_deep_compiles_for_sm_103a(node):
    _rc, report = check(node, "--deep", CUDA_HOME=CUDA, FLIGHTCHECK_NO_CACHE="1")
    (fc109,) = by_code(report)["FC109"]
    assert fc109["status"] == "pass", fc109
    assert fc109["message"].startswith("103a compiled and linked in ")
    assert failing(report) == set()
