"""FC1xx — JIT toolchain, continued: FlashInfer's companion packages, libcudart, Python
headers, and a jit-cache that lacks the GPU's arch (FC110–FC113). Imported through
``toolchain`` so the family registers as one.
"""

from __future__ import annotations

from collections.abc import Iterator

from flightcheck._checks.framework import Context, Outcome, Skip, check, fail, ok, unknown
from flightcheck._checks.shared import jit as _jit
from flightcheck._knowledge import flashinfer as _fi_wheels
from flightcheck._knowledge.derived import gpu_subject
from flightcheck._vocabulary.results import ERROR, WARNING


@check(
    "FC110",
    "flashinfer-companion-version-mismatch",
    ERROR,
    logs=(
        r"flashinfer-(?:cubin|jit-cache) version \(?[\w.+]+\)? does not match",
        "version mismatch.*flashinfer-(?:cubin|jit-cache)",
    ),
)
def companion_mismatch(ctx: Context) -> Iterator[Outcome]:
    """flashinfer-cubin or flashinfer-jit-cache does not match flashinfer-python's version.

    ## What it checks
    flashinfer-cubin, when installed, has exactly flashinfer-python's version (or is a
    source build, ``0.0.0+unknown``); flashinfer-jit-cache's version starts with it
    (``0.7.2.post1+cu130`` matches ``0.7.2.post1``). FlashInfer compares both at import.

    ## Why the launch dies
    Before 0.7.2 (0.4.0, 0.4.1, 0.7.0 and 0.7.1 read) ``import flashinfer`` raises "flashinfer-cubin
    version (X) does not match flashinfer version (Y)" (or the jit-cache equivalent), so
    every FlashInfer path in the engine is gone. From 0.7.2 (``flashinfer/jit/env.py``) the
    mismatched package is ignored with a warning: cubins are downloaded on demand (~60 s of
    retries per artifact, then an AssertionError, on an air-gapped host) and jit-cache
    kernels are compiled with nvcc after the weight load (a warning then). With
    FLASHINFER_DISABLE_VERSION_CHECK set it imports, and mismatched prebuilt kernels fail
    later instead (a warning). With FLASHINFER_CUBIN_DIR set (0.7.0 and later) FlashInfer
    never looks at flashinfer-cubin, whatever its version. Before 0.4.0 (the sdists of
    0.2.0.post1-0.3.1.post1 read) FlashInfer never imports either package: passes.

    ## How to fix
    Install the companions at flashinfer-python's version, with the engine's interpreter:
    ``python -m pip install flashinfer-jit-cache==0.7.2.post1 --index-url
    https://flashinfer.ai/whl/cu130`` (cuXYZ = torch's CUDA).
    """
    packages = ctx.need(ctx.python.packages, "python.packages")
    fi = packages.get("flashinfer-python")
    if not fi:
        raise Skip("flashinfer-python is not installed")
    cubin, jc = packages.get("flashinfer-cubin"), packages.get("flashinfer-jit-cache")
    if (cubin or jc) and not _fi_wheels.at_least(fi, _fi_wheels.COMPANIONS_READ_SINCE):
        unread = ", ".join(f"{n} {v}" for n, v in (("flashinfer-cubin", cubin), ("flashinfer-jit-cache", jc)) if v)
        yield ok(
            f"flashinfer-python {fi} never reads {unread} (companion packages are read from "
            f"{_fi_wheels.COMPANIONS_READ_SINCE}): not used, nothing to match",
            evidence={"flashinfer-python": fi, "flashinfer-cubin": cubin, "flashinfer-jit-cache": jc},
        )
        return
    bad, fixes = [], []
    cubin_dir = ctx.env.get(_fi_wheels.CUBIN_DIR)
    bypassed = None
    if cubin and cubin_dir and _fi_wheels.at_least(fi, _fi_wheels.CUBIN_DIR_BYPASSES_CUBIN_PACKAGE_SINCE):
        # FlashInfer reads the cubins from there and never compares the package (FC122 judges them)
        bypassed, cubin = cubin, None
    if cubin and cubin != fi and cubin != "0.0.0+unknown":
        bad.append(f"flashinfer-cubin {cubin}")
        fixes.append(_jit.pip(ctx, f"flashinfer-cubin=={fi} --extra-index-url {_fi_wheels.INDEX}"))
    if jc and not _jit.jit_cache_matches(fi, jc):
        bad.append(f"flashinfer-jit-cache {jc}")
        tag = _fi_wheels.cuda_tag(jc) or _fi_wheels.tag_for(ctx.python.torch_cuda) or "cu130"
        fixes.append(_jit.pip(ctx, f"flashinfer-jit-cache=={fi} --index-url {_fi_wheels.index_url(tag)}"))
    if not bad:
        have = [f"{n} {v}" for n, v in (("flashinfer-cubin", cubin), ("flashinfer-jit-cache", jc)) if v]
        note = f"; cubins from {_fi_wheels.CUBIN_DIR}={cubin_dir} (flashinfer-cubin {bypassed} not read)"
        yield ok(
            f"flashinfer-python {fi}"
            + (f" with {', '.join(have)}" if have else ", no companion packages")
            + (note if bypassed else "")
        )
        return
    disabled = bool(ctx.env.get("FLASHINFER_DISABLE_VERSION_CHECK"))
    ignored = _fi_wheels.at_least(fi, _fi_wheels.MISMATCH_IGNORED_SINCE)
    if disabled:
        effect = "FLASHINFER_DISABLE_VERSION_CHECK hides it at import; the prebuilt kernels still do not match"
    elif ignored:
        what = []
        if any(b.startswith("flashinfer-cubin") for b in bad):
            where = f"{ctx.jit_cache.dir}/cubins" if ctx.jit_cache.dir else "its cache"
            what.append(f"downloads every cubin on demand to {where} (fails air-gapped)")
        if any(b.startswith("flashinfer-jit-cache") for b in bad):
            what.append("JIT-compiles every kernel with nvcc after the weight load")
        effect = f"FlashInfer {fi} ignores the mismatched package with a warning and " + " and ".join(what)
    else:
        effect = "import flashinfer raises"
    yield fail(
        f"{' and '.join(bad)} with flashinfer-python {fi}: {effect}",
        fix=" && ".join(fixes),
        severity=WARNING if disabled or ignored else None,
        evidence={"flashinfer-python": fi, "flashinfer-cubin": cubin, "flashinfer-jit-cache": jc},
    )


