"""The facts snapshot's ``checkpoint`` section (``flightcheck collect --model M``).

What two nodes must agree on before a multi-node launch: the same files with the same
sizes, and byte-identical headers (sha256 of the 8-byte length + header: two copies of a
shard with equal headers and sizes hold the same tensors at the same offsets). Built from
the same cached scan as ``check``; only the hashes cost extra, once.

It also records what the reader found (its findings by kind, the tensor and byte counts,
config.json as parsed), so that ``check --facts`` can judge the recorded checkpoint where
the model is not there to read (:func:`recorded`; the FC5xx family decides when).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from flightcheck._checkpoint.index import INDEX_NAME
from flightcheck._checkpoint.shardio import read_header, read_small

if TYPE_CHECKING:
    from flightcheck._checkpoint.model import Checkpoint
    from flightcheck._vocabulary.facts import CheckpointFacts
    from flightcheck._vocabulary.intent import Intent

#: config.json larger than this is not recorded (FC507 then says the record lacks it)
CONFIG_LIMIT = 1 << 20


def checkpoint_section(intent: Intent) -> dict[str, Any]:
    """{model, path, files {name: size}, header_sha256 {name: sha256}, commit, config_sha256}."""
    from flightcheck._checkpoint.reader import load

    model = intent.model or ""
    ck = load(
        model,
        revision=intent.revision,
        envs=(os.environ,),
        download_dir=intent.download_dir,
        sha=True,
        engine=intent.engine,
        load_format=intent.load_format,
    )
    out: dict[str, Any] = {
        "model": model,
        "path": str(ck.path) if ck.path else None,
        "files": None,
        "header_sha256": None,
        "commit": ck.resolved.commit,
        "config_sha256": None,
        **_what_was_found(ck),
    }
    if ck.path is None:
        return out
    files: dict[str, int] = {}
    shas: dict[str, str] = {}
    for extra in ("config.json", INDEX_NAME):
        try:
            files[extra] = (ck.path / extra).stat().st_size
        except OSError:
            pass
    out["config_sha256"] = _file_sha256(ck.path / "config.json")
    for shard in ck.shards:
        if shard.scan is None:
            continue  # missing or refused: absent here, so a comparison shows the difference
        files[shard.name] = shard.size
        sha = shard.scan.header_sha256 or _header_sha256(str(shard.path))
        if sha:
            shas[shard.name] = sha
    out["files"], out["header_sha256"] = files, shas
    return out


def _header_sha256(path: str) -> str | None:
    try:
        _size, buf = read_header(path)
    except OSError:
        return None
    n = int.from_bytes(buf[:8], "little")
    return hashlib.sha256(buf).hexdigest() if len(buf) == 8 + n else None


def _file_sha256(path: os.PathLike[str] | str, limit: int = 64 << 20) -> str | None:
    try:
        return hashlib.sha256(read_small(path, limit)).hexdigest()
    except OSError:
        return None


def _what_was_found(ck: Checkpoint) -> dict[str, Any]:
    """The reader's verdict material, JSON-ready: findings, counts, config.json."""
    config = ck.config if isinstance(ck.config, dict) else None
    if config is not None and len(msgspec.json.encode(config, enc_hook=str)) > CONFIG_LIMIT:
        config = None
    return {
        "findings": [
            msgspec.to_builtins(
                {
                    "kind": f.kind,
                    "subject": f.subject,
                    "message": f.message,
                    "fix": f.fix,
                    "severity": f.severity,
                    "evidence": f.evidence,
                },
                enc_hook=str,
            )
            for f in ck.findings
        ],
        "tensors": ck.tensor_count if ck.found else None,
        "weight_bytes": ck.total_bytes if ck.found else None,
        "index_name": ck.index_name,
        "config": msgspec.to_builtins(config, enc_hook=str) if config is not None else None,
        "config_error": ck.config_error,
        "unread": ck.unread,
        "blocked": ck.blocked,
        "gguf_loaded": ck.gguf_loaded,
        "repo_id": ck.resolved.repo_id,
    }


def recorded(section: CheckpointFacts | None, source: str = "the facts file") -> Checkpoint | None:
    """The :class:`Checkpoint` a recorded section stands for, as the FC5xx checks read it:
    the findings, counts and config.json the reader gave when it was collected, and one
    placeholder :class:`Shard` per weight file recorded (never opened). None without a
    section, or for one from before findings were recorded (it cannot be judged)."""
    if section is None or section.findings is None or not section.model:
        return None
    from flightcheck._checkpoint.model import Checkpoint, Finding, Shard
    from flightcheck._checkpoint.resolve import Resolved

    path = Path(section.path) if section.path else None
    extras = {"config.json", section.index_name or INDEX_NAME}
    shards = [
        Shard(name=name, path=(path or Path(".")) / name, size=size)
        for name, size in (section.files or {}).items()
        if name not in extras
    ]
    findings = [
        Finding(
            kind=f.kind or "",
            subject=f.subject or f"model:{section.model}",
            message=f.message or "",
            fix=f.fix,
            severity=f.severity if f.severity in ("warning", "error") else None,
            evidence={**(f.evidence or {}), "source": source},
        )
        for f in section.findings
    ]
    return Checkpoint(
        Resolved(
            model=section.model,
            path=path,
            kind="dir" if path is not None else "missing",
            repo_id=section.repo_id,
            commit=section.commit,
        ),
        config=section.config,
        config_error=section.config_error,
        index_name=section.index_name,
        shards=shards,
        findings=findings,
        unread=section.unread,
        blocked=section.blocked,
        gguf_loaded=section.gguf_loaded,
        recorded=source,
        recorded_totals=(section.tensors or 0, section.weight_bytes or 0),
    )
