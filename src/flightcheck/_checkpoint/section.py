"""The facts snapshot's ``checkpoint`` section (``flightcheck collect --model M``).

What two nodes must agree on before a multi-node launch: the same files with the same
sizes, and byte-identical headers (sha256 of the 8-byte length + header: two copies of a
shard with equal headers and sizes hold the same tensors at the same offsets). Built from
the same cached scan as ``check``; only the hashes cost extra, once.
"""

from __future__ import annotations

import hashlib
import os
from typing import TYPE_CHECKING, Any

from flightcheck._checkpoint.index import INDEX_NAME
from flightcheck._checkpoint.shardio import read_header, read_small

if TYPE_CHECKING:
    from flightcheck._vocabulary.intent import Intent


def checkpoint_section(intent: Intent) -> dict[str, Any]:
    """{model, path, files {name: size}, header_sha256 {name: sha256}, commit, config_sha256}."""
    from flightcheck._checkpoint.reader import load

    model = intent.model or ""
    ck = load(model, revision=intent.revision, envs=(os.environ,), download_dir=intent.download_dir, sha=True)
    out: dict[str, Any] = {
        "model": model,
        "path": str(ck.path) if ck.path else None,
        "files": None,
        "header_sha256": None,
        "commit": ck.resolved.commit,
        "config_sha256": None,
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
