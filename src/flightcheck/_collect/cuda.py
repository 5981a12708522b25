"""Find the CUDA toolkit and host compilers the way FlashInfer's JIT will find them.

FlashInfer (``flashinfer/jit/cpp_ext.py``) takes the CUDA home from ``CUDA_HOME``, else
``CUDA_PATH`` (an empty value counts as unset), else ``dirname(dirname(which nvcc))``, else
``/usr/local/cuda`` when that exists; the compiler is ``$FLASHINFER_NVCC`` or
``$cuda_home/bin/nvcc`` (so a set CUDA_HOME wins over the nvcc on PATH), the host compiler
``$CXX`` or ``c++``, and ninja is whatever PATH finds. Everything here reads the *engine's*
environment, not flightcheck's. Tool runs are cached per process by (path, mtime, size):
the compile smoke test and the collectors ask about the same nvcc.
"""

from __future__ import annotations

import glob
import os
import re
import shlex
import shutil
import threading
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from flightcheck._collect.proc import run

DEFAULT_CUDA_HOME = "/usr/local/cuda"
#: Where toolkits other than the one in use usually sit (the fix can point CUDA_HOME there).
TOOLKIT_GLOBS = (
    "/usr/local/cuda-*/bin/nvcc",
    "/usr/local/cuda/bin/nvcc",
    "/opt/cuda*/bin/nvcc",
    "/opt/nvidia/cuda*/bin/nvcc",
)
TOOL_TIMEOUT = 10.0  # nvcc on a cold NFS home can take seconds; a hang costs only this

_RELEASE = re.compile(r"release (\d+\.\d+),")
_VERSION = re.compile(r"\b(\d+\.\d+(?:\.\d+)?)\b")

_cache: dict[tuple[Any, ...], Any] = {}
_cache_lock = threading.Lock()
_key_locks: dict[tuple[Any, ...], threading.Lock] = {}


