"""The ``--deep`` compile smoke test (FC109): for real with this machine's nvcc and ninja
(skipped cleanly where they are absent), its cache, and failures from an arch nvcc does not
know and from a fake nvcc."""

from __future__ import annotations

import os
import sys
import time

import pytest

from flightcheck import Intent, evaluate
from flightcheck._collect import collect
from flightcheck._collect import cuda as _cuda
from flightcheck._collect.compile_smoke import build_ninja, cache_key, split_output
from support.fake_cuda import fake_nvcc, tool_bin
from support.fake_engine import make_engine
from support.toolchain import CUDA, HAVE_TOOLS, gpu_doc

needs_tools = pytest.mark.skipif(not HAVE_TOOLS, reason="needs nvcc under /usr/local/cuda, ninja and c++")


@pytest.fixture(autouse=True)
def _fresh():
    _cuda.clear_cache()
    yield
    _cuda.clear_cache()


def env_for(tmp_path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("CUDA_HOME", "CUDA_PATH", "FLASHINFER_CUDA_ARCH_LIST", "FLIGHTCHECK_NO_CACHE")
    }
    env.update(XDG_CACHE_HOME=str(tmp_path / "xdg"), FLASHINFER_WORKSPACE_BASE=str(tmp_path))
    env.update(extra)
    return env


def smoke(env: dict[str, str], python: str | None = None, tp: int = 8):
    facts = collect(
        Intent(tensor_parallel_size=tp), env=env, python=python, probes=["compile_smoke"], facts_docs=[gpu_doc()]
    )
    return facts


@needs_tools
def test_real_build_for_sm_103a_then_cached(tmp_path):
    env = env_for(tmp_path, CUDA_HOME=CUDA)
    t0 = time.perf_counter()
    first = smoke(env).compile_smoke
    cold = time.perf_counter() - t0
    assert first.error is None, first.error
    assert set(first.archs) == {"103a"}
    res = first.archs["103a"]
    assert res.ok is True and res.cached is False, res.output
    assert first.nvcc == f"{CUDA}/bin/nvcc"
    assert (tmp_path / "xdg" / "flightcheck" / "compile-smoke.json").exists()
    _cuda.clear_cache()
    t0 = time.perf_counter()
    second = smoke(env).compile_smoke
    warm = time.perf_counter() - t0
    assert second.archs["103a"].ok is True and second.archs["103a"].cached is True
    assert warm < cold  # no compiler ran
    third = smoke(env_for(tmp_path, CUDA_HOME=CUDA, FLIGHTCHECK_NO_CACHE="1")).compile_smoke
    assert third.archs["103a"].ok is True and third.archs["103a"].cached is False


@needs_tools
def test_an_arch_this_nvcc_does_not_know_fails_with_nvccs_own_words(tmp_path):
    # CUDA 13 renamed sm_101 to sm_110: compute_101a is unknown to nvcc 13.x
    env = env_for(tmp_path, CUDA_HOME=CUDA, FLASHINFER_CUDA_ARCH_LIST="10.1a 10.3a")
    version = _cuda.nvcc_version(f"{CUDA}/bin/nvcc", env)[0]
    if version is None or int(version.split(".")[0]) < 13:
        pytest.skip("needs nvcc 13 (which dropped sm_101)")
    section = smoke(env).compile_smoke
    assert section.archs["103a"].ok is True  # one arch failing does not sink the others
    bad = section.archs["101a"]
    assert bad.ok is False and bad.cached is False
    assert "Unsupported gpu architecture 'compute_101a'" in bad.output
    assert "k_101a" in bad.output and "k_103a" not in bad.output.split("FAILED")[-1]
    cache = (tmp_path / "xdg" / "flightcheck" / "compile-smoke.json").read_text()
    assert '"101a"' not in cache and '"103a"' in cache  # failures are never cached


@needs_tools
def test_fc109_fake_nvcc_failure_reaches_it_with_its_output(tmp_path):
    home = tmp_path / "cuda-fake"
    fake_nvcc(
        home / "bin" / "nvcc",
        release="13.0",
        compile_error="nvcc fatal   : Unsupported gpu architecture 'compute_103a'",
    )
    (home / "include").mkdir()
    (home / "include" / "cuda_runtime.h").write_text('#pragma once\nextern "C" int cudaGetLastError(void);\n')
    (home / "lib64").mkdir()
    engine = make_engine(tmp_path / "venv")  # flashinfer without a jit-cache: JIT needed
    env = env_for(tmp_path, CUDA_HOME=str(home))
    facts = collect(
        Intent(tensor_parallel_size=8, deep=True),
        env=env,
        python=str(engine),
        probes=["compile_smoke"],
        facts_docs=[gpu_doc()],
    )
    assert facts.compile_smoke.archs["103a"].ok is False
    report = evaluate(facts, Intent(tensor_parallel_size=8, deep=True))
    (r,) = [c for c in report.checks if c.code == "FC109"]
    assert r.status.value == "fail"
    assert "Unsupported gpu architecture 'compute_103a'" in r.message
    assert "-gencode=arch=compute_103a,code=sm_103a" in r.evidence["output"]


def test_missing_tools_are_an_error_not_a_crash(tmp_path):
    env = env_for(tmp_path, PATH=str(tool_bin(tmp_path / "bin", "c++")), CUDA_HOME=str(tmp_path / "none"))
    section = smoke(env).compile_smoke
    assert section.archs is None and section.error == "no nvcc will be found (FC101)"


def test_no_gpu_facts_means_nothing_to_build(tmp_path):
    env = env_for(tmp_path)
    facts = collect(
        Intent(), env=env, probes=["compile_smoke"], facts_docs=[{"gpus": None, "driver": {"loaded": False}}]
    )
    assert facts.compile_smoke.error.startswith("no arch to build for")


