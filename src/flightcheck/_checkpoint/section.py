"""The facts snapshot's ``checkpoint`` section (``flightcheck collect --model M``).

What two nodes must agree on before a multi-node launch: the same files with the same
sizes, and byte-identical headers (sha256 of the 8-byte length + header: two copies of a
shard with equal headers and sizes hold the same tensors at the same offsets). Built from
the same cached scan as ``check``; only the hashes cost extra, once.
"""

from __future__ import annotations

import hashlib
import os
from typing import TYPE_CHECKING, Any, Optional

from .index import INDEX_NAME
from .validate import MAX_HEADER

if TYPE_CHECKING:
    from .._intent import Intent


def checkpoint_section(intent: Intent) -> dict[str, Any]:
    """{model, path, files {name: size}, header_sha256 {name: sha256}, commit, config_sha256}."""
    from .load import load

    model = intent.model or ""
    ck = load(model, revision=intent.revision, envs=(os.environ,), download_dir=intent.download_dir, sha=True)
    out: dict[str, Any] = {"model": model, "path": str(ck.path) if ck.path else None, "files": None, "header_sha256": None,
                           "commit": ck.resolved.commit, "config_sha256": None}
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


def _header_sha256(path: str) -> Optional[str]:
    try:
        with open(path, "rb") as fh:
            head = fh.read(8)
            n = int.from_bytes(head, "little") if len(head) == 8 else MAX_HEADER + 1
            if n > MAX_HEADER:
                return None
            return hashlib.sha256(head + fh.read(n)).hexdigest()
    except OSError:
        return None


def _file_sha256(path: os.PathLike[str] | str, limit: int = 64 << 20) -> Optional[str]:
    try:
        with open(path, "rb") as fh:
            data = fh.read(limit + 1)
    except OSError:
        return None
    return hashlib.sha256(data).hexdigest() if len(data) <= limit else None
