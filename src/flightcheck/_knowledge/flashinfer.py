"""FlashInfer's published ``flashinfer-jit-cache`` wheels: which archs each build carries.

Pure data, used two ways: by the python collector when it cannot read the archs out of the
installed .so files (it then trusts the wheel's ``+cuXYZ`` tag and this table), and by the
checks to pick the wheel index (``https://flashinfer.ai/whl/cuXYZ``) whose build covers a GPU.
From the ``release.yml`` workflow at each FlashInfer tag and ``ci/cuda-versions.json`` at
HEAD (0.6.18): rows are (first version, first version after, {cuda tag: archs}, {machine:
extra archs for that tag}).
"""

from __future__ import annotations

import re

from packaging.version import Version

from flightcheck._vocabulary.version import parse

INDEX = "https://flashinfer.ai/whl"
_OLD = ["7.5", "8.0", "8.9", "9.0a"]

_TABLE: list[tuple[str, str | None, dict[str, list[str]], dict[str, dict[str, list[str]]]]] = [
    (
        "0.4.1",
        "0.5.3",
        {
            "cu128": _OLD + ["10.0a", "12.0a"],
            "cu129": _OLD + ["10.0a", "10.3a", "12.0a"],
            "cu130": _OLD + ["10.0a", "10.3a", "12.0a"],
        },
        {},
    ),
    (
        "0.5.3",
        "0.6.6",
        {
            "cu128": _OLD + ["10.0a", "12.0a"],
            "cu129": _OLD + ["10.0a", "12.0a"],  # 10.3a was dropped from cu129 in this range
            "cu130": _OLD + ["10.0a", "10.3a", "11.0a", "12.0f"],
        },
        {},
    ),
    (
        "0.6.6",
        "0.6.11",
        {
            "cu128": _OLD + ["10.0a", "12.0a"],
            "cu129": _OLD + ["10.0a", "10.3a", "12.0f"],
            "cu130": _OLD + ["10.0a", "10.3a", "11.0a", "12.0f"],
        },
        {},
    ),
    (
        "0.6.11",
        "0.6.18",
        {
            "cu128": _OLD + ["10.0a", "12.0a"],
            "cu129": _OLD + ["10.0a", "10.3a", "12.0f"],
            "cu130": _OLD + ["10.0a", "10.3a", "12.0f"],  # x86_64 dropped 11.0a from 0.6.11
        },
        {"aarch64": {"cu130": ["11.0a"]}},
    ),
    (
        "0.6.18",
        None,
        {  # HEAD layout, assumed to hold for later releases
            "cu129": _OLD + ["10.0a", "10.3a", "12.0f"],
            "cu130": _OLD + ["10.0a", "10.3a", "12.0f"],
            "cu134": _OLD + ["10.0a", "10.3a", "10.7a", "12.0f"],
        },
        {"aarch64": {"cu130": ["11.0a", "12.1a"], "cu134": ["11.0a", "12.1a"]}},
    ),
]

#: CUDA versions FlashInfer has published jit-cache wheels for (cuXYZ tags).
TAGS = ((12, 8), (12, 9), (13, 0), (13, 4))


def _v(text: str) -> Version | None:
    return parse(text)


def cuda_tag(version: str) -> str | None:
    """'0.7.2.post1+cu130' -> 'cu130' (the local tag of a jit-cache wheel)."""
    m = re.search(r"\+(cu\d{3,})", version)
    return m.group(1) if m else None


def published_archs(version: str, tag: str, machine: str | None = None) -> list[str] | None:
    """The archs FlashInfer's release built ``flashinfer-jit-cache==version`` +``tag`` for, or
    None when the table has no row (older than 0.4.1, or a tag that release did not build)."""
    ver = _v(version.split("+", 1)[0])
    if ver is None:
        return None
    for first, after, tags, extra in _TABLE:
        if ver >= Version(first) and (after is None or ver < Version(after)):
            if tag not in tags:
                return None
            return tags[tag] + extra.get(machine or "", {}).get(tag, [])
    return None


def tag_for(torch_cuda: str | None) -> str | None:
    """The wheel tag matching torch's CUDA: the newest published tag of the same major not
    newer than it (torch 13.0 -> cu130; 13.2 -> cu130; 12.8 -> cu128); else the oldest of that
    major (the runtime is ABI-compatible within a major)."""
    if not torch_cuda:
        return None
    try:
        major, minor = (int(x) for x in torch_cuda.split(".")[:2])
    except ValueError:
        return None
    same = [t for t in TAGS if t[0] == major]
    if not same:
        return None
    fit = [t for t in same if t <= (major, minor)] or same[:1]
    return f"cu{fit[-1][0]}{fit[-1][1]}"


