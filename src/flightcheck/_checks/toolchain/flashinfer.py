"""FC118, FC120, FC122, FC125 — what FlashInfer's JIT reads from the host: its ``which nvcc``
lookup of the CUDA home, its workspace base, the trtllm-gen cubins (installed or
downloadable) and the link step's binutils and libcuda.so (the rules and their sources are
in ``_knowledge/flashinfer.py``). Imported through ``toolchain``.
"""

from __future__ import annotations

from collections.abc import Iterator

from flightcheck._checks.framework import Context, Outcome, Skip, check, fail, ok, unknown
from flightcheck._checks.shared import jit as _jit
from flightcheck._checks.toolchain._shared import _extension, _flashinfer_jit, _installed, _vllm_gate
from flightcheck._knowledge import flashinfer as _fi
from flightcheck._knowledge.units import major_minor
from flightcheck._vocabulary.results import ERROR, WARNING


@check("FC118", "which-missing-for-cuda-home", ERROR)
def which_missing(ctx: Context) -> Iterator[Outcome]:
    """CUDA_HOME and CUDA_PATH are unset and there is no ``which`` for FlashInfer to run.

    ## What it checks
    When FlashInfer will compile, with CUDA_HOME and CUDA_PATH unset or empty, a ``which``
    binary is on the engine's PATH: FlashInfer's ``get_cuda_path`` (``jit/cpp_ext.py``) finds
    the CUDA home by running ``which nvcc`` as a subprocess.

    ## Why the launch dies
    Minimal images (UBI-minimal, distroless, some slim bases) have no ``which``: the first
    FlashInfer build after the weight load raises "FileNotFoundError: [Errno 2] No such file
    or directory: 'which'", although nvcc itself is on PATH.

    ## How to fix
    ``export CUDA_HOME=/usr/local/cuda-13.0`` (the toolkit nvcc belongs to), so FlashInfer
    never looks; or install ``which`` (``dnf install -y which``; Debian: ``debianutils``).
    """
    needed, why = _flashinfer_jit(ctx)
    if needed is False:
        raise Skip(f"no JIT needed: {why}")
    set_home = [v for v in ("CUDA_HOME", "CUDA_PATH") if ctx.env.get(v)]
    if set_home:
        raise Skip(f"{set_home[0]} is set: FlashInfer does not run which")
    tools = _extension(ctx, ctx.toolchain.host_tools, "toolchain.host_tools")
    if tools.get(_fi.WHICH_LOOKUP):
        yield ok(f"which at {tools[_fi.WHICH_LOOKUP]}")
        return
    home = ctx.toolchain.cuda_home
    root = home.path if home is not None and home.path and home.exists else _jit.alternative(ctx)
    pkg = "debianutils" if _jit.install(ctx).startswith("apt") else "which"
    fix = f"export CUDA_HOME={root}" if root else _jit.install(ctx, pkg)
    yield fail(
        "CUDA_HOME and CUDA_PATH are unset and there is no 'which' on the engine's PATH: FlashInfer's CUDA-home "
        f"lookup raises FileNotFoundError: 'which' on its first build ({why})",
        fix=fix + (f"  (or: {_jit.install(ctx, pkg)})" if root else ""),
        evidence={"which": None, "cuda_home": root},
    )


@check("FC120", "flashinfer-workspace-base-empty", WARNING)
def workspace_base_empty(ctx: Context) -> Iterator[Outcome]:
    """FLASHINFER_WORKSPACE_BASE is set but empty: FlashInfer's cache lands in the cwd.

    ## What it checks
    When flashinfer-python is installed, ``FLASHINFER_WORKSPACE_BASE`` is unset or
    non-empty.

    ## Why the launch dies
    FlashInfer reads ``Path(os.getenv("FLASHINFER_WORKSPACE_BASE", home))`` (``jit/env.py``):
    an empty value is ``Path("")``, so its JIT cache and log go to ``./.cache/flashinfer`` in
    whatever directory the engine starts in: a read-only working directory fails ``import
    flashinfer``, and each directory recompiles every kernel (minutes after the load).

    ## How to fix
    ``unset FLASHINFER_WORKSPACE_BASE`` (FlashInfer then uses $HOME) or
    ``export FLASHINFER_WORKSPACE_BASE=/var/tmp/flashinfer``.
    """
    if not _installed(ctx, "flashinfer-python"):
        raise Skip("flashinfer-python is not installed")
    value = ctx.env.get(_fi.WORKSPACE_BASE)
    if value is None:
        raise Skip(f"{_fi.WORKSPACE_BASE} is not set")
    if value:
        yield ok(f"{_fi.WORKSPACE_BASE}={value}")
        return
    jc = ctx.jit_cache
    yield fail(
        f"{_fi.WORKSPACE_BASE} is set but empty: FlashInfer puts its cache in ./.cache/flashinfer of the engine's "
        "working directory" + (f" ({jc.dir})" if jc.dir else ""),
        fix=f"unset {_fi.WORKSPACE_BASE}  (or: export {_fi.WORKSPACE_BASE}=/var/tmp/flashinfer)",
        evidence={_fi.WORKSPACE_BASE: value, "dir": jc.dir},
    )


