"""FC115 - FC117, FC121, FC124 — what Triton reads from the host: its C compiler, ptxas
(the path, and a smoke test for the arch), its cache directory and libcuda (the rules and
their sources are in ``_knowledge/triton.py``). Imported through ``toolchain``.
"""

from __future__ import annotations

from collections.abc import Iterator

from flightcheck._checks.framework import Context, Log, Outcome, Skip, check, fail, ok, unknown
from flightcheck._checks.shared import jit as _jit
from flightcheck._checks.toolchain._shared import _extension, _installed
from flightcheck._knowledge import triton as _triton
from flightcheck._knowledge.units import major_minor
from flightcheck._vocabulary.results import ERROR


@check(
    "FC115",
    "triton-c-compiler-missing",
    ERROR,
    logs=(r"Failed to find C compiler\. Please specify via CC environment variable",),
)
def triton_c_compiler(ctx: Context) -> Iterator[Outcome]:
    """CC is unset and neither ``gcc`` nor ``clang`` is on PATH, so Triton finds no C compiler.

    ## What it checks
    When Triton is installed and CC is unset, ``gcc`` or ``clang`` resolves on the engine's
    PATH: Triton's ``_find_compiler`` (``runtime/build.py``) tries exactly those two and
    never ``cc``, so a host with only ``cc``/``c++`` (an alternatives link, a minimal image)
    passes FC104 and still fails here.

    ## Why the launch dies
    Triton compiles a C launcher stub for its first kernel (vLLM's profile run, after the
    weight load): "RuntimeError: Failed to find C compiler. Please specify via CC
    environment variable".

    ## How to fix
    ``export CC=/usr/bin/cc`` (the compiler the host has), or install gcc
    (``apt-get install -y build-essential``).
    """
    if not _installed(ctx, "triton"):
        raise Skip("triton is not installed")
    if ctx.env.get("CC"):
        raise Skip(f"CC={ctx.env.get('CC')} is what Triton uses (FC104/FC114)")
    tools = _extension(ctx, ctx.toolchain.host_tools, "toolchain.host_tools")
    found = [(n, tools.get(n)) for n in _triton.C_COMPILERS if tools.get(n)]
    if found:
        yield ok(f"Triton will use {found[0][0]} ({found[0][1]})")
        return
    cc = ctx.toolchain.cc
    fix = f"export CC={cc.path}" if cc is not None and cc.path else _jit.install(ctx, "build-essential")
    yield fail(
        "CC is unset and neither gcc nor clang is on the engine's PATH: Triton's first kernel raises "
        "'Failed to find C compiler'" + (f" (it never tries {cc.path})" if cc is not None and cc.path else ""),
        fix=fix,
        evidence={"gcc": None, "clang": None, "cc": cc.path if cc else None},
    )


@check("FC116", "triton-ptxas-path-unusable", ERROR)
def triton_ptxas_path(ctx: Context) -> Iterator[Outcome]:
    """TRITON_PTXAS_PATH / TRITON_PTXAS_BLACKWELL_PATH names a directory or a non-executable.

    ## What it checks
    For each GPU arch used, the variable Triton reads for it (``TRITON_PTXAS_BLACKWELL_PATH``
    for SM 10.0 and up, ``TRITON_PTXAS_PATH`` below; ``backends/nvidia/compiler.py``
    ``get_ptxas``), when set, names an executable file. A missing file is let through:
    Triton then falls back to its bundled ptxas.

    ## Why the launch dies
    ``NvidiaTool.from_path`` (``triton/knobs.py``) runs ``<path> --version`` and catches only
    CalledProcessError and FileNotFoundError: a directory or a file without the execute bit
    raises PermissionError out of the first Triton compile, after the weight load.

    ## How to fix
    Point it at the ptxas binary (``export TRITON_PTXAS_PATH=/usr/local/cuda/bin/ptxas``,
    not ``.../bin``), ``chmod +x`` it, or unset it to use Triton's bundled ptxas.
    """
    if not _installed(ctx, "triton"):
        raise Skip("triton is not installed")
    set_vars = [v for v in (_triton.PTXAS, _triton.PTXAS_BLACKWELL) if ctx.env.get(v)]
    if not set_vars:
        raise Skip("neither TRITON_PTXAS_PATH nor TRITON_PTXAS_BLACKWELL_PATH is set")
    archs = _jit.archs_used(ctx)
    used: dict[str, str] = {}
    for arch, gpus in (archs or {}).items():
        mm = major_minor(gpus[0].compute_capability)
        if mm:
            used.setdefault(_triton.ptxas_var(mm[0]), arch)
    states = _extension(ctx, ctx.toolchain.env_paths, "toolchain.env_paths")
    out = []
    for var in set_vars:
        if archs is not None and var not in used:
            continue
        st = states.get(var)
        if st is None:
            out.append(unknown(f"{var}={ctx.env.get(var)} was not examined"))
            continue
        if st.kind == "executable":
            out.append(ok(f"{var}={st.path}"))
        elif st.kind == "missing":
            out.append(ok(f"{var}={st.path} does not exist: Triton falls back to its bundled ptxas"))
        else:
            what = "a directory" if st.kind == "dir" else "not executable"
            fix = (
                f"export {var}={(st.path or '').rstrip('/')}/ptxas  (the binary, not its directory; or: unset {var})"
                if st.kind == "dir"
                else f"chmod +x {st.path}  (or: unset {var})"
            )
            out.append(
                fail(
                    f"{var}={st.path} is {what}: Triton's first compile"
                    + (f" for {used[var]}" if var in used else "")
                    + " raises PermissionError",
                    fix=fix,
                    evidence={var: st.path, "kind": st.kind},
                )
            )
    if not out:
        raise Skip(f"{', '.join(set_vars)} serve no arch used ({' '.join(archs or ())})")
    yield from out