def index_url(tag: str) -> str:
    """``https://flashinfer.ai/whl/cu130``."""
    return f"{INDEX}/{tag}"


# ---- what FlashInfer's JIT reads from the host (flashinfer/jit/cpp_ext.py, jit/env.py of
# 0.7.2.post1, the version vLLM 0.33.0 pins) ------------------------------------------------

#: ``jit/env.py`` ``_get_cubin_dir`` / ``_get_aot_providers``: a flashinfer-cubin or
#: flashinfer-jit-cache whose version does not match is ignored with a warning ("Ignoring
#: incompatible flashinfer-cubin package (cubins will be downloaded on demand ...)",
#: "Ignoring incompatible flashinfer-jit-cache package (kernels will be JIT-compiled
#: instead)") instead of failing the import. Read in the wheels: 0.7.0 and 0.7.1 raise
#: RuntimeError from the module-level ``FLASHINFER_CUBIN_DIR = _get_cubin_dir()`` and
#: ``FLASHINFER_AOT_PROVIDERS = _get_aot_providers()`` (so ``import flashinfer`` fails);
#: 0.7.2 and 0.7.2.post1 (the release vLLM 0.33.0 pins; the same env.py) warn and go on.
MISMATCH_IGNORED_SINCE = "0.7.2"
#: The first release that looks at flashinfer-cubin / flashinfer-jit-cache at all: 0.4.0's
#: ``jit/env.py`` ``_get_cubin_dir`` / ``_get_jit_cache_dir`` (``has_flashinfer_cubin()``,
#: then ``raise RuntimeError("flashinfer-cubin version (...) does not match flashinfer
#: version (...)")``; 0.4.1 the same). The sdists of 0.2.0.post1-0.3.1.post1 name neither
#: package anywhere in ``flashinfer/``: a companion of any version is never imported there.
COMPANIONS_READ_SINCE = "0.4.0"
#: ``_get_cubin_dir`` returns ``$FLASHINFER_CUBIN_DIR`` before it looks at flashinfer-cubin at
#: all: with it set, the package's version is never compared (read in 0.7.0, 0.7.1, 0.7.2,
#: 0.7.2.post1; 0.5.x-0.6.x not read). 0.4.0 and 0.4.1 look at the package first and at
#: ``$FLASHINFER_CUBIN_DIR`` only without it (so the variable does not bypass the check there).
CUBIN_DIR_BYPASSES_CUBIN_PACKAGE_SINCE = "0.7.0"
#: ``jit/cpp_ext.py`` ``get_cuda_path``: with CUDA_HOME and CUDA_PATH unset (or empty) it
#: runs ``subprocess.run(["which", "nvcc"])`` (no ``which`` binary: FileNotFoundError).
WHICH_LOOKUP = "which"
#: ``jit/cpp_ext.py`` ``build_cuda_cflags``: ``-ccbin $CC`` written unquoted into build.ninja;
#: ``generate_ninja_build_for_op``: ``cxx = $CXX`` (default c++). Launchers go in these:
CXX_LAUNCHER = "FLASHINFER_CXX_LAUNCHER"
NVCC_LAUNCHER = "FLASHINFER_NVCC_LAUNCHER"
#: ``jit/env.py``: ``Path(os.getenv("FLASHINFER_WORKSPACE_BASE", home))``: a set but empty
#: value is ``Path("")``, the engine's working directory.
WORKSPACE_BASE = "FLASHINFER_WORKSPACE_BASE"


def at_least(version: str | None, first: str) -> bool:
    """Whether ``version`` (a package version, maybe with a local tag) is ``first`` or newer."""
    v = _v((version or "").split("+", 1)[0])
    return v is not None and v >= Version(first)


# ---- trtllm-gen cubins (flashinfer/artifacts.py, jit/cubin_loader.py, jit/env.py) ---------

