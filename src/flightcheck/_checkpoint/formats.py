"""The checkpoint formats other than safetensors shards, as the engine loads them: a GGUF
file (vLLM's Flint: one ``*.gguf`` read by the ``gguf`` reader) and the files of a load
format flightcheck does not scan, listed; and file names made printable. Split from
:mod:`.reader`, which calls :func:`_other_format` before it scans shards."""

from __future__ import annotations

import fnmatch
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from flightcheck._checkpoint import bounded
from flightcheck._checkpoint.guard import Guard
from flightcheck._checkpoint.model import TIMEOUT_S, Checkpoint, Finding
from flightcheck._checkpoint.problems import Kind
from flightcheck._knowledge.units import si_bytes


def _other_format(
    ck: Checkpoint,
    root: Path,
    engine: str | None,
    load_format: str | None,
    listing: tuple[list[str], list[str] | None, list[str]] | None = None,
    *,
    guard: Guard | None = None,
    deadline: float | None = None,
    timeout: float = TIMEOUT_S,
) -> bool:
    """True when the engine will not read ``*.safetensors`` from ``root``: a load format
    that reads no weights (``dummy``), one with a loader of its own, or the default
    loader's ``*.bin`` / ``*.pt`` fallback (and ``*.gguf`` for models that read it). Sets
    ``ck.unread`` (why) and ``ck.other_weights`` (the files and sizes flightcheck can tell)."""
    from flightcheck._knowledge import engines

    knowledge = engines.get(engine).checkpoint
    fmt = (load_format or "auto").lower()
    flag = engines.flag(engine, "load_format")
    # the one bounded listing (:func:`_listing`): None when it failed or did not answer
    names: list[str] | None = listing[1] if listing else None
    # as find_gguf_file's glob("*.gguf") sees the directory: every entry (a directory, a
    # dangling link too) but the hidden ones
    gguf = [n for n in (listing[2] if listing else []) if n.endswith(".gguf") and not n.startswith(".")]
    archs = set((ck.config or {}).get("architectures") or []) if isinstance(ck.config, dict) else set()
    reads_gguf = bool(archs & set(knowledge.GGUF_ARCHITECTURES))
    if reads_gguf and len(gguf) > 1 and knowledge.GGUF_SINGLE_FILE:
        # Whatever the load format: the model's constructor looks for its one GGUF
        # (Flint's find_gguf_file, before any weight is read) and refuses several.
        _several_gguf(ck, root, gguf, guard, deadline or time.monotonic() + timeout, timeout)
        return True
    if fmt in knowledge.NO_WEIGHT_LOAD_FORMATS:
        ck.unread = f"{flag} {fmt}: the engine reads no weight file (random weights)"
        return True
    patterns = knowledge.LOAD_FORMAT_FILES.get(fmt)
    if patterns is None:
        ck.unread = f"{flag} {fmt}: flightcheck reads safetensors only; this format's files are not checked"
        return True
    if names is None:
        return False
    if reads_gguf and gguf and fmt in knowledge.GGUF_LOAD_FORMATS:
        # The model loads this file and no other: the loader globs only its
        # allow_patterns_overrides (["*.gguf"]), so safetensors beside it are never opened.
        _loaded_gguf(ck, root, gguf[0], guard, deadline or time.monotonic() + timeout, timeout)
        return True
    for pattern in patterns:
        hits = [n for n in names if fnmatch.fnmatchcase(n, pattern) and n not in knowledge.NOT_WEIGHT_FILES]
        if not hits:
            continue
        if pattern.endswith(".safetensors"):
            return False
        _list_other(ck, root, hits)
        ck.unread = (
            f"the engine loads {len(hits)} {pattern} file{'s' if len(hits) != 1 else ''} "
            f"({si_bytes(sum(ck.other_weights.values()))}): flightcheck reads safetensors headers only, "
            "so only their presence and sizes are checked"
        )
        return True
    files = set(names)
    gguf = [n for n in gguf if n in files]
    if gguf:
        # No other weight file, and a model the engine does not load GGUF for: it never opens
        # these, so what is wrong with them is a warning (docs/what-stops-a-launch.md).
        _list_other(ck, root, gguf)
        _read_gguf(
            ck,
            {n: str(root / n) for n in gguf},
            guard,
            deadline or time.monotonic() + timeout,
            timeout,
            loaded=False,
        )
        good = [ck.gguf[n] for n in gguf if n in ck.gguf and ck.gguf[n].ok]
        read = (
            f"; their headers: {sum(len(g.tensors) for g in good):,} tensors, "
            f"{si_bytes(sum(g.weight_bytes for g in good))} of weights"
            if good
            else ""
        )
        ck.unread = (
            f"{len(gguf)} *.gguf file{'s' if len(gguf) != 1 else ''} and no *.safetensors: "
            f"flightcheck reads GGUF headers only (presence, sizes, tensors){read}"
        )
        return True
    return False


