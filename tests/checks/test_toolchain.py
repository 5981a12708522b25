"""FC101–FC113 on recorded nodes: each check fires on the node that has its problem, stays
silent on a healthy one, and its fix is the exact thing to run on that node."""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import pytest

from flightcheck import Intent, evaluate
from flightcheck._collect import cuda as _cuda
from flightcheck._collect.pyinfo import _gather_now
from flightcheck._collect.toolchain import cuda_envs, tilelang_cuda
from support.ckptgen import load_config, write_checkpoint
from support.evaluation import assert_fires, assert_silent, evaluated, facts, host_doc, results, statuses
from support.toolchain import CUDA, sections

TP8 = {"tensor_parallel_size": 8}


def node(name: str, **override):
    """The bundled 8x B300 node with a recorded toolchain/python/env/jit_cache state."""
    doc = sections(name)
    doc.update(override)
    return facts("b300", **doc)


def no_gpu(name: str, **override):
    """The same state on a machine whose driver could not be read."""
    return node(name, driver={"loaded": False, "error": "NVML Shared Library Not Found"}, gpus=None, **override)


ALL = ["FC101", "FC102", "FC103", "FC104", "FC105", "FC106", "FC107", "FC108", "FC110", "FC111", "FC112", "FC113"]


@pytest.mark.parametrize("code", ALL)
def test_healthy_node_fails_nothing(code):
    assert_silent(code, node("healthy-cu131"), **TP8)


def test_fc101_driver_only_node_needs_nvcc_and_names_the_venv_ninja():
    f = node("driver-only")
    (r101,) = assert_fires("FC101", f, **TP8)
    assert "flashinfer-python 0.7.2.post1 without flashinfer-jit-cache" in r101.message
    # the driver supports CUDA 13.1 and torch is cu130: the 13.1 toolkit; ninja is in the venv
    assert r101.fix.startswith("apt-get install -y cuda-toolkit-13-1 && export CUDA_HOME=/usr/local/cuda-13.1")
    assert "ninja-build" not in r101.fix
    assert (
        "/opt/serve/venv/bin/python3 -m pip install flashinfer-jit-cache==0.7.2.post1 --index-url https://flashinfer.ai/whl/cu130"
        in r101.fix
    )
    (r103,) = assert_fires("FC103", f, **TP8)
    assert "/opt/serve/venv/bin/ninja exists" in r103.message
    assert r103.fix == "export PATH=/opt/serve/venv/bin:$PATH"


def test_fc103_no_ninja_anywhere_installs_it_with_the_os_package_manager():
    doc = sections("driver-only")
    doc["toolchain"]["ninja_in_venv"] = None
    f = facts("b300", **doc)
    (r101,) = assert_fires("FC101", f, **TP8)
    assert "cuda-toolkit-13-1 ninja-build" in r101.fix
    (r103,) = assert_fires("FC103", f, **TP8)
    assert r103.fix.startswith("apt-get install -y ninja-build")
    rhel = facts("b300", **doc, host={"os": "Rocky Linux 9.4", "machine": "x86_64"})
    (r103,) = assert_fires("FC103", rhel, **TP8)
    assert r103.fix.startswith("dnf install -y ninja-build")


def test_fc101_a_toolkit_already_on_the_host_is_preferred_to_installing_one():
    doc = sections("driver-only")
    doc["toolchain"]["alternatives"] = [{"path": "/usr/local/cuda-13.1/bin/nvcc", "version": "13.1"}]
    (r,) = assert_fires("FC101", facts("b300", **doc), **TP8)
    assert r.fix.startswith("export CUDA_HOME=/usr/local/cuda-13.1")


def test_fc102_cuda_12_8_cannot_target_b300():
    f = node("cuda-12-8-home")
    fails = assert_fires("FC102", f, **TP8)
    assert len(fails) == 1 and fails[0].subject == "gpu:0"
    assert "nvcc 12.8 (/usr/local/cuda-12.8/bin/nvcc) cannot compile for 103a" in fails[0].message
    assert "needs nvcc >= 12.9" in fails[0].message
    assert fails[0].fix == "export CUDA_HOME=/usr/local/cuda-13.1"
    assert fails[0].evidence["min_nvcc"] == "12.9"


def test_fc102_nvcc_whose_arch_list_lacks_the_gpu_fails_even_when_new_enough():
    doc = sections("healthy-cu131")
    doc["toolchain"]["nvcc"]["archs"] = ["sm_90", "sm_100", "sm_120"]
    (r,) = assert_fires("FC102", facts("b300", **doc), **TP8)
    assert "is not in its --list-gpu-arch" in r.message


def test_fc102_without_gpu_facts_says_why_and_what_nvcc_can_do():
    f = no_gpu("healthy-cu131")
    got = results(f, **TP8)["FC102"]
    assert [r.status.value for r in got] == ["skip"]
    assert "FC201" in got[0].message and "NVML Shared Library Not Found" in got[0].message
    assert "103a" in got[0].message and "110a" in got[0].message  # what nvcc 13.1 can target
    # without GPUs the toolchain-only checks still answer
    assert statuses(f, "FC101", **TP8) == {"pass"}
    assert statuses(f, "FC103", **TP8) == {"pass"}
    assert_fires("FC101", no_gpu("driver-only"), **TP8)


def test_fc113_jit_cache_covering_the_gpu_means_nothing_to_compile():
    f = node("jit-cache-cu130")
    for code in ("FC101", "FC102", "FC103", "FC106", "FC111", "FC113"):
        assert_silent(code, f, **TP8)
    assert statuses(f, "FC101", **TP8) == {"skip"}
    assert statuses(f, "FC113", **TP8) == {"pass"}
    # on a machine without GPU facts coverage cannot be known: unknown, not a pass
    assert statuses(no_gpu("jit-cache-cu130"), "FC101", **TP8) == {"unknown"}


def test_fc113_jit_cache_without_the_gpu_arch_is_caught():
    f = node("jit-cache-cu129-no-103a")
    (r,) = assert_fires("FC113", f, **TP8)
    assert "not 103a" in r.message and "cudaErrorNoKernelImageForDevice" in r.message
    # torch is cu129 and 0.6.3's cu129 build has no 10.3a: no published build fits, so the
    # fix is to let FlashInfer compile (FC101 then asks for the toolkit)
    assert r.fix == "/opt/serve/venv/bin/python3 -m pip uninstall -y flashinfer-jit-cache"
    assert r.evidence["source"].startswith("table:")
    (r101,) = assert_fires("FC101", f, **TP8)
    assert "not for 103a" in r101.message


def test_fc113_fix_replaces_the_build_when_one_for_torchs_cuda_covers_the_gpu():
    doc = sections("jit-cache-cu129-no-103a")
    doc["python"]["torch_cuda"] = "13.0"
    (r,) = assert_fires("FC113", facts("b300", **doc), **TP8)
    assert r.fix == (
        "/opt/serve/venv/bin/python3 -m pip install --force-reinstall --no-deps "
        "flashinfer-jit-cache==0.6.3+cu130 --index-url https://flashinfer.ai/whl/cu130"
    )


def test_fc104_no_host_compiler_and_no_headers():
    f = node("bare-image")
    (r104,) = assert_fires("FC104", f, **TP8)
    assert r104.fix == "apt-get install -y build-essential"
    (r112,) = assert_fires("FC112", f, **TP8)
    assert r112.fix == "apt-get install -y python3.12-dev"
    assert "/usr/include/python3.12" in r112.message


def test_fc104_cxx_pointing_nowhere_is_named_in_the_fix():
    doc = sections("bare-image")
    doc["env"]["CXX"] = "/opt/gcc-14/bin/g++"
    doc["unavailable"] = {"toolchain.cxx": "CXX=/opt/gcc-14/bin/g++: not found on the engine's PATH"}
    (r,) = assert_fires("FC104", facts("b300", **doc), **TP8)
    assert "CXX=/opt/gcc-14/bin/g++: not found" in r.message
    assert r.fix.startswith("unset CXX CC") or r.fix.startswith("unset CXX")


