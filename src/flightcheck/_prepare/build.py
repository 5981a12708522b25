"""Compile FlashInfer modules ahead of time for the target arch, one child of the engine's
interpreter per module (so a crash or a 30-minute MoE build is one module's, and progress
shows per module), and copy each ``<m>.so`` into the bundle's AOT layout.

The child sets what ``python -m flashinfer.aot`` sets (FlashInfer 0.7.2.post1 ``aot.py``):
``FLASHINFER_CUDA_ARCH_LIST`` to the target (no GPU needed) and
``FLASHINFER_WORKSPACE_BASE`` to a scratch directory, then calls the module's generator and
``JitSpec.build()``. Two toolkit gaps of minimal CUDA images are filled the way that was
proven to work: curand's headers alone (never all of pip's ``nvidia/cu13/include``: its
aggregated headers break cudafe, ``macro "__cudaLaunch" passed 2 arguments``) through
``FLASHINFER_EXTRA_CUDAFLAGS``, and a libcuda stub directory through
``FLASHINFER_EXTRA_LDFLAGS`` (``cpp_ext.py``).
"""

from __future__ import annotations

import glob
import json
import os
import shlex
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flightcheck._collect.proc import run
from flightcheck._knowledge import flashinfer_modules as fim

#: a module build may take half an hour (fused_moe_trtllm_sm100, flashinfer #4884)
MODULE_TIMEOUT = 3 * 3600.0
_MARK = "@@flightcheck-prepare@@"

# Runs inside the engine's interpreter (stdlib + flashinfer): build one module, report its .so
CHILD = """
import importlib, json, sys, time
mod_name, fn_name = sys.argv[1].split(":")
t0 = time.time()
spec = getattr(importlib.import_module(mod_name), fn_name)()
spec.build(verbose=False)
out = {"name": spec.name, "so": str(spec.jit_library_path), "seconds": time.time() - t0}
sys.stdout.write("\\nMARK" + json.dumps(out) + "\\n")
""".replace("MARK", _MARK)


@dataclass
class Built:
    """One module's build: the .so in the bundle, or why not."""

    name: str
    why: str
    so: str | None = None
    seconds: float | None = None
    error: str | None = None


def curand_include(cuda_home: str | None, site_dirs: list[str], scratch: str) -> str | None:
    """A directory with curand's headers alone, when the toolkit lacks them (minimal CUDA
    images do) and the engine's venv has pip's ``nvidia-curand``; None when not needed or
    not found."""
    for root in filter(None, [cuda_home]):
        if os.path.exists(os.path.join(root, "include", "curand.h")):
            return None
    for site in site_dirs:
        found = sorted(glob.glob(os.path.join(site, "nvidia", "cu*", "include", "curand*.h")))
        found = found or sorted(glob.glob(os.path.join(site, "nvidia", "curand", "include", "curand*.h")))
        if found:
            inc = os.path.join(scratch, "curand-include")
            os.makedirs(inc, exist_ok=True)
            for h in found:
                shutil.copy2(h, inc)
            return inc
    return None


def child_env(
    base: dict[str, str], arch: str, cuda_home: str | None, scratch: str, include: str | None, stub_dir: str | None
) -> dict[str, str]:
    """The build child's environment."""
    env = dict(base)
    env[fim.ARCH_LIST_VAR] = arch
    env[fim.WORKSPACE_VAR] = scratch
    env.pop(fim.DISABLE_JIT_VAR, None)
    if cuda_home:
        env["CUDA_HOME"] = cuda_home
        env["PATH"] = os.path.join(cuda_home, "bin") + os.pathsep + env.get("PATH", "")
    if include:
        env["FLASHINFER_EXTRA_CUDAFLAGS"] = (
            env.get("FLASHINFER_EXTRA_CUDAFLAGS", "") + " -isystem " + shlex.quote(include)
        ).strip()
    if stub_dir:
        env["FLASHINFER_EXTRA_LDFLAGS"] = (
            env.get("FLASHINFER_EXTRA_LDFLAGS", "") + " -L" + shlex.quote(stub_dir)
        ).strip()
    return env


def build_modules(
    python: str,
    modules: list[tuple[fim.Module, str]],
    bundle: str,
    env: dict[str, str],
    say: Callable[[str], None],
    timeout: float = MODULE_TIMEOUT,
) -> list[Built]:
    """Build each module in its own child; copy the results to ``bundle/aot/<m>/<m>.so``."""
    out: list[Built] = []
    for i, (module, why) in enumerate(modules, 1):
        say(f"[{i}/{len(modules)}] building {module.name} for {env.get(fim.ARCH_LIST_VAR)} ...")
        t0 = time.monotonic()
        proc = run([python, "-c", CHILD, module.generator], timeout=timeout, env=env, cwd="/")
        answer = _answer(proc.out) if proc.ok else None
        if answer is None or not os.path.isfile(str(answer.get("so"))):
            tail = _last_error(proc.err or proc.out)
            out.append(Built(module.name, why, error=f"{proc.why() if not proc.ok else 'no module built'}: {tail}"))
            say(f"[{i}/{len(modules)}] {module.name}: FAILED after {time.monotonic() - t0:.0f}s: {tail}")
            continue
        dest_dir = os.path.join(bundle, "aot", module.name)
        os.makedirs(dest_dir, exist_ok=True)
        dest = os.path.join(dest_dir, f"{module.name}.so")
        shutil.copy2(str(answer["so"]), dest)
        seconds = float(answer.get("seconds") or time.monotonic() - t0)
        out.append(Built(module.name, why, so=dest, seconds=seconds))
        say(f"[{i}/{len(modules)}] {module.name}: built in {seconds:.0f}s")
    return out


def _answer(text: str) -> dict[str, Any] | None:
    for line in reversed(text.splitlines()):
        if line.startswith(_MARK):
            try:
                data = json.loads(line[len(_MARK) :])
            except ValueError:
                return None
            return data if isinstance(data, dict) else None
    return None


def _last_error(text: str) -> str:
    """The most telling line of a failed build: a compiler's fatal error, else the last line."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in lines:
        if "fatal error" in ln or "cannot find -l" in ln or "Unsupported gpu architecture" in ln:
            return ln[:300]
    return lines[-1][:300] if lines else "no output"
