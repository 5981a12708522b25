"""FC114–FC128 (the runtime compilers besides FlashInfer's nvcc: Triton, DeepGEMM, the cubin
download, CuTe DSL): for each error check, launches the engine serves on a host that looks
suspicious but is fine (docs/what-stops-a-launch.md). Each asserts what the check says
(pass or skip, never a failure) and that the verdict is not blocked.

Where this machine has the tool (nvcc 13.0 and its ptxas under /usr/local/cuda, gcc,
``which``, ``/sbin/ldconfig``), the facts are the real collector's reading of it, laid over
the bundled 8x B300 (or 8x H100) node; those tests skip cleanly where the tool is absent.
"""

from __future__ import annotations

import copy
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from flightcheck import Intent, evaluate
from flightcheck._collect import cuda as _cuda
from flightcheck._collect.toolchain import HOST_TOOLS, env_paths, libcuda_lookup
from flightcheck._knowledge.cuda import host_compiler_bounds
from support.evaluation import evaluated, facts, host_doc
from support.toolchain import CUDA, sections

TP8 = {"tensor_parallel_size": 8}
PTXAS = f"{CUDA}/bin/ptxas"
NVCC = f"{CUDA}/bin/nvcc"
HOST_CONFIG = f"{CUDA}/include/crt/host_config.h"
GCC = shutil.which("gcc")

needs_ptxas = pytest.mark.skipif(not os.access(PTXAS, os.X_OK), reason=f"no {PTXAS} here")
needs_nvcc = pytest.mark.skipif(not os.access(NVCC, os.X_OK), reason=f"no {NVCC} here")
needs_gcc = pytest.mark.skipif(GCC is None, reason="no gcc on PATH here")


@pytest.fixture(autouse=True)
def _fresh_tool_cache():
    _cuda.clear_cache()
    yield
    _cuda.clear_cache()


#: the lookups of a slim image with gcc (the collector records every name of HOST_TOOLS).
IMAGE_TOOLS = {
    "which": "/usr/bin/which",
    "gcc": "/usr/bin/gcc",
    "clang": None,
    "ld": "/usr/bin/ld",
    "objcopy": "/usr/bin/objcopy",
}


def healthy(**env: str | None) -> dict[str, Any]:
    """The healthy CUDA 13.1 node's toolchain/python/env sections, ``env`` laid over (None
    removes a variable)."""
    doc = copy.deepcopy(sections("healthy-cu131"))
    for k, v in env.items():
        if v is None:
            doc["env"].pop(k, None)
        else:
            doc["env"][k] = v
    return doc


def real_env_paths(doc: dict[str, Any], **env: str) -> dict[str, Any]:
    """Set ``env`` in the node's environment and record the tool variables' states the way
    the collector reads them on this machine."""
    doc["env"].update(env)
    host_env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": doc["env"].get("HOME") or "/nonexistent"}
    host_env.update({k: v for k, v in doc["env"].items() if v is not None})
    doc["toolchain"]["env_paths"] = {**(doc["toolchain"].get("env_paths") or {}), **env_paths(host_env)}
    return doc


def serves(code: str, doc: dict[str, Any], expect: str, *, host: str = "b300", **intent: Any) -> list:
    """Evaluate the launch; ``code`` answers ``expect`` (pass or skip) only, and the verdict
    does not stop the launch. Returns the code's results for further assertions."""
    rep = evaluate(facts(host, **doc), Intent(**{**TP8, **intent}))
    got = evaluated(code, [r for r in rep.checks if r.code == code])
    assert {r.status.value for r in got} == {expect}, [(r.status.value, r.message) for r in got]
    blocking = [(r.code, r.message) for r in rep.failures if r.severity.value == "error"]
    assert blocking == [] and rep.verdict in ("ready", "ready-with-fallbacks"), (rep.verdict, blocking)
    return got