def test_fc112_headers_of_a_non_system_python_need_that_python_reinstalled():
    doc = sections("bare-image")
    doc["toolchain"]["python_include"] = "/root/.local/share/uv/python/cpython-3.12/include/python3.12"
    (r,) = assert_fires("FC112", facts("b300", **doc), **TP8)
    assert "reinstall that Python with its headers" in r.fix


def test_fc105_stale_cuda_home():
    f = node("stale-cuda-home")
    (r,) = assert_fires("FC105", f, **TP8)
    assert r.message == "CUDA_HOME=/opt/cuda-12.4 does not exist"
    assert r.fix == "export CUDA_HOME=/usr/local/cuda-13.1"
    assert_fires("FC101", f, **TP8)


def test_fc105_cuda_home_without_nvcc():
    doc = sections("stale-cuda-home")
    doc["toolchain"]["cuda_home"]["exists"] = True
    doc["toolchain"]["alternatives"] = []
    (r,) = assert_fires("FC105", facts("b300", **doc), **TP8)
    assert r.message.endswith("has no bin/nvcc")
    assert r.fix.startswith("unset CUDA_HOME; apt-get install -y cuda-toolkit-13-1")


def test_fc106_nvcc_13_with_a_cu128_torch():
    f = node("torch-cu128-nvcc13")
    (r,) = assert_fires("FC106", f, **TP8)
    assert r.severity.value == "warning"
    assert "torch is built with CUDA 12.8" in r.message
    assert r.fix == "export CUDA_HOME=/usr/local/cuda-12.9"  # the 12.x toolkit already there


def test_fc106_installs_the_last_12x_when_none_is_there():
    doc = sections("torch-cu128-nvcc13")
    doc["toolchain"]["alternatives"] = []
    (r,) = assert_fires("FC106", facts("b300", **doc), **TP8)
    assert r.fix == "apt-get install -y cuda-toolkit-12-9 && export CUDA_HOME=/usr/local/cuda-12.9"


def test_fc111_wrapper_nvcc_gives_a_cuda_home_without_libcudart():
    f = node("wrapper-nvcc")
    (r,) = assert_fires("FC111", f, **TP8)
    assert "/usr/local/lib64/libcudart.so is missing (derived from the nvcc on PATH, /usr/local/bin/nvcc)" in r.message
    assert r.fix == "export CUDA_HOME=/usr/local/cuda-13.0"
    assert_silent("FC101", f, **TP8)
    assert_silent("FC102", f, **TP8)


def test_fc107_unwritable_and_full_cache_dir():
    (r,) = assert_fires("FC107", node("readonly-home"), **TP8)
    assert "Read-only file system" in r.message
    assert r.fix.startswith("export FLASHINFER_WORKSPACE_BASE=/var/tmp/flashinfer")
    doc = sections("healthy-cu131")
    doc["jit_cache"]["free_bytes"] = 512 << 20
    (r,) = assert_fires("FC107", facts("b300", **doc), **TP8)
    assert "0.5 GiB free" in r.message


def test_fc110_companion_versions():
    f = node("companion-mismatch")
    (r,) = assert_fires("FC110", f, **TP8)
    assert "flashinfer-cubin 0.7.1 and flashinfer-jit-cache 0.7.1+cu130 with flashinfer-python 0.7.2.post1" in r.message
    assert (
        "flashinfer-cubin==0.7.2.post1" in r.fix
        and "flashinfer-jit-cache==0.7.2.post1 --index-url https://flashinfer.ai/whl/cu130" in r.fix
    )
    doc = sections("companion-mismatch")
    old = copy.deepcopy(doc)  # before 0.7.2 the mismatch fails the import
    old["python"]["packages"].update({"flashinfer-python": "0.6.12", "flashinfer-cubin": "0.6.11"})
    old["python"]["packages"]["flashinfer-jit-cache"] = None
    (r,) = assert_fires("FC110", facts("b300", **old), **TP8)
    assert "import flashinfer raises" in r.message and r.severity.value == "error"
    doc["env"]["FLASHINFER_DISABLE_VERSION_CHECK"] = "1"
    (r,) = assert_fires("FC110", facts("b300", **doc), **TP8)
    assert r.severity.value == "warning"


def test_fc108_arch_lists():
    doc = sections("healthy-cu131")
    doc["env"]["FLASHINFER_CUDA_ARCH_LIST"] = "9.0a 10.0a"
    (r,) = assert_fires("FC108", facts("b300", **doc), **TP8)
    assert r.severity.value == "error" and "leaves out 103a" in r.message
    assert r.fix.startswith('export FLASHINFER_CUDA_ARCH_LIST="9.0a 10.0a 10.3a"')
    doc["env"]["FLASHINFER_CUDA_ARCH_LIST"] = "10.0f"  # the family target runs on 10.3
    assert_silent("FC108", facts("b300", **doc), **TP8)
    doc["env"]["FLASHINFER_CUDA_ARCH_LIST"] = "10.3"  # normalised to 10.3a by FlashInfer
    assert_silent("FC108", facts("b300", **doc), **TP8)
    doc["env"]["FLASHINFER_CUDA_ARCH_LIST"] = "10.0a;10.3a"  # FlashInfer splits on spaces only
    (r,) = assert_fires("FC108", facts("b300", **doc), **TP8)
    assert "cannot parse" in r.message and "ValueError" in r.message
    doc["env"].pop("FLASHINFER_CUDA_ARCH_LIST")
    doc["env"]["TORCH_CUDA_ARCH_LIST"] = "9.0;10.0a"
    (r,) = assert_fires("FC108", facts("b300", **doc), **TP8)
    assert r.severity.value == "warning"
    assert r.fix == 'export TORCH_CUDA_ARCH_LIST="9.0;10.0a;10.3"'
    doc["env"]["TORCH_CUDA_ARCH_LIST"] = "9.0;10.0+PTX"  # PTX runs on anything newer
    assert_silent("FC108", facts("b300", **doc), **TP8)
    doc["env"]["TORCH_CUDA_ARCH_LIST"] = "9.0;10.0a+PTX"  # arch-specific PTX runs on its arch only
    (r,) = assert_fires("FC108", facts("b300", **doc), **TP8)
    assert "leaves out 103a" in r.message
    doc["env"]["TORCH_CUDA_ARCH_LIST"] = "10.0a;10.3a"  # the bundled example's value
    assert_silent("FC108", facts("b300", **doc), **TP8)


def test_no_flashinfer_means_nothing_to_check_for_jit():
    doc = sections("driver-only")
    doc["python"]["packages"].update({"flashinfer-python": None, "flashinfer-cubin": None})
    f = facts("b300", **doc)
    for code in ("FC101", "FC102", "FC103", "FC106", "FC107", "FC110", "FC111", "FC113"):
        assert statuses(f, code, **TP8) == {"skip"}, code


def test_fc101_engine_interpreter_that_could_not_run_makes_it_unknown():
    doc = copy.deepcopy(sections("driver-only"))
    doc["python"] = {"executable": "/opt/serve/venv/bin/python3", "packages": None}
    doc["unavailable"] = {"python.packages": "the engine's interpreter could not run: exit 127"}
    f = facts("b300", **doc)
    got = results(f, **TP8)["FC101"]
    assert got[0].status.value == "unknown" and "could not run" in got[0].message


def test_family_headline():
    from flightcheck import Intent, evaluate

    rep = evaluate(node("healthy-cu131"), Intent(tensor_parallel_size=8))
    assert rep.summaries["FC1"] == "nvcc 13.1 (/usr/local/cuda-13.1), ninja 1.11.1, c++ 13.3.0"
    rep = evaluate(node("jit-cache-cu130"), Intent(tensor_parallel_size=8))
    assert rep.summaries["FC1"].startswith("no nvcc, no ninja, c++ 13.3.0, flashinfer-jit-cache for 7.5")


