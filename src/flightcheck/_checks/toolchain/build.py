"""FC1xx — JIT toolchain, continued: the cache directory, arch lists, the ``--deep`` compile
smoke test (FC107–FC109). Companion packages, libcudart and Python headers are in
``toolchain_deps``. Imported by ``toolchain`` so the family registers as one.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from flightcheck._checks.framework import Context, Log, Outcome, Skip, check, fail, ok, unknown
from flightcheck._checks.shared import jit as _jit
from flightcheck._knowledge.derived import gpu_subject, package
from flightcheck._knowledge.gpus import arch_to_cc, covers, parse_arch_list
from flightcheck._knowledge.units import GiB
from flightcheck._vocabulary.results import ERROR, WARNING

MIN_FREE = 2 * GiB


@check(
    "FC107",
    "jit-cache-unwritable",
    ERROR,
    logs=(
        r"PermissionError: \[Errno 13\] Permission denied: '[^']*/\.cache/flashinfer",
        "No space left on device: '[^']*/flashinfer",
    ),
)
def jit_cache_unwritable(ctx: Context) -> Iterator[Outcome]:
    """FlashInfer's cache directory is not writable or has under 2 GiB free.

    ## What it checks
    ``$FLASHINFER_WORKSPACE_BASE`` (default ``$HOME``) ``/.cache/flashinfer``, or its nearest
    existing parent, accepts a new file (tested by creating and removing one), and its
    filesystem has at least 2 GiB free.

    ## Why the launch dies
    ``import flashinfer`` creates that directory and opens its JIT log there at import time,
    so a read-only home (a container's non-root user, a read-only mount) fails the import
    itself; compiled kernels (tens to hundreds of MB per module) fill a small disk mid-build
    with "No space left on device".

    ## How to fix
    Make the directory writable for the engine's user, or point FlashInfer elsewhere:
    ``export FLASHINFER_WORKSPACE_BASE=/var/tmp/flashinfer`` (a local disk with room).
    """
    packages = ctx.python.packages
    if packages is not None and not packages.get("flashinfer-python"):
        raise Skip("flashinfer-python is not installed")
    jc = ctx.need(ctx.facts.jit_cache, "jit_cache")
    alt = "export FLASHINFER_WORKSPACE_BASE=/var/tmp/flashinfer"
    if jc.writable is False:
        yield fail(
            f"FlashInfer's cache {jc.dir} is not writable: {jc.problem or 'write test failed'}",
            fix=f"{alt}  (or make {jc.tested or jc.dir} writable for the engine's user)",
            evidence={"dir": jc.dir, "tested": jc.tested},
        )
        return
    free = ctx.need(ctx.jit_cache.free_bytes, "jit_cache.free_bytes")
    if free < MIN_FREE:
        yield fail(
            f"{free / GiB:.1f} GiB free under {jc.dir}; FlashInfer's JIT needs at least 2 GiB",
            fix=f"free space on that filesystem, or {alt} on a disk with room",
            evidence={"dir": jc.dir, "free_bytes": free},
        )
        return
    yield ok(f"{jc.dir} writable, {free / GiB:.0f} GiB free")


def _label(arch: str, flashinfer: bool) -> str:
    """'103a' -> '10.3a' for FlashInfer's list, '10.3' for torch's (which may not know every
    suffix; plain SASS for the exact arch runs there)."""
    cc = arch_to_cc(arch)
    return cc + (arch[-1] if flashinfer and arch[-1] in "af" else "")


@check(
    "FC108",
    "arch-list-excludes-gpu",
    ERROR,
    logs=(
        Log(
            "FlashInfer requires GPUs with sm75 or higher",
            note=(
                "misleading: FlashInfer's JIT found no target arch (FLASHINFER_CUDA_ARCH_LIST leaves the GPU out,"
                " or the worker could not query it), not an old GPU"
            ),
        ),
    ),
)
def arch_list_excludes_gpu(ctx: Context) -> Iterator[Outcome]:
    """FLASHINFER_CUDA_ARCH_LIST (or TORCH_CUDA_ARCH_LIST) leaves out the arch of a GPU used.

    ## What it checks
    When set, FLASHINFER_CUDA_ARCH_LIST parses the way FlashInfer parses it (``X.Y`` tokens
    separated by single spaces) and includes code that runs on every GPU used (an error);
    TORCH_CUDA_ARCH_LIST likewise for torch's extension builds (a warning: FlashInfer ignores
    it since 0.3.1, but vLLM's own JIT extensions follow it).

    ## Why the launch dies
    FlashInfer compiles for exactly the listed archs instead of detecting the GPUs: the build
    succeeds and the first kernel fails with "no kernel image is available for execution on
    the device", after the weight load. A token it cannot parse ("10.0a;10.3a") makes
    ``import flashinfer`` raise ValueError.

    ## How to fix
    ``export FLASHINFER_CUDA_ARCH_LIST="10.3a"`` with the archs of the GPUs used, space
    separated, or ``unset FLASHINFER_CUDA_ARCH_LIST`` to let FlashInfer detect them.
    """
    env = ctx.facts.env or {}
    present = [v for v in ("FLASHINFER_CUDA_ARCH_LIST", "TORCH_CUDA_ARCH_LIST") if env.get(v)]
    if not present:
        raise Skip("neither FLASHINFER_CUDA_ARCH_LIST nor TORCH_CUDA_ARCH_LIST is set")
    archs = _jit.archs_used(ctx)
    out: list[Outcome] = []
    passed_over: list[str] = []
    for var in present:
        is_fi = var == "FLASHINFER_CUDA_ARCH_LIST"
        if is_fi and ctx.python.packages is not None and not package(ctx.facts, "flashinfer-python"):
            passed_over.append(f"{var} is set but flashinfer-python is not installed")
            continue
        value = str(env[var])
        entries, bad = parse_arch_list(value, is_fi)
        good = [t for t in (value.split(" ") if is_fi else re.split(r"[ ;]+", value.strip())) if t and t not in bad]
        if bad and is_fi:
            new = " ".join(dict.fromkeys(good + [_label(a, True) for a in archs or ()]))
            out.append(
                fail(
                    f"{var}={value!r}: FlashInfer cannot parse {', '.join(bad)} (it splits on single spaces); "
                    "import flashinfer raises ValueError",
                    fix=f'export {var}="{new}"' if new else f"unset {var}",
                    evidence={var: value, "bad_tokens": bad},
                )
            )
            continue
        if archs is None:
            passed_over.append(f"{var}={value!r}: GPU archs unknown, {_jit.no_gpu_note(ctx)}")
            continue
        missing = {a: g for a, g in archs.items() if not covers(entries, g[0].compute_capability)}
        if not missing:
            out.append(ok(f"{var}={value!r} covers {' '.join(archs)}"))
            continue
        sep = " " if is_fi else ";"
        add = [_label(a, is_fi) for a in missing]
        fix = f'export {var}="{sep.join(dict.fromkeys(good + add))}"' + (f"  (or: unset {var})" if is_fi else "")
        first = next(iter(missing.values()))[0]
        out.append(
            fail(
                f"{var}={value!r} leaves out {' '.join(missing)} ({first.name or 'GPU'})"
                + ("" if is_fi else ": torch extension builds will not run there"),
                fix=fix,
                subject=gpu_subject(first),
                severity=None if is_fi else WARNING,
                evidence={var: value, "missing": list(missing)},
            )
        )
    if not out:
        raise Skip("; ".join(passed_over))
    yield from out


_SMOKE_FIXES = (
    (re.compile(r"Unsupported gpu architecture|nvcc fatal.*arch", re.IGNORECASE), "toolkit"),
    (re.compile(r"cannot find -lcudart|cuda_runtime\.h: No such file", re.IGNORECASE), "home"),
    (re.compile(r"cannot find -lcuda\b", re.IGNORECASE), "libcuda"),
    (re.compile(r"unsupported GNU version|unsupported clang version", re.IGNORECASE), "host"),
)


def _smoke_fix(ctx: Context, output: str, arch: str | None) -> str:
    kind = next((k for pat, k in _SMOKE_FIXES if pat.search(output)), None)
    need = _jit.need_for([arch] if arch else (_jit.archs_used(ctx) or ["90a"]))
    if kind == "toolkit":
        return _jit.toolkit_fix(ctx, need)
    if kind == "home":
        root = _jit.alternative(ctx, at_least=need)
        return f"export CUDA_HOME={root}" if root else _jit.toolkit_fix(ctx, need)
    if kind == "libcuda":
        v, _ = _jit.toolkit_version(ctx, need)
        return (
            f"{_jit.install(ctx, f'cuda-toolkit-{v[0]}-{v[1]}')} "
            "(its lib64/stubs/libcuda.so links where the driver's libcuda.so is missing)"
        )
    if kind == "host":
        return (
            "nvcc rejects this host compiler: "
            "install one it supports and export CC and CXX to it (e.g. gcc-13 / g++-13)"
        )
    return "the evidence holds the compiler's own output; fix the toolchain failures above, then rerun with --deep"


_ERROR_LINE = re.compile(r"nvcc fatal|fatal error|error:|cannot find|undefined reference|No such file", re.IGNORECASE)


def _first_error(output: str) -> str:
    """The line of compiler output that names the problem (else its last line)."""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    return next((ln for ln in lines if _ERROR_LINE.search(ln)), lines[-1] if lines else "no output")[:300]


@check("FC109", "compile-smoke-failed", ERROR)
def compile_smoke_failed(ctx: Context) -> Iterator[Outcome]:
    """``--deep``: compiling and linking a tiny CUDA kernel for each arch used fails.

    ## What it checks
    With ``--deep``, flightcheck writes a build.ninja like FlashInfer's (``-gencode=arch=
    compute_103a,code=sm_103a``, a host .cpp against ``$cuda_home/include``, a shared object
    linked by the host compiler with ``-L$cuda_home/lib64 -lcudart``) and builds it with the
    nvcc and ninja that will be used, every arch in parallel, within 120 s. A pass is cached
    per (nvcc path, version, mtime, arch).

    ## Why the launch dies
    Everything the other toolchain checks infer can still be wrong in ways only a build
    shows: a host compiler nvcc rejects, missing headers, a linker that cannot find
    libcudart. FlashInfer finds out after the weight load.

    ## How to fix
    Read the compiler output in the evidence; it is the same error the engine would hit.
    The fix names the usual cure for the error it recognises.
    """
    smoke = ctx.facts.compile_smoke
    if smoke is None:
        if not ctx.intent.deep:
            raise Skip("runs only with --deep")
        yield unknown(f"the compile smoke test did not run: {ctx.facts.reason('compile_smoke') or 'no result'}")
        return
    needed, why = _jit.jit_needed(ctx)
    if needed is False:
        raise Skip(f"no JIT needed: {why}")
    if smoke.error:
        yield fail(
            f"the compile smoke test could not build: {smoke.error}",
            fix=_smoke_fix(ctx, smoke.error, None),
            evidence={"error": smoke.error},
        )
        return
    results = smoke.archs or {}
    for arch in _jit.archs_used(ctx) or results:
        res = results.get(arch)
        if res is None:
            yield unknown(f"{arch} was not part of the compile smoke test")
        elif res.ok:
            note = f"; {smoke.cache}" if smoke.cache else ""  # a cache file not trusted: built again
            yield ok(
                f"{arch} compiled and linked"
                + (" (cached)" if res.cached else f" in {res.duration_s or 0:.1f}s")
                + note
            )
        else:
            out = res.output or ""
            yield fail(
                f"compiling a test kernel for {arch} with {smoke.nvcc} failed: {_first_error(out)}",
                fix=_smoke_fix(ctx, out, arch),
                evidence={"arch": arch, "nvcc": smoke.nvcc, "ninja": smoke.ninja, "output": out[-4000:]},
            )
