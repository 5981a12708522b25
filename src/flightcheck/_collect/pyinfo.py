"""What the engine's interpreter sees: package versions, Python.h, where packages live.

One child process of that interpreter answers everything (importlib.metadata, sysconfig,
``importlib.util.find_spec`` for package directories, which imports nothing), so a passive
run pays for one interpreter start-up, shared by the toolchain and python collectors. When
the engine's interpreter is flightcheck's own, the same code runs in-process instead.
Nothing here imports torch, vllm or flashinfer.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from typing import Any

from flightcheck._collect.cuda import cached
from flightcheck._collect.proc import run

#: Distributions whose versions the facts record (facts.md lists the minimum).
PACKAGES = (
    "torch",
    "vllm",
    "sglang",
    "flashinfer-python",
    "flashinfer-cubin",
    "flashinfer-jit-cache",
    "triton",
    "nvidia-ml-py",
    "cuda-bindings",
    "nvidia-nccl-cu12",
    "nvidia-nccl-cu13",
    "ninja",
    "sgl-kernel",
    "sglang-kernel",
    "apache-tvm-ffi",
    "nvidia-cutlass-dsl",
    # what `vllm collect-env` shows that decides a verdict: the engine pins a range of these
    "transformers",
    "tokenizers",
    "nvidia-cuda-runtime-cu12",
    "nvidia-cuda-runtime",
    "nvidia-cudnn-cu12",
    "nvidia-cudnn-cu13",
    # runtime compilers the JIT checks gate on (FC114, FC126)
    "tilelang",
    "tokenspeed-mla",
    "tokenspeed-triton",
    # tilelang's CUDA home (FC129) and humming's NVRTC (FC130) look at these
    "nvidia-cuda-nvcc",
    "humming-kernels",
    # DeepGEMM built from its repository: vLLM before 0.20.0 runs only this one (FC119)
    "deep-gemm",
)
#: Distributions whose installed files of these names the collectors locate (from the
#: dist's RECORD, as ``importlib.metadata.files`` lists them): tilelang's third guess at
#: the CUDA home is the ``nvcc`` of nvidia-cuda-nvcc (tilelang/env.py ``_find_cuda_home``).
DIST_FILES = {"nvidia-cuda-nvcc": ["nvcc"]}
#: Import names whose directories the collectors read files from (as text, never imported).
PACKAGE_DIRS = (
    "torch",
    "vllm",
    "sglang",
    "flashinfer",
    "flashinfer_jit_cache",
    "triton",
    "nvidia_cutlass_dsl",
    "sgl_kernel",
)
ENGINES = ("vllm", "sglang")
#: Distributions worth a slow importlib.metadata lookup when no dist-info names them
#: (their import name, to tell whether they are there at all).
MODULES = {
    "vllm": "vllm",
    "sglang": "sglang",
    "torch": "torch",
    "flashinfer-python": "flashinfer",
    "deep-gemm": "deep_gemm",
}
TIMEOUT = 20.0
_MARK = "@@flightcheck-pyinfo@@"

# Runs inside the engine's interpreter: Python >= 3.8 syntax, stdlib only, imports nothing
# of the packages it asks about. Versions come from the *.dist-info directory names on
# sys.path (first entry wins, as for importlib.metadata) without importing
# importlib.metadata and its email parser, which alone cost ~40 ms of start-up; a name
# whose module is importable but has no such directory (egg-links, odd installs) falls back
# to importlib.metadata.
SCRIPT = r"""
import json, os, re, sys, sysconfig
import importlib.util

def _norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()

def _scan():
    found = {}
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for n in names:
            if n.endswith(".dist-info") or n.endswith(".egg-info"):
                stem = n.rsplit(".", 1)[0]
                dist, sep, ver = stem.partition("-")
                if sep and ver and _norm(dist) not in found:
                    found[_norm(dist)] = (ver.split("-")[0], os.path.join(entry or ".", n))
    return found

def _metadata_version(name):
    try:
        import importlib.metadata as md
    except ImportError:
        return None
    for n in (name, name.replace("-", "_")):
        try:
            return md.version(n)
        except Exception:
            pass
    return None

