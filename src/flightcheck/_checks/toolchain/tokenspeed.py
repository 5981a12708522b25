"""FC126 — tokenspeed_triton's one ptxas: TRITON_PTXAS_PATH, set for another arch, replaces it
for Blackwell kernels too. Imported through ``toolchain``.
"""

from __future__ import annotations

from collections.abc import Iterator

from flightcheck._checks.framework import Context, Outcome, Skip, check, fail, ok
from flightcheck._checks.shared import jit as _jit
from flightcheck._checks.toolchain._shared import _installed
from flightcheck._knowledge import triton as _triton
from flightcheck._knowledge.derived import gpu_subject
from flightcheck._knowledge.units import major_minor
from flightcheck._vocabulary.results import ERROR, WARNING


@check("FC126", "tokenspeed-ptxas-override", ERROR)
def tokenspeed_ptxas(ctx: Context) -> Iterator[Outcome]:
    """TRITON_PTXAS_PATH replaces tokenspeed_triton's one ptxas for Blackwell kernels too.

    ## What it checks
    When tokenspeed-mla (vLLM's TOKENSPEED_MLA attention backend, SM 10.x) and its
    tokenspeed-triton are installed and an SM 10.x GPU is used, ``TRITON_PTXAS_PATH`` is
    unset or names a ptxas new enough for that arch: tokenspeed_triton's ``get_ptxas``
    (``backends/nvidia/compiler.py``) returns ``knobs.nvidia.ptxas`` for every arch, with no
    Blackwell variable, so a ptxas set for Hopper is used for Blackwell.

    ## Why the launch dies
    An older ptxas does not know ``sm_100a``/``sm_103a``: the first TOKENSPEED_MLA kernel
    fails to assemble ("Value 'sm_103a' is not defined for option 'gpu-name'") after the
    weight load. Upstream Triton is unaffected (it reads TRITON_PTXAS_BLACKWELL_PATH there).

    ## How to fix
    Point TRITON_PTXAS_PATH at a ptxas that knows the arch (``export
    TRITON_PTXAS_PATH=/usr/local/cuda-13.0/bin/ptxas``) or unset it.
    """
    if len(_installed(ctx, "tokenspeed-mla", "tokenspeed-triton")) < 2:
        raise Skip("tokenspeed-mla / tokenspeed-triton are not installed")
    value = ctx.env.get(_triton.PTXAS)
    if not value:
        raise Skip(f"{_triton.PTXAS} is not set: tokenspeed_triton uses its bundled ptxas")
    archs = _jit.archs_used(ctx)
    if archs is None:
        raise Skip(f"GPU archs unknown, {_jit.no_gpu_note(ctx)}")
    sm10 = {a: g for a, g in archs.items() if (mm := major_minor(g[0].compute_capability)) and mm[0] == 10}
    if not sm10:
        raise Skip("no SM 10.x GPU used: TOKENSPEED_MLA does not run")
    st = (ctx.toolchain.env_paths or {}).get(_triton.PTXAS)
    ver = major_minor(st.version) if st is not None else None
    need = _jit.need_for(list(sm10))
    arch, gpus = next(iter(sm10.items()))
    if ver is not None and ver >= need:
        yield ok(f"{_triton.PTXAS}={value} (CUDA {_jit.fmt(ver)}) knows {' '.join(sm10)}")
        return
    home = ctx.toolchain.cuda_home
    cur = _jit.nvcc_version(ctx)
    fix = (
        f"export {_triton.PTXAS}={home.path}/bin/ptxas  (or: unset {_triton.PTXAS})"
        if home is not None and home.path and cur is not None and cur >= need
        else f"unset {_triton.PTXAS}"
    )
    yield fail(
        f"{_triton.PTXAS}={value} ("
        + (f"CUDA {_jit.fmt(ver)}" if ver else "version unknown")
        + f") is the ptxas tokenspeed_triton uses for {arch} too; {arch} needs CUDA >= {_jit.fmt(need)}",
        fix=fix,
        subject=gpu_subject(gpus[0]),
        severity=None if ver is not None else WARNING,
        evidence={_triton.PTXAS: value, "version": st.version if st else None, "arch": arch},
    )