def test_fc109_compile_smoke_results_are_judged():
    ok_arch = {"ok": True, "cached": True, "duration_s": 0.0, "output": ""}
    bad_arch = {
        "ok": False,
        "cached": False,
        "duration_s": 1.2,
        "output": "FAILED: k_103a.cuda.o\nnvcc fatal   : Unsupported gpu architecture 'compute_103a'",
    }
    base = sections("cuda-12-8-home")
    f = facts(
        "b300",
        **base,
        compile_smoke={"nvcc": "/usr/local/cuda-12.8/bin/nvcc", "ninja": "/usr/bin/ninja", "archs": {"103a": bad_arch}},
    )
    (r,) = assert_fires("FC109", f, deep=True, **TP8)
    assert "Unsupported gpu architecture 'compute_103a'" in r.message
    assert r.fix == "export CUDA_HOME=/usr/local/cuda-13.1"
    assert "FAILED: k_103a.cuda.o" in r.evidence["output"]
    f = facts(
        "b300", **sections("healthy-cu131"), compile_smoke={"nvcc": "x", "ninja": "y", "archs": {"103a": ok_arch}}
    )
    assert statuses(f, "FC109", deep=True, **TP8) == {"pass"}
    assert statuses(node("healthy-cu131"), "FC109", **TP8) == {"skip"}  # not --deep
    f = facts(
        "b300",
        **sections("driver-only"),
        compile_smoke={"nvcc": None, "ninja": None, "archs": None, "error": "no nvcc will be found (FC101)"},
    )
    (r,) = assert_fires("FC109", f, deep=True, **TP8)
    assert "no nvcc will be found" in r.message


def test_fc108_arch_list_without_gpu_facts_is_skipped_with_the_reason():
    doc = sections("healthy-cu131")
    doc["env"]["FLASHINFER_CUDA_ARCH_LIST"] = "10.3a"
    f = facts("b300", **doc, driver={"loaded": False, "error": "NVML Shared Library Not Found"}, gpus=None)
    got = results(f, **TP8)["FC108"]
    assert [r.status.value for r in got] == ["skip"] and "FC201" in got[0].message
    doc["env"]["FLASHINFER_CUDA_ARCH_LIST"] = "10.0a,10.3a"  # still unparseable, GPUs or not
    f = facts("b300", **doc, driver={"loaded": False}, gpus=None)
    (r,) = assert_fires("FC108", f, **TP8)
    assert r.fix == "unset FLASHINFER_CUDA_ARCH_LIST"


def test_fc109_says_when_the_cached_verdicts_were_not_trusted():
    """A compile verdict planted by another user is ignored by the collector (the build runs
    again); the pass says so, so nobody wonders why --deep was not instant."""
    fresh = {"ok": True, "cached": False, "duration_s": 1.1, "output": ""}
    why = "cache file /shared/flightcheck/compile-smoke.json ignored: owned by uid 65534, not by you"
    f = facts(
        "b300",
        **sections("healthy-cu131"),
        compile_smoke={"nvcc": "x", "ninja": "y", "archs": {"103a": fresh}, "cache": why},
    )
    (r,) = results(f, deep=True, **TP8)["FC109"]
    assert r.status.value == "pass" and r.message == f"103a compiled and linked in 1.1s; {why}"


# ---- FC114–FC128: the other runtime compilers (Triton, DeepGEMM, FlashInfer's lookups) ------

RUNTIME = [
    "FC114",
    "FC115",
    "FC116",
    "FC117",
    "FC118",
    "FC119",
    "FC120",
    "FC122",
    "FC123",
    "FC124",
    "FC125",
    "FC126",
    "FC127",
]


def healthy(**env):
    """The healthy node with ``env`` added to its environment (None removes a variable)."""
    doc = sections("healthy-cu131")
    for k, v in env.items():
        if v is None:
            doc["env"].pop(k, None)
        else:
            doc["env"][k] = v
    return doc


@pytest.mark.parametrize("code", RUNTIME)
def test_fc114_to_fc120_are_silent_on_the_healthy_node(code):
    doc = healthy(CC="gcc", CXX="g++")
    assert_silent(code, facts("b300", **doc), **TP8)
    assert_silent(code, node("healthy-cu131"), **TP8)


def test_fc114_ccache_in_cc_breaks_triton_and_flashinfer_and_moves_to_the_launchers():
    doc = healthy(CC="ccache gcc")
    doc["toolchain"]["cc"] = {"path": "/usr/bin/gcc", "version": "13.3.0"}
    (r,) = assert_fires("FC114", facts("b300", **doc), **TP8)
    assert "Triton runs 'ccache gcc' as one file" in r.message
    assert "-ccbin ccache gcc" in r.message
    assert r.fix == "export CC=/usr/bin/gcc FLASHINFER_CXX_LAUNCHER=ccache FLASHINFER_NVCC_LAUNCHER=ccache"


def test_fc114_two_word_cxx_matters_only_to_tilelang():
    doc = healthy(CXX="ccache g++")
    assert_silent("FC114", facts("b300", **doc), **TP8)  # FlashInfer's ninja runs $cxx through a shell
    doc["python"]["packages"]["tilelang"] = "0.1.12"
    (r,) = assert_fires("FC114", facts("b300", **doc), **TP8)
    assert "Failed to preprocess host compiler properties" in r.message
    assert r.fix.startswith("export CXX=/usr/bin/c++ ")


def test_fc115_a_host_with_only_cc_fails_triton():
    doc = healthy()
    doc["toolchain"]["host_tools"].update(gcc=None, clang=None)
    (r,) = assert_fires("FC115", facts("b300", **doc), **TP8)
    assert "Failed to find C compiler" in r.message and "never tries /usr/bin/cc" in r.message
    assert r.fix == "export CC=/usr/bin/cc"
    doc["env"]["CC"] = "/usr/bin/cc"
    assert_silent("FC115", facts("b300", **doc), **TP8)
    doc["env"].pop("CC")
    doc["toolchain"]["host_tools"]["clang"] = "/usr/bin/clang"
    assert_silent("FC115", facts("b300", **doc), **TP8)


def test_fc116_ptxas_variable_at_a_directory_fails_for_the_arch_it_serves():
    doc = healthy(TRITON_PTXAS_BLACKWELL_PATH="/usr/local/cuda/bin", TRITON_PTXAS_PATH="/opt/ptxas")
    doc["toolchain"]["env_paths"].update(
        TRITON_PTXAS_BLACKWELL_PATH={"path": "/usr/local/cuda/bin", "kind": "dir"},
        TRITON_PTXAS_PATH={"path": "/opt/ptxas", "kind": "file"},
    )
    # B300 is SM 10.3: only the Blackwell variable is read
    (r,) = assert_fires("FC116", facts("b300", **doc), **TP8)
    assert "TRITON_PTXAS_BLACKWELL_PATH=/usr/local/cuda/bin is a directory" in r.message
    assert "PermissionError" in r.message
    assert r.fix.startswith("export TRITON_PTXAS_BLACKWELL_PATH=/usr/local/cuda/bin/ptxas")
    # on Hopper the other one is, and it lacks the execute bit
    h100 = {**{k: v for k, v in doc.items() if k in ("toolchain", "python", "env", "jit_cache")}}
    (r,) = assert_fires("FC116", facts("hgx-h100", **h100), **TP8)
    assert r.fix.startswith("chmod +x /opt/ptxas")
    doc["toolchain"]["env_paths"]["TRITON_PTXAS_BLACKWELL_PATH"]["kind"] = "missing"
    assert_silent("FC116", facts("b300", **doc), **TP8)  # Triton falls back to its bundled ptxas


