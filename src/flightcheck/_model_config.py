"""The model's ``config.json`` (architectures, model_type), for checks that depend on the model.

The checkpoint reader (``ctx.checkpoint``) owns the model on disk; this accessor asks it
first and, when it is not available or has no config, reads ``config.json`` itself: from a
directory, or from a repo id in the local Hugging Face cache (never downloading). Anything
unreadable is simply "no config": the fallback logic then treats the model as unknown.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._checks._framework import Context

MAX_CONFIG_BYTES = 4 << 20  # a config.json is a few KB; anything this big is not one


def model_config(ctx: Context) -> dict[str, Any] | None:
    """The parsed config.json of ``--model``, or None (cached per evaluation)."""
    key = "model_config.config"
    if key not in ctx.cache:
        ctx.cache[key] = _from_checkpoint(ctx) or _from_disk(ctx)
    return ctx.cache[key]


def _from_checkpoint(ctx: Context) -> dict[str, Any] | None:
    try:
        ck = ctx.checkpoint
    except Exception:  # no checkpoint reader, or the model is unreadable (FC5xx report it)
        return None
    cfg = getattr(ck, "config", None) if ck is not None else None
    if cfg is None and isinstance(ck, dict):
        cfg = ck.get("config")
    if isinstance(cfg, dict):
        return cfg
    raw = getattr(cfg, "raw", None)
    return raw if isinstance(raw, dict) else None


def _read(path: Path) -> dict[str, Any] | None:
    try:
        if not path.is_file() or path.stat().st_size > MAX_CONFIG_BYTES:
            return None
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def _hub_dirs(env: dict[str, Any]) -> list[Path]:
    dirs = []
    if env.get("HF_HUB_CACHE"):
        dirs.append(Path(env["HF_HUB_CACHE"]))
    if env.get("HF_HOME"):
        dirs.append(Path(env["HF_HOME"]) / "hub")
    dirs.append(Path(os.path.expanduser("~")) / ".cache" / "huggingface" / "hub")
    return dirs


def _from_disk(ctx: Context) -> dict[str, Any] | None:
    model = ctx.intent.model
    if not model:
        return None
    p = Path(model).expanduser()
    if p.is_dir():
        return _read(p / "config.json")
    if model.count("/") != 1 or model.startswith(("/", ".")):
        return None
    repo = "models--" + model.replace("/", "--")
    for hub in _hub_dirs(ctx.facts.env or {}):
        base = hub / repo
        if not base.is_dir():
            continue
        ref = ctx.intent.revision or "main"
        try:
            commit = (base / "refs" / ref).read_text().strip()
        except OSError:
            commit = ref
        cfg = _read(base / "snapshots" / commit / "config.json")
        if cfg is not None:
            return cfg
    return None