@check(
    "FC111",
    "libcudart-missing",
    ERROR,
    logs=("cannot find -lcudart",),
)
def libcudart_missing(ctx: Context) -> Iterator[Outcome]:
    """``$cuda_home/lib64/libcudart.so`` is missing, so the JIT link step fails.

    ## What it checks
    When JIT is needed, the CUDA home FlashInfer resolves has ``lib64/libcudart.so``.

    ## Why the launch dies
    Every JIT module is linked with ``-L$cuda_home/lib64 -lcudart``. A CUDA home derived from
    a wrapper nvcc in /usr/local/bin (giving /usr/local), or a pip-installed CUDA (``lib/``
    layout), compiles fine and fails at the link: "cannot find -lcudart", after the load.

    ## How to fix
    ``export CUDA_HOME=<a full toolkit>`` (e.g. ``/usr/local/cuda-13.0``), or install the
    toolkit matching the driver.
    """
    needed, why = _jit.jit_needed(ctx)
    if needed is False:
        raise Skip(f"no JIT needed: {why}")
    home = ctx.need(ctx.toolchain.cuda_home, "toolchain.cuda_home")
    if not home.path:
        raise Skip("no CUDA home at all (FC101)")
    has = ctx.need(ctx.toolchain.libcudart, "toolchain.libcudart")
    if has:
        yield ok(f"{home.path}/lib64/libcudart.so")
        return
    if needed is None:
        yield unknown(f"{home.path}/lib64/libcudart.so is missing; JIT may be needed: {why}")
        return
    need = _jit.need_for(_jit.archs_used(ctx) or ["90a"])
    nvcc = _jit.nvcc_version(ctx)
    root = (nvcc and _jit.alternative(ctx, at_least=max(need, nvcc), major=nvcc[0])) or _jit.alternative(
        ctx, at_least=need
    )
    origin = (
        f" (derived from the nvcc on PATH, {ctx.nvcc.path})"
        if home.source == "nvcc-on-path"
        else f" (from {home.source})"
    )
    yield fail(
        f"{home.path}/lib64/libcudart.so is missing{origin}: FlashInfer's link step (-lcudart) fails; {why}",
        fix=f"export CUDA_HOME={root}" if root else _jit.toolkit_fix(ctx, need),
        evidence={"cuda_home": home.path, "source": home.source},
    )


