"""FC1xx: for each error check, a launch the engine serves that it must not stop
(docs/what-stops-a-launch.md). The nodes are the recorded toolchain states of
tests/fixtures/toolchain laid over the bundled 8x B300 node."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from flightcheck._vocabulary.facts import from_dict
from support.evaluation import assert_fires, evaluated, facts, host_doc, results
from support.toolchain import sections

TP8 = {"tensor_parallel_size": 8}


def stops(code: str, doc: dict, **intent) -> list:
    """The error-severity failures of ``code`` on the B300 node with ``doc``'s sections."""
    got = evaluated(code, results(facts("b300", **doc), **{**TP8, **intent}).get(code, []))
    return [
        (r.status.value, r.message)
        for r in got
        if r.status.value in ("fail", "unknown") and r.severity.value == "error"
    ]


def jit_cache_node() -> dict:
    """A production image: no toolkit, no ninja, flashinfer-jit-cache built for 10.3a,
    so FlashInfer compiles nothing (its kernels load from the cache)."""
    return sections("jit-cache-cu130")


def with_env(doc: dict, **env) -> dict:
    doc = copy.deepcopy(doc)
    doc["env"].update(env)
    return doc


def stale_cuda_home_with_jit_cache() -> dict:
    """The same image with a CUDA_HOME left over from the base image (no such directory):
    nothing compiles, so nothing reads it."""
    doc = jit_cache_node()
    doc["toolchain"]["cuda_home"] = {"path": "/opt/cuda-12.4", "source": "CUDA_HOME", "exists": False}
    return with_env(doc, CUDA_HOME="/opt/cuda-12.4")


def torch_arch_list_without_the_gpu() -> dict:
    """TORCH_CUDA_ARCH_LIST left at 9.0 on a B300: FlashInfer ignores it (since 0.3.1)."""
    return with_env(sections("healthy-cu131"), TORCH_CUDA_ARCH_LIST="9.0")


def flashinfer_arch_list_with_the_gpu() -> dict:
    return with_env(sections("healthy-cu131"), FLASHINFER_CUDA_ARCH_LIST="9.0a 10.0a 10.3a")


def no_cubin_package() -> dict:
    doc = sections("jit-cache-cu130")
    doc["python"]["packages"]["flashinfer-cubin"] = None
    return doc


def cc_named_by_variable() -> dict:
    """No ``cc``/``c++`` on PATH, but CC/CXX name the compilers the image ships."""
    doc = sections("healthy-cu131")
    doc["toolchain"]["cxx"] = {"path": "/usr/bin/g++-13", "version": "13.3.0"}
    doc["toolchain"]["cc"] = {"path": "/usr/bin/gcc-13", "version": "13.3.0"}
    return with_env(doc, CC="gcc-13", CXX="g++-13")


SCENARIOS = {
    "FC101": ("no_nvcc_with_a_jit_cache_for_the_gpu", jit_cache_node),
    "FC102": ("no_nvcc_with_a_jit_cache_for_the_gpu", jit_cache_node),
    "FC103": ("no_ninja_with_a_jit_cache_for_the_gpu", jit_cache_node),
    "FC104": ("compilers_named_by_cc_and_cxx", cc_named_by_variable),
    "FC105": ("a_stale_cuda_home_when_nothing_compiles", stale_cuda_home_with_jit_cache),
    "FC107": ("a_jit_cache_for_the_gpu", jit_cache_node),
    "FC108": ("torch_arch_list_without_the_gpu", torch_arch_list_without_the_gpu),
    "FC109": ("without_deep", jit_cache_node),
    "FC110": ("flashinfer_cubin_not_installed", no_cubin_package),
    "FC111": ("no_toolkit_with_a_jit_cache_for_the_gpu", jit_cache_node),
    "FC112": ("no_compile_with_a_jit_cache_for_the_gpu", jit_cache_node),
    "FC113": ("a_jit_cache_built_for_10_3a", jit_cache_node),
}


@pytest.mark.parametrize("code", sorted(SCENARIOS))
def test_fc1xx_does_not_stop_a_servable_launch(code: str) -> None:
    _name, make = SCENARIOS[code]
    assert stops(code, make()) == []


def test_fc108_does_not_stop_a_flashinfer_arch_list_that_includes_the_gpu() -> None:
    assert stops("FC108", flashinfer_arch_list_with_the_gpu()) == []


