"""The python collector against fake engine venvs (another interpreter, fake metadata,
torch/version.py, engine env declarations, a jit-cache of synthetic .so files), and the
fatbin reader against synthetic ELF files and, where nvcc exists, real ones."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from flightcheck import Intent
from flightcheck._collect import CollectContext
from flightcheck._collect import cuda as _cuda
from flightcheck._collect import fatbin as _fatbin
from flightcheck._collect.engine import engine_python
from flightcheck._collect.python_env import collect_python, requirement_on
from flightcheck._knowledge import flashinfer as _fi_wheels
from support import FIXTURES
from support.fake_cuda import elf_with_fatbin, script
from support.fake_engine import dist, make_engine, site_packages

REAL_FATBINS = FIXTURES / "fatbin"  # nvcc 13.0 builds, see its README.md


@pytest.fixture(autouse=True)
def _fresh_cache():
    _cuda.clear_cache()
    yield
    _cuda.clear_cache()


def collect(python, engine: str = "vllm", deep: bool = False, env: dict | None = None):
    cctx = CollectContext(Intent(engine=engine, deep=deep), dict(env or {"PATH": "/usr/bin:/bin"}), str(python))
    out = collect_python(cctx)
    return out["python"], out["unavailable"]


def test_engine_venv_packages_torch_cuda_and_declarations(tmp_path):
    py = make_engine(tmp_path / "venv")
    got, unavailable = collect(py)
    assert got["executable"] == str(py)
    assert got["version"].startswith(f"{sys.version_info[0]}.{sys.version_info[1]}")
    assert got["packages"]["vllm"] == "0.33.0"
    assert got["packages"]["flashinfer-python"] == "0.7.2.post1"
    assert got["packages"]["flashinfer-jit-cache"] is None and got["packages"]["sglang"] is None
    assert got["torch_cuda"] == "13.0"
    assert got["engine"] == "vllm"
    assert got["engine_requires"] == "flashinfer-python==0.7.2.post1"  # the extra's ray line is not it
    assert got["engine_env_vars"] == [
        "VLLM_ALLREDUCE_USE_SYMM_MEM",
        "VLLM_FLASHINFER_ALLREDUCE_BACKEND",
        "VLLM_HOST_IP",
    ]
    assert got["torch_arch_list"] is None and "--deep" in unavailable["python.torch_arch_list"]
    assert unavailable["python.jit_cache_archs"] == "flashinfer-jit-cache is not installed"


def _console_script(path, text: str):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)


def test_engine_interpreter_behind_the_vllm_script_on_the_engines_path(tmp_path):
    py = make_engine(tmp_path / "venv")
    env = {"PATH": str(tmp_path / "bin")}
    _console_script(tmp_path / "bin" / "vllm", f"#!{py}\nimport sys\n")
    assert engine_python(Intent(), env) == str(py)
    # pip writes a /bin/sh trampoline when the interpreter's path is too long for "#!"
    _console_script(tmp_path / "bin" / "vllm", f"#!/bin/sh\n'''exec' {py} \"$0\" \"$@\"\n' '''\nimport sys\n")
    assert engine_python(Intent(), env) == str(py)
    # "#!/usr/bin/env python3" is resolved on the engine's PATH, not flightcheck's
    (tmp_path / "envbin").mkdir()
    (tmp_path / "envbin" / "python3").symlink_to(py)
    _console_script(tmp_path / "bin" / "vllm", "#!/usr/bin/env python3\nimport sys\n")
    env = {"PATH": f"{tmp_path / 'bin'}:{tmp_path / 'envbin'}"}
    assert engine_python(Intent(), env) == str(tmp_path / "envbin" / "python3")
    # no engine script: flightcheck's own interpreter
    assert engine_python(Intent(engine="sglang"), env) == sys.executable


def test_sglang_engine(tmp_path):
    py = make_engine(tmp_path / "venv", engine="sglang", flashinfer="0.7.4")
    got, _ = collect(py, engine="sglang")
    assert got["engine_requires"] == "flashinfer-python==0.7.4"
    assert got["engine_env_vars"] == [
        "SGLANG_ENABLE_TORCH_SYMM_MEM",
        "SGLANG_JIT_DEEPGEMM_PRECOMPILE",
        "SGL_DG_CACHE_DIR",
    ]


def test_jit_cache_archs_read_from_the_so_files(tmp_path):
    py = make_engine(
        tmp_path / "venv", jit_cache="0.7.2.post1+cu130", jit_cache_archs=["9.0a", "10.0a", "10.3a", "12.0f"]
    )
    got, unavailable = collect(py)
    assert got["jit_cache_archs"] == ["9.0a", "10.0a", "10.3a", "12.0f"]
    assert got["jit_cache_archs_source"] == "fatbin: read from 3 .so files (norm.so, sampling.so, page.so)"
    assert "python.jit_cache_archs" not in unavailable


def test_jit_cache_archs_from_the_release_table_when_unreadable(tmp_path):
    py = make_engine(tmp_path / "venv", flashinfer="0.6.3", jit_cache="0.6.3+cu129", jit_cache_archs=None)
    got, _ = collect(py)
    assert got["jit_cache_archs"] == ["7.5", "8.0", "8.9", "9.0a", "10.0a", "12.0a"]  # no 10.3a
    assert got["jit_cache_archs_source"].startswith("table: FlashInfer's release build list for 0.6.3+cu129")
    py = make_engine(tmp_path / "v2", flashinfer="0.3.0", jit_cache="0.3.0+cu128", jit_cache_archs=None)
    got, unavailable = collect(py)
    assert got["jit_cache_archs"] is None and "no release-table row" in unavailable["python.jit_cache_archs"]


def test_cpu_only_torch(tmp_path):
    got, unavailable = collect(make_engine(tmp_path / "venv", torch_cuda=None))
    assert got["torch_cuda"] is None and "CPU-only" in unavailable["python.torch_cuda"]


def test_deep_reads_torch_arch_flags_without_cuda(tmp_path):
    py = make_engine(tmp_path / "venv", importable_torch=True)
    got, unavailable = collect(py, deep=True)
    assert got["torch_arch_list"] == ["sm_80", "sm_90", "sm_100", "sm_103", "sm_120"]
    py = make_engine(tmp_path / "v2")  # its torch raises on import
    got, unavailable = collect(py, deep=True)
    assert got["torch_arch_list"] is None and "importing torch" in unavailable["python.torch_arch_list"]


def test_an_interpreter_that_cannot_run_is_recorded(tmp_path):
    bad = script(tmp_path / "bin" / "python3", "echo 'bad interpreter' >&2; exit 126")
    got, unavailable = collect(bad)
    assert got["executable"] == str(bad) and got["packages"] is None
    assert "could not run" in unavailable["python.packages"] and "bad interpreter" in unavailable["python.packages"]


def test_own_interpreter_is_queried_in_process():
    got, _ = collect(sys.executable, env={"PATH": "/usr/bin:/bin"})
    import importlib.metadata as md

    assert got["executable"] == sys.executable
    assert got["packages"]["vllm"] is None
    want = None
    try:
        want = md.version("ninja")
    except md.PackageNotFoundError:
        pass
    assert got["packages"]["ninja"] == want


@pytest.mark.parametrize(
    "lines, want",
    [
        (["flashinfer-python==0.7.2.post1"], "flashinfer-python==0.7.2.post1"),
        (["flashinfer_python (==0.2.5)"], "flashinfer-python==0.2.5"),
        (['flashinfer-python>=0.5; extra == "flashinfer"'], None),
        (['flashinfer-python==0.6.1; platform_system == "Linux"'], "flashinfer-python==0.6.1"),
        (["torch==2.9.0", "not a requirement ((("], None),
        ([], None),
    ],
)
def test_requirement_parsing(lines, want):
    assert requirement_on(lines) == want


# --- fatbin reader ------------------------------------------------------------------------


def test_fatbin_reader_on_synthetic_elf(tmp_path):
    so = elf_with_fatbin(
        tmp_path / "m.so",
        [[("elf", "10.0a"), ("elf", "10.3a"), ("ptx", "9.0")], [("elf", "12.0f"), ("elf", "8.0")]],
        pad_between=8,
    )
    assert _fatbin.read_archs(str(so)) == ({"10.0a", "10.3a", "12.0f", "8.0"}, {"9.0"})
    plain = elf_with_fatbin(tmp_path / "plain.so", None)
    assert _fatbin.read_archs(str(plain)) == (set(), set())


def test_fatbin_reader_refuses_garbage_and_truncation(tmp_path):
    (tmp_path / "x.so").write_bytes(b"hello world" * 10)
    with pytest.raises(_fatbin.NotFatbin):
        _fatbin.read_archs(str(tmp_path / "x.so"))
    so = elf_with_fatbin(tmp_path / "t.so", [[("elf", "10.3a")]])
    data = so.read_bytes()
    so.write_bytes(data[:200])  # the section header table is gone
    with pytest.raises(_fatbin.NotFatbin):
        _fatbin.read_archs(str(so))


def test_sampling_skips_arch_pinned_modules(tmp_path):
    root = tmp_path / "jit_cache"
    elf_with_fatbin(root / "fused_moe_103" / "fused_moe_103.so", [[("elf", "10.3a")]])
    elf_with_fatbin(root / "gemm_sm100" / "gemm_sm100.so", [[("elf", "10.0a")]])
    elf_with_fatbin(root / "sampling" / "sampling.so", [[("elf", "9.0a"), ("elf", "12.0f")]])
    assert _fatbin.sample_modules(str(root)) == [str(root / "sampling" / "sampling.so")]
    assert _fatbin.jit_cache_archs(str(tmp_path))[0] == ["9.0a", "12.0f"]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc on this machine")
def test_fatbin_reader_on_a_real_nvcc_build(tmp_path):
    src = tmp_path / "k.cu"
    src.write_text("__global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }\n")
    gencodes = [
        "-gencode=arch=compute_90a,code=sm_90a",
        "-gencode=arch=compute_103a,code=sm_103a",
        "-gencode=arch=compute_120f,code=sm_120f",
        "-gencode=arch=compute_100,code=sm_100",
        "-gencode=arch=compute_90,code=compute_90",
    ]
    proc = subprocess.run(
        ["nvcc", "-shared", "-Xcompiler", "-fPIC", *gencodes, "-o", str(tmp_path / "k.so"), str(src)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0 and "Unsupported gpu architecture" in proc.stderr:
        pytest.skip("this nvcc is older than 12.9")
    assert proc.returncode == 0, proc.stderr
    cubins, ptx = _fatbin.read_archs(str(tmp_path / "k.so"))
    assert cubins == {"9.0a", "10.3a", "12.0f", "10.0"}
    assert ptx == {"9.0"}


def _real(name: str) -> bytes:
    return (REAL_FATBINS / name).read_bytes()


@pytest.mark.parametrize(
    "name,want",
    [
        ("ptx84-compute90.fatbin", (set(), {"9.0": {"8.4"}})),
        ("ptx87-compute90.fatbin", (set(), {"9.0": {"8.7"}})),
        ("ptx87-compute90-uncompressed.fatbin", (set(), {"9.0": {"8.7"}})),
        ("ptx87-sm90-compute90.fatbin", ({"9.0"}, {"9.0": {"8.7"}})),
        ("ptx90-sm80-compute90.fatbin", ({"8.0"}, {"9.0": {"9.0"}})),
    ],
)
def test_ptx_isa_version_read_from_real_nvcc_fatbins(tmp_path, name, want):
    so = elf_with_fatbin(tmp_path / "k.so", None, blob=_real(name))
    assert _fatbin.read_fatbin(str(so)) == want
    assert _fatbin.read_archs(str(so)) == (want[0], set(want[1]))


def test_ptx_version_field_zero_reads_as_unreadable(tmp_path):
    so = elf_with_fatbin(tmp_path / "m.so", [[("ptx", "9.0"), ("ptx", "10.0f", "8.8"), ("elf", "9.0a", "1.8")]])
    assert _fatbin.read_fatbin(str(so)) == ({"9.0a"}, {"9.0": set(), "10.0f": {"8.8"}})


def test_library_fatbins_reads_top_level_and_one_level_down(tmp_path):
    pkg = tmp_path / "vllm"
    elf_with_fatbin(pkg / "_C.abi3.so", None, blob=_real("ptx90-sm80-compute90.fatbin"))
    elf_with_fatbin(pkg / "vllm_flash_attn" / "_vllm_fa2_C.abi3.so", [[("elf", "9.0a"), ("ptx", "9.0", "8.7")]])
    elf_with_fatbin(pkg / "cumem_allocator.abi3.so", None)  # no device code
    (pkg / "broken.so").write_bytes(b"not an ELF file at all" * 4)
    (pkg / "__pycache__").mkdir()
    elf_with_fatbin(pkg / "__pycache__" / "x.so", [[("elf", "12.0f")]])  # never read
    got = _fatbin.library_fatbins(str(pkg))
    assert got["files"] == ["_C.abi3.so", "cumem_allocator.abi3.so", "vllm_flash_attn/_vllm_fa2_C.abi3.so"]
    assert got["cubins"] == ["8.0", "9.0a"]
    assert got["ptx"] == {"9.0": ["8.7", "9.0"]}
    assert "broken.so" in got["problem"]
    assert _fatbin.library_fatbins(str(tmp_path / "empty"))["problem"].startswith("no .so files")


def test_cuda_libraries_of_the_engine_and_its_kernel_packages(tmp_path):
    py = make_engine(tmp_path / "venv", engine="sglang", flashinfer="0.7.4")
    sp = site_packages(tmp_path / "venv")
    dist(sp, "sglang-kernel", "0.4.1")
    elf_with_fatbin(sp / "sgl_kernel" / "sm90" / "common_ops.abi3.so", None, blob=_real("ptx87-sm90-compute90.fatbin"))
    got, unavailable = collect(py, engine="sglang")
    assert got["cuda_libraries"] == {
        "sglang-kernel": {
            "version": "0.4.1",
            "files": ["sm90/common_ops.abi3.so"],
            "cubins": ["9.0"],
            "ptx": {"9.0": ["8.7"]},
            "problem": None,
        },
    }  # SGLang's own package is pure Python: nothing to record
    assert "python.cuda_libraries" not in unavailable
    got, unavailable = collect(make_engine(tmp_path / "plain", engine="sglang"), engine="sglang")
    assert got["cuda_libraries"] is None and "no extension modules" in unavailable["python.cuda_libraries"]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc on this machine")
def test_ptx_isa_version_follows_the_ptx_text_in_a_real_nvcc_build(tmp_path):
    """nvcc's own PTX (its ``.version``) and the same text edited to ``.version 8.4``,
    each embedded with ``nvcc -fatbin``: the entry header carries the text's version."""
    src = tmp_path / "k.cu"
    src.write_text("__global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }\n")
    run = lambda *a: subprocess.run(["nvcc", *a], capture_output=True, text=True, check=False)
    proc = run("-ptx", "-arch=compute_90", "-o", str(tmp_path / "k.ptx"), str(src))
    assert proc.returncode == 0, proc.stderr
    text = (tmp_path / "k.ptx").read_text()
    own = next(line.split()[1] for line in text.splitlines() if line.startswith(".version"))
    (tmp_path / "old.ptx").write_text(text.replace(f".version {own}", ".version 8.4"))
    for ptx, version in (("k.ptx", own), ("old.ptx", "8.4")):
        out = tmp_path / f"{ptx}.fatbin"
        proc = run("-fatbin", "-gencode", "arch=compute_90,code=compute_90", "-o", str(out), str(tmp_path / ptx))
        assert proc.returncode == 0, proc.stderr
        so = elf_with_fatbin(tmp_path / f"{ptx}.so", None, blob=out.read_bytes())
        assert _fatbin.read_fatbin(str(so)) == (set(), {"9.0": {version}})


def test_release_table_and_tags():
    assert _fi_wheels.published_archs("0.7.2.post1", "cu130", "x86_64") == [
        "7.5",
        "8.0",
        "8.9",
        "9.0a",
        "10.0a",
        "10.3a",
        "12.0f",
    ]
    assert "12.1a" in _fi_wheels.published_archs("0.7.2.post1", "cu130", "aarch64")
    assert "10.3a" not in _fi_wheels.published_archs("0.6.3", "cu129")
    assert _fi_wheels.published_archs("0.7.2", "cu128") is None  # HEAD builds no cu128
    assert _fi_wheels.tag_for("13.0") == "cu130" and _fi_wheels.tag_for("13.2") == "cu130"
    assert _fi_wheels.tag_for("12.8") == "cu128" and _fi_wheels.tag_for("12.6") == "cu128"
    assert _fi_wheels.tag_for("11.8") is None
    assert _fi_wheels.cuda_tag("0.7.2.post1+cu130") == "cu130" and _fi_wheels.cuda_tag("0.7.2") is None