def _stat_key(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def cached(kind: str, path: str, compute: Callable[[], Any], *extra: Any) -> Any:
    """``compute()`` once per (kind, path, mtime, size, extra) in this process; concurrent
    callers of the same key wait for the first instead of spawning the tool twice."""
    key = (kind, path, _stat_key(path), *extra)
    with _cache_lock:
        if key in _cache:
            return _cache[key]
        lock = _key_locks.setdefault(key, threading.Lock())
    with lock:
        with _cache_lock:
            if key in _cache:
                return _cache[key]
        value = compute()
        with _cache_lock:
            _cache[key] = value
        return value


def clear_cache() -> None:
    """Forget cached tool runs (tests change fake tools in place)."""
    with _cache_lock:
        _cache.clear()
        _key_locks.clear()


def which(name: str, env: Mapping[str, str]) -> str | None:
    """``shutil.which`` on the engine's PATH (an absolute name is checked as is)."""
    if os.sep in name:
        return name if os.path.isfile(name) and os.access(name, os.X_OK) else None
    return shutil.which(name, path=env.get("PATH", os.defpath))


def resolve_cuda_home(env: Mapping[str, str]) -> tuple[str | None, str | None]:
    """(cuda_home, source) in FlashInfer's order; (None, None) when it would raise."""
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if env.get(var):
            return env[var], var
    nvcc = which("nvcc", env)
    if nvcc:
        return os.path.dirname(os.path.dirname(nvcc)), "nvcc-on-path"
    if os.path.exists(DEFAULT_CUDA_HOME):
        return DEFAULT_CUDA_HOME, "default"
    return None, None


def nvcc_binary(cuda_home: str | None, env: Mapping[str, str]) -> str | None:
    """The nvcc FlashInfer's build.ninja will call: ``$FLASHINFER_NVCC`` or ``$cuda_home/bin/nvcc``."""
    override = env.get("FLASHINFER_NVCC")
    if override:
        # ninja runs the command through a shell, so a bare name is looked up on PATH
        first = shlex.split(override)[0] if override.strip() else override
        return which(first, env) or first
    if cuda_home is None:
        return None
    return os.path.join(cuda_home, "bin", "nvcc")


def _nvcc_version_now(path: str, env: Mapping[str, str]) -> tuple[str | None, str | None]:
    proc = run([path, "--version"], timeout=TOOL_TIMEOUT, env=env)
    if not proc.ok:
        return None, f"{path} --version: {proc.why()}"
    found = _RELEASE.findall(proc.out)  # FlashInfer's own parse: the first "release X.Y,"
    if not found:
        return None, f"{path} --version printed no 'release X.Y,': {proc.out.strip()[:120]!r}"
    return found[0], None


def nvcc_version(path: str, env: Mapping[str, str]) -> tuple[str | None, str | None]:
    """(``"13.0"``, None) or (None, why): ``nvcc --version`` parsed as FlashInfer parses it."""
    return cached("nvcc-version", path, lambda: _nvcc_version_now(path, env), env.get("PATH"))


def _nvcc_archs_now(path: str, env: Mapping[str, str]) -> tuple[list[str] | None, str | None]:
    proc = run([path, "--list-gpu-arch"], timeout=TOOL_TIMEOUT, env=env)
    if not proc.ok:
        return None, f"{path} --list-gpu-arch: {proc.why()}"
    # nvcc prints virtual archs (compute_103); the real-arch names are what facts record
    archs = sorted(
        {tok.replace("compute_", "sm_", 1) for tok in proc.out.split() if tok.startswith(("compute_", "sm_"))},
        key=_arch_key,
    )
    return (archs or None), (None if archs else f"{path} --list-gpu-arch printed no archs")


def _arch_key(name: str) -> tuple[int, str]:
    digits = re.sub(r"\D", "", name)
    return int(digits or 0), name


def nvcc_archs(path: str, env: Mapping[str, str]) -> tuple[list[str] | None, str | None]:
    """(``["sm_75", ..., "sm_121"]``, None) or (None, why), from ``nvcc --list-gpu-arch``."""
    return cached("nvcc-archs", path, lambda: _nvcc_archs_now(path, env), env.get("PATH"))


def _compiler_version_now(path: str, env: Mapping[str, str]) -> str | None:
    # gcc prints the full version with -dumpfullversion; clang only knows -dumpversion
    proc = run([path, "-dumpfullversion", "-dumpversion"], timeout=TOOL_TIMEOUT, env=env)
    text = proc.out.strip()
    if proc.ok and re.fullmatch(r"\d+(\.\d+)*", text):
        return text
    proc = run([path, "--version"], timeout=TOOL_TIMEOUT, env=env)
    if proc.ok and proc.out:
        m = _VERSION.findall(proc.out.splitlines()[0])
        return m[-1] if m else None
    return None


def compiler(var: str, default: str, env: Mapping[str, str]) -> tuple[dict[str, str | None] | None, str | None]:
    """({path, version}, None) for ``$var`` or ``default`` on PATH, or (None, why)."""
    spec = env.get(var) or default
    words = shlex.split(spec) if spec.strip() else [default]
    # "ccache g++" style values: the compiler is the last word that resolves
    path = next((p for p in (which(w, env) for w in reversed(words)) if p), None)
    if path is None:
        origin = f"{var}={spec}" if env.get(var) else f"{default}"
        return None, f"{origin}: not found on the engine's PATH"
    version = cached("cc-version", path, lambda: _compiler_version_now(path, env))
    return {"path": path, "version": version}, None


def _ninja_version_now(path: str, env: Mapping[str, str]) -> str | None:
    proc = run([path, "--version"], timeout=TOOL_TIMEOUT, env=env)
    return (proc.out.strip() or None) if proc.ok else None


def ninja(env: Mapping[str, str]) -> dict[str, str | None] | None:
    """{path, version} of the ninja FlashInfer's ``run_ninja`` will exec (PATH only)."""
    path = which("ninja", env)
    if path is None:
        return None
    return {"path": path, "version": cached("ninja-version", path, lambda: _ninja_version_now(path, env))}


def _toolkit_version_file(root: str) -> str | None:
    """major.minor from a toolkit's version.json / version.txt, without running nvcc."""
    try:
        import json

        with open(os.path.join(root, "version.json"), encoding="utf-8") as fh:
            ver = json.load(fh).get("cuda", {}).get("version")
        if isinstance(ver, str):
            return ".".join(ver.split(".")[:2])
    except (OSError, ValueError, AttributeError):
        pass
    try:
        with open(os.path.join(root, "version.txt"), encoding="utf-8") as fh:
            m = _VERSION.search(fh.read())
        return ".".join(m.group(1).split(".")[:2]) if m else None
    except OSError:
        return None


def alternatives(env: Mapping[str, str], limit: int = 12) -> list[dict[str, str | None]]:
    """Every CUDA toolkit on this host (its nvcc path and version), newest first; deduplicated
    by the real path of its nvcc, so /usr/local/cuda and /usr/local/cuda-13.0 count once
    (the versioned name is kept: it survives an update-alternatives switch)."""
    candidates = sorted(p for pattern in TOOLKIT_GLOBS for p in glob.glob(pattern))
    on_path = which("nvcc", env)
    if on_path:
        candidates.append(on_path)
    seen: dict[str, str] = {}
    for path in candidates:
        # a usable CUDA_HOME has the runtime headers; a wrapper script in /usr/local/bin does not
        if not os.access(path, os.X_OK) or not os.path.exists(
            os.path.join(toolkit_root(path), "include", "cuda_runtime.h")
        ):
            continue
        real = os.path.realpath(path)
        prev = seen.get(real)
        # prefer a name with a version in it, then the shorter one
        if prev is None or (re.search(r"cuda-\d", path) and not re.search(r"cuda-\d", prev)):
            seen[real] = path
    from flightcheck._collect import run_parallel

    paths = list(seen.values())[:limit]
    versions = {p: _toolkit_version_file(toolkit_root(p)) for p in paths}

    def ask(p: str) -> str | None:
        return nvcc_version(p, env)[0]

    # no version file (pip-assembled toolkits): ask their nvcc, all at once
    asked, _failed = run_parallel({p: (partial(ask, p), TOOL_TIMEOUT + 1) for p, v in versions.items() if v is None})
    out: list[dict[str, str | None]] = [{"path": p, "version": versions[p] or asked.get(p)} for p in paths]
    out.sort(key=lambda e: _version_key(e["version"]), reverse=True)
    return out


def _version_key(v: str | None) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in (v or "0").split("."))
    except ValueError:
        return (0,)


def toolkit_root(nvcc_path: str) -> str:
    """/usr/local/cuda-13.0/bin/nvcc -> /usr/local/cuda-13.0."""
    return os.path.dirname(os.path.dirname(nvcc_path))
