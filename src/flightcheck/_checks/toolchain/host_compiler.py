"""FC114, FC123 — the host compiler of a JIT build: CC / CXX as one compiler file (Triton,
FlashInfer, tilelang run it as one), and a host compiler nvcc accepts (its
``host_config.h``). Imported through ``toolchain`` so the family registers as one.
"""

from __future__ import annotations

from collections.abc import Iterator

from flightcheck._checks.framework import Context, Outcome, Skip, check, fail, ok
from flightcheck._checks.shared import jit as _jit
from flightcheck._checks.toolchain._shared import _LAUNCHERS, _flashinfer_jit, _installed, _words
from flightcheck._knowledge import cuda as _cuda
from flightcheck._knowledge import flashinfer as _fi
from flightcheck._knowledge.units import major_minor
from flightcheck._vocabulary.results import ERROR


@check(
    "FC114",
    "host-compiler-spec-not-one-file",
    ERROR,
    logs=(
        "Failed to preprocess host compiler properties",
        "No such file or directory: '(?:ccache|sccache|distcc) [^']*'",
    ),
)
def host_compiler_spec(ctx: Context) -> Iterator[Outcome]:
    """CC or CXX holds a command line (``ccache gcc``), not one compiler file.

    ## What it checks
    When CC or CXX is set in the engine's environment, its value is a single word: Triton
    (``runtime/build.py``) runs ``$CC`` as one file name, FlashInfer writes ``-ccbin $CC``
    unquoted into build.ninja (``jit/cpp_ext.py``), tilelang (``contrib/cc.py``) runs
    ``$CXX`` (else ``$CC``) as its compiler. Checked for the ones installed.

    ## Why the launch dies
    ``CC="ccache gcc"``: Triton's first kernel raises ``FileNotFoundError: 'ccache gcc'``;
    every FlashInfer CUDA build fails with "nvcc fatal : A single input file is required
    for a non-link phase when an outputfile is specified" (``-ccbin ccache gcc``); tilelang
    stops with "Failed to preprocess host compiler properties". All after the weight load.

    ## How to fix
    Set CC/CXX to the compiler file (``export CC=/usr/bin/gcc CXX=/usr/bin/g++``) and give a
    launcher to FlashInfer the way it takes one: ``export FLASHINFER_CXX_LAUNCHER=ccache
    FLASHINFER_NVCC_LAUNCHER=ccache``. A compiler whose path holds a space runs for Triton
    and tilelang (they exec the whole value); only FlashInfer's ``-ccbin`` splits it.
    """
    users = {
        "CC": _installed(ctx, "triton", "flashinfer-python", "tilelang"),
        "CXX": _installed(ctx, "tilelang"),
    }
    tc = ctx.toolchain
    checked = []
    for var, key in (("CC", "cc"), ("CXX", "cxx")):
        value = ctx.env.get(var)
        if value is None:
            continue
        checked.append(var)
        words = _words(value)
        if len(words) <= 1 and value.strip() == value and value:
            continue
        used_by = users[var]
        st = (tc.env_paths or {}).get(var)
        whole = st is not None and st.kind == "executable"
        if whole:
            # the whole value (a path with a space in it) is one executable file: Triton's
            # subprocess and tilelang's -ccbin=<value> run it as it is; only FlashInfer's
            # unquoted "-ccbin $CC" in build.ninja splits it (jit/cpp_ext.py)
            used_by = [u for u in used_by if u == "flashinfer-python" and var == "CC"]
        if not used_by:
            continue
        tool = getattr(tc, key)
        target = tool.path if tool is not None and tool.path else (words[-1] if words else None)
        launcher = next((w for w in words[:-1] if w.rsplit("/", 1)[-1] in _LAUNCHERS), None)
        fix = f"export {var}={target}" if target else f"unset {var}"
        if whole:  # FlashInfer needs a path without a space: a link to the same compiler
            fix = f'ln -s "{value}" /usr/local/bin/cc-flashinfer && export {var}=/usr/local/bin/cc-flashinfer'
        if launcher:
            fix += f" {_fi.CXX_LAUNCHER}={launcher} {_fi.NVCC_LAUNCHER}={launcher}"
        effects = {
            "triton": f"Triton runs {value!r} as one file: FileNotFoundError on its first kernel",
            "flashinfer-python": (
                f"FlashInfer passes -ccbin {value} to nvcc unquoted: "
                "'nvcc fatal : A single input file is required for a non-link phase'"
            ),
            "tilelang": f"tilelang runs {value!r} as its compiler: 'Failed to preprocess host compiler properties'",
        }
        yield fail(
            f"{var}={value!r} is not one compiler file; " + "; ".join(effects[u] for u in used_by),
            fix=fix,
            evidence={var: value, "used_by": used_by},
        )
        return
    if not checked:
        raise Skip("neither CC nor CXX is set")
    yield ok(", ".join(f"{v}={ctx.env.get(v)}" for v in checked))