def on_hopper(doc: dict[str, Any], nvcc: str) -> dict[str, Any]:
    """The node's sections with the CUDA home at ``/usr/local/cuda-<nvcc>``."""
    doc["toolchain"]["nvcc"] = {"path": f"/usr/local/cuda-{nvcc}/bin/nvcc", "version": nvcc, "archs": None}
    doc["toolchain"]["cuda_home"] = {"path": f"/usr/local/cuda-{nvcc}", "source": "CUDA_HOME", "exists": True}
    doc["toolchain"]["alternatives"] = [{"path": f"/usr/local/cuda-{nvcc}/bin/nvcc", "version": nvcc}]
    doc["env"]["CUDA_HOME"] = f"/usr/local/cuda-{nvcc}"
    return on_h100(doc)


def on_h100(doc: dict[str, Any]) -> dict[str, Any]:
    """The recorded 8x H100 node runs a CUDA 12.8 driver; torch in these sections is cu130:
    give it the R580 driver such an image needs (FC203 is not what these tests are about)."""
    doc["driver"] = {"loaded": True, "version": "580.95.05", "cuda_version": "13.0"}
    doc["fabric_manager"] = {**host_doc("hgx-h100")["fabric_manager"], "version": "580.95.05"}
    return doc


# ---- FC114: CC / CXX are one compiler file ------------------------------------------------


@needs_gcc
def test_fc114_does_not_stop_cc_and_cxx_set_to_absolute_compiler_paths():
    """CC=/usr/bin/gcc CXX=/usr/bin/g++ with Triton, FlashInfer and tilelang all installed."""
    doc = healthy()
    doc["python"]["packages"]["tilelang"] = "0.1.12"
    gxx = shutil.which("g++") or GCC
    real_env_paths(doc, CC=os.path.realpath(str(GCC)), CXX=os.path.realpath(str(gxx)))
    (r,) = serves("FC114", doc, "pass")
    assert f"CC={os.path.realpath(str(GCC))}" in r.message


@needs_gcc
def test_fc114_does_not_stop_a_compiler_path_with_a_space_when_no_flashinfer_reads_it(tmp_path: Path):
    """CC="/opt/gcc 12/bin/gcc": Triton execs the whole value (runtime/build.py returns $CC
    as argv[0]) and tilelang passes ``-ccbin=<value>`` as one argument (contrib/nvcc.py):
    both run it. Only FlashInfer's unquoted ``-ccbin $CC`` would split it."""
    bindir = tmp_path / "gcc 12" / "bin"
    bindir.mkdir(parents=True)
    (bindir / "gcc").symlink_to(os.path.realpath(str(GCC)))
    doc = healthy()
    doc["python"]["packages"].update({"flashinfer-python": None, "flashinfer-cubin": None, "tilelang": "0.1.12"})
    real_env_paths(doc, CC=str(bindir / "gcc"))
    assert doc["toolchain"]["env_paths"]["CC"]["kind"] == "executable"
    serves("FC114", doc, "pass")
    # with FlashInfer installed the same value does break its build.ninja: still caught
    doc["python"]["packages"].update({"flashinfer-python": "0.7.2.post1", "flashinfer-cubin": "0.7.2.post1"})
    (r,) = [x for x in evaluate(facts("b300", **doc), Intent(**TP8)).checks if x.code == "FC114"]
    assert r.status.value == "fail" and r.evidence["used_by"] == ["flashinfer-python"]
    assert "Triton" not in r.message and r.fix.startswith('ln -s "')


def test_fc114_does_not_stop_a_ccache_cxx_that_only_flashinfers_ninja_reads():
    """CXX="ccache g++" without tilelang: FlashInfer writes ``cxx = $CXX`` into build.ninja,
    whose commands run through a shell that splits it (jit/cpp_ext.py)."""
    serves("FC114", healthy(CXX="ccache g++"), "pass")


# ---- FC115: Triton finds a C compiler ----------------------------------------------------