def _loaded_gguf(ck: Checkpoint, root: Path, name: str, guard: Guard | None, deadline: float, timeout: float) -> None:
    """The one ``*.gguf`` file vLLM's Flint loads: its header judged (an error where it is
    broken), its tensors grouped for the memory model (:mod:`.ggufnames`)."""
    from flightcheck._checkpoint.ggufnames import flint_groups

    ck.gguf_loaded = name
    _list_other(ck, root, [name])
    _read_gguf(ck, {name: str(root / name)}, guard, deadline, timeout, loaded=True)
    scan = ck.gguf.get(name)
    if scan is not None:
        got = flint_groups(scan)
        ck.gguf_groups = got.groups
        ck.gguf_uncounted = f"{name}: {got.why}" if got.groups is None else None
        if got.refused:  # the loader raises on it, after the model is built: the load fails
            ck.findings.append(
                Finding(
                    Kind.BAD_HEADER,
                    f"shard:{name}",
                    f"{name}: {got.why}",
                    fix=f"re-export {name} with the tensors vLLM's Flint loader reads "
                    "(vllm/models/flint/gguf_nvfp4.py: NVFP4 linear layers with their .scale, BF16 or F32 otherwise)",
                )
            )
    else:
        ck.gguf_uncounted = f"{name}: its header could not be read"
    summary = f"; its header: {_gguf_summary(scan)}" if scan is not None and scan.ok else ""
    ck.unread = (
        f"the engine loads {name} and no other weight file (vLLM's Flint reads its one *.gguf): "
        f"flightcheck reads GGUF headers only (presence, sizes, tensors){summary}"
    )


def _several_gguf(
    ck: Checkpoint, root: Path, gguf: list[str], guard: Guard | None, deadline: float, timeout: float
) -> None:
    """FC512: more than one ``*.gguf`` where the model takes exactly one (vLLM's Flint:
    ``find_gguf_file`` raises "Expected one GGUF file"). Their headers are read and judged
    as warnings: the launch fails before any of them is opened."""
    import shlex  # (only for this fix's text: kept off the warm path)

    _list_other(ck, root, gguf)
    _read_gguf(ck, {n: str(root / n) for n in gguf}, guard, deadline, timeout, loaded=False)
    spare = f"{root}-other-gguf"
    shown = ", ".join(gguf[:4]) + (f", ... ({len(gguf)} in all)" if len(gguf) > 4 else "")
    ck.findings.append(
        Finding(
            Kind.SEVERAL_GGUF,
            f"model:{root}",
            f"{len(gguf)} *.gguf files in {root} ({shown}): vLLM's Flint model loads exactly one "
            '("Expected one GGUF file"), so the launch fails while the model is built',
            fix=f"keep one GGUF in {root} and move the others out; to serve {gguf[0]}: "
            f"mkdir -p {shlex.quote(spare)} && mv {' '.join(shlex.quote(str(root / n)) for n in gguf[1:])} "
            f"{shlex.quote(spare)}/",
            evidence={"files": [_text(n) for n in gguf]},  # a list: _printable escapes strings only
        )
    )
    ck.unread = (
        f"{len(gguf)} *.gguf files where the engine accepts one: no weight file is loaded, "
        "so none is judged as the launch's"
    )


def _gguf_summary(scan: Any) -> str:
    arch = f"{scan.architecture}, " if scan.architecture else ""
    return f"GGUF v{scan.version}, {arch}{len(scan.tensors):,} tensors, {si_bytes(scan.weight_bytes)} of weights"


def _read_gguf(
    ck: Checkpoint,
    paths: Mapping[str, str],
    guard: Guard | None,
    deadline: float,
    timeout: float,
    *,
    loaded: bool,
) -> None:
    """Read the GGUF headers of ``paths`` (name -> path) concurrently under the deadline,
    into ``ck.gguf``; each problem a finding of its kind, an error only when the engine
    ``loaded`` the file (else a warning: the launch does not depend on it)."""
    from flightcheck._checkpoint import gguf as gg

    names = list(paths)
    todo: list[str] = []
    for name in names:
        why = guard.withheld(paths[name]) if guard is not None else None
        if why:
            ck.findings.append(
                Finding(
                    Kind.UNREADABLE,
                    f"shard:{name}",
                    why,
                    fix=f"check permissions and the filesystem: ls -lL {paths[name]}",
                    severity=None if loaded else "warning",
                )
            )
            ck.other_weights.pop(name, None)  # its size is not ours to tell either
        else:
            todo.append(name)
    for i, got in bounded.imap(lambda n: gg.read(paths[n]), todo, deadline=deadline, budget=timeout):
        name = todo[i]
        if isinstance(got, BaseException):
            why = f"cannot be read: {got}"
            problems = [(Kind.UNREADABLE, why)]
        else:
            ck.gguf[name] = got
            problems = got.problems
        for kind, message in problems:
            fix = (
                f"check permissions and the filesystem: ls -lL {paths[name]}"
                if kind == Kind.UNREADABLE
                else f"re-copy {name} from its source (compare its size and sha256 with the source)"
            )
            ck.findings.append(
                Finding(kind, f"shard:{name}", f"{name}: {message}", fix=fix, severity=None if loaded else "warning")
            )


def _list_other(ck: Checkpoint, root: Path, names: list[str]) -> None:
    for n in names:
        try:
            ck.other_weights[n] = os.stat(root / n).st_size
        except OSError:
            ck.other_weights[n] = 0


def _text(s: str) -> str:
    """``s`` with lone surrogates (undecodable bytes of a file name) as ``\\xNN`` escapes."""
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        pass
    try:
        return s.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:
        return s.encode("utf-8", "backslashreplace").decode("utf-8")
