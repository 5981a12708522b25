"""The JIT-toolchain rules (FC102, FC110, FC114–FC127) asserted against the installed engine
stack's own source, read as text: vLLM 0.33.0, FlashInfer 0.7.2.post1, Triton, tokenspeed
and nvidia-cutlass-dsl in the conformance venv. Nothing is imported from them."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from flightcheck._knowledge import cuda as _cuda
from flightcheck._knowledge import flashinfer as _fi
from flightcheck._knowledge import triton as _triton
from flightcheck._knowledge import vllm as _vllm


@pytest.fixture(scope="module")
def site(engine_python: str) -> Path:
    out = subprocess.run(
        [engine_python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return Path(out.stdout.strip())


def read(site: Path, rel: str) -> str:
    path = site / rel
    if not path.exists():
        pytest.skip(f"{rel} is not installed")
    return path.read_text(encoding="utf-8", errors="replace")


def test_triton_compiler_lookup_ptxas_cache_and_libcuda(site: Path) -> None:
    build = read(site, "triton/runtime/build.py")
    c_part = build.split('assert language == "c++"')[0]
    assert 'os.environ.get("CC")' in c_part and 'shutil.which("gcc")' in c_part and 'shutil.which("clang")' in c_part
    assert 'which("cc")' not in c_part and "Failed to find C compiler" in c_part
    knobs = read(site, "triton/knobs.py")
    assert "f\"TRITON_{binary.upper().replace('-', '_')}_PATH\"" in knobs
    assert "except (subprocess.CalledProcessError, FileNotFoundError)" in knobs  # PermissionError escapes
    assert f'env_str_callable_default("{_triton.CACHE_DIR}"' in knobs and f'"{_triton.HOME_VAR}"' in knobs
    assert f'env_opt_str("{_triton.LIBCUDA_PATH}")' in knobs
    compiler = read(site, "triton/backends/nvidia/compiler.py")
    assert "ptxas_blackwell if arch >= 100 else knobs.nvidia.ptxas" in compiler
    assert 'suffix = "a" if capability >= 90 else ""' in compiler
    assert "llvm_ptx_version = min(90, ptx_version)" in compiler
    driver = read(site, "triton/backends/nvidia/driver.py")
    assert f'["{_triton.LDCONFIG}", "-p"]' in driver and "libcuda.so cannot found!" in driver
    assert "if env_ld_library_path and not dirs:" in driver


def test_tokenspeed_triton_has_one_ptxas_for_every_arch(site: Path) -> None:
    compiler = read(site, "tokenspeed_triton/backends/nvidia/compiler.py")
    body = compiler.split("def get_ptxas(arch: int)")[1].split("\ndef ")[0]
    assert "return knobs.nvidia.ptxas\n" in body and "blackwell" not in body


def test_flashinfer_host_lookups_workspace_and_mismatch(site: Path) -> None:
    cpp = read(site, "flashinfer/jit/cpp_ext.py")
    assert f'subprocess.run(["{_fi.WHICH_LOOKUP}", "nvcc"]' in cpp
    assert 'cuda_cflags += ["-ccbin", cc_env]' in cpp
    assert f'os.environ.get("{_fi.CXX_LAUNCHER}"' in cpp and f'os.environ.get("{_fi.NVCC_LAUNCHER}"' in cpp
    for sub in _fi.LINK_SUBDIRS:
        assert f'"-L$cuda_home/{sub}"' in cpp
    assert '"-lcuda"' in cpp
    env = read(site, "flashinfer/jit/env.py")
    assert f'os.getenv("{_fi.WORKSPACE_BASE}", pathlib.Path.home().as_posix())' in env
    assert "Ignoring incompatible flashinfer-cubin package" in env
    assert f'os.getenv("{_fi.CUBIN_DIR}")' in env


def test_flashinfer_cubin_download_and_family_targets(site: Path) -> None:
    loader = read(site, "flashinfer/jit/cubin_loader.py")
    assert f'"{_fi.CUBINS_REPOSITORY}",\n    "{_fi.DEFAULT_CUBINS_REPOSITORY}"' in loader
    assert f'os.getenv("{_fi.NO_DOWNLOAD}")' in loader and "Artifact not found locally" in loader
    assert "retries: int = 4" in loader and "delay: int = 5" in loader and "timeout: int = 10" in loader
    pins = _fi.parse_artifacts(read(site, "flashinfer/artifacts.py"))
    assert set(pins) == set(_fi.TRTLLM_GEN)
    modules = read(site, "flashinfer/jit/attention/modules.py")
    assert 'assert checksum, f"Failed to get checksums.txt from {checksum_path}"' in modules
    utils = read(site, "flashinfer/utils.py")
    sm100f = utils.split("def is_sm100f_supported")[1].split("\ndef ")[0]
    assert 'major == 10 and version_at_least(torch.version.cuda, "12.9")' in sm100f
    assert _fi.FAMILY_TARGET_TORCH_CUDA == (12, 9) and _fi.FAMILY_TARGET_MAJORS == {10}
    assert "is_sm100f_supported(a.device)" in read(site, "flashinfer/gemm/gemm_base.py")


def test_vllm_deep_gemm_and_flashinfer_gate(site: Path) -> None:
    cuda = read(site, "vllm/platforms/cuda.py")
    body = cuda.split("def support_deep_gemm")[1].split("@classmethod")[0]
    assert "is_device_capability(90)" in body
    assert {int(x) // 10 for x in re.findall(r"is_device_capability_family\((\d+)\)", body)} == set(
        _vllm.DEEP_GEMM_CC_FAMILIES
    )
    envs = read(site, "vllm/envs.py")
    assert f'"{_vllm.USE_DEEP_GEMM}": lambda: bool(int(os.getenv("{_vllm.USE_DEEP_GEMM}", "1")))' in envs
    so = site / "vllm/third_party/deep_gemm/_C_extension.abi3.so"
    if not so.exists():
        pytest.skip("vLLM's vendored DeepGEMM is not installed")
    assert b"NVCC version must be at least 12.9" in so.read_bytes()
    assert _vllm.DEEP_GEMM_MIN_NVCC == (12, 9)
    gate = read(site, "vllm/utils/flashinfer.py")
    assert "if not has_flashinfer_cubin() and (" in gate and 'shutil.which("ninja") is None' in gate


def test_cute_dsl_flavor_loader(site: Path) -> None:
    loader = read(site, f"nvidia_cutlass_dsl/{_fi.CUTE_DSL_LIBS}/__init__.py")
    assert "None of the installed toolkit flavors" in loader
    assert "driver_major >= toolkit_ver" in loader
    assert r"_cutlass_ir\.cu(\d+)\." in loader


def test_nvcc_host_config_bounds_of_this_toolkit() -> None:
    header = Path("/usr/local/cuda/include/crt/host_config.h")
    if not header.exists():
        pytest.skip("no CUDA toolkit here")
    bounds = _cuda.host_compiler_bounds(header.read_text(encoding="utf-8", errors="replace"))
    assert set(bounds) == {"gcc_max", "clang_below"}


def test_cute_dsl_ptxas_path_is_patched_in_at_import(site: Path) -> None:
    for rel in ("quack/__init__.py", "vllm/vllm_flash_attn/cute/interface.py"):
        text = read(site, rel)
        assert f'os.environ.get("{_fi.CUTE_DSL_PTXAS}", None) is not None' in text and ".patch()" in text
    patch = read(site, "quack/dsl/cute_dsl_ptxas.py")
    assert 'raise RuntimeError(f"ptxas not found: {CUTE_DSL_PTXAS_PATH}")' in patch
