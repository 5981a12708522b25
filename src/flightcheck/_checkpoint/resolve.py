"""Resolve ``--model`` to a directory: a local path, or a Hugging Face repo id found in the
local cache, exactly where the engine will look, without network and without importing
huggingface_hub (its import alone costs ~140 ms).

The cache layout (huggingface_hub ``file_download``): ``<hub>/models--org--name/`` holds
``blobs/<etag>`` (the bytes), ``snapshots/<commit>/<file>`` (symlinks into the blobs),
``refs/<branch>`` (the commit a branch points to) and, since huggingface_hub 1.22,
``trees/<commit>.json`` (each file's expected size). An interrupted download leaves
``blobs/<etag>[.<8 hex>].incomplete`` and no snapshot link; ``--local-dir`` downloads keep
the same under ``<dir>/.cache/huggingface/download/``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from flightcheck._checkpoint.shardio import read_small

MAX_TREE = 256 << 20  # a size record of a million files; beyond that it is not one

_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*(/[A-Za-z0-9][\w.\-]*)?$")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")


class Resolved(msgspec.Struct):
    """Where ``--model`` points: a directory (``path``) or why there is none (``problem``)."""

    model: str
    path: Path | None = None
    kind: str = "missing"  # "dir" | "hf-cache" | "file" | "missing"
    repo_id: str | None = None
    revision: str | None = None
    commit: str | None = None
    repo_dir: Path | None = None  # <hub>/models--org--name
    searched: list[str] = msgspec.field(default_factory=list)
    problem: str | None = None
    note: str | None = None  # e.g. "no refs/main: used the only snapshot"


def hub_dirs(envs: Sequence[Mapping[str, str | None]], home: str | None = None) -> list[Path]:
    """The hub cache directories the environments point at, in huggingface_hub's order:
    HF_HUB_CACHE, HUGGINGFACE_HUB_CACHE, $HF_HOME/hub, $XDG_CACHE_HOME/huggingface/hub,
    ~/.cache/huggingface/hub. One per environment, duplicates dropped."""
    out: list[Path] = []
    for env in envs:

        def get(name: str, env: Mapping[str, str | None] = env) -> str | None:
            value = env.get(name)
            return os.path.expanduser(os.path.expandvars(value)) if value else None

        hub = get("HF_HUB_CACHE") or get("HUGGINGFACE_HUB_CACHE")
        if hub is None:
            hf_home = get("HF_HOME") or os.path.join(
                get("XDG_CACHE_HOME") or os.path.join(home or os.path.expanduser("~"), ".cache"), "huggingface"
            )
            hub = os.path.join(hf_home, "hub")
        p = Path(hub)
        if p not in out:
            out.append(p)
    return out


#: values huggingface_hub reads as true (huggingface_hub/constants.py ENV_VARS_TRUE_VALUES).
_TRUE = {"1", "ON", "YES", "TRUE"}


def offline(env: Mapping[str, str | None]) -> bool:
    """Whether an engine with this environment never downloads: huggingface_hub's
    ``HF_HUB_OFFLINE = _is_true(HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE)``
    (huggingface_hub/constants.py), which vLLM passes as ``local_files_only``
    (vllm/model_executor/model_loader/weight_utils.py, vllm/transformers_utils/config.py)."""
    value = env.get("HF_HUB_OFFLINE") or env.get("TRANSFORMERS_OFFLINE")
    return bool(value) and str(value).upper() in _TRUE


def looks_like_repo_id(model: str) -> bool:
    """``org/name`` or ``name`` (what the Hub accepts), not a path."""
    return bool(_REPO_ID.match(model)) and ".." not in model and not model.endswith((".", "-"))


def resolve(
    model: str,
    *,
    revision: str | None = None,
    envs: Sequence[Mapping[str, str | None]] = (),
    download_dir: str | None = None,
) -> Resolved:
    """Find the directory of ``model``. Never raises; a miss says what was searched."""
    res = Resolved(model=model, revision=revision)
    expanded = Path(os.path.expanduser(model))
    try:
        is_dir = expanded.is_dir()
        exists = expanded.exists() or expanded.is_symlink()
    except OSError as exc:  # a symlink loop, a dead mount
        res.problem = f"{model}: {exc.strerror or exc}"
        return res
    if is_dir:
        res.path, res.kind = expanded, "dir"
        return res
    if exists:
        res.kind = "file"
        res.problem = f"{model} is a file, not a model directory (give the directory that holds config.json)"
        return res
    if not looks_like_repo_id(model):
        res.problem = f"no such directory: {model}"
        return res
    res.repo_id = model
    hubs = ([Path(os.path.expanduser(download_dir))] if download_dir else []) + hub_dirs(list(envs) or [os.environ])
    folder = "models--" + model.replace("/", "--")
    present: list[tuple[Path, str]] = []
    for hub in hubs:
        repo = hub / folder
        res.searched.append(str(repo))
        try:  # Path.is_dir/is_file raise on EACCES (a shared cache of another user)
            if not repo.is_dir():
                continue
            commit, why = _commit_of(repo, revision)
        except OSError as exc:
            present.append((repo, f"it cannot be read: {exc.strerror or exc}"))
            continue
        if commit is not None:
            res.kind, res.repo_dir, res.commit = "hf-cache", repo, commit
            res.path = repo / "snapshots" / commit
            res.note = why
            return res
        present.append((repo, why or ""))
    if present:
        res.repo_dir = present[0][0]
        res.problem = f"{model} is in the cache ({present[0][0]}) but {present[0][1]}"
    else:
        res.problem = (
            f"{model} is not in the local Hugging Face cache (looked in {', '.join(str(h) for h in hubs)}); "
            "flightcheck never downloads"
        )
    return res


def _commit_of(repo: Path, revision: str | None) -> tuple[str | None, str | None]:
    """(commit, note) for ``revision`` (default main) of a cached repo, or (None, why not)."""
    rev = revision or "main"
    snapshots = repo / "snapshots"
    ref = repo / "refs" / rev
    if ".." not in Path(rev).parts and ref.is_file():
        try:
            commit = ref.read_text(encoding="utf-8", errors="replace").strip()
        except OSError as exc:
            return None, f"refs/{rev} cannot be read: {exc.strerror or exc}"
        if not _COMMIT.match(commit):
            return None, f"refs/{rev} does not hold a commit hash"
        if not (snapshots / commit).is_dir():
            return (
                None,
                f"refs/{rev} points to {commit[:12]} whose snapshot directory is missing (interrupted download?)",
            )
        return commit, None
    if _COMMIT.match(rev) and (snapshots / rev).is_dir():
        return rev, None
    try:
        snaps = sorted(p.name for p in snapshots.iterdir() if p.is_dir()) if snapshots.is_dir() else []
    except OSError:
        snaps = []
    if revision is None and len(snaps) == 1:
        return snaps[0], f"no refs/main: used its only snapshot {snaps[0][:12]}"
    have = ", ".join(snaps) or "none"  # whole ids: --revision takes nothing shorter
    return None, f"revision {rev!r} is not there (snapshots: {have}); pass --revision"


class _TreeFile(msgspec.Struct):
    size: int | None = None
    lfs_size: int | None = None
    blob_id: str | None = None
    lfs_sha256: str | None = None


class _Tree(msgspec.Struct):
    files: dict[str, _TreeFile] = {}


def expected_files(res: Resolved) -> dict[str, tuple[int, str]]:
    """From ``trees/<commit>.json``: file -> (expected size, blob id); empty when absent or
    unreadable (an unknown format is ignored, never guessed at)."""
    if res.repo_dir is None or res.commit is None:
        return {}
    try:
        tree = msgspec.json.decode(read_small(res.repo_dir / "trees" / f"{res.commit}.json", MAX_TREE), type=_Tree)
    except (OSError, msgspec.MsgspecError, RecursionError):
        return {}
    out: dict[str, tuple[int, str]] = {}
    for name, f in tree.files.items():
        size = f.lfs_size if f.lfs_size is not None else f.size
        if size is not None and size >= 0:
            out[name] = (size, f.lfs_sha256 or f.blob_id or "")
    return out


def incomplete_downloads(res: Resolved) -> list[tuple[Path, int]]:
    """``*.incomplete`` files of this model: in the repo's blobs (hub cache) or under
    ``<dir>/.cache/huggingface/download`` (``--local-dir`` downloads). (path, bytes so far)."""
    dirs: list[Path] = []
    if res.repo_dir is not None:
        dirs.append(res.repo_dir / "blobs")
    if res.path is not None:
        dirs.append(res.path / ".cache" / "huggingface" / "download")
    out: list[tuple[Path, int]] = []
    for d in dirs:
        try:
            for root, _dirs, files in os.walk(d):
                for f in files:
                    if f.endswith(".incomplete"):
                        p = Path(root) / f
                        try:
                            out.append((p, p.stat().st_size))
                        except OSError:
                            out.append((p, 0))
        except OSError:
            continue
    return sorted(out)


def env_views(facts_env: Mapping[str, Any] | None) -> list[Mapping[str, str | None]]:
    """The environments to search: the engine's (from the facts) first, then this process's
    (a snapshot recorded elsewhere may not know where this machine keeps its cache)."""
    views: list[Mapping[str, str | None]] = []
    if facts_env:
        views.append({k: v for k, v in facts_env.items() if isinstance(v, str)})
    views.append(os.environ)
    return views