def test_fc117_unwritable_triton_cache():
    doc = healthy()
    doc["toolchain"]["env_paths"]["TRITON_CACHE_DIR"].update(
        writable=False, problem="cannot create a file in /home/serve: Read-only file system"
    )
    (r,) = assert_fires("FC117", facts("b300", **doc), **TP8)
    assert "Read-only file system" in r.message
    assert r.fix.startswith("export TRITON_CACHE_DIR=/var/tmp/triton-cache")


def test_fc118_no_which_and_no_cuda_home_names_the_toolkit_nvcc_belongs_to():
    doc = healthy(CUDA_HOME=None)
    doc["toolchain"]["cuda_home"] = {"path": "/usr/local/cuda-13.1", "source": "nvcc-on-path", "exists": True}
    doc["toolchain"]["host_tools"]["which"] = None
    (r,) = assert_fires("FC118", facts("b300", **doc), **TP8)
    assert "FileNotFoundError: 'which'" in r.message
    assert r.fix.startswith("export CUDA_HOME=/usr/local/cuda-13.1")
    assert "apt-get install -y debianutils" in r.fix
    doc["env"]["CUDA_HOME"] = "/usr/local/cuda-13.1"
    assert_silent("FC118", facts("b300", **doc), **TP8)


def hopper(nvcc: str, packages: dict | None = None, **env):
    doc = healthy(**env)
    doc["python"]["packages"].update(packages or {})
    doc["toolchain"]["nvcc"] = {"path": f"/usr/local/cuda-{nvcc}/bin/nvcc", "version": nvcc, "archs": None}
    doc["toolchain"]["cuda_home"] = {"path": f"/usr/local/cuda-{nvcc}", "source": "CUDA_HOME", "exists": True}
    doc["toolchain"]["alternatives"] = [{"path": f"/usr/local/cuda-{nvcc}/bin/nvcc", "version": nvcc}]
    doc["env"]["CUDA_HOME"] = f"/usr/local/cuda-{nvcc}"
    return facts("hgx-h100", **doc)


def test_fc119_deepgemm_needs_12_9_on_hopper_where_fc102_is_content_with_12_6():
    f = hopper("12.6")
    assert_silent("FC102", f, **TP8)
    (r,) = assert_fires("FC119", f, **TP8)
    assert "NVCC version must be at least 12.9" in r.message and "nvcc 12.6" in r.message
    assert r.severity.value == "warning"  # no model given: it depends on the weights
    assert "cuda-toolkit-" in r.fix and "export VLLM_USE_DEEP_GEMM=0" in r.fix
    assert_silent("FC119", hopper("12.9"), **TP8)
    assert_silent("FC119", hopper("12.6", VLLM_USE_DEEP_GEMM="0"), **TP8)


def test_fc119_dg_nvcc_compiler_override_is_what_counts():
    doc = healthy(DG_JIT_NVCC_COMPILER="/opt/cuda-12.8/bin/nvcc")
    doc["toolchain"]["env_paths"]["DG_JIT_NVCC_COMPILER"] = {
        "path": "/opt/cuda-12.8/bin/nvcc",
        "kind": "executable",
        "version": "12.8",
    }
    (r,) = assert_fires("FC119", facts("b300", **doc), **TP8)
    assert "/opt/cuda-12.8/bin/nvcc" in r.message
    assert r.fix.startswith("unset DG_JIT_NVCC_COMPILER  (DeepGEMM then uses /usr/local/cuda-13.1/bin/nvcc, nvcc 13.1)")
    doc["python"]["packages"]["vllm"] = "0.24.0"  # vendored, its binary not read: a warning
    (r,) = assert_fires("FC119", facts("b300", **doc), **TP8)
    assert r.severity.value == "warning" and "not read in 0.24.0" in r.message
    doc["python"]["packages"]["vllm"] = "0.19.1"  # not vendored, no deep_gemm package
    assert_silent("FC119", facts("b300", **doc), **TP8)
    assert_silent("FC119", facts("b300", **doc), engine="sglang", **TP8)


def test_fc119_names_an_installed_deep_gemm_package_before_vllm_vendored_it():
    """vLLM 0.9.2-0.19.x run only an installed deep_gemm package (has_deep_gemm), whose JIT
    asserts nvcc >= 12.3 (DeepGEMM csrc/jit/compiler.hpp): nvcc 12.1 on Hopper fails there."""
    old = {"vllm": "0.10.1.1", "deep-gemm": "2.0.0"}
    f = hopper("12.1", old, VLLM_USE_DEEP_GEMM="1")
    (r,) = assert_fires("FC119", f, **TP8)
    assert "the installed deep_gemm package 2.0.0" in r.message
    assert "NVCC version should be >= 12.3" in r.message and "nvcc 12.1" in r.message
    assert_silent("FC119", hopper("12.3", old, VLLM_USE_DEEP_GEMM="1"), **TP8)
    # 0.10.1.1's default is VLLM_USE_DEEP_GEMM=0; without the package nothing runs DeepGEMM
    assert_silent("FC119", hopper("12.1", old), **TP8)
    assert_silent("FC119", hopper("12.1", {"vllm": "0.10.1.1"}, VLLM_USE_DEEP_GEMM="1"), **TP8)


def test_fc119_an_installed_deep_gemm_package_wins_over_the_vendored_copy():
    """From 0.20.0 has_deep_gemm prefers an installed package: its 12.3 floor, not 12.9."""
    assert_silent("FC119", hopper("12.6", {"deep-gemm": "2.1.1"}), **TP8)
    (r,) = assert_fires("FC119", hopper("12.6"), **TP8)
    assert "vLLM 0.33.0's vendored DeepGEMM" in r.message


def test_fc119_a_vllm_newer_than_read_gets_the_note():
    (r,) = assert_fires("FC119", hopper("12.6", {"vllm": "0.40.0"}), **TP8)
    assert "rules of vLLM 0.33.0 applied to 0.40.0" in r.message
    assert r.evidence["rules"] == "rules of vLLM 0.33.0 applied to 0.40.0 (newer than the newest release read)"


def test_fc119_block_fp8_on_hopper_and_mxfp4_on_blackwell_without_flashinfer(tmp_path, monkeypatch):
    """The DeepGEMM paths of vLLM 0.33 (``_knowledge/vllm/`` DEEP_GEMM_QUANTS): block FP8
    everywhere DeepGEMM runs; MXFP4 on SM 10.x when FlashInfer is off."""
    from support.ckptgen import load_config, write_checkpoint

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    tiny = load_config("tiny-llama")
    fp8 = {"quant_method": "fp8", "weight_block_size": [128, 128]}
    model = write_checkpoint(tmp_path / "fp8", {**tiny, "quantization_config": fp8})
    (r,) = assert_fires("FC119", hopper("12.6"), model=str(model), **TP8)
    assert r.severity.value == "error" and r.evidence["quant"] == "fp8-block"
    mxfp4 = write_checkpoint(tmp_path / "mxfp4", {**tiny, "quantization_config": {"quant_method": "mxfp4"}})
    doc = healthy(DG_JIT_NVCC_COMPILER="/opt/cuda-12.8/bin/nvcc")
    doc["toolchain"]["env_paths"]["DG_JIT_NVCC_COMPILER"] = {
        "path": "/opt/cuda-12.8/bin/nvcc",
        "kind": "executable",
        "version": "12.8",
    }
    doc["python"]["packages"].update({"flashinfer-python": None, "flashinfer-cubin": None})
    (r,) = assert_fires("FC119", facts("b300", **doc), model=str(mxfp4), **TP8)
    assert r.evidence["quant"] == "mxfp4"