#: ``jit/cubin_loader.py``: where ``get_artifact`` downloads from, and the switch that makes a
#: missing artifact an error ("Artifact not found locally") instead of a download.
CUBINS_REPOSITORY = "FLASHINFER_CUBINS_REPOSITORY"
DEFAULT_CUBINS_REPOSITORY = "https://edge.urm.nvidia.com/artifactory/sw-kernelinferencelibrary-public-generic-local/"
NO_DOWNLOAD = "FLASHINFER_NO_DOWNLOAD"
CUBIN_DIR = "FLASHINFER_CUBIN_DIR"
#: The trtllm-gen packages whose ``checksums.txt`` every FMHA / batched-GEMM (MoE) / GEMM
#: module fetches first (``jit/attention/modules.py``, ``jit/fused_moe.py``,
#: ``jit/gemm/core.py``: ``assert checksum, "Failed to get checksums.txt from ..."``).
TRTLLM_GEN = ("TRTLLM_GEN_FMHA", "TRTLLM_GEN_BMM", "TRTLLM_GEN_GEMM")
#: Compute capability majors these trtllm-gen kernels are published for ("sm100f/sm103a and
#: Rubin sm107a", the comment on ``ArtifactPath``): the 10.x family.
TRTLLM_GEN_CC_MAJORS = frozenset({10})
#: ``download_file``: 4 tries of 10 s timeout, sleeping 5-10, 10-20, 20-40 s between them:
#: 35 to 110 s per artifact on a host that cannot reach the repository.
DOWNLOAD_STALL_S = (35, 110)


def parse_artifacts(text: str) -> dict[str, tuple[str, str]]:
    """``artifacts.py`` as text -> {``TRTLLM_GEN_FMHA``: (ArtifactPath, CheckSumHash)} for the
    trtllm-gen packages, the way ``get_artifact`` addresses their ``checksums.txt``."""
    head, _, tail = text.partition("class CheckSumHash")

    def consts(part: str) -> dict[str, str]:
        return dict(re.findall(r"^\s+(TRTLLM_GEN_\w+)\s*:\s*str\s*=\s*\(?\s*\"([^\"]+)\"", part, re.MULTILINE))

    paths, sums = consts(head), consts(tail)
    return {k: (paths[k], sums[k]) for k in TRTLLM_GEN if k in paths and k in sums}


#: ``jit/cpp_ext.py`` ``generate_ninja_build_for_op``: every module links with
#: ``-L$cuda_home/lib64 -L$cuda_home/lib64/stubs -lcudart -lcuda``; ``-lcuda`` needs an
#: unversioned ``libcuda.so`` there or in the linker's default directories (a driver's
#: ``libcuda.so.1`` alone does not do). Modules with embedded cubins also run ``ld -r -b
#: binary`` and ``objcopy`` (tvm_ffi/utils/embed_cubin.py).
LINK_SUBDIRS = ("lib64", "lib64/stubs")
LINKER_DEFAULT_DIRS = (
    "/usr/lib/x86_64-linux-gnu",
    "/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/lib64",
    "/usr/lib",
    "/usr/local/lib",
)
BINUTILS = ("ld", "objcopy")


# ---- CuTe DSL (nvidia-cutlass-dsl 4.8: dsl_packages/cutlass/_mlir/_mlir_libs/__init__.py) ---

#: where the per-CUDA-major builds live, and their file names (``_cutlass_ir.cu13.<abi>.so``);
#: the loader keeps the flavours whose major the driver supports (``cuDriverGetVersion``
#: major >= N) and raises "None of the installed toolkit flavors (...) are compatible with
#: the CUDA driver" when none is left.
CUTE_DSL_LIBS = "dsl_packages/cutlass/_mlir/_mlir_libs"
CUTE_DSL_FLAVOR = r"^_cutlass_ir\.cu(\d+)\..*\.so$"


#: ``utils.py`` ``is_sm100f_supported``: SM 10.x with ``torch.version.cuda`` >= 12.9 (torch's
#: CUDA, not nvcc's); ``gemm/gemm_base.py`` then builds its TGV BF16 GEMM with
#: ``sm100f_nvcc_flags`` (``-gencode=arch=compute_100f``, ``jit/core.py``), which needs an
#: nvcc of 12.9 or later even where the arch itself (100a) needs only 12.8.
FAMILY_TARGET_TORCH_CUDA = (12, 9)
FAMILY_TARGET_MAJORS = frozenset({10})
FAMILY_TARGET_NVCC = (12, 9)

# ---- the arch FlashInfer's JIT builds for SM 12.x, by release -----------------------------