@check(
    "FC123",
    "nvcc-rejects-host-compiler",
    ERROR,
    logs=(r"unsupported GNU version! gcc versions later than \d+ are not supported",),
)
def nvcc_rejects_host_compiler(ctx: Context) -> Iterator[Outcome]:
    """The host compiler nvcc will call is newer than the toolkit's ``crt/host_config.h`` allows.

    ## What it checks
    When JIT is needed, the compiler nvcc runs as its host compiler (``$CC``, which FlashInfer
    passes as ``-ccbin``, else ``gcc`` on PATH) is within the bounds the toolkit's own
    ``include/crt/host_config.h`` enforces (CUDA 13.0: GCC 15 or older, clang older than
    21), unless ``-allow-unsupported-compiler`` is in NVCC_APPEND_FLAGS/NVCC_PREPEND_FLAGS.
    Read passively from the header; ``--deep`` (FC109) compiles for real.

    ## Why the launch dies
    Every nvcc build stops in the header: "#error -- unsupported GNU version! gcc versions
    later than 15 are not supported!" (or the clang one), for each FlashInfer / DeepGEMM /
    vLLM JIT module, after the weight load.

    ## How to fix
    Install a supported compiler and point CC/CXX at it (``apt-get install -y gcc-14 g++-14
    && export CC=/usr/bin/gcc-14 CXX=/usr/bin/g++-14``), or use a newer toolkit.
    """
    needed, why = _flashinfer_jit(ctx)
    if needed is False:
        raise Skip(f"no JIT needed: {why}")
    tc = ctx.toolchain
    bounds = tc.host_compiler_bounds
    if not bounds:
        raise Skip(f"the toolkit's crt/host_config.h was not read ({ctx.facts.reason('toolchain.nvcc') or 'no nvcc'})")
    host = tc.nvcc_host
    major = major_minor((host.version or "") + ".0") if host else None
    if host is None or major is None:
        raise Skip("nvcc's host compiler or its version is unknown (FC104)")
    flags = " ".join(ctx.env.get(v) or "" for v in _cuda.NVCC_FLAG_VARS)
    kind = tc.nvcc_host_kind or "gcc"
    limit = bounds.get("gcc_max") if kind == "gcc" else bounds.get("clang_below")
    if limit is None:
        raise Skip(f"host_config.h sets no {kind} bound")
    too_new = major[0] > limit if kind == "gcc" else major[0] >= limit
    if not too_new:
        yield ok(
            f"{kind} {host.version} ({host.path}) within nvcc's bound ({kind} {'<=' if kind == 'gcc' else '<'} {limit})"
        )
        return
    if _cuda.ALLOW_UNSUPPORTED in flags:
        yield ok(f"{kind} {host.version} is past nvcc's bound, allowed by {_cuda.ALLOW_UNSUPPORTED}")
        return
    ok_major = limit if kind == "gcc" else 14
    fix = (
        f"{_jit.install(ctx, f'gcc-{ok_major}', f'g++-{ok_major}')} && "
        f"export CC=/usr/bin/gcc-{ok_major} CXX=/usr/bin/g++-{ok_major}"
    )
    message = (
        "unsupported GNU version! gcc versions later than"
        if kind == "gcc"
        else "unsupported clang version! clang version must be less than"
    )
    yield fail(
        f"nvcc {ctx.nvcc.version or ''} rejects {kind} {host.version} ({host.path}): "
        f"'#error -- {message} {limit}' in every JIT build ({why})",
        fix=fix,
        evidence={"host_compiler": host.path, "version": host.version, "kind": kind, "bounds": bounds},
    )