def test_fc115_does_not_stop_a_cc_only_host_whose_cc_variable_names_it():
    doc = healthy(CC="/usr/bin/cc")
    doc["toolchain"]["host_tools"].update(gcc=None, clang=None)
    (r,) = serves("FC115", doc, "skip")
    assert "CC=/usr/bin/cc is what Triton uses" in r.message


@needs_gcc
def test_fc115_does_not_stop_this_machines_gcc():
    doc = healthy()
    doc["toolchain"]["host_tools"] = {n: _cuda.which(n, os.environ) for n in HOST_TOOLS}
    (r,) = serves("FC115", doc, "pass")
    assert r.message.startswith("Triton will use gcc")


def test_fc115_does_not_stop_a_host_with_clang_only():
    doc = healthy()
    doc["toolchain"]["host_tools"].update(gcc=None, clang="/usr/bin/clang")
    serves("FC115", doc, "pass")


# ---- FC116: TRITON_PTXAS_PATH / TRITON_PTXAS_BLACKWELL_PATH ------------------------------


@needs_ptxas
def test_fc116_does_not_stop_ptxas_variables_at_a_real_executable_ptxas():
    doc = real_env_paths(healthy(), TRITON_PTXAS_PATH=PTXAS, TRITON_PTXAS_BLACKWELL_PATH=PTXAS)
    assert doc["toolchain"]["env_paths"]["TRITON_PTXAS_BLACKWELL_PATH"]["kind"] == "executable"
    (r,) = serves("FC116", doc, "pass")
    assert r.message == f"TRITON_PTXAS_BLACKWELL_PATH={PTXAS}"


def test_fc116_does_not_stop_the_hopper_variable_at_a_directory_on_blackwell(tmp_path: Path):
    """On a B300 Triton reads only TRITON_PTXAS_BLACKWELL_PATH (``get_ptxas``: arch >= 100)."""
    doc = real_env_paths(healthy(), TRITON_PTXAS_PATH=str(tmp_path))
    assert doc["toolchain"]["env_paths"]["TRITON_PTXAS_PATH"]["kind"] == "dir"
    (r,) = serves("FC116", doc, "skip")
    assert "serve no arch used" in r.message


def test_fc116_does_not_stop_a_variable_naming_a_file_that_is_gone(tmp_path: Path):
    """A missing file is FileNotFoundError, which Triton catches: its bundled ptxas is used."""
    doc = real_env_paths(healthy(), TRITON_PTXAS_BLACKWELL_PATH=str(tmp_path / "gone" / "ptxas"))
    (r,) = serves("FC116", doc, "pass")
    assert "falls back to its bundled ptxas" in r.message


# ---- FC117: Triton's cache directory -----------------------------------------------------


def test_fc117_does_not_stop_a_triton_cache_dir_that_does_not_exist_yet(tmp_path: Path):
    """Triton creates the directory: a writable parent is enough."""
    doc = real_env_paths(healthy(), TRITON_CACHE_DIR=str(tmp_path / "not" / "yet"))
    st = doc["toolchain"]["env_paths"]["TRITON_CACHE_DIR"]
    assert st["writable"] is True and st["kind"] == "missing"
    serves("FC117", doc, "pass")


def test_fc117_does_not_stop_a_read_only_home_when_triton_cache_dir_points_elsewhere(tmp_path: Path):
    doc = healthy(HOME="/nonexistent-readonly-home")
    real_env_paths(doc, TRITON_CACHE_DIR=str(tmp_path))
    assert doc["toolchain"]["env_paths"]["TRITON_CACHE_DIR"]["path"] == str(tmp_path)
    serves("FC117", doc, "pass")


# ---- FC118: FlashInfer's ``which nvcc`` --------------------------------------------------


