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


def test_flashinfer_cubin_dir_is_read_before_the_cubin_package(site: Path) -> None:
    """FC110: with FLASHINFER_CUBIN_DIR set, flashinfer-cubin's version is never compared."""
    body = read(site, "flashinfer/jit/env.py").split("def _get_cubin_dir")[1].split("\ndef ")[0]
    assert body.index(f'os.getenv("{_fi.CUBIN_DIR}")') < body.index("has_flashinfer_cubin()")
    assert "return pathlib.Path(env_dir)" in body.split("has_flashinfer_cubin()")[1].split("import flashinfer_cubin")[0]


def test_vllm_deep_gemm_quantisation_gate(site: Path) -> None:
    """FC119's DEEP_GEMM_QUANTS against vLLM's kernels: block FP8 linear and MoE, MXFP4 MoE
    only on the 10.x family behind FlashInfer's TRT-LLM kernel, no NVFP4 by default."""
    assert _vllm.DEEP_GEMM_QUANTS == {"fp8-block", "mxfp4"}
    linear = read(site, "vllm/model_executor/kernels/linear/scaled_mm/deep_gemm.py")
    assert "act_quant_desc.group_shape != GroupShape(1, 128)" in linear  # block-scaled only
    assert "Fp8MoeBackend.DEEPGEMM" in read(site, "vllm/model_executor/layers/fused_moe/oracle/fp8.py")
    mxfp4 = read(site, "vllm/model_executor/layers/fused_moe/oracle/mxfp4.py")
    prio = mxfp4.split("def _get_priority_backends()")[1].split("\ndef ")[0]
    assert prio.index("FLASHINFER_TRTLLM_MXFP4_MXFP8") < prio.index("DEEPGEMM_MXFP4") < prio.index("MARLIN")
    experts = read(site, "vllm/model_executor/layers/fused_moe/experts/deep_gemm_moe.py")
    fp4 = experts.split("class DeepGemmFP4Experts")[1]
    assert "is_device_capability_family(100)" in fp4.split("def _supports_current_device")[1].split("def ")[0]
    assert _vllm.DEEP_GEMM_QUANT_MAJORS == {"mxfp4": {10}}
    assert "DEEPGEMM" not in read(site, "vllm/model_executor/layers/fused_moe/oracle/nvfp4.py")
    mega = read(site, "vllm/model_executor/layers/fused_moe/deep_gemm_mega_moe.py")
    assert "DeepGEMM MegaMoE requires SM100 GPUs." in mega


def test_vllm_runs_tilelang_for_mhc_models(site: Path) -> None:
    """FC129's gate: on CUDA every mHC op calls the tilelang kernels; the models in
    MHC_ARCHS are built on them."""
    mhc = read(site, "vllm/model_executor/layers/mhc.py")
    assert "torch.ops.vllm.mhc_pre_tilelang(" in mhc.split("def forward_cuda")[1].split("def forward_hip")[0]
    registry = read(site, "vllm/model_executor/models/registry.py")
    for arch in _vllm.MHC_ARCHS:
        module = re.search(rf'"{arch}": \(\s*"(vllm\.models\.\w+)"', registry)
        assert module and module.group(1) in (
            "vllm.models.deepseek_v4",
            "vllm.models.deepseek_v41",
            "vllm.models.glm5next",
        )
    for rel in ("deepseek_v4/nvidia/model.py", "glm5next/common/model.py"):
        assert "mhc" in read(site, f"vllm/models/{rel}").lower()


def test_tilelang_cuda_home_order(site: Path) -> None:
    """FC129's replay of tilelang's ``_find_cuda_home``: CUDA_HOME or CUDA_PATH, nvcc on
    PATH, pip's nvidia-cuda-nvcc, /usr/local/cuda; nvcc is <home>/bin/nvcc."""
    from flightcheck._knowledge import tilelang as _tl

    env = read(site, "tilelang/env.py")
    body = env.split("def _find_cuda_home")[1].split("\ndef ")[0]
    order = [
        body.index('os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")'),
        body.index('shutil.which("nvcc")'),
        body.index(f'_get_package_version("{_tl.PIP_NVCC}")'),
        body.index(f'os.path.exists("{_tl.DEFAULT_HOMES[0]}")'),
        body.index(f'os.path.exists("{_tl.DEFAULT_HOMES[1]}")'),
    ]
    assert order == sorted(order)
    assert "if cuda_home is None or not os.path.exists(cuda_home):" in body
    nvcc = read(site, "tilelang/contrib/nvcc.py")
    assert 'return os.path.join(find_cuda_path(), "bin", "nvcc")' in nvcc and _tl.NOT_FOUND in nvcc
    backends = read(site, "tilelang/cuda/execution_backend.py")
    assert backends.index('"tvm_ffi"') < backends.index('"nvrtc"')  # auto = the first available: nvcc


def test_humming_preference_and_nvrtc_lookup(site: Path) -> None:
    """FC130: vLLM prefers humming over Marlin on SM 9.0 only, in the MoE oracles of the
    formats HUMMING_QUANTS lists; humming finds NVRTC as _knowledge/humming.py says."""
    from flightcheck._knowledge import humming as _hm

    prio = read(site, "vllm/model_executor/layers/quantization/utils/humming/priority.py")
    assert "_HUMMING_PREFERRED_CAPABILITIES = frozenset({90})" in prio
    assert {cc[0] * 10 + cc[1] for cc in _vllm.HUMMING_PREFERRED_CC} == {90}
    for oracle in ("int_wna16", "mxfp4", "nvfp4"):
        text = read(site, f"vllm/model_executor/layers/fused_moe/oracle/{oracle}.py")
        assert "prioritize_humming(" in text and "MARLIN" in text and "HUMMING" in text
    gpt_oss = read(site, "vllm/model_executor/layers/fused_moe/oracle/mxfp4.py").split(
        "def _get_priority_backends_for_gpt_oss"
    )[1]
    assert gpt_oss.index("Mxfp4MoeBackend.TRITON,") < gpt_oss.index("Mxfp4MoeBackend.MARLIN,")
    runtime = read(site, "humming/jit/runtime.py")
    assert f'os.environ.get("{_hm.COMPILER_VAR}", "")' in runtime and "from cuda.bindings import nvrtc" in runtime
    cuda = read(site, "humming/utils/cuda.py")
    assert 'candidates = ["/usr/local/cuda"] + sorted(glob.glob("/usr/local/cuda-*"))' in cuda
    assert '"No suitable CUDA {target_major} environment found. "' in cuda.replace('f"', '"')
    nvrtc = read(site, "humming/utils/nvrtc.py")
    assert 'filter_cuda_paths(required_headers=["nvrtc.h"])' in nvrtc and _hm.NO_LIB in nvrtc
    assert 'os.path.join(lib_dir, "libnvrtc.so")' in nvrtc
