"""Python collector: the ENGINE's interpreter, its packages, and what they were built for.

Versions come from importlib.metadata in one child of the engine's interpreter (see
``_pyinfo``). Everything else is read as text or bytes, never imported: torch's CUDA from
``torch/version.py``, the archs of flashinfer-jit-cache from the fatbins inside its .so
files (and, for ``cuda_libraries``, the cubin archs and PTX ISA versions of the engine's own
extension modules and of the kernel packages it loads), the environment variables the
engine declares from ``vllm/envs.py`` or SGLang's ``srt/environ.py``. Only ``--deep``
imports torch (in a child) for ``torch_arch_list``, via the arch flags torch was compiled
with, which never initialises CUDA.
"""

from __future__ import annotations

import json
import os
import platform
import re
from typing import Any

from flightcheck._collect import CollectContext, collector
from flightcheck._collect import fatbin as _fatbin
from flightcheck._collect.proc import run
from flightcheck._collect.pyinfo import engine_info
from flightcheck._knowledge import flashinfer as _fi_wheels

TORCH_TIMEOUT = 90.0  # importing torch from a cold page cache takes tens of seconds

_TORCH_CUDA = re.compile(r"^cuda\s*(?::[^=\n]*)?=\s*(?:(['\"])(.*?)\1|None)", re.MULTILINE)
_MARK = "@@flightcheck-arch@@"
# The compiled-in arch flags need no device; get_arch_list() would first ask whether CUDA is
# available (and answer [] on a node whose driver is broken), so it is only the fallback.
_ARCH_SCRIPT = (
    "import json, torch\n"
    "f = getattr(torch._C, '_cuda_getArchFlags', None)\n"
    "flags = f() if f is not None else None\n"
    "archs = flags.split() if flags else torch.cuda.get_arch_list()\n"
    f"print({_MARK!r} + json.dumps(archs))\n"
)


def _read_text(path: str, limit: int = 4 << 20) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read(limit)
    except OSError:
        return None


def torch_cuda(torch_dir: str) -> tuple[str | None, str | None]:
    """(CUDA version torch was built with, why-unavailable) from torch/version.py as text."""
    text = _read_text(os.path.join(torch_dir, "version.py"))
    if text is None:
        return None, f"{torch_dir}/version.py is not readable"
    m = _TORCH_CUDA.search(text)
    if m is None:
        return None, f"{torch_dir}/version.py has no 'cuda = ...' line"
    if m.group(2) is None:
        return None, "torch is a CPU-only build (torch.version.cuda is None)"
    return m.group(2), None


def torch_arch_list(python: str, env: dict[str, str]) -> tuple[list[str] | None, str | None]:
    """torch's compiled arch list (``sm_90``, ``sm_100`` ...), from a child of the engine's
    interpreter; NVML-based availability so even the fallback creates no CUDA context."""
    proc = run(
        [python, "-c", _ARCH_SCRIPT], timeout=TORCH_TIMEOUT, env={**env, "PYTORCH_NVML_BASED_CUDA_CHECK": "1"}, cwd="/"
    )
    if not proc.ok:
        return None, f"importing torch in {python} failed: {proc.why()}"
    for line in reversed(proc.out.splitlines()):
        if line.startswith(_MARK):
            archs = json.loads(line[len(_MARK) :])
            return (archs or None), (None if archs else "torch reports no CUDA archs (CPU-only build)")
    return None, "torch printed no arch list"


def requirements(requires: list[str] | None) -> dict[str, str]:
    """A distribution's unconditional Requires-Dist lines as {normalised name: specifier}
    (requirements behind an extra are ignored; a bare name has the specifier "")."""
    from packaging.requirements import InvalidRequirement, Requirement

    out: dict[str, str] = {}
    for line in requires or ():
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.marker is not None and "extra" in str(req.marker):
            continue
        out.setdefault(re.sub(r"[-_.]+", "-", req.name).lower(), str(req.specifier))
    return out


def requirement_on(requires: list[str] | None, wanted: str = "flashinfer-python") -> str | None:
    """The unconditional requirement on ``wanted`` among a distribution's Requires-Dist
    lines, as ``flashinfer-python==0.7.2.post1`` (requirements behind an extra are ignored)."""
    spec = requirements(requires).get(wanted)
    return None if spec is None else f"{wanted}{spec}"


def engine_env_vars(engine: str, package_dir: str) -> tuple[list[str] | None, str | None]:
    """(names, why-unavailable): the environment variables the installed engine declares."""
    from flightcheck._knowledge import engines

    found = engines.get(engine)
    files = found.env_files(package_dir)
    texts = [t for t in (_read_text(f) for f in files) if t]
    if not texts:
        return None, f"{files[0]} is not readable"
    names = {m for t in texts for m in found.env_names(t)}
    return sorted(names), None