def _requires(info):
    if info is None:
        return None
    meta = os.path.join(info[1], "METADATA")
    if not os.path.exists(meta):
        meta = os.path.join(info[1], "PKG-INFO")
    try:
        with open(meta, encoding="utf-8", errors="replace") as fh:
            head = fh.read(1 << 20).split("\n\n", 1)[0]
    except OSError:
        return None
    return [ln.split(":", 1)[1].strip() for ln in head.splitlines() if ln.startswith("Requires-Dist:")]

def _pkgdir(mod):
    try:
        spec = importlib.util.find_spec(mod)
    except Exception:
        return None
    if spec is None:
        return None
    locs = list(spec.submodule_search_locations or [])
    if locs:
        return locs[0]
    return os.path.dirname(spec.origin) if spec.origin else None

def _dist_files(info, wanted):
    if info is None:
        return []
    base = os.path.dirname(info[1])
    try:
        with open(os.path.join(info[1], "RECORD"), encoding="utf-8", errors="replace") as fh:
            rows = [ln.split(",", 1)[0] for ln in fh.read(1 << 22).splitlines()]
    except OSError:
        return []
    names = [r for r in rows if r and r.replace("\\", "/").rsplit("/", 1)[-1] in wanted]
    return [os.path.normpath(os.path.join(base, r)) for r in names]

def _nvidia_roots():
    out = []
    for entry in sys.path:
        root = os.path.join(entry or ".", "nvidia")
        if os.path.isdir(root) and root not in out:
            out.append(os.path.abspath(root))
    return out

def gather(names, dirs, engines, modules, files=None):
    inc = sysconfig.get_path("include")
    found = _scan()
    packages = {}
    for n in names:
        info = found.get(_norm(n))
        version = info[0] if info else None
        if version is None and n in modules and _pkgdir(modules[n]):
            version = _metadata_version(n)
        packages[n] = version
    return {
        "executable": sys.executable,
        "version": sys.version.split()[0],
        "packages": packages,
        "include": inc,
        "python_h": bool(inc) and os.path.exists(os.path.join(inc, "Python.h")),
        "requires": dict((e, _requires(found.get(_norm(e)))) for e in engines),
        "dirs": dict((m, _pkgdir(m)) for m in dirs),
        "dist_files": dict((d, _dist_files(found.get(_norm(d)), w)) for d, w in (files or {}).items()),
        "nvidia_roots": _nvidia_roots(),
    }

if __name__ == "__main__":
    args = json.loads(sys.argv[1])
    sys.stdout.write("\n" + MARK + json.dumps(gather(*args)) + "\n")
""".replace("MARK", repr(_MARK))


def _same_interpreter(python: str, env: Mapping[str, str]) -> bool:
    return python == sys.executable and env.get("PYTHONPATH") == os.environ.get("PYTHONPATH")


def _gather_now(python: str, env: Mapping[str, str]) -> dict[str, Any]:
    args = [list(PACKAGES), list(PACKAGE_DIRS), list(ENGINES), MODULES, DIST_FILES]
    if _same_interpreter(python, env):
        ns: dict[str, Any] = {"__name__": "flightcheck_pyinfo"}
        exec(compile(SCRIPT, "<flightcheck-pyinfo>", "exec"), ns)  # noqa: S102  # our own constant code
        info = ns["gather"](*args)
        info["executable"] = python
        return info
    # cwd "/" keeps a checkout in the current directory off the child's sys.path
    proc = run([python, "-c", SCRIPT, json.dumps(args)], timeout=TIMEOUT, env=env, cwd="/")
    if not proc.ok:
        return {"error": f"the engine's interpreter {python} could not run: {proc.why()}"}
    for line in reversed(proc.out.splitlines()):
        if line.startswith(_MARK):
            try:
                info = json.loads(line[len(_MARK) :])
            except ValueError:
                break
            info["executable"] = python  # the path the engine is launched with, not a resolved one
            return info
    return {"error": f"the engine's interpreter {python} printed no answer: {proc.out.strip()[-200:]!r}"}


def engine_info(python: str, env: Mapping[str, str]) -> dict[str, Any]:
    """The engine interpreter's answers (see SCRIPT), or ``{"error": why}``; once per process."""
    return cached(
        "pyinfo",
        python,
        lambda: _gather_now(python, env),
        env.get("PATH"),
        env.get("PYTHONPATH"),
        env.get("VIRTUAL_ENV"),
    )