@check(
    "FC117",
    "triton-cache-unwritable",
    ERROR,
    logs=(r"PermissionError: \[Errno 13\] Permission denied: '[^']*/\.triton",),
)
def triton_cache_unwritable(ctx: Context) -> Iterator[Outcome]:
    """Triton's kernel cache directory cannot be written.

    ## What it checks
    ``$TRITON_CACHE_DIR``, default ``$TRITON_HOME/.triton/cache`` (``TRITON_HOME`` defaults
    to ``$HOME``; ``triton/knobs.py``), or its nearest existing parent, accepts a new file.

    ## Why the launch dies
    Triton writes every compiled kernel and its launcher there before loading it; a
    read-only home or mount fails the first Triton kernel (vLLM's profile run, after the
    weight load) with PermissionError / "Read-only file system".

    ## How to fix
    ``export TRITON_CACHE_DIR=/var/tmp/triton-cache`` (a writable local disk), or make the
    directory writable for the engine's user.
    """
    if not _installed(ctx, "triton"):
        raise Skip("triton is not installed")
    states = _extension(ctx, ctx.toolchain.env_paths, "toolchain.env_paths")
    st = states.get(_triton.CACHE_DIR)
    if st is None:
        yield unknown("Triton's cache directory is unknown (neither TRITON_CACHE_DIR, TRITON_HOME nor HOME is set)")
        return
    if st.writable is not False:
        yield ok(f"{st.path} writable")
        return
    yield fail(
        f"Triton's cache {st.path} is not writable: {st.problem or 'write test failed'}",
        fix=f"export {_triton.CACHE_DIR}=/var/tmp/triton-cache  (or make {st.path} writable for the engine's user)",
        evidence={"dir": st.path, "problem": st.problem},
    )


def _ptxas_fix(ctx: Context, var: str, sm: str, output: str, source: str | None) -> str:
    """A ptxas that knows ``sm``: the CUDA home's when new enough, else Triton's bundled one."""
    home = ctx.toolchain.cuda_home
    nvcc = _jit.nvcc_version(ctx)
    arch = sm.removeprefix("sm_")
    need = _jit.MIN_NVCC.get(arch) or _jit.MIN_NVCC.get(arch.rstrip("a") + "f") or (12, 8)
    if "not defined for option 'gpu-name'" in output or "Unsupported" in output:
        if source != "bundled":
            if home is not None and home.path and nvcc is not None and nvcc >= need:
                return f"export {var}={home.path}/bin/ptxas  (CUDA {_jit.fmt(nvcc)} knows {sm}; or: unset {var})"
            return f"unset {var}  (Triton's bundled ptxas is used then)"
        return _jit.pip(ctx, "-U triton") + f"  (a Triton whose bundled ptxas knows {sm})"
    return f"unset {var}" if source != "bundled" else _jit.pip(ctx, "--force-reinstall --no-deps triton")