def test_fc118_does_not_stop_a_host_without_which_when_cuda_home_is_set():
    doc = healthy()
    doc["toolchain"]["host_tools"]["which"] = None
    (r,) = serves("FC118", doc, "skip")
    assert "CUDA_HOME is set" in r.message


def test_fc118_does_not_stop_a_host_without_which_when_nothing_compiles():
    """The production image: flashinfer-jit-cache for 10.3a, no CUDA_HOME, no which."""
    doc = copy.deepcopy(sections("jit-cache-cu130"))
    doc["env"].pop("CUDA_HOME", None)
    doc["env"].pop("CUDA_PATH", None)
    doc["toolchain"]["host_tools"] = {**IMAGE_TOOLS, "which": None}
    (r,) = serves("FC118", doc, "skip")
    assert "no JIT needed" in r.message


def test_fc118_does_not_stop_a_host_with_which():
    doc = healthy(CUDA_HOME=None)
    doc["toolchain"]["cuda_home"] = {"path": "/usr/local/cuda-13.1", "source": "nvcc-on-path", "exists": True}
    doc["toolchain"]["host_tools"]["which"] = shutil.which("which") or "/usr/bin/which"
    serves("FC118", doc, "pass")


# ---- FC119: DeepGEMM's nvcc --------------------------------------------------------------


@needs_nvcc
def test_fc119_does_not_stop_dg_jit_nvcc_compiler_at_a_new_enough_nvcc_beside_an_old_cuda_home():
    """The CUDA home is 12.6 (FC102 is content on Hopper), DG_JIT_NVCC_COMPILER names this
    machine's nvcc 13.0: DeepGEMM compiles with that one."""
    doc = on_hopper(healthy(), "12.6")
    real_env_paths(doc, DG_JIT_NVCC_COMPILER=NVCC)
    st = doc["toolchain"]["env_paths"]["DG_JIT_NVCC_COMPILER"]
    assert st["kind"] == "executable" and st["version"] is not None
    (r,) = serves("FC119", doc, "pass", host="hgx-h100")
    assert f"({NVCC})" in r.message


def test_fc119_does_not_stop_an_old_nvcc_when_deep_gemm_is_off():
    (r,) = serves("FC119", on_hopper(healthy(VLLM_USE_DEEP_GEMM="0"), "12.6"), "skip", host="hgx-h100")
    assert "VLLM_USE_DEEP_GEMM=0" in r.message


def test_fc119_does_not_stop_an_old_nvcc_for_a_model_without_deep_gemm_kernels(tmp_path: Path, monkeypatch):
    """A bf16 Llama on Hopper with nvcc 12.6: no block-FP8 / MXFP4 / NVFP4 weights, so vLLM
    never calls DeepGEMM (vllm/model_executor/layers/quantization/utils/fp8_utils.py)."""
    from support.ckptgen import load_config, write_checkpoint

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    model = write_checkpoint(tmp_path / "llama", load_config("llama-3-8b"), shards=2)
    (r,) = serves("FC119", on_hopper(healthy(), "12.6"), "skip", host="hgx-h100", model=str(model))
    assert "take no DeepGEMM path" in r.message


def test_fc119_does_not_stop_sglang():
    doc = on_hopper(healthy(), "12.6")
    doc["python"]["packages"]["sglang"] = "0.5.23"
    (r,) = serves("FC119", doc, "skip", host="hgx-h100", engine="sglang")
    assert "DeepGEMM is vLLM's" in r.message


# ---- FC121: --deep, Triton's ptxas assembles a kernel -------------------------------------


CONF_PY = "/work/.conformance-venv/bin/python"