# ---- a vLLM that does not run on CUDA compiles no CUDA kernels (issue 22, item D) ----------


def _non_cuda(vllm_version: str, torch_version: str, env: dict[str, str]) -> Any:
    """b300's facts with no nvcc, no ninja, no libcudart: every CUDA toolchain check fails
    there on a CUDA vLLM, and must skip on a CPU or ROCm one."""
    doc = host_doc("b300")
    doc["python"] = {
        **doc["python"],
        "packages": {**doc["python"]["packages"], "vllm": vllm_version, "torch": torch_version},
    }
    doc["env"] = {**(doc.get("env") or {}), **env}
    tc = doc["toolchain"]
    tc["nvcc"] = {"path": None, "version": None, "archs": None}
    tc["ninja"] = None
    tc["libcudart"] = False
    tc["alternatives"] = []
    return from_dict(doc)


@pytest.mark.parametrize(
    "vllm_version,torch_version,env,platform",
    [
        ("0.33.0+cpu", "2.14.0+cpu", {}, "CPU"),
        ("0.33.0", "2.14.0", {"VLLM_TARGET_DEVICE": "cpu"}, "CPU"),
        ("0.33.0+rocm711", "2.14.0+rocm7.1", {}, "ROCm"),
    ],
)
# Not named test_fc101_...: the family gate decides before any check function runs, so the
# mutation test (which breaks a check function) cannot turn this one red.
def test_toolchain_gate_skips_where_vllm_is_not_on_cuda(vllm_version, torch_version, env, platform):
    """No nvcc, no ninja: on a CPU or ROCm vLLM (vllm/platforms/__init__.py 0.33.0) no FC1xx
    CUDA-compiler check fails; each skips with the one line naming the platform."""
    f = _non_cuda(vllm_version, torch_version, env)
    got = results(f, engine="vllm", tensor_parallel_size=1)
    for code in ("FC101", "FC103", "FC111", "FC119"):
        (r,) = evaluated(code, got.get(code, []))
        assert r.status.value == "skip" and f"{platform} platform" in r.message, (code, r)
    for code, rs in got.items():
        if code.startswith("FC1"):
            assert not [r for r in evaluated(code, rs) if r.status.value == "fail"], (code, rs)


def test_fc101_still_fires_on_a_cuda_vllm_without_nvcc():
    """The same facts on a CUDA vLLM: FC101 fails (the gate is not a blanket skip)."""
    f = _non_cuda("0.33.0", "2.14.0+cu130", {})
    assert_fires("FC101", f, engine="vllm", tensor_parallel_size=1)


def rtx_5090_node(flashinfer: str) -> dict:
    """An RTX 5090 node (SM 12.0, no NVSwitch) with nvcc 12.8 and ``flashinfer`` without a
    jit-cache: FlashInfer compiles its kernels for the GPU on first use."""
    doc = copy.deepcopy(sections("cuda-12-8-home"))
    doc["python"]["packages"].update({"flashinfer-python": flashinfer, "flashinfer-cubin": None})
    return doc


def sm120_stops(flashinfer: str) -> list:
    doc = rtx_5090_node(flashinfer)
    gpus = copy.deepcopy(host_doc("b300")["gpus"])[:1]
    gpus[0].update(name="NVIDIA GeForce RTX 5090", compute_capability="12.0", multicast_supported=False)
    doc["gpus"] = gpus
    return stops("FC102", doc, tensor_parallel_size=1)


@pytest.mark.parametrize("flashinfer", ["0.2.14.post1", "0.3.0.post1", "0.3.1", "0.4.1", "0.5.3", "0.6.6"])
def test_fc102_does_not_stop_sm120_with_nvcc_12_8_before_flashinfer_builds_120f(flashinfer: str) -> None:
    """FlashInfer before 0.6.7 builds sm_120 (torch's arch flags, before 0.3.1) or
    compute_120a (0.3.1-0.6.6) for SM 12.0: nvcc 12.8 compiles both
    (flashinfer/jit/cpp_ext.py, compilation_context.py read in 0.2.0.post1-0.7.4)."""
    assert sm120_stops(flashinfer) == []


def test_fc102_stops_sm120_with_nvcc_12_8_where_flashinfer_builds_120f() -> None:
    """From 0.6.7 SM 12.x is compute_120f, which nvcc 12.8 cannot target (the control)."""
    got = sm120_stops("0.7.2.post1")
    assert got and "120f" in got[0][1]