def test_fc120_empty_workspace_base():
    (r,) = assert_fires("FC120", facts("b300", **healthy(FLASHINFER_WORKSPACE_BASE="")), **TP8)
    assert "./.cache/flashinfer" in r.message
    assert r.fix.startswith("unset FLASHINFER_WORKSPACE_BASE")
    assert_silent("FC120", facts("b300", **healthy(FLASHINFER_WORKSPACE_BASE="/var/tmp/fi")), **TP8)


def test_fc110_flashinfer_0_7_0_and_0_7_1_raise_at_import_0_7_2_ignores():
    """Read in the wheels: 0.7.0/0.7.1 ``jit/env.py`` raise RuntimeError at import for a
    mismatched flashinfer-cubin; 0.7.2 and 0.7.2.post1 warn and download instead."""
    for fi, cubin, severity, effect in (
        ("0.7.1", "0.7.0", "error", "import flashinfer raises"),
        ("0.7.0", "0.6.12", "error", "import flashinfer raises"),
        ("0.7.2", "0.7.1", "warning", "ignores the mismatched package"),
    ):
        doc = sections("healthy-cu131")
        doc["python"]["packages"].update({"flashinfer-python": fi, "flashinfer-cubin": cubin})
        (r,) = assert_fires("FC110", facts("b300", **doc), **TP8)
        assert r.severity.value == severity and effect in r.message, (fi, r.message)


@pytest.mark.parametrize("fi", ["0.2.14.post1", "0.3.1"])
def test_fc110_does_not_stop_companions_flashinfer_before_0_4_0_never_reads(fi: str):
    """The sdists of 0.2.0.post1-0.3.1.post1 name neither flashinfer-cubin nor
    flashinfer-jit-cache anywhere in ``flashinfer/``: a mismatched one is never imported."""
    doc = sections("healthy-cu131")
    doc["python"]["packages"].update({"flashinfer-python": fi, "flashinfer-cubin": "0.7.0"})
    doc["python"]["packages"]["flashinfer-jit-cache"] = "0.7.0+cu130"
    (r,) = assert_silent("FC110", facts("b300", **doc), **TP8)
    assert "never reads flashinfer-cubin 0.7.0, flashinfer-jit-cache 0.7.0+cu130" in r.message


def test_fc110_flashinfer_0_4_0_compares_the_companions_at_import():
    """0.4.0's ``jit/env.py`` is the first to read flashinfer-cubin, and raises on a mismatch."""
    doc = sections("healthy-cu131")
    doc["python"]["packages"].update({"flashinfer-python": "0.4.0", "flashinfer-cubin": "0.3.1"})
    (r,) = assert_fires("FC110", facts("b300", **doc), **TP8)
    assert r.severity.value == "error" and "import flashinfer raises" in r.message


def test_fc110_does_not_stop_a_mismatched_cubin_package_when_flashinfer_cubin_dir_is_set():
    """``_get_cubin_dir`` returns $FLASHINFER_CUBIN_DIR before it looks at flashinfer-cubin
    (0.7.0 to 0.7.2.post1): the package's version is never compared."""
    doc = sections("healthy-cu131")
    doc["python"]["packages"].update({"flashinfer-python": "0.7.1", "flashinfer-cubin": "0.7.0"})
    doc["env"]["FLASHINFER_CUBIN_DIR"] = "/srv/flashinfer-cubins"
    (r,) = results(facts("b300", **doc), **TP8)["FC110"]
    assert r.status.value == "pass"
    assert "cubins from FLASHINFER_CUBIN_DIR=/srv/flashinfer-cubins (flashinfer-cubin 0.7.0 not read)" in r.message


def test_fc110_flashinfer_0_7_2_ignores_a_mismatched_companion_and_downloads_or_compiles():
    (r,) = assert_fires("FC110", node("companion-mismatch"), **TP8)
    assert "ignores the mismatched package" in r.message
    assert "downloads every cubin on demand" in r.message and "JIT-compiles every kernel" in r.message
    assert r.severity.value == "warning"


def test_fc101_fc103_vllm_0_33_without_cubin_disables_flashinfer_instead_of_failing():
    doc = sections("driver-only")
    doc["python"]["packages"]["flashinfer-cubin"] = None
    f = facts("b300", **doc)
    for code in ("FC101", "FC103"):
        (r,) = assert_fires(code, f, **TP8)
        assert "disables FlashInfer at startup" in r.message
        assert r.severity.value == "warning"


def test_fc121_triton_ptxas_that_does_not_know_the_arch():
    doc = healthy(TRITON_PTXAS_BLACKWELL_PATH="/opt/cuda-12.8/bin/ptxas")
    bad = {
        "ok": False,
        "ptxas": "/opt/cuda-12.8/bin/ptxas",
        "version": "12.8",
        "source": "TRITON_PTXAS_BLACKWELL_PATH",
        "output": "ptxas fatal   : Value 'sm_103a' is not defined for option 'gpu-name'",
    }
    f = facts("b300", **doc, compile_smoke={"triton_ptxas": {"sm_103a": bad}})
    (r,) = assert_fires("FC121", f, deep=True, **TP8)
    assert "Value 'sm_103a' is not defined" in r.message
    assert r.fix.startswith("export TRITON_PTXAS_BLACKWELL_PATH=/usr/local/cuda-13.1/bin/ptxas")
    good = dict(
        bad, ok=True, ptxas="/venv/triton/backends/nvidia/bin/ptxas-blackwell", version="13.3", source="bundled"
    )
    assert_silent("FC121", facts("b300", **doc, compile_smoke={"triton_ptxas": {"sm_103a": good}}), deep=True, **TP8)
    assert statuses(node("healthy-cu131"), "FC121", **TP8) == {"skip"}  # no --deep


def cubinless(**env):
    """B300 node with FlashInfer's cubins neither installed nor cached."""
    doc = healthy(**env)
    doc["python"]["packages"]["flashinfer-cubin"] = None
    doc["toolchain"]["flashinfer_cubins"] = {
        "dir": "/home/serve/.cache/flashinfer/cubins",
        "source": "cache",
        "repository": "https://edge.urm.nvidia.com/artifactory/x/",
        "artifacts": {"TRTLLM_GEN_FMHA": "missing", "TRTLLM_GEN_BMM": "missing", "TRTLLM_GEN_GEMM": "ok"},
        "urls": ["https://edge.urm.nvidia.com/artifactory/x/abc/fmha/trtllm-gen/checksums.txt"],
    }
    return doc


def test_fc122_cubins_missing_on_blackwell_download_at_first_use():
    (r,) = assert_fires("FC122", facts("b300", **cubinless()), **TP8)
    assert r.severity.value == "warning" and "TRTLLM_GEN_FMHA, TRTLLM_GEN_BMM not in" in r.message
    assert r.fix.startswith("/opt/serve/venv/bin/python3 -m pip install flashinfer-cubin==0.7.2.post1")
    (r,) = assert_fires("FC122", facts("b300", **cubinless(FLASHINFER_NO_DOWNLOAD="1")), **TP8)
    assert "Artifact not found locally" in r.message and r.severity.value == "error"
    unreachable = {"cubin_repository_ok": False, "cubin_repository_error": "Connection refused"}
    (r,) = assert_fires("FC122", facts("b300", **cubinless(), compile_smoke=unreachable), deep=True, **TP8)
    assert "Failed to get checksums.txt" in r.message and r.severity.value == "error"
    reachable = {"cubin_repository_ok": True}
    assert_silent("FC122", facts("b300", **cubinless(), compile_smoke=reachable), deep=True, **TP8)


def test_fc122_silent_with_the_cubins_or_off_blackwell():
    doc = cubinless()
    doc["toolchain"]["flashinfer_cubins"]["artifacts"] = dict.fromkeys(("TRTLLM_GEN_FMHA", "TRTLLM_GEN_BMM"), "ok")
    assert_silent("FC122", facts("b300", **doc), **TP8)
    h100 = {k: v for k, v in cubinless().items() if k in ("toolchain", "python", "env", "jit_cache")}
    assert statuses(facts("hgx-h100", **h100), "FC122", **TP8) == {"skip"}