#: What the JIT builds for the GPUs it detects (``FLASHINFER_CUDA_ARCH_LIST`` unset), read in
#: every flashinfer-python release on PyPI from 0.2.0.post1 to 0.7.4 (the sdists of
#: 0.2.0.post1-0.4.1, the wheels from 0.5.0):
#:
#: * 0.2.0.post1-0.3.0.post1: torch's arch flags. ``jit/core.py`` ``load_cuda_ops`` builds
#:   with ``torch.utils.cpp_extension.load`` (0.2.0.post1-0.2.5), then ``jit/cpp_ext.py``
#:   ``generate_ninja_build_for_op``: ``cuda_cflags += _get_cuda_arch_flags(extra_cuda_cflags)``
#:   (0.2.6-0.3.0.post1): ``TORCH_CUDA_ARCH_LIST`` or the device's capability, no suffix
#:   (SM 12.0 -> ``compute_120,code=sm_120``); ``jit/env.py`` names the cache
#:   ``~/.cache/flashinfer/<compute_N...>`` from the same flags.
#: * 0.3.1-0.6.6: ``compilation_context.py`` ``CompilationContext.__init__``: for each
#:   detected device ``if major >= 9: minor = str(minor) + "a"`` (SM 12.0 -> ``compute_120a``;
#:   ``cpp_ext.py`` takes ``get_nvcc_flags_list()`` for a module without its own
#:   ``-gencode``). 0.4.0 and 0.4.1 stop adding the ``a`` to ``FLASHINFER_CUDA_ARCH_LIST``
#:   entries (taken as written), not to the detected devices.
#: * from 0.6.7: SM 12.x is normalised to ``compute_120f`` and ``RuntimeError("SM 12.x
#:   requires CUDA >= 12.9")`` is raised below.
#:
#: nvcc 12.8 compiles 120 and 120a. Before 0.2.0.post1 (no release read) the oldest rule
#: (torch's flags) is assumed; past 0.7.4 the 0.7.4 rule (``120f``) applies.
SM12_FAMILY_SINCE = "0.6.7"
SM12_SUFFIX_A_SINCE = "0.3.1"
JIT_ARCH_READ_IN = ("0.2.0.post1", "0.7.4")


def jit_arch(arch: str, version: str | None) -> str:
    """The arch flightcheck's ``arch_of`` names (``120f`` for SM 12.0) as the installed
    FlashInfer's JIT builds it: ``120a`` (0.3.1-0.6.6) or ``120`` (before 0.3.1, torch's
    flags) for SM 12.x; any other arch, or an unknown version, is returned as is (the newest
    rule)."""
    if not arch.startswith("12") or _v((version or "").split("+", 1)[0]) is None:
        return arch
    if at_least(version, SM12_FAMILY_SINCE):
        return arch
    base = arch.rstrip("af")
    return base + "a" if at_least(version, SM12_SUFFIX_A_SINCE) else base


#: ``CUTE_DSL_PTXAS_PATH`` (quack/__init__.py, vllm/vllm_flash_attn/cute/interface.py,
#: vllm/third_party/tml_fa4): when set, importing them runs ``cute_dsl_ptxas.patch()``, which
#: raises "ptxas not found: <path>" unless it is an executable file, and then assembles every
#: CuTe DSL kernel with ``<path> -arch=sm_100a`` instead of the embedded ptxas library.
CUTE_DSL_PTXAS = "CUTE_DSL_PTXAS_PATH"


# ---- the trtllm all-reduce (+RMSNorm) workspace and multicast (flashinfer/comm/) -----------

#: flashinfer/comm/allreduce.py ``TRTLLMAllReduceFusionWorkspace`` ->
#: trtllm_ar.py ``trtllm_create_ipc_workspace_for_all_reduce_fusion``: in the 0.6.12 wheel the
#: three buffers come from torch symmetric memory (torch_symmetric_memory.py
#: ``_alloc_symm_buffer_bytes``: ``symm_mem.rendezvous``), which binds multicast where the
#: GPUs support it unless TORCH_SYMM_MEM_DISABLE_MULTICAST=1; in the 0.7.2.post1 wheel they are
#: ``SymmDeviceMemory(enable_multicast=False)`` (torch symmetric memory only under
#: confidential compute). The kernels use the peer pointers only, so the trtllm backend stays
#: off multicast by itself from 0.7.2.post1 and with the torch switch before it (releases
#: between the two not read; past 0.7.2.post1 extrapolated).
TRTLLM_WORKSPACE_NO_MULTICAST_SINCE = "0.7.2.post1"
