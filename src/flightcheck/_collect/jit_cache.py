"""JIT cache collector: FlashInfer's workspace directory, whether it is writable, free space.

FlashInfer puts its workspace at ``$FLASHINFER_WORKSPACE_BASE`` (default ``$HOME``) +
``/.cache/flashinfer`` and creates it, and its log file, when ``flashinfer`` is imported, so
an unwritable one fails the import itself. Writability is tested for real, by creating and
removing a file in the directory or, when it does not exist yet, in its nearest existing
parent (the one FlashInfer's ``makedirs`` would write into): permission bits lie for root,
read-only mounts and full disks.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Mapping
from typing import Any

from flightcheck._collect import CollectContext, collector


def workspace_dir(env: Mapping[str, str]) -> str | None:
    """FlashInfer's cache dir for this environment (``Path.home()`` semantics for $HOME)."""
    base = env.get("FLASHINFER_WORKSPACE_BASE")
    if base == "":
        # Path(os.getenv(..., home)) of an empty value: the engine's working directory
        return os.path.join(os.path.abspath("."), ".cache", "flashinfer")
    if not base:
        base = env.get("HOME")
        if not base:
            try:
                base = pwd.getpwuid(os.getuid()).pw_dir
            except KeyError:
                return None
    return os.path.join(os.path.abspath(base), ".cache", "flashinfer")


def nearest_existing(path: str) -> str:
    """``path`` itself or its closest ancestor that exists."""
    probe = path
    while not os.path.exists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    return probe


def write_test(directory: str) -> str | None:
    """None when a file can be created and removed in ``directory``; else why not."""
    if not os.path.isdir(directory):
        return f"{directory} is not a directory"
    try:
        import tempfile  # (here: only a write test needs it)

        fd, name = tempfile.mkstemp(prefix=".flightcheck-", dir=directory)
    except OSError as exc:
        return f"cannot create a file in {directory}: {exc.strerror or exc}"
    try:
        os.close(fd)
    finally:
        try:
            os.unlink(name)
        except OSError as exc:
            return f"created but cannot remove {name}: {exc.strerror or exc}"
    return None


@collector("jit_cache", sections=("jit_cache",), timeout=5.0)
def collect_jit_cache(cctx: CollectContext) -> dict[str, Any]:
    """The ``jit_cache`` section."""
    unavailable: dict[str, str] = {}
    path = workspace_dir(cctx.env)
    if path is None:
        unavailable["jit_cache"] = "neither FLASHINFER_WORKSPACE_BASE nor HOME is set and the user has no passwd entry"
        return {"jit_cache": None, "unavailable": unavailable}
    tested = nearest_existing(path)
    why = write_test(tested)
    try:
        st = os.statvfs(tested)
        free: int | None = st.f_bavail * st.f_frsize
    except OSError as exc:
        free = None
        unavailable["jit_cache.free_bytes"] = f"statvfs {tested}: {exc.strerror or exc}"
    return {
        "jit_cache": {"dir": path, "writable": why is None, "free_bytes": free, "tested": tested, "problem": why},
        "unavailable": unavailable,
    }