@check(
    "FC121",
    "triton-ptxas-smoke-failed",
    ERROR,
    logs=(
        Log(
            r"ptxas fatal\s*: Value 'sm_\d+[af]?' is not defined for option 'gpu-name'",
            note="the ptxas Triton (or FlashInfer) runs predates the GPU's arch",
        ),
    ),
)
def triton_ptxas_smoke(ctx: Context) -> Iterator[Outcome]:
    """``--deep``: the ptxas Triton will use cannot assemble a small kernel for an arch used.

    ## What it checks
    With ``--deep``, for each GPU arch used, flightcheck resolves the ptxas Triton will run
    (``TRITON_PTXAS_BLACKWELL_PATH`` for SM 10.0 and up, ``TRITON_PTXAS_PATH`` below, each
    only when its ``--version`` runs, else Triton's bundled ``backends/nvidia/bin/ptxas``;
    ``triton/knobs.py``) and assembles a ten-line PTX kernel with it, with Triton's
    ``--gpu-name=sm_103a`` and the PTX version Triton emits for that ptxas.

    ## Why the launch dies
    A ptxas too old for the GPU ("Value 'sm_110a' is not defined for option 'gpu-name'"),
    one that cannot run, or one built for another host fails every Triton kernel at its
    first compile, in vLLM's profile run after the weight load.

    ## How to fix
    Point the variable at a ptxas of a toolkit that knows the arch
    (``export TRITON_PTXAS_BLACKWELL_PATH=/usr/local/cuda-13.0/bin/ptxas``), unset it to use
    Triton's bundled ptxas, or upgrade Triton.
    """
    smoke = ctx.facts.compile_smoke
    if smoke is None:
        if not ctx.intent.deep:
            raise Skip("runs only with --deep")
        yield unknown(f"the compile smoke test did not run: {ctx.facts.reason('compile_smoke') or 'no result'}")
        return
    results = smoke.triton_ptxas
    if results is None:
        raise Skip("triton is not installed for the engine")
    if not results:
        raise Skip(f"GPU archs unknown, {_jit.no_gpu_note(ctx)}")
    for sm, res in results.items():
        arch = sm.removeprefix("sm_")
        var = _triton.ptxas_var(int(arch.rstrip("a")) // 10)
        if res.ok:
            yield ok(f"{sm}: {res.ptxas} (CUDA {res.version}, {res.source}) assembles")
            continue
        out = res.output or ""
        yield fail(
            f"Triton's ptxas for {sm} ({res.ptxas or 'none found'}"
            + (f", CUDA {res.version}, from {res.source}" if res.version else "")
            + f") fails: {out.strip().splitlines()[-1][:200] if out.strip() else 'no output'}",
            fix=_ptxas_fix(ctx, var, sm, out, res.source),
            evidence={"arch": sm, "ptxas": res.ptxas, "version": res.version, "source": res.source, "output": out},
        )


@check("FC124", "triton-libcuda-not-found", ERROR, logs=(r"libcuda\.so cannot found",))
def triton_libcuda(ctx: Context) -> Iterator[Outcome]:
    """Triton's libcuda lookup (``ldconfig -p``, then LD_LIBRARY_PATH) finds no libcuda.so.1.

    ## What it checks
    When Triton is installed, the driver is loaded and ``TRITON_LIBCUDA_PATH`` is unset,
    Triton's ``libcuda_dirs`` (``backends/nvidia/driver.py``) succeeds: ``/sbin/ldconfig``
    exists, and its cache lists a libcuda.so.1 that exists, or an LD_LIBRARY_PATH entry
    holds one.

    ## Why the launch dies
    Containers that mount the driver libraries without refreshing the linker cache (or have
    no ``/sbin/ldconfig``) import and load fine; Triton's first launcher build, in vLLM's
    profile run after the weight load, fails with "AssertionError: libcuda.so cannot
    found!" (or FileNotFoundError: '/sbin/ldconfig').

    ## How to fix
    ``export TRITON_LIBCUDA_PATH=<the directory holding libcuda.so.1>``
    (e.g. ``/usr/lib/x86_64-linux-gnu``), or refresh the cache with ``ldconfig`` in the image.
    """
    if not _installed(ctx, "triton"):
        raise Skip("triton is not installed")
    if ctx.env.get(_triton.LIBCUDA_PATH):
        raise Skip(f"{_triton.LIBCUDA_PATH}={ctx.env.get(_triton.LIBCUDA_PATH)} is what Triton uses")
    if ctx.driver.loaded is False or ctx.facts.gpus is None:
        raise Skip("no NVIDIA driver loaded (FC201)")
    lookup = _extension(ctx, ctx.toolchain.libcuda_lookup, "toolchain.libcuda_lookup")
    if lookup.ldconfig == "found":
        yield ok("ldconfig's cache lists libcuda.so.1")
        return
    if lookup.ldconfig == "none" and lookup.ld_library_path:  # consulted only when ldconfig lists none
        yield ok(f"libcuda.so.1 in LD_LIBRARY_PATH entry {lookup.ld_library_path[0]}")
        return
    dirs = lookup.ld_library_path or lookup.known or []
    fix = (
        f"export {_triton.LIBCUDA_PATH}={dirs[0]}"
        if dirs
        else f"export {_triton.LIBCUDA_PATH}=<the directory holding libcuda.so.1>  (or run ldconfig in the image)"
    )
    if lookup.ldconfig == "missing":
        why = f"there is no {_triton.LDCONFIG}: Triton's first kernel raises FileNotFoundError: '{_triton.LDCONFIG}'"
    else:
        state = "lists only files that are gone" if lookup.ldconfig == "stale" else "has no libcuda.so.1"
        why = (
            f"ldconfig's cache {state} and no LD_LIBRARY_PATH entry holds it: Triton's first kernel raises "
            "'libcuda.so cannot found!'"
        )
    yield fail(why, fix=fix, evidence={"ldconfig": lookup.ldconfig, "known": lookup.known})