@check(
    "FC112",
    "python-headers-missing",
    ERROR,
    logs=(r"Python\.h: No such file or directory",),
)
def python_headers_missing(ctx: Context) -> Iterator[Outcome]:
    """The engine interpreter's ``Python.h`` is missing.

    ## What it checks
    ``Python.h`` exists in the include directory of the engine's interpreter
    (``sysconfig.get_path("include")``, which FlashInfer and Triton pass to the compiler).

    ## Why the launch dies
    Triton builds a C launcher that includes Python.h for its first kernel (torch.compile,
    in the profile run after the weight load), and FlashInfer's JIT sources include it:
    "fatal error: Python.h: No such file or directory".

    ## How to fix
    ``apt-get install python3.12-dev`` (``dnf install python3.12-devel``) for a system Python;
    an interpreter built without headers has to be reinstalled with them.
    """
    has = ctx.need(ctx.toolchain.python_headers, "toolchain.python_headers")
    include = ctx.toolchain.python_include
    if has:
        yield ok(f"Python.h in {include}" if include else "Python.h present")
        return
    exe = ctx.python.executable or "the engine's interpreter"
    if include and not include.startswith(("/usr/include/", "/usr/local/include/")):
        fix = (
            f"{exe} uses {include}, which lacks Python.h: reinstall that Python with its headers "
            f"(or build the venv from a system Python plus {_jit.python_dev_package(ctx)})"
        )
    else:
        fix = _jit.install(ctx, _jit.python_dev_package(ctx))
    yield fail(f"no Python.h in {include or 'the include directory'} of {exe}", fix=fix, evidence={"include": include})


@check(
    "FC113",
    "flashinfer-jit-cache-arch-missing",
    ERROR,
    logs=(
        "no kernel image is available for execution on the device.*flashinfer|flashinfer.*no kernel image is available",
        "cudaErrorNoKernelImageForDevice",
    ),
)
def jit_cache_arch_missing(ctx: Context) -> Iterator[Outcome]:
    """flashinfer-jit-cache is installed but not built for the arch of a GPU used.

    ## What it checks
    When flashinfer-jit-cache is installed at flashinfer-python's version, the archs built
    into it (read from the fatbins of its .so files, or FlashInfer's release table for its
    ``+cuXYZ`` tag) include code that runs on every GPU used.

    ## Why the launch dies
    FlashInfer takes a prebuilt module whenever its file exists, without looking at its
    archs; nothing is compiled, and the first kernel fails with
    "cudaErrorNoKernelImageForDevice" (e.g. a cu128 or cu129 build of 0.5.3-0.6.5 on B300,
    which has no 10.3a), after the weight load.

    ## How to fix
    Replace it with the build for torch's CUDA that covers the GPU (``pip install
    --force-reinstall --no-deps flashinfer-jit-cache==0.7.2.post1+cu130 --index-url
    https://flashinfer.ai/whl/cu130``), or uninstall it so FlashInfer compiles (FC101-FC103
    then apply).
    """
    packages = ctx.need(ctx.python.packages, "python.packages")
    fi, jc = packages.get("flashinfer-python"), packages.get("flashinfer-jit-cache")
    if not fi or not jc:
        raise Skip("flashinfer-jit-cache is not installed" if fi else "flashinfer-python is not installed")
    if not _jit.jit_cache_matches(fi, jc):
        raise Skip(f"flashinfer-jit-cache {jc} does not match flashinfer-python {fi} (FC110)")
    archs = _jit.archs_used(ctx)
    if archs is None:
        raise Skip(f"GPU archs unknown, {_jit.no_gpu_note(ctx)}")
    built = ctx.need(ctx.python.jit_cache_archs, "python.jit_cache_archs")
    source = ctx.python.jit_cache_archs_source
    missing = {a: g for a, g in archs.items() if not _jit.jit_cache_covers(built, str(g[0].compute_capability))}
    if not missing:
        yield ok(
            f"flashinfer-jit-cache {jc} has {' '.join(archs)} ({(source or '').split(':')[0] or 'archs recorded'})"
        )
        return
    fix = _jit.jit_cache_install(ctx, list(missing), replace=True) or _jit.pip(
        ctx, "-y flashinfer-jit-cache", verb="uninstall"
    )
    first = next(iter(missing.values()))[0]
    yield fail(
        f"flashinfer-jit-cache {jc} is built for {' '.join(built)}, not {' '.join(missing)} ({first.name or 'GPU'}): "
        "FlashInfer loads its modules anyway and the kernels fail with cudaErrorNoKernelImageForDevice",
        fix=fix,
        subject=gpu_subject(first),
        evidence={"built": built, "missing": list(missing), "source": source},
    )