@needs_ptxas
@pytest.mark.skipif(not os.path.exists(CONF_PY), reason="no engine venv with Triton here")
def test_fc121_does_not_stop_the_blackwell_variable_at_this_machines_cuda_13_ptxas(tmp_path: Path):
    """TRITON_PTXAS_BLACKWELL_PATH at CUDA 13.0's ptxas, which knows sm_103a: the real
    assembly of the ten-line kernel succeeds."""
    from flightcheck._collect import CollectContext
    from flightcheck._collect.compile_smoke import triton_ptxas
    from support.toolchain import gpu_doc

    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "TRITON_PTXAS_BLACKWELL_PATH": PTXAS}
    got = triton_ptxas(CollectContext(Intent(**TP8), env, CONF_PY), facts("b300", **gpu_doc()))
    if got is None:
        pytest.skip("Triton is not installed in the engine venv")
    assert got["sm_103a"]["ok"] is True and got["sm_103a"]["source"] == "TRITON_PTXAS_BLACKWELL_PATH"
    doc = real_env_paths(healthy(), TRITON_PTXAS_BLACKWELL_PATH=PTXAS)
    built = {"ok": True, "cached": False, "duration_s": 1.0, "output": ""}  # FC109's own build, --deep too
    doc["compile_smoke"] = {"nvcc": NVCC, "ninja": "/usr/bin/ninja", "archs": {"103a": built}, "triton_ptxas": got}
    (r,) = serves("FC121", doc, "pass", deep=True)
    assert r.message.startswith(f"sm_103a: {PTXAS}")


def test_fc121_does_not_stop_without_deep():
    (r,) = serves("FC121", healthy(), "skip")
    assert r.message == "runs only with --deep"


# ---- FC122: FlashInfer's trtllm-gen cubins ------------------------------------------------


def test_fc122_does_not_stop_a_matching_flashinfer_cubin():
    (r,) = serves("FC122", healthy(), "pass")
    assert r.message == "flashinfer-cubin 0.7.2.post1 provides the cubins"


def _fake_flashinfer(root: Path, cubins: Path) -> dict[str, Any]:
    """A FlashInfer whose artifacts.py pins the checksums.txt files written under ``cubins``,
    laid out as ``get_artifact`` addresses them."""
    import hashlib

    paths, sums = {}, {}
    for name in ("TRTLLM_GEN_FMHA", "TRTLLM_GEN_BMM", "TRTLLM_GEN_GEMM"):
        sub = f"abc123/{name.lower()}/"
        body = f"{name} 0123 kernel.cubin\n".encode()
        (cubins / sub).mkdir(parents=True, exist_ok=True)
        (cubins / sub / "checksums.txt").write_bytes(body)
        paths[name], sums[name] = sub, hashlib.sha256(body).hexdigest()
    fdir = root / "flashinfer"
    fdir.mkdir(parents=True)
    text = "class ArtifactPath:\n" + "".join(f'    {k}: str = "{v}"\n' for k, v in paths.items())
    text += "\n\nclass CheckSumHash:\n" + "".join(f'    {k}: str = "{v}"\n' for k, v in sums.items())
    (fdir / "artifacts.py").write_text(text)
    return {"dirs": {"flashinfer": str(fdir)}, "packages": {"flashinfer-python": "0.7.2.post1"}}


def test_fc122_does_not_stop_an_air_gapped_node_with_a_populated_cubin_dir(tmp_path: Path):
    """No flashinfer-cubin, FLASHINFER_NO_DOWNLOAD=1, FLASHINFER_CUBIN_DIR holding every
    checksums.txt with the pinned hash: nothing is downloaded."""
    from flightcheck._collect.toolchain import flashinfer_cubins

    cubins = tmp_path / "cubins"
    py = _fake_flashinfer(tmp_path / "site", cubins)
    env = {"FLASHINFER_CUBIN_DIR": str(cubins), "FLASHINFER_NO_DOWNLOAD": "1"}
    doc = healthy(**env)
    doc["python"]["packages"]["flashinfer-cubin"] = None
    doc["toolchain"]["flashinfer_cubins"] = flashinfer_cubins(env, py)
    assert set(doc["toolchain"]["flashinfer_cubins"]["artifacts"].values()) == {"ok"}
    (r,) = serves("FC122", doc, "pass")
    assert str(cubins) in r.message