def test_fc123_gcc_newer_than_the_toolkits_host_config_allows():
    doc = healthy()
    doc["toolchain"]["nvcc_host"] = {"path": "/usr/bin/gcc", "version": "16.1.0"}
    (r,) = assert_fires("FC123", facts("b300", **doc), **TP8)
    assert "unsupported GNU version! gcc versions later than 15" in r.message
    assert r.fix == "apt-get install -y gcc-15 g++-15 && export CC=/usr/bin/gcc-15 CXX=/usr/bin/g++-15"
    doc["env"]["NVCC_APPEND_FLAGS"] = "-allow-unsupported-compiler"
    assert_silent("FC123", facts("b300", **doc), **TP8)
    doc = healthy()
    doc["toolchain"].update(nvcc_host={"path": "/usr/bin/clang-21", "version": "21.0.1"}, nvcc_host_kind="clang")
    (r,) = assert_fires("FC123", facts("b300", **doc), **TP8)
    assert "clang version must be less than 21" in r.message


def test_fc124_triton_cannot_find_libcuda():
    doc = healthy()
    doc["toolchain"]["libcuda_lookup"] = {"ldconfig": "none", "ld_library_path": [], "known": ["/usr/lib64"]}
    (r,) = assert_fires("FC124", facts("b300", **doc), **TP8)
    assert "libcuda.so cannot found!" in r.message and r.fix == "export TRITON_LIBCUDA_PATH=/usr/lib64"
    doc["toolchain"]["libcuda_lookup"]["ldconfig"] = "missing"
    (r,) = assert_fires("FC124", facts("b300", **doc), **TP8)
    assert "FileNotFoundError: '/sbin/ldconfig'" in r.message
    doc["toolchain"]["libcuda_lookup"] = {"ldconfig": "none", "ld_library_path": ["/drv"], "known": []}
    assert_silent("FC124", facts("b300", **doc), **TP8)
    doc["toolchain"]["libcuda_lookup"]["ldconfig"] = "stale"  # Triton then never reads LD_LIBRARY_PATH
    assert_fires("FC124", facts("b300", **doc), **TP8)
    doc["env"]["TRITON_LIBCUDA_PATH"] = "/drv"
    assert_silent("FC124", facts("b300", **doc), **TP8)


def test_fc125_link_without_stubs_or_binutils():
    doc = healthy()
    doc["python"]["packages"]["flashinfer-cubin"] = None  # JIT needed either way; keep FlashInfer on
    doc["toolchain"]["link_libcuda"] = []
    doc["toolchain"]["host_tools"]["objcopy"] = None
    (r,) = assert_fires("FC125", facts("b300", **doc), **TP8)
    assert "no objcopy on the engine's PATH" in r.message and "cannot find -lcuda" in r.message
    assert r.fix == "apt-get install -y binutils && apt-get install -y cuda-driver-dev-13-1"


def test_fc126_tokenspeed_triton_uses_triton_ptxas_path_on_blackwell_too():
    doc = healthy(TRITON_PTXAS_PATH="/usr/local/cuda-12.8/bin/ptxas")
    doc["python"]["packages"].update({"tokenspeed-mla": "2.0.3", "tokenspeed-triton": "3.9.10"})
    doc["toolchain"]["env_paths"]["TRITON_PTXAS_PATH"] = {
        "path": "/usr/local/cuda-12.8/bin/ptxas",
        "kind": "executable",
        "version": "12.8",
    }
    (r,) = assert_fires("FC126", facts("b300", **doc), **TP8)
    assert "tokenspeed_triton uses for 103a" in r.message and "needs CUDA >= 12.9" in r.message
    assert r.fix.startswith("export TRITON_PTXAS_PATH=/usr/local/cuda-13.1/bin/ptxas")
    assert_silent("FC116", facts("b300", **doc), **TP8)  # upstream Triton reads the Blackwell variable there
    doc["toolchain"]["env_paths"]["TRITON_PTXAS_PATH"]["version"] = "13.0"
    assert_silent("FC126", facts("b300", **doc), **TP8)
    doc["python"]["packages"]["tokenspeed-mla"] = None
    assert statuses(facts("b300", **doc), "FC126", **TP8) == {"skip"}


def test_fc127_cute_dsl_with_only_a_newer_flavor_than_the_driver():
    doc = healthy()
    doc["python"]["packages"]["nvidia-cutlass-dsl"] = "4.8.0"
    doc["toolchain"]["cute_dsl_flavors"] = [13]
    driver = {"loaded": True, "version": "575.57.08", "cuda_version": "12.9"}
    (r,) = assert_fires("FC127", facts("b300", **doc, driver=driver), **TP8)
    assert "cu13 builds only" in r.message and "None of the installed toolkit flavors" in r.message
    assert r.fix.startswith("/opt/serve/venv/bin/python3 -m pip install nvidia-cutlass-dsl-libs-cu12==4.8.0")
    doc["toolchain"]["cute_dsl_flavors"] = [12, 13]
    assert_silent("FC127", facts("b300", **doc, driver=driver), **TP8)


def test_fc102_b200_with_a_cu129_or_newer_torch_gets_compute_100f_which_needs_12_9():
    doc = sections("cuda-12-8-home")
    gpus = facts("b300").to_dict()["gpus"]
    for g in gpus:
        g["compute_capability"], g["name"] = "10.0", "NVIDIA B200"
    doc["python"]["torch_cuda"] = "12.9"
    (r, *_) = assert_fires("FC102", facts("b300", **doc, gpus=gpus), **TP8)
    assert "gets compute_100f code too (torch CUDA 12.9)" in r.message and r.evidence["min_nvcc"] == "12.9"
    doc["python"]["torch_cuda"] = "12.8"  # FlashInfer then builds 100a only, which 12.8 compiles
    assert_silent("FC102", facts("b300", **doc, gpus=gpus), **TP8)


def test_fc128_cute_dsl_ptxas_path():
    doc = healthy(CUTE_DSL_PTXAS_PATH="/usr/local/cuda-12.8/bin")
    doc["python"]["packages"]["nvidia-cutlass-dsl"] = "4.8.0"
    doc["toolchain"]["env_paths"]["CUTE_DSL_PTXAS_PATH"] = {"path": "/usr/local/cuda-12.8/bin", "kind": "dir"}
    (r,) = assert_fires("FC128", facts("b300", **doc), **TP8)
    assert "is a directory" in r.message and "ptxas not found" in r.message
    assert r.fix.startswith("export CUTE_DSL_PTXAS_PATH=/usr/local/cuda-13.1/bin/ptxas")
    doc["toolchain"]["env_paths"]["CUTE_DSL_PTXAS_PATH"] = {
        "path": "/usr/local/cuda-12.8/bin/ptxas",
        "kind": "executable",
        "version": "12.8",
    }
    (r,) = assert_fires("FC128", facts("b300", **doc), **TP8)
    assert "is CUDA 12.8; 103a needs 12.9" in r.message
    doc["toolchain"]["env_paths"]["CUTE_DSL_PTXAS_PATH"]["version"] = "13.0"
    assert_silent("FC128", facts("b300", **doc), **TP8)


