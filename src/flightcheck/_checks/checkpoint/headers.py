"""FC5xx — the checkpoint on disk: found, complete, uncorrupted, consistent, readable.

FC501–FC505 here, FC506–FC512 in :mod:`.files`; :mod:`.kinds` maps the reader's problem kinds
to these codes. Every check reads ``ctx.checkpoint`` (resolved, scanned and cross-checked once, see
``flightcheck._checkpoint``) and reports its own findings, one per file, with the file as
the subject (``shard:model-00007-of-00096.safetensors``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import msgspec

from flightcheck._checks.checkpoint.kinds import KIND_OF
from flightcheck._checks.framework import Context, Outcome, Skip, check, fail, ok, summary
from flightcheck._knowledge import engines, sglang, vllm
from flightcheck._knowledge.derived import package
from flightcheck._knowledge.units import version
from flightcheck._vocabulary.results import ERROR, Severity

LIMIT = 5  # findings listed one by one per check; the rest are counted on one line


def _checkpoint(ctx: Context, *, found: bool = True) -> Any:
    ck = launch_checkpoint(ctx)
    if ck is None:
        raise Skip("no --model given")
    if ck.crash:
        raise RuntimeError(f"reading the checkpoint failed: {ck.crash}")
    if found and not ck.found:
        raise Skip(ck.unread or "the model was not found (FC501)")
    return ck


def _recorded(ctx: Context) -> Any:
    """The checkpoint the facts' recorded ``checkpoint`` section stands for (None without
    one, or for a section from before findings were recorded); built once per evaluation."""
    if "fc5_recorded" not in ctx.cache:
        from flightcheck._checkpoint.section import recorded

        section = ctx.facts.checkpoint
        host = ctx.facts.host.hostname if ctx.facts.host is not None else None
        where = f" on {host}" if host else ""
        source = f"recorded by `flightcheck collect --model`{where}, not read here"
        ctx.cache["fc5_recorded"] = recorded(section, source)
    return ctx.cache["fc5_recorded"]


def _same_model(named: str, section: Any) -> bool:
    if named == section.model:
        return True
    return bool(section.path) and os.path.abspath(os.path.expanduser(named)) == section.path


def launch_checkpoint(ctx: Context) -> Any:
    """The checkpoint the FC5xx family judges: the one read here for ``--model``; where it
    is not here (no ``--model``, or the model the facts recorded is not on this machine),
    the one the facts' ``checkpoint`` section recorded (``collect --model`` on the node).
    A model read here always wins: a snapshot never stands in for a checkpoint on disk."""
    ck = ctx.checkpoint
    if ck is not None and (ck.found or ck.crash):
        return ck
    rec = _recorded(ctx)
    if rec is None:
        return ck
    if ck is None or _same_model(ctx.intent.model or "", ctx.facts.checkpoint):
        return rec
    return ck


def _report(
    ck: Any,
    code: str,
    passed: str,
    *,
    judges_weights: bool = True,
    adjust: Callable[[Any], Any] | None = None,
) -> Iterator[Outcome]:
    findings = ck.of(KIND_OF[code])
    if adjust is not None:  # what the finding means for this launch's engine
        findings = [adjust(f) for f in findings]
    if ck.unread and not findings and judges_weights:
        # what flightcheck cannot read it does not judge (docs/what-stops-a-launch.md)
        raise Skip(ck.unread)
    for f in findings[:LIMIT]:
        sev = Severity(f.severity) if f.severity else None
        yield fail(f.message, fix=f.fix, subject=f.subject, evidence=f.evidence, severity=sev)
    if len(findings) > LIMIT:
        # One line for the rest (a 96-shard download cut short would otherwise print 96).
        rest = findings[LIMIT:]
        explicit = {f.severity for f in rest}
        if "error" in explicit:
            sev = Severity.ERROR
        elif None in explicit:
            sev = None  # the check's own severity
        else:
            sev = Severity(rest[0].severity)
        yield fail(
            f"... and {len(rest)} more like these ({', '.join(f.subject.split(':', 1)[-1] for f in rest[:3])}, ...)",
            fix=rest[0].fix,
            subject=f"model:{ck.resolved.model}",
            severity=sev,
            evidence={"more": len(rest), "subjects": [f.subject for f in rest]},
        )
    if not findings:
        yield ok(f"{passed} ({ck.recorded})" if ck.recorded else passed)


@summary("FC5")
def _headline(ctx: Context) -> str:
    ck = launch_checkpoint(ctx)
    if ck is None:
        return "no --model given"
    if ck.crash:
        return f"could not be read ({ck.crash})"
    from flightcheck._checkpoint import summary_line

    if ck.recorded:
        return f"{ck.resolved.model}: {ck.recorded}: {_recorded_summary(ck)}"
    line = summary_line(ck)
    section = ctx.facts.checkpoint
    if section is not None and section.findings is not None and _same_model(ctx.intent.model or "", section):
        line += " (read here; the facts file's recorded checkpoint section is not used)"
    return line


def _recorded_summary(ck: Any) -> str:
    if ck.unread:
        return str(ck.unread)
    if not ck.found:
        return "model not found"
    from flightcheck._knowledge.units import si_bytes

    n = len(ck.shards)
    return f"{n} shard{'s' if n != 1 else ''}, {si_bytes(ck.total_bytes)}, {ck.tensor_count:,} tensors"


@check(
    "FC501",
    "model-not-found",
    ERROR,
    logs=(
        "is not a local folder and is not a valid model identifier",
        "Repository Not Found for url",
        "Invalid repository ID or local directory specified",
        "LocalEntryNotFoundError",
    ),
)
def model_not_found(ctx: Context) -> Iterator[Outcome]:
    """The model directory or Hugging Face repo id cannot be found on this node.

    ## What it checks
    ``--model`` is a directory, or a repo id (``org/name``, ``--revision``) present in the
    local Hugging Face cache: ``HF_HUB_CACHE``, ``HUGGINGFACE_HUB_CACHE``, ``$HF_HOME/hub``
    or ``~/.cache/huggingface/hub`` (and ``--download-dir``), with ``refs/<revision>``
    pointing at a snapshot that exists. flightcheck never downloads anything. A repo id
    that is not cached is an error only when the engine runs offline (``HF_HUB_OFFLINE`` or
    ``TRANSFORMERS_OFFLINE`` in its environment); otherwise a warning, since the engine
    downloads it. A single ``.gguf`` file is a warning: flightcheck reads only its header.

    ## Why the launch dies
    With ``HF_HUB_OFFLINE=1`` the engine fails at once; without it, every node starts
    downloading a checkpoint of hundreds of gigabytes at launch time, or fails on a gated
    or private repo after minutes (a warning: the launch may still work).

    ## How to fix
    Download it before the launch on every node (``hf download org/name``, with
    ``--revision`` if pinned), point ``HF_HUB_CACHE`` at the cache that holds it, or pass
    the directory itself as ``--model``.
    """
    ck = _checkpoint(ctx, found=False)
    yield from _report(
        ck,
        "FC501",
        f"{ck.resolved.model} -> {ck.path}" + (f" ({ck.resolved.note})" if ck.resolved.note else ""),
        judges_weights=False,
    )


@check(
    "FC502",
    "shard-missing",
    ERROR,
    logs=(r"No such file or directory: '[^']*\.safetensors'",),
)
def shard_missing(ctx: Context) -> Iterator[Outcome]:
    """A weight file the index names is not there.

    ## What it checks
    Every file ``model.safetensors.index.json`` maps a tensor to exists (a symlink into the
    cache's blobs must not dangle); with no index, that the directory has the weight files
    the engine's loader globs for its ``--load-format`` (``auto``: ``*.safetensors``, else
    ``*.bin``, else ``*.pt``). Weights flightcheck does not read (``*.bin``, ``*.pt``,
    ``dummy`` and the other load formats) make the shard checks skip and say so; of GGUF
    files the header is read (FC503/FC504 judge it, an error only for a model whose vLLM
    code loads that file: Flint, which then loads its one ``*.gguf`` and no safetensors
    beside it, so only the GGUF is judged).

    An index value spelled unlike the engine's glob of the directory (``./name``,
    ``sub/name``, an absolute path other than the glob's) is an error for vLLM, which
    compares the joined path with its glob's (0.33.0 weight_utils.py
    ``filter_duplicate_safetensors_files``; a warning for a release before the one read),
    and a warning for SGLang, which then leaves the file out of the load (0.5.23).

    ## Why the launch dies
    vLLM checks this only when it starts loading ("Weight files referenced in index but
    missing"), or, with a partial snapshot, fails on the first tensor of the absent shard
    after the others have loaded.

    ## How to fix
    Download the missing files (``hf download org/name FILE``) or copy them from the
    source; the message names each one.
    """
    ck = _checkpoint(ctx)
    yield from _report(
        ck, "FC502", f"all {len(ck.shards)} weight files are present", adjust=lambda f: _index_spelling(ctx, f)
    )


def _index_spelling(ctx: Context, f: Any) -> Any:
    """An index value spelled unlike the engine's glob (``./name``, ``sub/name``): what the
    engine does with it (the reader only says how it is spelled)."""
    name = f.evidence.get("index_spelling")
    if name is None:
        return f
    if engines.get(ctx.intent.engine).index_spelling == "drops":
        read = sglang.INDEX_SPELLING_DROPS_READ
        return msgspec.structs.replace(
            f,
            severity="warning",
            message=f"{f.message}: SGLang finds it (os.path.isfile) but leaves the file out of the ones it loads "
            f"(its glob spells it {os.path.basename(name)!r}), so its tensors are not loaded "
            f"(read in {'.'.join(map(str, read))})",
        )
    v = version(package(ctx.facts, "vllm"))
    raises = vllm.index_spelling_raises(tuple(v.release) if v is not None else None)
    said = (
        f"{f.message}: vLLM joins it to the model path as {f.evidence.get('joined')!r}, which its glob does not "
        "return, and raises FileNotFoundError: Weight files referenced in index but missing"
    )
    if raises:
        return msgspec.structs.replace(f, severity="error", message=said)
    return msgspec.structs.replace(
        f,
        severity="warning",
        message=f"{said} (from {'.'.join(map(str, vllm.INDEX_SPELLING_RAISES_READ))}; this release was not read)",
    )


@check(
    "FC503",
    "shard-size-mismatch",
    ERROR,
    logs=(
        "MetadataIncompleteBuffer",
        "incomplete metadata, file not fully covered",
    ),
)
def shard_size_mismatch(ctx: Context) -> Iterator[Outcome]:
    """A shard's size is not what its header says: truncated or padded.

    ## What it checks
    For every shard, file size == 8 + header length + end of the last tensor's data, the
    rule safetensors itself enforces.

    ## Why the launch dies
    ``safe_open`` refuses the file ("incomplete metadata, file not fully covered") when the
    loader reaches that shard, after the shards before it have been read — typically
    minutes into the load. A copy interrupted by ``cp``/``rsync``/``wget`` leaves exactly this.

    ## How to fix
    Delete the file and fetch it again (the message gives the exact command for a cached
    repo id); for a copied directory, copy that file again and compare its size with the
    source.
    """
    ck = _checkpoint(ctx)
    yield from _report(ck, "FC503", f"every shard's size matches its header ({len(ck.shards)} shards)")


@check(
    "FC504",
    "shard-header-invalid",
    ERROR,
    logs=(
        r"SafetensorError: Error while deserializing header: (?:HeaderTooLarge|InvalidHeader\w*|HeaderTooSmall)",
        "invalid JSON in header",
    ),
)
def shard_header_invalid(ctx: Context) -> Iterator[Outcome]:
    """A shard's safetensors header is invalid.

    ## What it checks
    Each header as safetensors validates it: length at most 100,000,000 bytes and inside
    the file, UTF-8 JSON, string-only ``__metadata__``, known dtypes (F4, F6 and F8
    variants included), data offsets that tile the data region from 0 with no overlap or
    hole, and each span equal to the element count times the dtype size. Of the GGUF file
    vLLM's Flint loads: what the ``gguf`` reader refuses, and the tensors its loader raises
    on (vllm/models/flint/gguf_nvfp4.py: a name ``_map_name`` does not map, a type other than
    NVFP4, BF16 or F32, an NVFP4 tensor without its ``.scale``).

    ## Why the launch dies
    The engine opens each shard only when it reaches it, so a corrupt shard 70 of 96 fails
    the launch after most of the checkpoint has been read ("Error while deserializing
    header", "invalid offset for tensor").

    ## How to fix
    Re-download or re-copy the named shard; if the header itself was written by a custom
    exporter, fix the exporter: no other reader will accept it either.
    """
    ck = _checkpoint(ctx)
    yield from _report(ck, "FC504", f"{len(ck.shards)} headers valid, {ck.tensor_count:,} tensors")


@check("FC505", "download-incomplete", ERROR)
def download_incomplete(ctx: Context) -> Iterator[Outcome]:
    """A download of this model was interrupted.

    ## What it checks
    ``*.incomplete`` blobs in the repo's cache folder (or ``.cache/huggingface/download``
    of a ``--local-dir`` download), and every snapshot file whose size differs from the
    size the cache recorded for that commit (``trees/<commit>.json``). For a repo id the
    engine may download (``HF_HUB_OFFLINE`` / ``TRANSFORMERS_OFFLINE`` unset in its
    environment), an interrupted blob, and a file the snapshot lacks (FC502), are warnings
    saying how many bytes it fetches at launch (vLLM 0.33.0 ``download_weights_from_hf``).

    ## Why the launch dies
    An interrupted ``hf download`` leaves a partial blob and no snapshot link: the engine
    either starts downloading it again at launch or fails on the missing file; a
    size-mismatched file fails when its turn to load comes.

    ## How to fix
    Run the download again (``hf download org/name``): it resumes the partial blob. The
    fix line names the file and the revision.
    """
    ck = _checkpoint(ctx)
    yield from _report(
        ck, "FC505", "no interrupted download" + (", sizes match the cache's records" if ck.resolved.repo_dir else "")
    )
