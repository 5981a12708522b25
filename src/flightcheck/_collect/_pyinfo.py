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

from ._cuda import cached
from ._proc import run

#: Distributions whose versions the facts record (facts.md lists the minimum).
PACKAGES = (
    "torch", "vllm", "sglang", "flashinfer-python", "flashinfer-cubin", "flashinfer-jit-cache",
    "triton", "nvidia-ml-py", "cuda-bindings", "nvidia-nccl-cu12", "nvidia-nccl-cu13", "ninja",
    "sgl-kernel", "sglang-kernel", "apache-tvm-ffi", "nvidia-cutlass-dsl",
)
#: Import names whose directories the collectors read files from (as text, never imported).
PACKAGE_DIRS = ("torch", "vllm", "sglang", "flashinfer", "flashinfer_jit_cache")
ENGINES = ("vllm", "sglang")
TIMEOUT = 20.0
_MARK = "@@flightcheck-pyinfo@@"

# Runs inside the engine's interpreter: Python >= 3.8 syntax, stdlib only, imports nothing
# of the packages it asks about.
SCRIPT = r'''
import json, os, platform, sys, sysconfig
import importlib.util
try:
    import importlib.metadata as _md
except ImportError:  # Python < 3.8
    _md = None

def _version(name):
    if _md is None:
        return None
    for n in (name, name.replace("-", "_")):
        try:
            return _md.version(n)
        except Exception:
            pass
    return None

def _requires(name):
    if _md is None:
        return None
    try:
        return _md.requires(name) or []
    except Exception:
        return None

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

def gather(names, dirs, engines):
    inc = sysconfig.get_path("include")
    return {
        "executable": sys.executable,
        "version": platform.python_version(),
        "packages": dict((n, _version(n)) for n in names),
        "include": inc,
        "python_h": bool(inc) and os.path.exists(os.path.join(inc, "Python.h")),
        "requires": dict((e, _requires(e)) for e in engines),
        "dirs": dict((m, _pkgdir(m)) for m in dirs),
    }

if __name__ == "__main__":
    args = json.loads(sys.argv[1])
    sys.stdout.write("\n" + MARK + json.dumps(gather(*args)) + "\n")
'''.replace("MARK", repr(_MARK))


def _same_interpreter(python: str, env: Mapping[str, str]) -> bool:
    return python == sys.executable and env.get("PYTHONPATH") == os.environ.get("PYTHONPATH")


def _gather_now(python: str, env: Mapping[str, str]) -> dict[str, Any]:
    args = [list(PACKAGES), list(PACKAGE_DIRS), list(ENGINES)]
    if _same_interpreter(python, env):
        ns: dict[str, Any] = {"__name__": "flightcheck_pyinfo"}
        exec(compile(SCRIPT, "<flightcheck-pyinfo>", "exec"), ns)  # our own constant code
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
                info = json.loads(line[len(_MARK):])
            except ValueError:
                break
            info["executable"] = python  # the path the engine is launched with, not a resolved one
            return info
    return {"error": f"the engine's interpreter {python} printed no answer: {proc.out.strip()[-200:]!r}"}


def engine_info(python: str, env: Mapping[str, str]) -> dict[str, Any]:
    """The engine interpreter's answers (see SCRIPT), or ``{"error": why}``; once per process."""
    return cached("pyinfo", python, lambda: _gather_now(python, env), env.get("PATH"), env.get("PYTHONPATH"), env.get("VIRTUAL_ENV"))