def test_fc122_does_not_stop_a_hopper_node_without_cubins():
    doc = healthy(FLASHINFER_NO_DOWNLOAD="1")
    doc["python"]["packages"]["flashinfer-cubin"] = None
    missing = {"TRTLLM_GEN_FMHA": "missing"}
    doc["toolchain"]["flashinfer_cubins"] = {"dir": "/x", "source": "cache", "artifacts": missing}
    (r,) = serves("FC122", on_h100(doc), "skip", host="hgx-h100")
    assert "trtllm-gen cubins are not loaded" in r.message


# ---- FC123: nvcc's host-compiler bounds --------------------------------------------------


@needs_gcc
@pytest.mark.skipif(not os.path.exists(HOST_CONFIG), reason=f"no {HOST_CONFIG} here")
def test_fc123_does_not_stop_this_machines_gcc_with_this_toolkits_host_config():
    host, why = _cuda.compiler("CC", "gcc", {"PATH": os.environ.get("PATH", os.defpath)})
    assert host is not None, why
    doc = healthy()
    doc["python"]["packages"]["flashinfer-cubin"] = None  # JIT needed: the check is evaluated
    doc["toolchain"].update(
        nvcc_host=host,
        nvcc_host_kind="gcc",
        host_compiler_bounds=host_compiler_bounds(Path(HOST_CONFIG).read_text(errors="replace")),
    )
    (r,) = serves("FC123", doc, "pass")
    assert f"gcc {host['version']}" in r.message


def test_fc123_does_not_stop_a_newer_gcc_allowed_by_nvcc_append_flags():
    """nvcc's own escape hatch: -allow-unsupported-compiler skips host_config.h's #error."""
    doc = healthy(NVCC_APPEND_FLAGS="-allow-unsupported-compiler")
    doc["python"]["packages"]["flashinfer-cubin"] = None
    doc["toolchain"]["nvcc_host"] = {"path": "/usr/bin/gcc-16", "version": "16.1.0"}
    (r,) = serves("FC123", doc, "pass")
    assert "allowed by -allow-unsupported-compiler" in r.message


# ---- FC124: Triton's libcuda lookup ------------------------------------------------------


def test_fc124_does_not_stop_a_stale_ldconfig_cache_with_triton_libcuda_path():
    doc = healthy(TRITON_LIBCUDA_PATH="/usr/local/nvidia/lib64")
    doc["toolchain"]["libcuda_lookup"] = {"ldconfig": "stale", "ld_library_path": [], "known": []}
    (r,) = serves("FC124", doc, "skip")
    assert "TRITON_LIBCUDA_PATH=/usr/local/nvidia/lib64 is what Triton uses" in r.message


@pytest.mark.skipif(not os.path.exists("/sbin/ldconfig"), reason="no /sbin/ldconfig here")
def test_fc124_does_not_stop_libcuda_found_through_ld_library_path(tmp_path: Path):
    """The driver libraries mounted at a directory the linker cache does not list, named in
    LD_LIBRARY_PATH: Triton's second lookup finds them (replayed on this machine)."""
    drv = tmp_path / "drv"
    drv.mkdir()
    (drv / "libcuda.so.1").write_bytes(b"\x7fELF")
    lookup = libcuda_lookup({"PATH": os.environ.get("PATH", ""), "LD_LIBRARY_PATH": str(drv)})
    if lookup["ldconfig"] != "none":
        pytest.skip(f"this machine's linker cache lists libcuda.so.1 ({lookup['ldconfig']})")
    doc = healthy(LD_LIBRARY_PATH=str(drv))
    doc["toolchain"]["libcuda_lookup"] = lookup
    (r,) = serves("FC124", doc, "pass")
    assert str(drv) in r.message


# ---- FC125: the link step ----------------------------------------------------------------


