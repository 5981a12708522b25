"""FC1xx — the other runtime compilers of a launch (FC114–FC128): the host compiler spec,
Triton's C compiler, ptxas and cache, FlashInfer's ``which nvcc`` lookup, DeepGEMM's nvcc
and FlashInfer's workspace base (FC114–FC120); the ``--deep`` Triton ptxas smoke, FlashInfer's
cubins, the host compiler nvcc accepts, libcuda for Triton, the JIT link tools, ptxas
overrides and CuTe DSL (FC121–FC128). Each reads what the component itself reads (the rules and
their sources are in ``_knowledge/triton.py``, ``flashinfer.py`` and ``vllm.py``).
Imported through ``toolchain`` so the family registers as one.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from typing import TypeVar

from flightcheck._checks.framework import Context, Outcome, Skip, check, fail, ok, unknown
from flightcheck._checks.shared import jit as _jit
from flightcheck._knowledge import cuda as _cuda
from flightcheck._knowledge import flashinfer as _fi
from flightcheck._knowledge import triton as _triton
from flightcheck._knowledge import vllm as _vllm
from flightcheck._knowledge.derived import gpu_subject
from flightcheck._knowledge.units import major_minor
from flightcheck._vocabulary.results import ERROR, WARNING

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


@check("FC114", "host-compiler-spec-not-one-file", ERROR)
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


@check("FC115", "triton-c-compiler-missing", ERROR)
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


@check("FC117", "triton-cache-unwritable", ERROR)
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


@check("FC119", "deepgemm-nvcc-too-old", ERROR)
def deepgemm_nvcc(ctx: Context) -> Iterator[Outcome]:
    """vLLM will JIT DeepGEMM kernels with an nvcc older than 12.9 (or none).

    ## What it checks
    For vLLM with its vendored DeepGEMM (0.33.0 and later), ``VLLM_USE_DEEP_GEMM`` not 0, a GPU
    used where vLLM's ``support_deep_gemm`` holds (SM 9.0, 10.x, 12.x) and a model whose
    weights take DeepGEMM paths there (block FP8; MXFP4 MoE on SM 10.x when vLLM's FlashInfer
    is off; any model, as a warning, when none is given): the
    nvcc DeepGEMM compiles with (``DG_JIT_NVCC_COMPILER``, else ``$CUDA_HOME/bin/nvcc``) is
    12.9 or newer. This is stricter than FC102 on Hopper (12.3 there).

    ## Why the launch dies
    DeepGEMM compiles its kernels at first use, after the weight load, and its extension
    refuses an older compiler: "NVCC version must be at least 12.9" (or fails to run a
    missing one).

    ## How to fix
    ``export DG_JIT_NVCC_COMPILER=/usr/local/cuda-13.0/bin/nvcc`` (or CUDA_HOME) to a 12.9+
    toolkit on the host, install one, or ``export VLLM_USE_DEEP_GEMM=0`` to keep vLLM off
    DeepGEMM.
    """
    if ctx.intent.engine != _vllm.NAME:
        raise Skip(f"DeepGEMM is vLLM's; engine is {ctx.intent.engine}")
    version = ctx.need(ctx.python.packages, "python.packages").get("vllm")
    if not version:
        raise Skip("vllm is not installed")
    if not _fi.at_least(version, _vllm.DEEP_GEMM_VENDORED_SINCE):
        raise Skip(f"vLLM {version} does not vendor DeepGEMM")
    if (ctx.env.get(_vllm.USE_DEEP_GEMM) or "1").strip() == "0":
        raise Skip(f"{_vllm.USE_DEEP_GEMM}=0")
    gpus = [g for g in ctx.gpus_used if _vllm.deep_gemm_arch(g.compute_capability)]
    if not ctx.gpus_used:
        raise Skip(f"GPU archs unknown, {_jit.no_gpu_note(ctx)}")
    if not gpus:
        raise Skip("no GPU used where vLLM enables DeepGEMM (SM 9.0, 10.x, 12.x)")
    memory = ctx.memory
    model = memory.cfg if memory is not None else None
    method = model.quant.method if model is not None else None
    if model is not None:
        packages = ctx.python.packages or {}
        flashinfer_on = bool(packages.get("flashinfer-python")) and not _vllm_gate(ctx)
        gpus = [
            g
            for g in gpus
            if (mm := major_minor(g.compute_capability))
            and _vllm.deep_gemm_takes(method, mm[0], flashinfer_on=flashinfer_on)
        ]
        if not gpus:
            raise Skip(f"the model's weights ({method or 'unquantized'}) take no DeepGEMM path on the GPUs used")
    states = ctx.toolchain.env_paths or {}
    override = ctx.env.get(_vllm.DG_NVCC_VAR)
    if override:
        st = states.get(_vllm.DG_NVCC_VAR)
        if st is None:
            yield unknown(f"{_vllm.DG_NVCC_VAR}={override} was not examined")
            return
        path: str | None = override
        ver = major_minor(st.version) if st.kind == "executable" else None
    else:
        path, ver = ctx.nvcc.path, _jit.nvcc_version(ctx)
    need = _vllm.DEEP_GEMM_MIN_NVCC
    if ver is not None and ver >= need:
        yield ok(f"DeepGEMM compiles with nvcc {_jit.fmt(ver)} ({path})")
        return
    if path and ver is None and not override:
        yield unknown(f"the version of {path} is unknown")
        return
    need_all = max(need, _jit.need_for(_jit.archs_used(ctx) or []))
    current = _jit.nvcc_version(ctx)
    torch = major_minor(ctx.python.torch_cuda)
    root = _jit.alternative(ctx, at_least=need_all, major=torch[0] if torch else None) or _jit.alternative(
        ctx, at_least=need_all
    )
    if override and current is not None and current >= need_all:
        fix = f"unset {_vllm.DG_NVCC_VAR}  (DeepGEMM then uses {ctx.nvcc.path}, nvcc {_jit.fmt(current)})"
    elif root:
        fix = f"export {_vllm.DG_NVCC_VAR}={root}/bin/nvcc"
    else:
        fix = _jit.toolkit_install(ctx, need_all)
    fix += f"  (or: export {_vllm.USE_DEEP_GEMM}=0)"
    have = f"nvcc {_jit.fmt(ver)} ({path})" if ver else (f"{path}, which cannot run," if path else "no nvcc")
    yield fail(
        f"vLLM {version} JIT-compiles DeepGEMM on {gpus[0].name or 'GPU'} (SM {gpus[0].compute_capability}) "
        f"with {have}: it needs nvcc >= {_jit.fmt(need)} ('NVCC version must be at least 12.9')",
        fix=fix,
        subject=gpu_subject(gpus[0]),
        severity=None if model is not None else WARNING,
        evidence={"nvcc": path, "nvcc_version": _jit.fmt(ver) if ver else None, "quant": method},
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


@check("FC121", "triton-ptxas-smoke-failed", ERROR)
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


@check("FC122", "flashinfer-cubins-unavailable", ERROR)
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
    if ctx.intent.engine != _vllm.NAME:
        return False
    packages = ctx.python.packages or {}
    if not _fi.at_least(packages.get("vllm"), _vllm.FLASHINFER_GATED_ON_TOOLS_SINCE) or packages.get(
        "flashinfer-cubin"
    ):
        return False
    return ctx.facts.toolchain is not None and (ctx.nvcc.path is None or ctx.toolchain.ninja is None)


@check("FC123", "nvcc-rejects-host-compiler", ERROR)
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


@check("FC124", "triton-libcuda-not-found", ERROR)
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


@check("FC125", "jit-link-tools-missing", ERROR)
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


@check("FC127", "cute-dsl-flavor-incompatible", ERROR)
def cute_dsl_flavor(ctx: Context) -> Iterator[Outcome]:
    """nvidia-cutlass-dsl (CuTe DSL: FA4, quack, Blackwell kernels) has no build the driver runs.

    ## What it checks
    When nvidia-cutlass-dsl is installed and an SM 10.x GPU is used, at least one of its
    ``_cutlass_ir.cu{N}`` builds has N no newer than the driver's CUDA major: its loader
    (``cutlass/_mlir/_mlir_libs/__init__.py``) keeps only those.

    ## Why the launch dies
    A cu13-only CuTe DSL on a CUDA 12.x driver raises "None of the installed toolkit flavors
    (cu13) are compatible with the CUDA driver" on the first CuTe DSL import, which vLLM
    defers to the first Blackwell attention / MoE kernel, after the weight load.

    ## How to fix
    Install the flavour of the driver's major with the engine's interpreter (``python -m pip
    install nvidia-cutlass-dsl-libs-cu12==<nvidia-cutlass-dsl version>``), or upgrade the
    driver.
    """
    packages = ctx.need(ctx.python.packages, "python.packages")
    version = packages.get("nvidia-cutlass-dsl")
    if not version:
        raise Skip("nvidia-cutlass-dsl is not installed")
    archs = _jit.archs_used(ctx)
    if archs is None:
        raise Skip(f"GPU archs unknown, {_jit.no_gpu_note(ctx)}")
    if not any((mm := major_minor(g[0].compute_capability)) and mm[0] == 10 for g in archs.values()):
        raise Skip("no SM 10.x GPU used")
    driver = major_minor(ctx.driver.cuda_version)
    if driver is None:
        raise Skip("the driver's CUDA version is unknown (FC201)")
    flavors = _extension(ctx, ctx.toolchain.cute_dsl_flavors, "toolchain.cute_dsl_flavors")
    usable = [f for f in flavors if f <= driver[0]]
    if usable:
        yield ok(f"nvidia-cutlass-dsl {version} cu{max(usable)} runs on the CUDA {_jit.fmt(driver)} driver")
        return
    installed = ", ".join(f"cu{f}" for f in flavors) or "none"
    yield fail(
        f"nvidia-cutlass-dsl {version} has {installed} builds only and the driver supports CUDA {_jit.fmt(driver)}: "
        "'None of the installed toolkit flavors are compatible with the CUDA driver' at the first CuTe DSL kernel",
        fix=_jit.pip(ctx, f"nvidia-cutlass-dsl-libs-cu{driver[0]}=={version}") + "  (or upgrade the driver)",
        evidence={"flavors": flavors, "driver_cuda": ctx.driver.cuda_version},
    )


@check("FC128", "cute-dsl-ptxas-path-unusable", ERROR)
def cute_dsl_ptxas(ctx: Context) -> Iterator[Outcome]:
    """CUTE_DSL_PTXAS_PATH names no executable, or a ptxas too old for a GPU used.

    ## What it checks
    When nvidia-cutlass-dsl is installed and ``CUTE_DSL_PTXAS_PATH`` is set, it names an
    executable ptxas whose CUDA release knows every GPU arch used (100a 12.8, 103a 12.9,
    110a 13.0, ...). vLLM's FA4 (``vllm_flash_attn/cute/interface.py``), its TML FA4 and
    quack patch CuTe DSL to assemble with it as soon as they are imported.

    ## Why the launch dies
    A path that is not an executable file raises "RuntimeError: ptxas not found: <path>"
    at the import; an old ptxas fails every CuTe DSL kernel with "ptxas failed: ...
    Value 'sm_103a' is not defined", at the first attention / MoE kernel after the load.

    ## How to fix
    ``export CUTE_DSL_PTXAS_PATH=/usr/local/cuda-13.0/bin/ptxas`` (a toolkit that knows the
    arch), or unset it to keep CuTe DSL's embedded ptxas.
    """
    packages = ctx.need(ctx.python.packages, "python.packages")
    if not packages.get("nvidia-cutlass-dsl"):
        raise Skip("nvidia-cutlass-dsl is not installed")
    value = ctx.env.get(_fi.CUTE_DSL_PTXAS)
    if not value:
        raise Skip(f"{_fi.CUTE_DSL_PTXAS} is not set: CuTe DSL uses its embedded ptxas")
    st = (ctx.toolchain.env_paths or {}).get(_fi.CUTE_DSL_PTXAS)
    if st is None:
        yield unknown(f"{_fi.CUTE_DSL_PTXAS}={value} was not examined")
        return
    home = ctx.toolchain.cuda_home
    archs = _jit.archs_used(ctx) or {}
    need = _jit.need_for(list(archs)) if archs else None
    cur = _jit.nvcc_version(ctx)
    better = (
        f"export {_fi.CUTE_DSL_PTXAS}={home.path}/bin/ptxas  (or: unset {_fi.CUTE_DSL_PTXAS})"
        if home is not None and home.path and cur is not None and (need is None or cur >= need)
        else f"unset {_fi.CUTE_DSL_PTXAS}"
    )
    if st.kind != "executable":
        what = {"dir": "a directory", "file": "not executable", "missing": "missing"}.get(st.kind or "", st.kind)
        yield fail(
            f"{_fi.CUTE_DSL_PTXAS}={value} is {what}: importing vLLM's FA4 or quack raises 'ptxas not found'",
            fix=better,
            evidence={"path": value, "kind": st.kind},
        )
        return
    ver = major_minor(st.version)
    if need is None or ver is None:
        yield ok(f"{_fi.CUTE_DSL_PTXAS}={value}" + (f" (CUDA {st.version})" if st.version else ""))
        return
    if ver >= need:
        yield ok(f"{_fi.CUTE_DSL_PTXAS}={value} (CUDA {_jit.fmt(ver)}) knows {' '.join(archs)}")
        return
    arch = next((a for a in archs if _jit.need_for([a]) > ver), next(iter(archs)))
    yield fail(
        f"{_fi.CUTE_DSL_PTXAS}={value} is CUDA {_jit.fmt(ver)}; {arch} needs {_jit.fmt(need)}: every CuTe DSL "
        "kernel fails to assemble ('ptxas failed')",
        fix=better,
        subject=gpu_subject(archs[arch][0]),
        evidence={"path": value, "version": st.version, "arch": arch},
    )
