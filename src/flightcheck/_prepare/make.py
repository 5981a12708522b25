"""Carry out a :class:`~flightcheck._prepare.plan.Plan`: fill the wheelhouse, compile the
modules, write ``manifest.json``. What could not be done is recorded with the reason and,
where one exists, the setting that keeps the launch off it."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from typing import Any

from flightcheck._knowledge import flashinfer_modules as fim
from flightcheck._prepare import build as _build
from flightcheck._prepare import bundle as _bundle
from flightcheck._prepare import wheels as _wheels
from flightcheck._prepare.plan import Plan
from flightcheck._vocabulary.errors import UsageError
from flightcheck._vocabulary.version import __version__


def make_bundle(
    plan: Plan,
    out: str,
    env: dict[str, str],
    say: Callable[[str], None],
    *,
    libcuda_stub: str | None = None,
    fetch_wheels: bool = True,
    module_timeout: float = _build.MODULE_TIMEOUT,
) -> dict[str, Any]:
    """Build the bundle at ``out``; its manifest."""
    problems = list(plan.toolchain.problems)
    if libcuda_stub:
        stub_dir = libcuda_stub if os.path.isdir(libcuda_stub) else os.path.dirname(libcuda_stub)
        if not os.path.exists(os.path.join(stub_dir, "libcuda.so")):
            raise UsageError(f"--libcuda-stub {libcuda_stub}: no libcuda.so there")
        problems = [p for p in problems if "libcuda stub" not in p]
    else:
        stub_dir = None
    if plan.modules and problems:
        raise UsageError("this build box cannot compile for " + plan.arch + ": " + "; ".join(problems))
    os.makedirs(out, exist_ok=True)
    fetched: list[_wheels.Fetched] = []
    if plan.wheels and fetch_wheels:
        say(f"wheels: fetching {len(plan.wheels)} from {plan.index_url}")
        fetched = _wheels.fetch(plan.python, plan.wheels, plan.index_url, os.path.join(out, "wheels"), env)
        for f in fetched:
            say(f"  {f.requirement}: " + (f"-> wheels/{f.file}" if f.file else f"skipped ({f.skipped})"))
    built: list[_build.Built] = []
    if plan.modules:
        with tempfile.TemporaryDirectory(prefix="flightcheck-prepare-") as scratch:
            site = [os.path.dirname(plan.flashinfer_dir)] if plan.flashinfer_dir else []
            include = _build.curand_include(plan.toolchain.cuda_home, site, scratch)
            if include:
                say(f"curand headers: not in the toolkit, taken alone from the engine's nvidia-curand ({include})")
            child = _build.child_env(env, plan.arch, plan.toolchain.cuda_home, scratch, include, stub_dir)
            built = _build.build_modules(plan.python, plan.modules, out, child, say, timeout=module_timeout)
    entries = [_bundle.module_entry(b.name, b.so, b.why, b.seconds) for b in built if b.so]
    failed = [{"name": b.name, "why": b.why, "error": b.error} for b in built if not b.so]
    not_prepared: list[dict[str, str]] = [{"what": n.what, "why": n.why, "avoid": n.avoid} for n in plan.not_preparable]
    not_prepared += [{"what": f"FlashInfer module {f['name']}", "why": str(f["error"]), "avoid": ""} for f in failed]
    manifest: dict[str, Any] = {
        "flightcheck": __version__,
        "arch": plan.arch,
        "flashinfer": plan.flashinfer,
        "torch": plan.torch,
        "torch_cuda": plan.torch_cuda,
        "nvcc": plan.toolchain.nvcc_version,
        "modules": entries,
        "failed": failed,
        "complete": bool(plan.modules) and not failed,
        "wheels": [{"requirement": f.requirement, "file": f.file, "skipped": f.skipped} for f in fetched],
        "not_prepared": not_prepared,
        "notes": plan.notes + [f"module inventory read in FlashInfer {fim.FLASHINFER_READ}, vLLM {fim.VLLM_READ}"],
    }
    path = _bundle.write_manifest(out, manifest)
    say(f"bundle: {out} ({len(entries)} module(s), {sum(1 for f in fetched if f.file)} wheel(s)); {path}")
    return manifest