def test_fc125_does_not_stop_a_pip_cuda_when_the_driver_package_ships_libcuda_so():
    """No lib64/stubs under the CUDA home, but the distribution's libcuda.so (the -dev link)
    in the linker's own directory: ``-lcuda`` resolves."""
    doc = healthy()
    doc["python"]["packages"]["flashinfer-cubin"] = None
    doc["toolchain"]["link_libcuda"] = ["/usr/lib/x86_64-linux-gnu/libcuda.so"]
    (r,) = serves("FC125", doc, "pass")
    assert "/usr/lib/x86_64-linux-gnu/libcuda.so" in r.message


def test_fc125_does_not_stop_a_node_where_nothing_links():
    doc = copy.deepcopy(sections("jit-cache-cu130"))
    doc["toolchain"]["link_libcuda"] = []
    doc["toolchain"]["host_tools"] = {**IMAGE_TOOLS, "ld": None, "objcopy": None}
    (r,) = serves("FC125", doc, "skip")
    assert "no JIT needed" in r.message


# ---- FC126: tokenspeed_triton's one ptxas ------------------------------------------------


@needs_ptxas
def test_fc126_does_not_stop_triton_ptxas_path_at_a_ptxas_that_knows_blackwell():
    doc = healthy()
    doc["python"]["packages"].update({"tokenspeed-mla": "2.0.3", "tokenspeed-triton": "3.9.10"})
    real_env_paths(doc, TRITON_PTXAS_PATH=PTXAS)
    (r,) = serves("FC126", doc, "pass")
    assert "knows 103a" in r.message


def test_fc126_does_not_stop_tokenspeed_on_hopper():
    doc = healthy(TRITON_PTXAS_PATH="/usr/local/cuda-12.4/bin/ptxas")
    doc["python"]["packages"].update({"tokenspeed-mla": "2.0.3", "tokenspeed-triton": "3.9.10"})
    doc["toolchain"]["env_paths"]["TRITON_PTXAS_PATH"] = {
        "path": "/usr/local/cuda-12.4/bin/ptxas",
        "kind": "executable",
        "version": "12.4",
    }
    (r,) = serves("FC126", on_h100(doc), "skip", host="hgx-h100")
    assert "TOKENSPEED_MLA does not run" in r.message


# ---- FC127: CuTe DSL's flavour -----------------------------------------------------------


def test_fc127_does_not_stop_cu12_and_cu13_flavours_on_a_cuda_12_9_driver():
    doc = healthy()
    doc["python"]["packages"]["nvidia-cutlass-dsl"] = "4.8.0"
    doc["toolchain"]["cute_dsl_flavors"] = [12, 13]
    driver = {"loaded": True, "version": "575.57.08", "cuda_version": "12.9"}
    rep = evaluate(facts("b300", **doc, driver=driver), Intent(**TP8))
    (r,) = [x for x in rep.checks if x.code == "FC127"]
    assert r.status.value == "pass" and "cu12 runs on the CUDA 12.9 driver" in r.message


def test_fc127_does_not_stop_a_cu13_only_cute_dsl_on_a_cuda_13_driver():
    doc = healthy()
    doc["python"]["packages"]["nvidia-cutlass-dsl"] = "4.8.0"
    doc["toolchain"]["cute_dsl_flavors"] = [13]
    (r,) = serves("FC127", doc, "pass")
    assert "cu13 runs on the CUDA" in r.message


# ---- FC128: CUTE_DSL_PTXAS_PATH ----------------------------------------------------------


@needs_ptxas
def test_fc128_does_not_stop_cute_dsl_ptxas_path_at_a_ptxas_that_knows_the_gpu():
    doc = healthy()
    doc["python"]["packages"]["nvidia-cutlass-dsl"] = "4.8.0"
    real_env_paths(doc, CUTE_DSL_PTXAS_PATH=PTXAS)
    (r,) = serves("FC128", doc, "pass")
    assert "knows 103a" in r.message