@check(
    "FC122",
    "flashinfer-cubins-unavailable",
    ERROR,
    logs=(
        r"Failed to get checksums\.txt",
        "Artifact not found locally: ",
    ),
)
def flashinfer_cubins(ctx: Context) -> Iterator[Outcome]:
    """FlashInfer's trtllm-gen cubins are neither installed nor cached, and will be downloaded.

    ## What it checks
    On SM 10.x GPUs (where FlashInfer's trtllm-gen FMHA, MoE and GEMM kernels run), the cubin
    directory FlashInfer resolves (``FLASHINFER_CUBIN_DIR``, else a flashinfer-cubin of the
    same version, else ``<workspace>/.cache/flashinfer/cubins``; ``jit/env.py``) holds each
    trtllm-gen ``checksums.txt`` with the SHA-256 ``artifacts.py`` pins (read as text from the
    installed FlashInfer). With ``--deep`` the configured repository
    (``FLASHINFER_CUBINS_REPOSITORY``) is asked for one of the missing files, 3 s timeout.

    ## Why the launch dies
    ``get_artifact`` (``jit/cubin_loader.py``) downloads what is missing at first use, after
    the weight load: on an air-gapped host each artifact costs 35-110 s of retries and then
    "AssertionError: Failed to get checksums.txt from ..."; with ``FLASHINFER_NO_DOWNLOAD``
    set it raises "Artifact not found locally" at once.

    ## How to fix
    Install the cubins with the engine's interpreter (``python -m pip install
    flashinfer-cubin==<flashinfer-python version>``), or fetch them on a connected host
    (``flashinfer download-kernels``), copy them over and ``export FLASHINFER_CUBIN_DIR=...``.
    """
    packages = ctx.need(ctx.python.packages, "python.packages")
    fi = packages.get("flashinfer-python")
    if not fi:
        raise Skip("flashinfer-python is not installed")
    if _vllm_gate(ctx):
        raise Skip("vLLM disables FlashInfer here (no flashinfer-cubin, no nvcc or ninja: FC101/FC103)")
    archs = _jit.archs_used(ctx)
    if archs is None:
        raise Skip(f"GPU archs unknown, {_jit.no_gpu_note(ctx)}")
    sm10 = {
        a: g
        for a, g in archs.items()
        if (mm := major_minor(g[0].compute_capability)) and mm[0] in _fi.TRTLLM_GEN_CC_MAJORS
    }
    if not sm10:
        raise Skip(f"no SM 10.x GPU used ({' '.join(archs)}): FlashInfer's trtllm-gen cubins are not loaded")
    cubins = _extension(ctx, ctx.toolchain.flashinfer_cubins, "toolchain.flashinfer_cubins")
    if cubins.source == "flashinfer-cubin":
        yield ok(f"flashinfer-cubin {packages.get('flashinfer-cubin')} provides the cubins")
        return
    arts = cubins.artifacts
    if arts is None:
        yield unknown(f"could not read FlashInfer's artifact pins or cubin directory ({cubins.dir})")
        return
    missing = [n for n, st in arts.items() if st != "ok"]
    if not missing:
        yield ok(f"{cubins.dir} ({cubins.source}) holds {', '.join(arts)}")
        return
    fix = _jit.pip(ctx, f"flashinfer-cubin=={fi} --extra-index-url {_fi.INDEX}") + (
        f"  (or on a connected host: flashinfer download-kernels, copy the cubins here and "
        f"export {_fi.CUBIN_DIR}=<that directory>)"
    )
    where = f"{cubins.dir} ({cubins.source})"
    names = ", ".join(missing)
    evidence = {"dir": cubins.dir, "source": cubins.source, "missing": missing, "repository": cubins.repository}
    smoke = ctx.facts.compile_smoke
    lo, hi = _fi.DOWNLOAD_STALL_S
    if ctx.env.get(_fi.NO_DOWNLOAD):
        yield fail(
            f"{names} not in {where} and {_fi.NO_DOWNLOAD} is set: the first trtllm-gen kernel after the weight "
            "load raises 'Artifact not found locally'",
            fix=fix,
            evidence=evidence,
        )
    elif smoke is not None and smoke.cubin_repository_ok is False:
        yield fail(
            f"{names} not in {where}, and the repository does not answer ({smoke.cubin_repository_error}): "
            f"each first use after the weight load retries for {lo}-{hi} s, then "
            "'AssertionError: Failed to get checksums.txt'",
            fix=fix,
            evidence={**evidence, "error": smoke.cubin_repository_error},
        )
    elif smoke is not None and smoke.cubin_repository_ok:
        yield ok(f"{names} will be downloaded from {cubins.repository} (it answered) into {where}")
    else:
        yield fail(
            f"{names} not in {where}: FlashInfer downloads them from {cubins.repository} at first use, after the "
            f"weight load; air-gapped, each retries for {lo}-{hi} s and fails (--deep asks the repository)",
            fix=fix,
            severity=WARNING,
            evidence=evidence,
        )


