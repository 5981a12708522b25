"""What the toolchain family's runtime-compiler checks share: the installed packages they
are about, a fact the family added to the snapshot (missing in an older one: skip), a
command line's words, and whether vLLM turns FlashInfer off (then nothing of it compiles).
"""

from __future__ import annotations

import shlex
from typing import TypeVar

from flightcheck._checks.framework import Context, Skip, gate
from flightcheck._checks.shared import jit as _jit
from flightcheck._knowledge import engines
from flightcheck._knowledge import flashinfer as _fi
from flightcheck._knowledge import vllm as _vllm

T = TypeVar("T")

_LAUNCHERS = ("ccache", "sccache", "distcc", "icecc")


def _installed(ctx: Context, *names: str) -> list[str]:
    packages = ctx.need(ctx.python.packages, "python.packages")
    return [n for n in names if packages.get(n)]


def _extension(ctx: Context, value: T | None, path: str) -> T:
    """A fact this family added to the toolchain section: missing with a collector's reason
    is ``unknown`` (ctx.need); missing without one (a snapshot recorded before it existed,
    or by hand) skips the check instead of making the whole verdict unknown."""
    if value is None and ctx.facts.toolchain is not None and not ctx.facts.reason(path):
        raise Skip(f"{path} is not in this snapshot (recorded by an older flightcheck?)")
    return ctx.need(value, path)


def _words(value: str) -> list[str]:
    try:
        return shlex.split(value)
    except ValueError:
        return value.split()


def _flashinfer_jit(ctx: Context) -> tuple[bool | None, str]:
    """``_jit.jit_needed``, except where vLLM turns FlashInfer off: then nothing of
    FlashInfer compiles, links or looks for a CUDA home (``vllm/utils/flashinfer.py``
    ``has_flashinfer``: no flashinfer-cubin, and no nvcc or no ninja)."""
    if _vllm_gate(ctx):
        raise Skip(
            "vLLM disables FlashInfer here (no flashinfer-cubin, no nvcc or ninja: FC101/FC103): nothing compiles"
        )
    return _jit.jit_needed(ctx)


def _vllm_gate(ctx: Context) -> bool:
    """vLLM's ``has_flashinfer`` is false here: no flashinfer-cubin and no nvcc or ninja."""
    if "flashinfer-gate" not in engines.get(ctx.intent.engine).runtime_compilers:
        return False
    packages = ctx.python.packages or {}
    if not _fi.at_least(packages.get("vllm"), _vllm.FLASHINFER_GATED_ON_TOOLS_SINCE) or packages.get(
        "flashinfer-cubin"
    ):
        return False
    return ctx.facts.toolchain is not None and (ctx.nvcc.path is None or ctx.toolchain.ninja is None)


#: The FC1xx checks that still apply where vLLM does not run on CUDA: the host C/C++
#: compiler and Python.h (torch inductor's C++ backend on the CPU, Triton's launcher on
#: ROCm build with them) and, on ROCm, Triton's C compiler and cache (Triton compiles the
#: AMD kernels). Everything else is about nvcc, ptxas, libcudart, FlashInfer, DeepGEMM and
#: other CUDA-only compilers, which a CPU or ROCm vLLM never runs.
HOST_COMPILER_CHECKS = frozenset({"FC104", "FC112", "FC114"})
ROCM_TRITON_CHECKS = frozenset({"FC115", "FC117"})


@gate("FC1")
def cuda_toolchain_gate(ctx: Context, code: str) -> str | None:
    """Why a toolchain check does not apply: the engine runs on the CPU or ROCm platform
    here (``Engine.non_cuda_platform``: vLLM's ``vllm/platforms/__init__.py``, read in
    0.33.0), so it JIT-compiles no CUDA kernels. None: the check applies."""
    if code in HOST_COMPILER_CHECKS:
        return None
    engine = engines.get(ctx.intent.engine)
    packages = ctx.python.packages or {}
    platform = engine.non_cuda_platform(packages, ctx.env)
    if platform is None or (platform == "ROCm" and code in ROCM_TRITON_CHECKS):
        return None
    version = packages.get(engine.package)
    where = f"{engine.display} runs on the {platform} platform here ({engine.package} {version})"
    return f"{where}: it compiles no CUDA kernels"