def test_fc128_does_not_stop_when_unset():
    doc = healthy()
    doc["python"]["packages"]["nvidia-cutlass-dsl"] = "4.8.0"
    (r,) = serves("FC128", doc, "skip")
    assert "embedded ptxas" in r.message


def _model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, **config: Any) -> str:
    from support.ckptgen import load_config, write_checkpoint

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return str(write_checkpoint(tmp_path / name, {**load_config("tiny-llama"), **config}))


MXFP4 = {"quantization_config": {"quant_method": "mxfp4"}}


def test_fc119_does_not_stop_an_mxfp4_model_on_hopper(tmp_path: Path, monkeypatch):
    """MXFP4 on SM 9.0 goes to humming / Marlin: DeepGemmFP4Experts needs the 10.x family
    (vllm/model_executor/layers/fused_moe/experts/deep_gemm_moe.py)."""
    model = _model(tmp_path, monkeypatch, "mxfp4", **MXFP4)
    (r,) = serves("FC119", on_hopper(healthy(), "12.6"), "skip", host="hgx-h100", model=model)
    assert "take no DeepGEMM path on the GPUs used" in r.message


def test_fc119_does_not_stop_an_mxfp4_model_on_blackwell_while_flashinfer_serves_it(tmp_path: Path, monkeypatch):
    """On SM 10.x FlashInfer's TRT-LLM MXFP4 MoE comes before DEEPGEMM_MXFP4
    (oracle/mxfp4.py): with FlashInfer on, DeepGEMM is not used, whatever DG's nvcc is."""
    model = _model(tmp_path, monkeypatch, "mxfp4", **MXFP4)
    doc = healthy(DG_JIT_NVCC_COMPILER="/opt/cuda-12.8/bin/nvcc")
    doc["toolchain"]["env_paths"]["DG_JIT_NVCC_COMPILER"] = {
        "path": "/opt/cuda-12.8/bin/nvcc",
        "kind": "executable",
        "version": "12.8",
    }
    (r,) = serves("FC119", doc, "skip", model=model)
    assert "mxfp4" in r.message


def flashinfer_off_node() -> dict[str, Any]:
    """A driver-only image (no toolkit, no which) with vLLM 0.33 and flashinfer-python but no
    flashinfer-cubin: vLLM's ``has_flashinfer`` is false (vllm/utils/flashinfer.py), so
    FlashInfer never compiles, links or runs ``which nvcc``."""
    doc = copy.deepcopy(sections("driver-only"))
    doc["python"]["packages"]["flashinfer-cubin"] = None
    doc["toolchain"]["host_tools"] = {**IMAGE_TOOLS, "which": None, "ld": None, "objcopy": None}
    doc["toolchain"]["link_libcuda"] = []
    doc["toolchain"]["nvcc_host"] = {"path": "/usr/bin/gcc-16", "version": "16.1.0"}
    doc["toolchain"]["host_compiler_bounds"] = {"gcc_max": 15, "clang_below": 21}
    for var in ("CUDA_HOME", "CUDA_PATH"):
        doc["env"].pop(var, None)
    return doc


@pytest.mark.parametrize("code", ["FC118", "FC123", "FC125"])
def test_fc118_fc123_fc125_does_not_stop_when_vllm_turns_flashinfer_off(code):
    assert flashinfer_off_node()["toolchain"]["nvcc"] is None
    (r,) = serves(code, flashinfer_off_node(), "skip")
    assert "vLLM disables FlashInfer here" in r.message
    # the same host with SGLang (no such gate) is still judged
    doc = flashinfer_off_node()
    doc["python"]["packages"]["sglang"] = "0.5.23"
    got = [x for x in evaluate(facts("b300", **doc), Intent(engine="sglang", **TP8)).checks if x.code == code]
    assert got and "vLLM disables FlashInfer" not in got[0].message