def test_build_file_is_flashinfer_shaped(tmp_path):
    text = build_ninja(
        str(tmp_path), ["100a", "103a"], "/opt/cuda/bin/nvcc", "c++", "/opt/cuda", "13.0", {"CC": "gcc-13"}, True
    )
    assert "-gencode=arch=compute_103a,code=sm_103a" in text and "-gencode=arch=compute_100a,code=sm_100a" in text
    assert "-ccbin gcc-13" in text and "-static-global-template-stub=false" in text
    assert "ldflags = -shared -L/opt/cuda/lib64 -L/opt/cuda/lib64/stubs -lcudart -lcuda" in text
    assert "default k_100a.so k_103a.so" in text
    no_driver = build_ninja(str(tmp_path), ["103a"], "/opt/cuda/bin/nvcc", "c++", "/opt/cuda", "12.4", {}, False)
    assert "-lcuda\n" not in no_driver and "-static-global-template-stub" not in no_driver


def test_output_is_split_per_arch():
    out = (
        "[1/5] c++ ... host.cpp -o host.o\n"
        "FAILED: k_101a.cuda.o\n"
        "nvcc ... -gencode=arch=compute_101a,code=sm_101a\n"
        "nvcc fatal   : Unsupported gpu architecture 'compute_101a'\n"
        "[2/5] nvcc ... -gencode=arch=compute_103a,code=sm_103a\n"
        "ninja: build stopped: subcommand failed."
    )
    per = split_output(out, ["101a", "103a"])
    assert "Unsupported gpu architecture 'compute_101a'" in per["101a"]
    assert per["103a"] == ""


def test_cache_key_follows_the_nvcc_binary(tmp_path):
    nvcc = fake_nvcc(tmp_path / "bin" / "nvcc")
    k1 = cache_key(str(nvcc), "12.8", "103a", "c++", "/opt/cuda", True)
    assert k1 == cache_key(str(nvcc), "12.8", "103a", "c++", "/opt/cuda", True)
    assert k1 != cache_key(str(nvcc), "12.8", "100a", "c++", "/opt/cuda", True)
    assert k1 != cache_key(str(nvcc), "12.9", "103a", "c++", "/opt/cuda", True)
    st = nvcc.stat()
    os.utime(nvcc, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # an upgraded toolkit in place
    assert k1 != cache_key(str(nvcc), "12.8", "103a", "c++", "/opt/cuda", True)


def test_targets_follow_flashinfers_reading_of_its_arch_list():
    from flightcheck._collect import CollectContext
    from flightcheck._collect.compile_smoke import target_archs
    from flightcheck._vocabulary.facts import from_dict

    facts = from_dict(gpu_doc())
    cctx = CollectContext(
        Intent(tensor_parallel_size=8), {"FLASHINFER_CUDA_ARCH_LIST": "9.0 10.3a 12.0 8.0 10.0a;x 10.3"}, sys.executable
    )
    assert target_archs(cctx, facts) == (["90a", "103a", "120f", "80"], "FLASHINFER_CUDA_ARCH_LIST")
    assert target_archs(CollectContext(Intent(tensor_parallel_size=8), {}, sys.executable), facts) == (
        ["103a"],
        "GPUs used",
    )


# --- Triton's ptxas on a ten-line PTX (FC121), with the real ptxas Triton bundles -------------

CONF_PY = "/work/.conformance-venv/bin/python"


def _triton_bin() -> str | None:
    import glob

    found = glob.glob("/work/.conformance-venv/lib/python3*/site-packages/triton/backends/nvidia/bin")
    return found[0] if found and os.path.exists(CONF_PY) else None


@pytest.mark.skipif(_triton_bin() is None, reason="no Triton with its bundled ptxas here")
@pytest.mark.parametrize(
    ("cc", "override", "ok"),
    [
        ("10.3", None, True),  # bundled ptxas-blackwell
        ("9.0", None, True),  # bundled ptxas
        ("11.0", "ptxas", False),  # a CUDA 12.9 ptxas does not know sm_110a
        ("11.0", "missing", True),  # a variable naming nothing: Triton falls back to its own
    ],
)
def test_triton_ptxas_assembles_a_small_kernel_with_the_ptxas_triton_uses(tmp_path, cc, override, ok):
    from flightcheck._collect import CollectContext
    from flightcheck._collect.compile_smoke import triton_ptxas
    from flightcheck._vocabulary.facts import from_dict

    doc = gpu_doc()
    for g in doc["gpus"]:
        g["compute_capability"] = cc
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    if override:
        env["TRITON_PTXAS_BLACKWELL_PATH"] = (
            str(tmp_path / "nope") if override == "missing" else f"{_triton_bin()}/ptxas"
        )
    got = triton_ptxas(CollectContext(Intent(tensor_parallel_size=8), env, CONF_PY), from_dict(doc))
    assert got is not None
    sm = "sm_" + cc.replace(".", "") + "a"
    assert list(got) == [sm]
    assert got[sm]["ok"] is ok, got[sm]
    if override == "ptxas":
        assert got[sm]["source"] == "TRITON_PTXAS_BLACKWELL_PATH" and got[sm]["version"] == "12.9"
        assert "not defined for option 'gpu-name'" in got[sm]["output"]
        f = from_dict({**doc, "compile_smoke": {"triton_ptxas": got}})
        (r,) = [x for x in evaluate(f, Intent(tensor_parallel_size=8, deep=True)).checks if x.code == "FC121"]
        assert r.status.value == "fail" and r.fix.startswith("unset TRITON_PTXAS_BLACKWELL_PATH")
    elif override is None:
        assert got[sm]["source"] == "bundled"
