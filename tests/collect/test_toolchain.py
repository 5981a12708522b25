"""The toolchain and jit_cache collectors against fake tools, and against the real nvcc,
ninja and compilers where this machine has them."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from flightcheck import Intent
from flightcheck._collect import CollectContext
from flightcheck._collect import cuda as _cuda
from flightcheck._collect.jit_cache import collect_jit_cache, nearest_existing, workspace_dir
from flightcheck._collect.toolchain import collect_toolchain, cuda_envs, tilelang_cuda, venv_ninja
from support.fake_cuda import clean_path, fake_nvcc, fake_toolkit, script

REAL_NVCC = shutil.which("nvcc")
REAL_NINJA = shutil.which("ninja")


@pytest.fixture(autouse=True)
def _fresh_tool_cache():
    _cuda.clear_cache()
    yield
    _cuda.clear_cache()


def ctx(env: dict[str, str], python: str = sys.executable) -> CollectContext:
    return CollectContext(Intent(), dict(env), python)


def collect(env: dict[str, str], python: str = sys.executable) -> tuple[dict, dict]:
    out = collect_toolchain(ctx(env, python))
    return out["toolchain"], out["unavailable"]


# --- resolution order: FlashInfer's get_cuda_path() --------------------------------------


def test_cuda_home_wins_over_the_nvcc_on_path(tmp_path):
    fake_nvcc(tmp_path / "pathbin" / "nvcc", release="12.8")
    home = fake_toolkit(tmp_path / "cuda-13.1", "13.1")
    env = {"PATH": clean_path(tmp_path / "pathbin"), "CUDA_HOME": str(home)}
    assert _cuda.resolve_cuda_home(env) == (str(home), "CUDA_HOME")
    tc, _ = collect(env)
    assert tc["nvcc"]["path"] == str(home / "bin" / "nvcc") and tc["nvcc"]["version"] == "13.1"
    assert tc["cuda_home"] == {"path": str(home), "source": "CUDA_HOME", "exists": True}
    assert tc["libcudart"] is True


def test_cuda_path_then_nvcc_on_path_then_default(tmp_path, monkeypatch):
    fake_nvcc(tmp_path / "tk" / "bin" / "nvcc")
    env = {"PATH": clean_path(tmp_path / "tk" / "bin"), "CUDA_HOME": "", "CUDA_PATH": "/opt/cuda"}
    assert _cuda.resolve_cuda_home(env) == ("/opt/cuda", "CUDA_PATH")  # an empty CUDA_HOME is unset
    del env["CUDA_PATH"]
    assert _cuda.resolve_cuda_home(env) == (str(tmp_path / "tk"), "nvcc-on-path")
    monkeypatch.setattr(_cuda, "DEFAULT_CUDA_HOME", str(tmp_path / "default-cuda"))
    env["PATH"] = clean_path(tmp_path / "empty")
    assert _cuda.resolve_cuda_home(env) == (None, None)  # FlashInfer raises here
    (tmp_path / "default-cuda").mkdir()
    assert _cuda.resolve_cuda_home(env) == (str(tmp_path / "default-cuda"), "default")


def test_flashinfer_nvcc_overrides_the_binary(tmp_path):
    home = fake_toolkit(tmp_path / "cuda-12.9", "12.9")
    other = fake_nvcc(tmp_path / "wrap" / "my-nvcc", release="13.0")
    env = {"PATH": clean_path(tmp_path / "wrap"), "CUDA_HOME": str(home), "FLASHINFER_NVCC": "my-nvcc"}
    tc, _ = collect(env)
    assert tc["nvcc"]["path"] == str(other) and tc["nvcc"]["version"] == "13.0"


def test_fake_nvcc_version_and_archs_and_no_libcudart(tmp_path):
    fake_nvcc(tmp_path / "tk" / "bin" / "nvcc", release="12.8", archs=("90", "100", "101", "120"))
    tc, unavailable = collect({"PATH": clean_path(tmp_path / "tk" / "bin")})
    assert tc["nvcc"] == {
        "path": str(tmp_path / "tk" / "bin" / "nvcc"),
        "version": "12.8",
        "archs": ["sm_90", "sm_100", "sm_101", "sm_120"],
    }
    assert tc["cuda_home"]["source"] == "nvcc-on-path"
    assert tc["libcudart"] is False
    assert tc["ninja"] is None and "no ninja" in unavailable["toolchain.ninja"]
    assert tc["cxx"] is None and "c++: not found" in unavailable["toolchain.cxx"]


def test_cuda_home_that_does_not_exist(tmp_path):
    tc, unavailable = collect({"PATH": clean_path(tmp_path), "CUDA_HOME": "/nonexistent"})
    assert tc["cuda_home"] == {"path": "/nonexistent", "source": "CUDA_HOME", "exists": False}
    assert tc["nvcc"] is None
    assert (
        unavailable["toolchain.nvcc"] == "/nonexistent/bin/nvcc does not exist (CUDA home /nonexistent from CUDA_HOME)"
    )


def test_nvcc_that_prints_garbage_or_hangs(tmp_path, monkeypatch):
    script(tmp_path / "a" / "bin" / "nvcc", 'echo "something else"')
    tc, unavailable = collect({"PATH": clean_path(tmp_path / "a" / "bin")})
    assert tc["nvcc"]["version"] is None
    assert "printed no 'release X.Y,'" in unavailable["toolchain.nvcc.version"]
    _cuda.clear_cache()
    monkeypatch.setattr(_cuda, "TOOL_TIMEOUT", 0.3)
    script(tmp_path / "b" / "bin" / "nvcc", "exec /bin/sleep 30")
    tc, unavailable = collect({"PATH": clean_path(tmp_path / "b" / "bin")})
    assert tc["nvcc"]["version"] is None
    assert "timed out" in unavailable["toolchain.nvcc.version"]


def test_compilers_from_cc_cxx_with_launcher_and_clang_style_versions(tmp_path):
    script(tmp_path / "bin" / "ccache", 'exec "$@"')
    script(tmp_path / "bin" / "g++-14", 'case "$1" in -dumpfullversion) echo 14.2.0;; esac')
    script(
        tmp_path / "bin" / "clang",
        'case "$1" in -dumpfullversion) echo "clang: error: unknown argument" >&2; exit 1;; '
        '--version) echo "Ubuntu clang version 18.1.3 (1ubuntu1)";; esac',
    )
    env = {"PATH": clean_path(tmp_path / "bin"), "CXX": "ccache g++-14", "CC": "clang"}
    tc, _ = collect(env)
    assert tc["cxx"] == {"path": str(tmp_path / "bin" / "g++-14"), "version": "14.2.0"}
    assert tc["cc"] == {"path": str(tmp_path / "bin" / "clang"), "version": "18.1.3"}


def test_ninja_found_and_venv_ninja_off_path(tmp_path):
    script(tmp_path / "bin" / "ninja", "echo 1.12.1")
    tc, _ = collect({"PATH": clean_path(tmp_path / "bin")})
    assert tc["ninja"] == {"path": str(tmp_path / "bin" / "ninja"), "version": "1.12.1"}
    venv_bin = tmp_path / "venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "python").symlink_to(sys.executable)
    script(venv_bin / "ninja", "echo 1.13.0")
    assert venv_ninja(str(venv_bin / "python"), {"PATH": clean_path(tmp_path / "bin")}) == str(venv_bin / "ninja")
    assert venv_ninja(str(venv_bin / "python"), {"PATH": clean_path(venv_bin)}) is None  # activated
    tc, _ = collect({"PATH": clean_path(tmp_path / "empty")}, python=str(venv_bin / "python"))
    assert tc["ninja"] is None and tc["ninja_in_venv"] == str(venv_bin / "ninja")


def test_alternatives_are_real_toolkits_newest_first(tmp_path, monkeypatch):
    fake_toolkit(tmp_path / "cuda-12.8", "12.8")
    fake_toolkit(tmp_path / "cuda-13.1", "13.1")
    fake_toolkit(tmp_path / "cuda-12.9", "12.9", version_file=False)  # version from nvcc
    fake_nvcc(tmp_path / "wrapper" / "bin" / "nvcc", release="13.1")  # no headers: not a CUDA_HOME
    (tmp_path / "cuda").symlink_to(tmp_path / "cuda-13.1")
    monkeypatch.setattr(
        _cuda, "TOOLKIT_GLOBS", (str(tmp_path / "cuda-*" / "bin" / "nvcc"), str(tmp_path / "cuda" / "bin" / "nvcc"))
    )
    alts = _cuda.alternatives({"PATH": clean_path(tmp_path / "wrapper" / "bin")})
    assert alts == [
        {"path": str(tmp_path / "cuda-13.1" / "bin" / "nvcc"), "version": "13.1"},
        {"path": str(tmp_path / "cuda-12.9" / "bin" / "nvcc"), "version": "12.9"},
        {"path": str(tmp_path / "cuda-12.8" / "bin" / "nvcc"), "version": "12.8"},
    ]


def test_tool_runs_are_cached_per_binary(tmp_path):
    counter = tmp_path / "count"
    nvcc = script(
        tmp_path / "bin" / "nvcc", f'echo x >> {counter}; echo "Cuda compilation tools, release 13.0, V13.0.1"'
    )
    env = {"PATH": str(tmp_path / "bin")}
    assert _cuda.nvcc_version(str(nvcc), env) == ("13.0", None)
    assert _cuda.nvcc_version(str(nvcc), env) == ("13.0", None)
    assert counter.read_text().count("x") == 1


@pytest.mark.skipif(REAL_NVCC is None, reason="no nvcc on this machine")
def test_real_nvcc():
    out = subprocess.run([REAL_NVCC, "--version"], capture_output=True, text=True, check=False).stdout
    want = re.search(r"release (\d+\.\d+),", out).group(1)
    tc, unavailable = collect(dict(os.environ))
    assert tc["nvcc"]["version"] == want
    assert tc["nvcc"]["archs"] and all(a.startswith("sm_") for a in tc["nvcc"]["archs"])
    if tuple(int(x) for x in want.split(".")) >= (12, 9):
        assert "sm_103" in tc["nvcc"]["archs"]
    assert not any(k.startswith("toolchain.nvcc") for k in unavailable)


@pytest.mark.skipif(REAL_NINJA is None or shutil.which("c++") is None, reason="no ninja / c++ here")
def test_real_ninja_compilers_and_python_headers():
    tc, _ = collect(dict(os.environ))
    version = subprocess.run([REAL_NINJA, "--version"], capture_output=True, text=True, check=False).stdout.strip()
    assert tc["ninja"] == {"path": REAL_NINJA, "version": version}
    assert re.fullmatch(r"\d+(\.\d+)+", tc["cxx"]["version"])
    import sysconfig

    assert tc["python_include"] == sysconfig.get_path("include")
    assert tc["python_headers"] == os.path.exists(os.path.join(sysconfig.get_path("include"), "Python.h"))


# --- jit_cache ----------------------------------------------------------------------------


def test_workspace_follows_flashinfer(tmp_path):
    assert workspace_dir({"FLASHINFER_WORKSPACE_BASE": str(tmp_path)}) == str(tmp_path / ".cache" / "flashinfer")
    assert workspace_dir({"HOME": "/home/serve"}) == "/home/serve/.cache/flashinfer"
    assert nearest_existing(str(tmp_path / "a" / "b" / "c")) == str(tmp_path)


def test_jit_cache_writable_and_free(tmp_path):
    out = collect_jit_cache(ctx({"FLASHINFER_WORKSPACE_BASE": str(tmp_path)}))["jit_cache"]
    assert out["dir"] == str(tmp_path / ".cache" / "flashinfer")
    assert out["writable"] is True and out["tested"] == str(tmp_path) and out["problem"] is None
    assert out["free_bytes"] > 0
    assert os.listdir(tmp_path) == []  # the probe file is gone


def test_jit_cache_blocked_by_a_file_and_by_an_unwritable_filesystem(tmp_path):
    (tmp_path / ".cache").write_text("not a directory")
    out = collect_jit_cache(ctx({"FLASHINFER_WORKSPACE_BASE": str(tmp_path)}))["jit_cache"]
    assert out["writable"] is False and "is not a directory" in out["problem"]
    if sys.platform.startswith("linux"):  # /proc refuses new files even to root
        out = collect_jit_cache(ctx({"FLASHINFER_WORKSPACE_BASE": "/proc"}))["jit_cache"]
        assert out["writable"] is False and out["problem"].startswith("cannot create a file in /proc")


# --- what the other runtime compilers read (Triton, DeepGEMM, FlashInfer's which lookup) ----


def test_env_paths_record_what_tool_variables_name(tmp_path):
    from flightcheck._collect.toolchain import env_paths

    ptxas_dir = tmp_path / "cuda" / "bin"
    ptxas_dir.mkdir(parents=True)
    not_exec = tmp_path / "ptxas"
    not_exec.write_text("#!/bin/sh\n")
    dg = fake_nvcc(tmp_path / "dg" / "bin" / "nvcc", release="12.8")
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    env = {
        "PATH": clean_path(),
        "TRITON_PTXAS_PATH": str(ptxas_dir),
        "TRITON_PTXAS_BLACKWELL_PATH": str(not_exec),
        "DG_JIT_NVCC_COMPILER": str(dg),
        "TRITON_CACHE_DIR": str(blocker / "cache"),  # its nearest existing parent is a file
    }
    got = env_paths(env)
    assert got["TRITON_PTXAS_PATH"]["kind"] == "dir"
    assert got["TRITON_PTXAS_BLACKWELL_PATH"]["kind"] == "file"
    assert got["DG_JIT_NVCC_COMPILER"]["kind"] == "executable" and got["DG_JIT_NVCC_COMPILER"]["version"] == "12.8"
    assert got["TRITON_CACHE_DIR"]["writable"] is False and "not a directory" in got["TRITON_CACHE_DIR"]["problem"]
    # unset: Triton's default under $TRITON_HOME (else $HOME), written to for real
    got = env_paths({"PATH": clean_path(), "HOME": str(tmp_path)})
    assert got == {
        "TRITON_CACHE_DIR": {
            "path": str(tmp_path / ".triton" / "cache"),
            "kind": "missing",
            "writable": True,
            "problem": None,
        }
    }
    got = env_paths({"PATH": clean_path(), "HOME": "/nonexistent", "TRITON_HOME": str(tmp_path)})
    assert got["TRITON_CACHE_DIR"]["path"] == str(tmp_path / ".triton" / "cache")


def test_host_tools_are_looked_up_on_the_engines_path(tmp_path):
    bindir = tmp_path / "bin"
    script(bindir / "cc", "exit 0")
    tc, _ = collect({"PATH": str(bindir), "HOME": str(tmp_path)})
    assert tc["host_tools"] == {"which": None, "gcc": None, "clang": None, "ld": None, "objcopy": None}
    assert tc["cc"]["path"] == str(bindir / "cc")  # FC104 is content; Triton (FC115) is not


@pytest.mark.skipif(shutil.which("which") is None or shutil.which("gcc") is None, reason="no which/gcc here")
def test_host_tools_of_this_machine():
    tc, _ = collect({"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/root")})
    assert tc["host_tools"]["which"] == shutil.which("which")
    assert tc["host_tools"]["gcc"] == shutil.which("gcc")


def test_an_empty_workspace_base_is_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert workspace_dir({"FLASHINFER_WORKSPACE_BASE": "", "HOME": "/home/x"}) == str(
        tmp_path / ".cache" / "flashinfer"
    )
    assert workspace_dir({"HOME": "/home/x"}) == "/home/x/.cache/flashinfer"


def test_env_snapshot_records_the_runtime_compilers_variables_and_never_secrets():
    from flightcheck._collect.env import snapshot

    env = {
        "TRITON_PTXAS_PATH": "/x",
        "TRITON_CACHE_DIR": "/c",
        "DG_JIT_NVCC_COMPILER": "/n",
        "TILELANG_CACHE_DIR": "/t",
        "CUTE_DSL_PTXAS_PATH": "/p",
        "HUMMING_X": "1",
        "TORCHINDUCTOR_CACHE_DIR": "/i",
        "FLASH_ATTENTION_CUTE_DSL_X": "1",
        "CC": "gcc",
        "CXX": "g++",
        "LD_LIBRARY_PATH": "/l",
        "HOME": "/h",
        "USER": "u",
        "TMPDIR": "/tmp",
        "TRITON_REMOTE_CACHE_TOKEN": "s3cr3t",
        "DG_API_KEY": "s3cr3t",
        "HF_TOKEN": "s3cr3t",
        "UNRELATED": "x",
    }
    snap = snapshot(env)
    for name in list(env)[:14]:
        assert snap[name] == env[name]
    assert "s3cr3t" not in snap.values() and "UNRELATED" not in snap


# --- FlashInfer's trtllm-gen cubins: the directory and checksums.txt as FlashInfer reads them --


def _fake_flashinfer(root, manifest: bytes) -> str:
    import hashlib

    fdir = root / "flashinfer"
    fdir.mkdir(parents=True)
    sha = hashlib.sha256(manifest).hexdigest()
    (fdir / "artifacts.py").write_text(
        "class ArtifactPath:\n"
        '    TRTLLM_GEN_FMHA: str = "p1/fmha/trtllm-gen/"\n'
        "    TRTLLM_GEN_BMM: str = (\n"
        '        "p2/batched_gemm/"\n'
        "    )\n"
        "class CheckSumHash:\n"
        f'    TRTLLM_GEN_FMHA: str = "{sha}"\n'
        f'    TRTLLM_GEN_BMM: str = (\n        "{sha}"\n    )\n'
    )
    return str(fdir)


def test_flashinfer_cubins_resolved_and_checked_like_flashinfer(tmp_path):
    from flightcheck._collect.toolchain import flashinfer_cubins

    manifest = b"abc  kernel.cubin\n"
    fdir = _fake_flashinfer(tmp_path, manifest)
    py = {"dirs": {"flashinfer": fdir}, "packages": {"flashinfer-python": "0.7.2.post1", "flashinfer-cubin": None}}
    cache = tmp_path / "home" / ".cache" / "flashinfer" / "cubins"
    (cache / "p1" / "fmha" / "trtllm-gen").mkdir(parents=True)
    (cache / "p1" / "fmha" / "trtllm-gen" / "checksums.txt").write_bytes(manifest)
    (cache / "p2" / "batched_gemm").mkdir(parents=True)
    (cache / "p2" / "batched_gemm" / "checksums.txt").write_bytes(b"stale")
    got = flashinfer_cubins({"HOME": str(tmp_path / "home")}, py)
    assert got["source"] == "cache" and got["dir"] == str(cache)
    assert got["artifacts"] == {"TRTLLM_GEN_FMHA": "ok", "TRTLLM_GEN_BMM": "checksum-mismatch"}
    assert got["urls"] == [got["repository"] + "p2/batched_gemm/checksums.txt"]
    got = flashinfer_cubins({"HOME": "/x", "FLASHINFER_CUBIN_DIR": str(tmp_path / "empty")}, py)
    assert got["source"] == "FLASHINFER_CUBIN_DIR" and set(got["artifacts"].values()) == {"missing"}
    py["packages"]["flashinfer-cubin"] = "0.7.2.post1"
    assert flashinfer_cubins({"HOME": "/x"}, py)["source"] == "flashinfer-cubin"
    py["packages"]["flashinfer-cubin"] = "0.7.1"  # ignored by FlashInfer 0.7.2: the cache is used
    assert flashinfer_cubins({"HOME": "/x"}, py)["source"] == "cache"


def test_the_installed_flashinfers_artifact_pins_parse():
    import glob

    from flightcheck._knowledge.flashinfer import TRTLLM_GEN, parse_artifacts

    found = glob.glob("/work/.conformance-venv/lib/python3*/site-packages/flashinfer/artifacts.py")
    if not found:
        pytest.skip("no installed FlashInfer here")
    from pathlib import Path

    pins = parse_artifacts(Path(found[0]).read_text(encoding="utf-8"))
    assert set(pins) == set(TRTLLM_GEN)
    assert all(re.fullmatch(r"[0-9a-f]{64}", sha) and path.endswith("/") for path, sha in pins.values())


def test_deep_asks_the_configured_repository_for_one_checksums_txt(tmp_path):
    import functools
    import http.server
    import socket
    import threading

    from flightcheck._collect.compile_smoke import cubin_repository
    from flightcheck._vocabulary.facts import from_dict

    (tmp_path / "p1").mkdir()
    (tmp_path / "p1" / "checksums.txt").write_text("x")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    try:

        def facts_for(url):
            return from_dict({"toolchain": {"flashinfer_cubins": {"urls": [url]}}})

        assert cubin_repository(facts_for(base + "p1/checksums.txt")) == (True, None)
        ok, why = cubin_repository(facts_for(base + "p2/checksums.txt"))
        assert ok is False and "HTTP 404" in why
    finally:
        server.shutdown()
        server.server_close()
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ok, why = cubin_repository(
        from_dict({"toolchain": {"flashinfer_cubins": {"urls": [f"http://127.0.0.1:{port}/x"]}}})
    )
    assert ok is False and why
    assert cubin_repository(from_dict({"toolchain": {}})) == (None, None)


def test_host_compiler_bounds_read_from_the_toolkits_header(tmp_path):
    home = fake_toolkit(tmp_path / "cuda-13.0", "13.0")
    (home / "include" / "crt").mkdir(parents=True, exist_ok=True)
    (home / "include" / "crt" / "host_config.h").write_text(
        "#if __GNUC__ > 15\n#error -- unsupported GNU version!\n#endif\n"
        "#if (__clang_major__ >= 21) || (__clang_major__ < 3)\n#error -- unsupported clang version!\n#endif\n"
    )
    script(tmp_path / "bin" / "gcc", "echo 16.1.0")
    tc, _ = collect({"PATH": clean_path(tmp_path / "bin"), "CUDA_HOME": str(home), "HOME": str(tmp_path)})
    assert tc["host_compiler_bounds"] == {"gcc_max": 15, "clang_below": 21}
    assert tc["nvcc_host"] == {"path": str(tmp_path / "bin" / "gcc"), "version": "16.1.0"}
    assert tc["nvcc_host_kind"] == "gcc"


@pytest.mark.skipif(not os.path.exists("/usr/local/cuda/include/crt/host_config.h"), reason="no CUDA toolkit here")
def test_host_compiler_bounds_of_the_real_toolkit():
    from flightcheck._knowledge.cuda import host_compiler_bounds

    text = open("/usr/local/cuda/include/crt/host_config.h", encoding="utf-8", errors="replace").read()  # noqa: SIM115
    got = host_compiler_bounds(text)
    assert got["gcc_max"] >= 12 and got["clang_below"] >= 16


def test_libcuda_lookup_replays_tritons_order(tmp_path):
    from flightcheck._collect.toolchain import libcuda_lookup

    drv = tmp_path / "drv"
    drv.mkdir()
    (drv / "libcuda.so.1").write_bytes(b"")
    got = libcuda_lookup({"PATH": os.environ["PATH"], "LD_LIBRARY_PATH": f"/nonexistent:{drv}"})
    assert got["ld_library_path"] == [str(drv)]
    assert got["ldconfig"] in ({"missing"} if not os.path.exists("/sbin/ldconfig") else {"found", "none", "stale"})


def test_link_libcuda_finds_the_toolkit_stub(tmp_path):
    from flightcheck._collect.toolchain import link_libcuda

    home = tmp_path / "cuda"
    (home / "lib64" / "stubs").mkdir(parents=True)
    assert all(not p.startswith(str(home)) for p in link_libcuda(str(home), {}))
    (home / "lib64" / "stubs" / "libcuda.so").write_bytes(b"")
    assert link_libcuda(str(home), {})[0] == str(home / "lib64" / "stubs" / "libcuda.so")


def test_cute_dsl_flavors_from_the_installed_builds(tmp_path):
    from flightcheck._collect.toolchain import cute_dsl_flavors

    libs = tmp_path / "nvidia_cutlass_dsl" / "dsl_packages" / "cutlass" / "_mlir" / "_mlir_libs"
    libs.mkdir(parents=True)
    for name in ("_cutlass_ir.cu13.cpython-312-x86_64-linux-gnu.so", "_cutlass_ir_version_cu13.py", "_cutlass_ir"):
        (libs / name).write_text("")
    assert cute_dsl_flavors({"dirs": {"nvidia_cutlass_dsl": str(tmp_path / "nvidia_cutlass_dsl")}}) == [13]
    assert cute_dsl_flavors({"dirs": {}}) is None


def test_env_paths_record_cc_and_cxx_as_the_one_file_triton_runs(tmp_path):
    """CC/CXX are recorded as the file their whole value names (what Triton and tilelang
    exec), so a path with a space is told from a command line such as ``ccache gcc``."""
    from flightcheck._collect.toolchain import env_paths

    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("no gcc here")
    spaced = tmp_path / "gcc 12" / "gcc"
    spaced.parent.mkdir()
    spaced.symlink_to(os.path.realpath(gcc))
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "CC": str(spaced), "CXX": "ccache g++"}
    got = env_paths(env)
    assert got["CC"]["kind"] == "executable" and got["CC"]["path"] == str(spaced)
    assert got["CXX"] == {"path": "ccache g++", "kind": "missing"}
    got = env_paths({**env, "CC": "gcc"})
    assert got["CC"]["path"] == gcc and got["CC"]["kind"] == "executable"


def test_tilelang_cuda_home_order(tmp_path):
    """tilelang/env.py: CUDA_HOME or CUDA_PATH, nvcc on PATH, pip's nvcc, /usr/local/cuda;
    a home that does not exist is none (the collector, on fake toolkits)."""
    from support.fake_cuda import fake_toolkit

    pip_root = tmp_path / "site" / "nvidia" / "cu13"
    (pip_root / "bin").mkdir(parents=True)
    pip_nvcc = pip_root / "bin" / "nvcc"
    pip_nvcc.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 13.5, V13.5.1'\n")
    pip_nvcc.chmod(0o755)
    py = {
        "packages": {"tilelang": "0.1.12", "nvidia-cuda-nvcc": "13.5.37"},
        "dist_files": {"nvidia-cuda-nvcc": [str(pip_nvcc)]},
    }
    env = {"PATH": "/usr/bin:/bin"}
    got = tilelang_cuda(env, py)
    assert got is not None and got["home"] == str(pip_root) and got["source"] == "nvidia-cuda-nvcc"
    assert got["nvcc"] == {"path": str(pip_nvcc), "version": "13.5"}
    home = fake_toolkit(tmp_path / "cuda-12.9", "12.9")
    got = tilelang_cuda({**env, "PATH": f"{home}/bin:/usr/bin"}, py)
    assert got is not None and got["home"] == str(home) and got["source"] == "nvcc-on-path"
    got = tilelang_cuda({**env, "CUDA_HOME": "", "CUDA_PATH": str(home)}, py)  # tilelang's `or`
    assert got is not None and got["source"] == "CUDA_PATH"
    got = tilelang_cuda({**env, "CUDA_HOME": str(tmp_path / "nowhere")}, py)
    assert got is not None and got["home"] is None and "does not exist" in got["problem"]
    no_file = {**py, "dist_files": {"nvidia-cuda-nvcc": []}}
    got = tilelang_cuda(env, no_file)
    assert got is not None and got["home"] is None and "installed but no `nvcc` found" in got["problem"]
    assert tilelang_cuda(env, {"packages": {}}) is None


def test_cuda_envs_replays_hummings_candidates(tmp_path):
    root = tmp_path / "site" / "nvidia"
    (root / "cu13" / "include").mkdir(parents=True)
    (root / "cu13" / "include" / "nvrtc.h").write_text("")
    (root / "cu13" / "lib").mkdir()
    (root / "cu13" / "lib" / "libnvrtc.so.13").write_text("")
    (root / "cuda_runtime").mkdir()
    (root / "cuda_nvrtc" / "include").mkdir(parents=True)
    (root / "cuda_nvrtc" / "include" / "nvrtc.h").write_text("")
    got = cuda_envs({"PATH": "/usr/bin"}, {"packages": {"humming-kernels": "0.1.19"}, "nvidia_roots": [str(root)]})
    pypi = {(e["path"], e["major"]): e for e in got or [] if e["source"] == "pypi"}
    # the CUDA 12 root searches nvidia/*/lib too (humming's glob), so it finds cu13's library
    assert pypi[(str(root), 12)]["header"] is True
    assert pypi[(str(root), 12)]["nvrtc_lib"] == str(root / "cu13" / "lib" / "libnvrtc.so.13")
    assert pypi[(str(root / "cu13"), 13)]["nvrtc_lib"] == str(root / "cu13" / "lib" / "libnvrtc.so.13")
    assert cuda_envs({}, {"packages": {}}) is None
    json.dumps(got)  # a facts field: plain JSON
