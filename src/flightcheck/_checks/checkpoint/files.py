"""FC5xx, continued: the index, config.json, unreadable and escaping files, load time,
sparse shards, several GGUF files (FC506–FC512). Imported by ``checkpoint`` so the
family registers as one.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from flightcheck._checkpoint.problems import Kind
from flightcheck._checks.checkpoint.headers import _checkpoint, _report
from flightcheck._checks.framework import Context, Outcome, Skip, check, fail, ok
from flightcheck._knowledge.units import si_bytes
from flightcheck._vocabulary.results import ERROR, INFO, WARNING


@check("FC506", "index-inconsistent", ERROR)
def index_inconsistent(ctx: Context) -> Iterator[Outcome]:
    """The index and the shards' headers disagree.

    ## What it checks
    ``model.safetensors.index.json`` is valid JSON mapping tensors to files (an error: the
    engine cannot read it either); each file holds exactly the tensors the index maps to
    it (compared by count and a digest of the names). vLLM uses the index only to choose
    the files and loads each whole (0.33.0 weight_utils.py
    ``filter_duplicate_safetensors_files``), so a disagreement is not a stop: a tensor
    mapped to the wrong file, or an entry no file holds that no model loads
    (``rotary_emb.inv_freq``, a tied ``lm_head.weight``), is info; any other entry no file
    holds, a tensor in two shards, a tensor the index does not list, or a
    ``metadata.total_size`` unlike the headers' sum, is a warning.

    ## Why the launch dies
    Only an unreadable index stops it. Otherwise a model parameter that no file holds
    fails the load ("Following weights were not initialized from checkpoint", an
    unquantized model), and a tensor in two shards is loaded twice, the last one read
    winning: both after most of the load.

    ## How to fix
    Re-download the index and the named shards together from the same revision; mixing
    files of two revisions is the usual cause.
    """
    ck = _checkpoint(ctx)
    if ck.index_name is None and len(ck.shards) <= 1 and not ck.of(Kind.INDEX_MISMATCH):
        raise Skip("single-file checkpoint: no index to cross-check")
    yield from _report(
        ck,
        "FC506",
        f"the index matches the {len(ck.shards)} headers" if ck.index_name else "no tensor is in two shards",
    )


@check(
    "FC507",
    "config-invalid",
    ERROR,
    logs=(
        r"Unrecognized model in .* Should have a `model_type` key in its config\.json",
        r"config\.json: No such file or directory|does not appear to have a file named config\.json",
    ),
)
def config_invalid(ctx: Context) -> Iterator[Outcome]:
    """config.json is missing, unparseable, or lacks a field the memory model needs.

    ## What it checks
    ``config.json`` exists, is a JSON object, and has ``num_hidden_layers``,
    ``hidden_size`` and ``num_attention_heads`` (in ``text_config`` for multimodal models).
    A missing field is a warning, not a stop: transformers maps other spellings onto these
    (``n_layer``, ``d_model``), so the engine may build the model that flightcheck cannot size.

    ## Why the launch dies
    The engine reads config.json first to pick the architecture; a truncated or missing
    one fails at once on every node, and a missing field fails model construction.

    ## How to fix
    Download config.json again (``hf download org/name config.json``) or restore it from
    the source; do not hand-edit it.
    """
    ck = _checkpoint(ctx)
    subject = "file:config.json"
    fix = (
        f"hf download {ck.resolved.repo_id} config.json"
        if ck.resolved.repo_id
        else f"restore {ck.path}/config.json from the model's source"
    )
    if ck.blocked:
        raise Skip(ck.blocked)
    if ck.config_error:
        yield fail(ck.config_error, fix=fix, subject=subject)
        return
    from flightcheck._memory.config import parse

    cfg = parse(ck.config)
    if cfg.missing:
        # Not a stop: transformers maps other spellings onto these (GPT-2's n_layer, MPT's
        # d_model: PretrainedConfig.attribute_map), so the engine may well build the model;
        # flightcheck only cannot size it (the memory fit skips).
        yield fail(
            f"config.json has no {', '.join(cfg.missing)}: flightcheck cannot size the model "
            "(the engine may still build it from other field names)",
            fix=fix,
            subject=subject,
            severity=WARNING,
        )
        return
    arch = cfg.architectures[0] if cfg.architectures else cfg.model_type or "unknown architecture"
    yield ok(
        f"{arch}, {cfg.layers} layers, hidden {cfg.hidden}" + (f", {cfg.experts} experts" if cfg.experts else ""),
        subject=subject,
    )


@check("FC508", "shard-unreadable", ERROR)
def shard_unreadable(ctx: Context) -> Iterator[Outcome]:
    """A shard exists but cannot be read.

    ## What it checks
    Each shard opens for reading and its header can be read: permissions, a symlink loop,
    a file that is not a regular file, an I/O error or a read that hangs past its timeout;
    and the model directory itself can be listed (one line when it cannot). Run as root on
    a directory owned by another user, a link to a file outside it that the owner could
    not read is reported unreadable for that owner and not read (no content, no size).

    ## Why the launch dies
    The engine's workers (often another user, in a container) fail with "Permission
    denied" or an I/O error when they reach that shard.

    ## How to fix
    Fix the permissions (``chmod a+r``), the link, or the filesystem; the message quotes
    the error.
    """
    ck = _checkpoint(ctx)
    yield from _report(ck, "FC508", "every shard is readable")


@check("FC509", "index-path-escape", ERROR)
def index_path_escape(ctx: Context) -> Iterator[Outcome]:
    """The index names a file outside the model directory.

    ## What it checks
    Every file name in the index stays inside the model directory: no ``..``, no absolute
    path but one naming a file directly in the directory (FC502 says whether the engine
    accepts its spelling); refused outright, never opened. A shard that is a symlink is followed as the
    OS follows it for the engine (symlink farms onto shared storage are a common layout);
    see FC508 for a link that root must not follow for the directory's owner.

    ## Why the launch dies
    A crafted index makes the loader open arbitrary files (``../../etc/passwd``); at best
    the launch fails on a non-safetensors file, at worst it reads what it should not.

    ## How to fix
    Do not run this checkpoint: re-download the index from a trusted source.
    """
    ck = _checkpoint(ctx)
    yield from _report(ck, "FC509", "every file the index names is inside the model directory")


@check("FC510", "load-time-estimate", INFO)
def load_time_estimate(ctx: Context) -> Iterator[Outcome]:
    """How many bytes each node reads, and how long that takes.

    ## What it checks
    The bytes of the shards this node loads; with ``--deep``, the read throughput measured
    on about 1 GiB sampled across the shards (page cache bypassed where the filesystem
    allows) and the expected load time.

    ## Why the launch dies
    It does not; but a slow network filesystem turns a 15-minute load into an hour, and a
    health check or scheduler timeout kills the engine while it loads.

    ## How to fix
    Copy the checkpoint to local NVMe before launching, or raise the start-up timeout of
    the orchestrator above the expected load time.
    """
    ck = _checkpoint(ctx)
    if ck.unread and not ck.other_weights:
        raise Skip(ck.unread)
    m = ctx.memory
    read = m.load_bytes if m is not None and m.load_bytes else ck.total_bytes
    msg = f"reads {si_bytes(read)} per node"
    evidence: dict[str, Any] = {"load_bytes": read}
    tp = ck.throughput
    if tp and tp.get("bytes_per_s"):
        rate = tp["bytes_per_s"]
        secs = read / rate
        msg += (
            f"; measured {rate / 1e9:.2f} GB/s ({tp.get('method')}, "
            f"{si_bytes(tp.get('bytes', 0))} sampled) -> about {_duration(secs)} to load"
        )
        evidence.update(read_bytes_per_s=int(rate), load_seconds_estimate=round(secs, 1))
    elif tp and tp.get("error"):
        msg += f"; read speed not measured: {tp['error']}"
    elif tp:
        msg += "; read speed not measured: every sample fell in a hole (sparse files)"
    else:
        msg += " (--deep measures the read speed and the load time)"
    yield fail(msg, subject=f"model:{ck.resolved.model}", evidence=evidence)


@check("FC511", "shard-sparse", WARNING)
def shard_sparse(ctx: Context) -> Iterator[Outcome]:
    """A shard has far fewer blocks on disk than its size: sparse or preallocated.

    ## What it checks
    For every shard of at least 1 MiB, allocated blocks (``st_blocks`` x 512) cover at
    least half of its size (a compressing filesystem stays well above that for weights).

    ## Why the launch dies
    A downloader that preallocates (aria2, some S3 tools) or a ``truncate``d placeholder
    gives a file of the right size whose content was never written: the header checks out,
    the weights are zeros, and the model loads and serves garbage.

    ## How to fix
    Re-download the shard; if it is sparse on purpose (a test fixture), ignore this.
    """
    ck = _checkpoint(ctx)
    yield from _report(ck, "FC511", "every shard is fully allocated on disk")


@check("FC512", "gguf-several-files", ERROR)
def gguf_several_files(ctx: Context) -> Iterator[Outcome]:
    """The model directory holds more than one ``*.gguf`` for a model that loads exactly one.

    ## What it checks
    For an architecture whose engine code reads its weights from the directory's GGUF file
    (vLLM 0.33: ``FlintForCausalLM``), that there is at most one ``*.gguf`` in the
    directory. Other models never look for GGUF files, so any number of them is fine there;
    SGLang reads GGUF only with its own load format.

    ## Why the launch dies
    vLLM's Flint model looks for its GGUF while it is built, whatever the load format
    (``find_gguf_file`` in vllm/models/flint/gguf_nvfp4.py), and raises ``ValueError:
    Expected one GGUF file in ..., found [...]`` when there are several: split GGUF files
    (``-00001-of-00003.gguf``) or two quantizations side by side.

    ## How to fix
    Keep the one GGUF to serve in the model directory and move the others elsewhere
    (a split GGUF must be merged into one file first: ``llama-gguf-split --merge``).
    """
    ck = _checkpoint(ctx)
    if not ck.of(Kind.SEVERAL_GGUF):
        if ck.gguf_loaded:
            yield ok(f"one *.gguf file, {ck.gguf_loaded}, which the engine loads")
            return
        raise Skip("the engine reads no GGUF file from this directory for this model")
    yield from _report(ck, "FC512", "", judges_weights=False)


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
