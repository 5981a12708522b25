"""FC712 — engine: a path the command takes needs a FlashInfer API the installed FlashInfer lacks."""

from __future__ import annotations

from collections.abc import Iterator

from flightcheck._checks.framework import Context, Outcome, Skip, check, fail, ok, unknown
from flightcheck._knowledge import atlas, engines
from flightcheck._knowledge.vllm import flashinfer_paths as paths
from flightcheck._vocabulary.results import ERROR, WARNING


def missing_apis(engine_release: str, helper: str, flashinfer_release: str) -> list[str] | None:
    """``module.name`` the helper of ``engine_release`` requires and ``flashinfer_release``
    lacks; None when either release is not in the atlas (then nothing is judged)."""
    probes = atlas.flashinfer_probes(engine_release)
    modules = atlas.flashinfer_modules(flashinfer_release)
    if helper not in probes or not modules:
        return None
    out: list[str] = []
    for module, name in probes[helper]:
        names = modules.get(module)
        if names is None:
            out.append(module)
        elif name and name not in names and "__getattr__" not in names:
            out.append(f"{module}.{name}")
    return list(dict.fromkeys(out))  # a module several names need: once


@check("FC712", "flashinfer-api-missing", ERROR)
def flashinfer_api_missing(ctx: Context) -> Iterator[Outcome]:
    """The command takes a vLLM path that needs a FlashInfer API the installed FlashInfer
    release does not have.

    ## What it checks
    vLLM asks whether FlashInfer has an API with its ``has_flashinfer_*`` helpers
    (``vllm/utils/flashinfer.py``), each of which requires named modules and attributes.
    The release atlas holds, per vLLM release, what each helper requires, and per
    FlashInfer release (from 0.2.0), the names each public module defines, all read from
    the wheels. This fires when a command-line choice takes a path whose helper would be
    False with the installed FlashInfer: ``--all2all-backend flashinfer_nvlink_two_sided``
    (or ``flashinfer_all2allv``) with a data-parallel layout, whose manager asserts
    ``has_flashinfer_nvlink_two_sided()`` (vllm/distributed/device_communicators/all2all.py,
    read in vLLM 0.33.0), with a FlashInfer that removed ``flashinfer.comm.trtllm_alltoall``
    (0.7.4). Either release missing from the atlas: unknown; a vLLM newer than the newest
    release read: the newest one's helpers, as a warning.

    ## Why the launch dies
    vLLM starts, loads the checkpoint, and fails an assertion when it builds the EP group's
    all2all manager ("flashinfer all2all module not found").

    ## How to fix
    Install the FlashInfer release this vLLM declares (``pip install
    flashinfer-python==<the pinned version>``), or choose another all2all backend
    (``--all2all-backend allgather_reducescatter``, vLLM's default).
    """
    intent = ctx.intent
    engine_rules = engines.get(intent.engine)
    if not engine_rules.probes_flashinfer_apis:
        raise Skip(f"{engine_rules.display}: which FlashInfer APIs its paths probe is not read")
    choice = intent.all2all_backend  # --all2all-backend, read once with the launch
    helpers = paths.PATHS.get((paths.ALL2ALL_DEST, choice or ""))
    if not helpers:
        raise Skip("the command takes no path that needs a FlashInfer API flightcheck knows")
    if not (
        intent.data_parallel_size > 1 or (intent.enable_expert_parallel and intent.prefill_context_parallel_size > 1)
    ):
        yield ok(f"{paths.ALL2ALL_FLAG} {choice}: the layout builds no all2all manager (no DP, no EP with PCP)")
        return
    packages = ctx.python.packages or {}
    engine, fi = packages.get("vllm"), packages.get("flashinfer-python")
    if not engine or not fi:
        yield unknown(
            f"{paths.ALL2ALL_FLAG} {choice} needs FlashInfer's all2all API; vllm {engine or '?'} / "
            f"flashinfer-python {fi or '?'} not both known",
            evidence={"vllm": engine, "flashinfer-python": fi},
        )
        return
    release, relation = atlas.nearest_release("vllm", engine)
    fi_release, fi_relation = atlas.nearest_release("flashinfer", fi)
    if release is None or fi_release is None or fi_relation != atlas.EXACT:
        yield unknown(
            f"{paths.ALL2ALL_FLAG} {choice} needs FlashInfer's all2all API; vllm {engine} / flashinfer-python {fi} "
            "are not both releases the atlas read",
            evidence={"vllm": engine, "flashinfer-python": fi},
        )
        return
    probes = atlas.flashinfer_probes(release)
    helper = next((h for h in helpers if h in probes), None)
    if helper is None:
        raise Skip(f"vLLM {release} has none of {', '.join(helpers)}")
    missing = missing_apis(release, helper, fi_release) or []
    evidence = {"vllm": engine, "rules_release": release, "flashinfer-python": fi, "helper": helper, "missing": missing}
    if not missing:
        yield ok(f"flashinfer-python {fi} has what vLLM {release}'s {helper}() requires", evidence=evidence)
        return
    extrapolated = relation in (atlas.NEWER, atlas.BETWEEN)  # another release's helpers: a warning
    said = f" (rules of vLLM {release} applied to {engine})" if extrapolated else ""
    # the wheel's own pin (Requires-Dist), when the release read is the one installed
    pin = atlas.pinned("vllm", release, "flashinfer-python") if not extrapolated else None
    install = (
        f"pip install flashinfer-python{pin} (the release vLLM {engine} declares)"
        if pin and pin.startswith("==")
        else f"pip install the flashinfer-python release vLLM {engine} declares (it lacks nothing of {helper})"
    )
    yield fail(
        f"{paths.ALL2ALL_FLAG} {choice}: vLLM {engine}'s {helper}() is False with flashinfer-python {fi}, "
        f"which lacks {', '.join(missing)}: the all2all manager's assertion fails at startup{said}",
        fix=f"{install}, or {paths.ALL2ALL_FLAG} allgather_reducescatter",
        evidence=evidence,
        severity=WARNING if extrapolated else None,
    )