def jit_cache_archs(version: str, package_dir: str | None) -> tuple[list[str] | None, str]:
    """(archs, source): from the .so files when readable, else from FlashInfer's table."""
    why = "package directory not found"
    if package_dir:
        archs, why = _fatbin.jit_cache_archs(package_dir)
        if archs:
            return archs, why
    tag = _fi_wheels.cuda_tag(version)
    machine = platform.machine()
    table = _fi_wheels.published_archs(version, tag, machine) if tag else None
    if table:
        return (
            table,
            (
                f"table: FlashInfer's release build list for {version} on {machine} "
                f"(the .so files could not be read: {why})"
            ),
        )
    return None, f"not read from the .so files ({why}) and no release-table row for {version}"


#: Kernel packages whose device code an engine loads, by distribution: their import directory.
#: sgl-kernel was renamed sglang-kernel (sglang 0.5.x requires ``sglang-kernel``); both
#: install ``sgl_kernel``.
KERNEL_PACKAGES = {
    "sgl-kernel": "sgl_kernel",
    "sglang-kernel": "sgl_kernel",
    "flashinfer-jit-cache": "flashinfer_jit_cache",
}


def cuda_libraries(
    engine: str, packages: dict[str, str | None], dirs: dict[str, str | None]
) -> tuple[dict[str, Any] | None, str | None]:
    """(``python.cuda_libraries``, why-unavailable): the device code of the engine's package
    (its directory is ``dirs[engine]``) and of the installed :data:`KERNEL_PACKAGES`, read
    from the fatbin headers of their extension modules (never the payloads)."""
    from flightcheck._knowledge import engines

    libs: dict[str, Any] = {}
    wanted = [(engines.get(engine).package, engine), *KERNEL_PACKAGES.items()]
    for dist, module in wanted:
        version, where = packages.get(dist), dirs.get(module)
        if not version or not where or dist in libs:
            continue
        if module == "flashinfer_jit_cache":  # hundreds of modules: a sample, as for jit_cache_archs
            root = os.path.join(where, "jit_cache")
            files = _fatbin.sample_modules(root if os.path.isdir(root) else where)
        else:
            files = _fatbin.library_files(where)
        if files:  # a pure-Python package (SGLang's own) carries no device code
            libs[dist] = {"version": version, **_fatbin.library_fatbins(where, files)}
    if not libs:
        return None, f"no extension modules in {engine} or a kernel package ({', '.join(KERNEL_PACKAGES)})"
    return libs, None


@collector("python_env", sections=("python",), timeout=120.0)
def collect_python(cctx: CollectContext) -> dict[str, Any]:
    """The ``python`` section."""
    unavailable: dict[str, str] = {}
    engine = cctx.intent.engine
    info = engine_info(cctx.python, cctx.env)
    python: dict[str, Any] = {"executable": cctx.python, "engine": engine}
    if "error" in info:
        for key in (
            "version",
            "packages",
            "torch_cuda",
            "jit_cache_archs",
            "engine_requires",
            "engine_env_vars",
            "engine_pins",
            "cuda_libraries",
        ):
            python[key] = None
            unavailable[f"python.{key}"] = info["error"]
        return {"python": python, "unavailable": unavailable}
    packages: dict[str, str | None] = info.get("packages") or {}
    dirs: dict[str, str | None] = info.get("dirs") or {}
    python.update(version=info.get("version"), packages=packages)

    python["torch_cuda"] = None
    if packages.get("torch") and dirs.get("torch"):
        python["torch_cuda"], why = torch_cuda(str(dirs["torch"]))
        if why:
            unavailable["python.torch_cuda"] = why
    else:
        unavailable["python.torch_cuda"] = "torch is not installed in the engine's interpreter"

    python["torch_arch_list"] = None
    if not cctx.intent.deep:
        unavailable["python.torch_arch_list"] = "read only with --deep (imports torch in a child)"
    elif packages.get("torch"):
        python["torch_arch_list"], why = torch_arch_list(cctx.python, cctx.env)
        if why:
            unavailable["python.torch_arch_list"] = why

    python["jit_cache_archs"] = None
    jc = packages.get("flashinfer-jit-cache")
    if jc:
        python["jit_cache_archs"], python["jit_cache_archs_source"] = jit_cache_archs(
            jc, dirs.get("flashinfer_jit_cache")
        )
        if python["jit_cache_archs"] is None:
            unavailable["python.jit_cache_archs"] = python["jit_cache_archs_source"]
    else:
        unavailable["python.jit_cache_archs"] = "flashinfer-jit-cache is not installed"

    python["cuda_libraries"], why = cuda_libraries(engine, packages, dirs)
    if why:
        unavailable["python.cuda_libraries"] = why

    python["engine_requires"] = python["engine_env_vars"] = python["engine_pins"] = None
    if packages.get(engine):
        declared = (info.get("requires") or {}).get(engine)
        python["engine_requires"] = requirement_on(declared)
        python["engine_pins"] = {d: spec for d, spec in requirements(declared).items() if d in packages and spec}
        if dirs.get(engine):
            python["engine_env_vars"], why = engine_env_vars(engine, str(dirs[engine]))
            if why:
                unavailable["python.engine_env_vars"] = why
    else:
        unavailable["python.engine_env_vars"] = f"{engine} is not installed in {cctx.python}"
    return {"python": python, "unavailable": unavailable}