# ---- FC129 (tilelang's CUDA home, mHC models) and FC130 (humming's NVRTC, MoE on SM 9.0) ----
# Each fires on the host condition only where vLLM sends the model to that compiler, and lets
# the launches the engine serves through. Where this machine has them, the facts are the real
# collector's: the toolkit under /usr/local/cuda (13.0, no nvrtc.h), and the engine venv's pip
# CUDA 13 (nvidia-cuda-nvcc 13.5 and nvidia-cuda-nvrtc, /work/.conformance-venv).
CONF_PY = "/work/.conformance-venv/bin/python"
needs_engine_venv = pytest.mark.skipif(not os.path.exists(CONF_PY), reason="no engine venv here")
needs_cuda = pytest.mark.skipif(not os.access(f"{CUDA}/bin/nvcc", os.X_OK), reason=f"no {CUDA}/bin/nvcc here")


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    _cuda.clear_cache()
    yield
    _cuda.clear_cache()


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A tiny model of each architecture these checks gate on (config.json is what counts)."""
    root = tmp_path_factory.mktemp("kernels")
    tiny = load_config("tiny-llama")
    moe = load_config("qwen3-30b-a3b")
    awq = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True}
    out = {
        "mhc": write_checkpoint(root / "dsv4", {**tiny, "architectures": ["DeepseekV4ForCausalLM"]}),
        "glm5next": write_checkpoint(root / "glm5next", {**tiny, "architectures": ["Glm5NextForCausalLM"]}),
        "llama": write_checkpoint(root / "llama", tiny),
        "moe-int4": write_checkpoint(root / "moe-int4", {**moe, "quantization_config": awq}, shards=2),
        "moe-bf16": write_checkpoint(root / "moe-bf16", moe, shards=2),
    }
    return {k: str(v) for k, v in out.items()}


def kernel_node(**toolchain: Any) -> dict[str, Any]:
    """The healthy CUDA 13.1 node (vLLM 0.33, FlashInfer at /usr/local/cuda-13.1), with
    toolchain fields replaced."""
    doc = copy.deepcopy(sections("healthy-cu131"))
    doc["toolchain"].update(toolchain)
    return doc


def tilelang_node(tl: dict[str, Any] | None, **env: str) -> dict[str, Any]:
    doc = kernel_node(tilelang_cuda=tl)
    doc["python"]["packages"]["tilelang"] = "0.1.12"
    doc["env"].update(env)
    return doc


def outcome(code: str, doc: dict[str, Any], host: str = "b300", **intent: Any) -> tuple[list, str]:
    """``code``'s results and the verdict; "not-ready" only when a toolchain (FC1xx) error
    fails: the generated checkpoints are sparse (FC511) and sized for other checks, which
    are not what these tests are about."""
    rep = evaluate(facts(host, **doc), Intent(**{**TP8, **intent}))
    blocking = [r for r in rep.failures if r.severity.value == "error" and r.code.startswith("FC1")]
    verdict = "not-ready" if blocking else ("ready" if rep.verdict in ("ready", "not-ready") else rep.verdict)
    return [r for r in rep.checks if r.code == code], verdict


# ---- FC129: tilelang ---------------------------------------------------------------------

SAME = {
    "home": "/usr/local/cuda-13.1",
    "source": "CUDA_HOME",
    "nvcc": {"path": "/usr/local/cuda-13.1/bin/nvcc", "version": "13.1"},
}


def test_fc129_no_cuda_for_tilelang_stops_an_mhc_model(models):
    tl = {"home": None, "source": "CUDA_HOME", "nvcc": None, "problem": "CUDA_HOME='/opt/cuda' does not exist"}
    (r,), verdict = outcome("FC129", tilelang_node(tl), model=models["mhc"])
    assert r.status.value == "fail" and r.severity.value == "error" and verdict == "not-ready"
    assert "Failed to automatically detect CUDA installation" in r.message and "/opt/cuda" in r.message
    assert r.fix.startswith("export CUDA_HOME=/usr/local/cuda-13.1")


def test_fc129_tilelang_nvcc_too_old_for_the_gpu(models):
    tl = {
        "home": "/usr/local/cuda-12.8",
        "source": "nvcc-on-path",
        "nvcc": {"path": "/usr/local/cuda-12.8/bin/nvcc", "version": "12.8"},
    }
    (r,), _ = outcome("FC129", tilelang_node(tl), model=models["glm5next"])
    assert r.status.value == "fail" and r.severity.value == "error"
    assert "cannot target 103a (needs 12.9)" in r.message and r.subject == "gpu:0"
    assert r.fix.startswith("export CUDA_HOME=/usr/local/cuda-13.1")


@needs_engine_venv
@needs_cuda
def test_fc129_pip_nvcc_before_usr_local_cuda_is_two_toolkits(models):
    """The engine venv here: CUDA_HOME unset, no nvcc on PATH. FlashInfer takes
    /usr/local/cuda (13.0); tilelang takes pip's nvidia-cuda-nvcc first (13.5): a warning,
    and the fix makes one CUDA_HOME for both."""
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp"}
    py = _gather_now(CONF_PY, env)
    if not (py.get("packages") or {}).get("nvidia-cuda-nvcc") or not (py.get("packages") or {}).get("tilelang"):
        pytest.skip("the engine venv has no tilelang / nvidia-cuda-nvcc")
    tl = tilelang_cuda(env, py)
    assert tl is not None and tl["source"] == "nvidia-cuda-nvcc" and "site-packages/nvidia" in tl["home"]
    doc = tilelang_node(tl)
    doc["env"].pop("CUDA_HOME")
    doc["toolchain"]["cuda_home"] = {"path": "/usr/local/cuda", "source": "default", "exists": True}
    doc["toolchain"]["nvcc"] = {
        "path": "/usr/local/cuda/bin/nvcc",
        "version": _cuda.nvcc_version(f"{CUDA}/bin/nvcc", env)[0],
    }
    (r,), verdict = outcome("FC129", doc, model=models["mhc"])
    assert r.status.value == "fail" and r.severity.value == "warning" and verdict != "not-ready"
    assert tl["nvcc"]["path"] in r.message and "FlashInfer with /usr/local/cuda" in r.message
    assert r.fix.startswith(f"export CUDA_HOME={tl['home']}")


@needs_cuda
def test_fc129_does_not_stop_cuda_home_set_for_both(models):
    """CUDA_HOME=/usr/local/cuda: tilelang and FlashInfer read it first (real collector)."""
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "CUDA_HOME": CUDA}
    tl = tilelang_cuda(env, {"packages": {"tilelang": "0.1.12"}})
    assert tl == {
        "home": CUDA,
        "source": "CUDA_HOME",
        "nvcc": {"path": f"{CUDA}/bin/nvcc", "version": tl["nvcc"]["version"]},
        "problem": None,
    }
    doc = tilelang_node(tl, CUDA_HOME=CUDA)
    doc["toolchain"]["cuda_home"] = {"path": CUDA, "source": "CUDA_HOME", "exists": True}
    doc["toolchain"]["nvcc"] = {"path": f"{CUDA}/bin/nvcc", "version": tl["nvcc"]["version"]}
    (r,), verdict = outcome("FC129", doc, model=models["mhc"])
    assert r.status.value == "pass" and verdict == "ready", r.message


@pytest.mark.parametrize(
    ("model", "intent", "why"),
    [
        ("llama", {}, "has no mHC ops"),
        (None, {}, "no model given"),
        ("mhc", {"engine": "sglang"}, "engine is sglang"),
    ],
)
def test_fc129_does_not_stop_where_tilelang_does_not_run(models, model, intent, why):
    tl = {"home": None, "source": None, "nvcc": None, "problem": "no CUDA home"}
    doc = tilelang_node(tl)
    doc["python"]["packages"]["sglang"] = "0.5.23"
    (r,), verdict = outcome("FC129", doc, **({"model": models[model]} if model else {}), **intent)
    assert r.status.value == "skip" and why in r.message and verdict != "not-ready"


def test_fc129_nvrtc_execution_backend_needs_no_nvcc(models):
    doc = tilelang_node({"home": None, "source": None, "nvcc": None}, TILELANG_EXECUTION_BACKEND="nvrtc")
    (r,), _ = outcome("FC129", doc, model=models["mhc"])
    assert r.status.value == "skip"


def test_fc129_same_toolkit_passes(models):
    (r,), verdict = outcome("FC129", tilelang_node(SAME), model=models["mhc"])
    assert r.status.value == "pass" and verdict == "ready"


# ---- FC130: humming's NVRTC --------------------------------------------------------------


def hopper_node(envs: list[dict[str, Any]] | None, **env: str) -> dict[str, Any]:
    doc = kernel_node(cuda_envs=envs)
    doc["python"]["packages"].update({"humming-kernels": "0.1.19", "cuda-bindings": "13.1.1"})
    doc["env"].update(env)
    doc["driver"] = {"loaded": True, "version": "580.95.05", "cuda_version": "13.0"}
    doc["fabric_manager"] = {**host_doc("hgx-h100")["fabric_manager"], "version": "580.95.05"}
    return doc


def cuda_env(path: str, major: int, minor: int | None, header: bool, lib: str | None, source: str = "system"):
    return {"path": path, "source": source, "major": major, "minor": minor, "header": header, "nvrtc_lib": lib}


@needs_cuda
def test_fc130_a_toolkit_without_nvrtc_stops_a_quantised_moe_on_hopper(models):
    """This machine's /usr/local/cuda (13.0) has no nvrtc.h and torch is cu130: humming has
    no CUDA 13 environment (the real collector, no pip nvidia roots)."""
    envs = cuda_envs({"PATH": "/usr/bin:/bin"}, {"packages": {"humming-kernels": "0.1.19"}, "nvidia_roots": []})
    assert envs and all(not e["header"] for e in envs if e["major"] == 13)
    (r,), verdict = outcome("FC130", hopper_node(envs), host="hgx-h100", model=models["moe-int4"])
    assert r.status.value == "fail" and r.severity.value == "error" and verdict == "not-ready"
    assert "No suitable CUDA 13 environment found" in r.message and "int4 MoE experts" in r.message
    assert r.fix.startswith('/opt/serve/venv/bin/python3 -m pip install "humming-kernels[cu13]==0.1.19"')
    assert "cuda-nvrtc-dev-13-0" in r.fix


def test_fc130_the_chosen_environment_without_libnvrtc(models):
    envs = [cuda_env("/usr/local/cuda-13.0", 13, 0, True, None), cuda_env("/venv/nvidia/cu13", 13, None, True, "/x.so")]
    (r,), _ = outcome("FC130", hopper_node(envs), host="hgx-h100", model=models["moe-int4"])
    assert r.status.value == "fail" and "picks /usr/local/cuda-13.0" in r.message
    assert "Could not locate the NVRTC library in CUDA path" in r.message


@needs_engine_venv
def test_fc130_does_not_stop_pip_nvrtc_of_torchs_major(models):
    """The engine venv's nvidia/cu13 (nvidia-cuda-nvrtc): humming finds nvrtc.h and
    libnvrtc.so.13 there although /usr/local/cuda has neither (real collector)."""
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp"}
    py = _gather_now(CONF_PY, env)
    envs = cuda_envs(env, py)
    if not envs or not any(e["source"] == "pypi" and e["header"] and e["nvrtc_lib"] for e in envs):
        pytest.skip("the engine venv has no pip NVRTC")
    (r,), verdict = outcome("FC130", hopper_node(envs), host="hgx-h100", model=models["moe-int4"])
    assert r.status.value == "pass" and "libnvrtc.so" in r.message and verdict != "not-ready"


@pytest.mark.parametrize(
    ("host", "model", "env", "why"),
    [
        ("b300", "moe-int4", {}, "no SM 9.0 GPU used"),
        ("hgx-h100", "moe-bf16", {}, "unquantized"),
        ("hgx-h100", "llama", {}, "is not a MoE"),
        ("hgx-h100", "moe-int4", {"HUMMING_COMPILER": "nvcc"}, "compiles with nvcc"),
        ("hgx-h100", None, {}, "no model"),
    ],
)
def test_fc130_does_not_stop_where_humming_does_not_compile_with_nvrtc(models, host, model, env, why):
    doc = hopper_node([cuda_env("/usr/local/cuda", 13, 0, False, None)], **env)
    if host == "b300":
        doc.pop("driver")
        doc.pop("fabric_manager")
    (r,), verdict = outcome("FC130", doc, host=host, **({"model": models[model]} if model else {}))
    assert r.status.value == "skip" and why in r.message, r.message
    assert verdict != "not-ready"


def test_humming_picks_the_newest_minor_with_the_header():
    from flightcheck._knowledge.humming import pick
    from flightcheck._vocabulary.facts import CudaEnv

    envs = [
        CudaEnv(path="/usr/local/cuda-13.0", major=13, minor=0, header=True),
        CudaEnv(path="/usr/local/cuda-13.1", major=13, minor=1, header=False),
        CudaEnv(path="/venv/nvidia/cu13", major=13, minor=None, header=True),
        CudaEnv(path="/usr/local/cuda-12.9", major=12, minor=9, header=True),
    ]
    assert pick(envs, 13).path == "/usr/local/cuda-13.0"
    assert pick(envs[2:], 13).path == "/venv/nvidia/cu13"
    assert pick(envs, 11) is None


# ---- FC131 and the prepared-node path of FC101/FC103: a driver-only 8x B300 node (no nvcc, no
# ninja) with a `flightcheck prepare` bundle installed for FlashInfer.

_BUNDLE_TP1 = {"tensor_parallel_size": 1}
_BUNDLE_MODULES = ("sampling", "topk", "fmha_gen")  # the bundled node serves an MLA model


def _bundle_node(
    *,
    arch: str = "10.3a",
    flashinfer: str = "0.7.2.post1",
    cuda: str = "13.0",
    present: bool = True,
    modules: tuple[str, ...] = _BUNDLE_MODULES,
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
    got = evaluated("FC131", results(_bundle_node(), **_BUNDLE_TP1)["FC131"])
    assert [r.status.value for r in got] == ["pass"], [(r.status.value, r.message) for r in got]
    assert "10.3a" in got[0].message
    for code in ("FC101", "FC103"):
        r = evaluated(code, results(_bundle_node(), **_BUNDLE_TP1)[code])
        assert {x.status.value for x in r} <= {"pass", "skip"}, (code, [(x.status.value, x.message) for x in r])
        assert "prepared bundle" in r[0].message


def test_without_the_bundle_the_driver_only_node_still_fails_fc101() -> None:
    assert_fires("FC101", facts("b300", **sections("driver-only")), **_BUNDLE_TP1)


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
    failing = assert_fires("FC131", _bundle_node(**kwargs), **_BUNDLE_TP1)
    assert words in failing[0].message
    assert failing[0].severity.value == "error"
    # and it no longer makes FC101 stand down: the node has no nvcc
    assert_fires("FC101", _bundle_node(**kwargs), **_BUNDLE_TP1)


def test_a_bundle_lacking_a_module_of_the_launch_warns_and_names_it() -> None:
    failing = assert_fires("FC131", _bundle_node(modules=("sampling",)), **_BUNDLE_TP1)
    assert "topk" in failing[0].message and failing[0].severity.value == "warning"
    assert "nothing can compile them here" in failing[0].message
    # TP 8 on SM 10.3 also reaches the all-reduce fusion modules
    failing = assert_fires("FC131", _bundle_node(), tensor_parallel_size=8)
    assert "trtllm_comm" in failing[0].message


def test_fc131_does_not_stop_a_node_without_a_bundle() -> None:
    assert_silent("FC131", facts("b300", **sections("jit-cache-cu130")), **_BUNDLE_TP1)
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
    got = evaluated("FC131", results(facts("b300", **doc), **_BUNDLE_TP1)["FC131"])
    assert all(r.severity.value == "warning" for r in got if r.status.value == "fail")
    assert "will be JIT-compiled" in got[0].message