@check(
    "FC125",
    "jit-link-tools-missing",
    ERROR,
    logs=(
        r"cannot find -lcuda\b",
        r"(?:^|\s)(?:ld|objcopy): (?:command )?not found",
    ),
)
def jit_link_tools(ctx: Context) -> Iterator[Outcome]:
    """FlashInfer's link step lacks binutils (``ld``, ``objcopy``) or a libcuda.so for ``-lcuda``.

    ## What it checks
    When JIT is needed: ``ld`` and ``objcopy`` are on the engine's PATH (modules with
    embedded cubins run ``ld -r -b binary`` and ``objcopy``; tvm_ffi's ``embed_cubin``), and
    an unversioned ``libcuda.so`` exists where FlashInfer's ``-L$cuda_home/lib64
    -L$cuda_home/lib64/stubs ... -lcuda`` can find it (those two, LIBRARY_PATH, the linker's
    usual directories). Passive; ``--deep`` (FC109) links for real.

    ## Why the launch dies
    A pip-installed CUDA (no ``lib64/stubs``) on a driver-only image (``libcuda.so.1`` but
    no ``libcuda.so``) compiles every object and fails the link after the weight load:
    "cannot find -lcuda"; without binutils, "ld: not found" / "objcopy: not found".

    ## How to fix
    Install the toolkit's stubs (``apt-get install -y cuda-driver-dev-13-0``, or a full
    ``cuda-toolkit-13-0`` and ``export CUDA_HOME`` to it), and binutils
    (``apt-get install -y binutils``).
    """
    needed, why = _flashinfer_jit(ctx)
    if needed is False:
        raise Skip(f"no JIT needed: {why}")
    tools = _extension(ctx, ctx.toolchain.host_tools, "toolchain.host_tools")
    link = ctx.toolchain.link_libcuda
    problems, fixes = [], []
    missing = [t for t in _fi.BINUTILS if t in tools and not tools[t]]
    if missing:
        problems.append(f"no {' or '.join(missing)} on the engine's PATH")
        fixes.append(_jit.install(ctx, "binutils"))
    if link is not None and not link:
        home = ctx.toolchain.cuda_home
        where = home.path if home is not None and home.path else "the CUDA home"
        problems.append(f"no libcuda.so in {where}/lib64[/stubs] or the linker's directories: 'cannot find -lcuda'")
        v = _jit.nvcc_version(ctx) or _jit.toolkit_version(ctx, (12, 8))[0]
        fixes.append(_jit.install(ctx, f"cuda-driver-dev-{v[0]}-{v[1]}"))
    if not problems:
        lib = link[0] if link else f"-lcuda not judged: {ctx.facts.reason('toolchain.link_libcuda') or 'unknown'}"
        yield ok(f"ld, objcopy, {lib}")
        return
    yield fail(
        "FlashInfer's JIT link step will fail: " + "; ".join(problems) + f" ({why})",
        fix=" && ".join(fixes),
        evidence={"missing_tools": missing, "libcuda_so": link},
    )
