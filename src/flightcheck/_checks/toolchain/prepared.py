"""FC131 — a ``flightcheck prepare`` bundle installed for FlashInfer does not fit what the
launch runs: built against another FlashInfer, CUDA major or GPU arch, a placed module gone,
or a module the launch reaches missing from it. Imported through ``toolchain``.
"""

from __future__ import annotations

from collections.abc import Iterator

from flightcheck._checks.framework import Context, Outcome, Skip, check, fail, ok, unknown
from flightcheck._checks.shared import jit as _jit
from flightcheck._knowledge import flashinfer_modules as fim
from flightcheck._vocabulary.results import ERROR, WARNING


@check("FC131", "prepared-bundle-mismatch", ERROR)
def prepared_bundle_mismatch(ctx: Context) -> Iterator[Outcome]:
    """The prepared FlashInfer bundle on this node does not match what is installed.

    ## What it checks
    When ``flightcheck prepare install`` has placed a bundle in FlashInfer's AOT directory
    (``<flashinfer>/data/aot``, where FlashInfer 0.7.2.post1 looks first, ``jit/env.py``
    ``get_aot_artifacts``): that it was built against the installed flashinfer-python, for
    torch's CUDA major and for the arch of every GPU used (read back from each module's
    fatbin when it was built); that every module it placed is still there; and that it
    carries every module the launch reaches (the inventory of
    ``_knowledge/flashinfer_modules.py``, vLLM 0.33.0's paths).

    ## Why the launch dies
    FlashInfer loads a ``data/aot`` module with no version or arch check. A module for
    another arch (``a`` code runs on its exact SM only: a B300 10.3a module on a B200) dies
    at its first kernel with CUDA error 209 (no kernel image); a CUDA 13 build under a CUDA
    12.9 torch dies with error 35; a module built against another FlashInfer calls into
    bindings that changed. All of it after the weights load. A module the bundle lacks is
    compiled, which a driver-only node cannot do (or, with ``FLASHINFER_DISABLE_JIT=1``,
    raises ``MissingJITCacheError``).

    ## How to fix
    Rebuild the bundle on the build box for this node (``flightcheck prepare --for
    node.json --python ENGINE_PY -o bundle -- <engine command>``) and ``flightcheck prepare
    install bundle --python ENGINE_PY``; or remove the stale modules (reinstall
    flashinfer-python) and let FlashInfer compile with a toolkit.
    """
    tc = ctx.facts.toolchain
    pb = tc.prepared_bundle if tc is not None else None
    if tc is None:
        raise Skip("toolchain facts unavailable")
    if pb is None:
        raise Skip("no prepared bundle is installed")
    if pb.problem:
        yield unknown(f"the prepared bundle's record {pb.record} cannot be read: {pb.problem}")
        return
    packages = ctx.python.packages or {}
    record = {
        "flashinfer": pb.flashinfer,
        "torch_cuda": pb.torch_cuda,
        "modules": [{"name": m.name, "archs": m.archs} for m in pb.modules or []],
    }
    ccs = [str(g.compute_capability) for g in ctx.gpus_used if g.compute_capability]
    problems = fim.bundle_mismatches(
        record, flashinfer=packages.get("flashinfer-python"), torch_cuda=ctx.python.torch_cuda, gpu_ccs=ccs
    )
    gone = [m.name for m in pb.modules or [] if m.present is False]
    if gone:
        problems.append(f"module(s) {', '.join(str(g) for g in gone)} are no longer where the bundle placed them")
    fix = (
        "rebuild the bundle for this node: flightcheck prepare --for node.json "
        f"--python {ctx.intent.python or 'ENGINE_PY'} -o bundle -- <engine command>; "
        "then flightcheck prepare install bundle --python ENGINE_PY"
    )
    evidence = {"record": pb.record, "arch": pb.arch, "flashinfer": pb.flashinfer, "torch_cuda": pb.torch_cuda}
    if problems:
        yield fail(
            f"the prepared bundle ({pb.record}) does not fit this launch: " + "; ".join(problems),
            fix=fix,
            evidence=evidence,
        )
        return
    if not ccs:
        yield unknown(f"the prepared bundle for {pb.arch} is installed; the GPUs' archs are unknown")
        return
    needed = _jit.prepared_modules_needed(ctx) or {}
    have = {m.name for m in pb.modules or [] if m.name}
    lacking = sorted({n for names in needed.values() for n in names} - have)
    if lacking:
        no_jit = (ctx.env.get(fim.DISABLE_JIT_VAR) or "").strip() not in ("", "0") or ctx.toolchain.nvcc is None
        yield fail(
            f"the prepared bundle for {pb.arch} lacks module(s) the launch reaches: {', '.join(lacking)}"
            + ("; nothing can compile them here" if no_jit else "; they will be JIT-compiled"),
            fix=fix.replace("node.json", "node.json --modules " + ",".join(sorted(have | set(lacking)))),
            severity=WARNING,
            evidence={**evidence, "lacking": lacking},
        )
        return
    yield ok(
        f"the prepared bundle for {pb.arch} fits FlashInfer {pb.flashinfer}, CUDA {pb.torch_cuda}, "
        f"SM {', '.join(sorted(set(ccs)))}"
    )
