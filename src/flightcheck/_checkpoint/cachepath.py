"""Where the scan cache of a model directory lives, without the cache's structures.

Standard library only: :mod:`.workers` asks whether a directory has a cache file before
msgspec and the reader are imported (a directory without one is read cold, so its scan
workers are started at once). :mod:`.cache` reads and writes the file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

try:  # hashlib's own blake2b, without loading OpenSSL's hashes (~3 ms) for a file name
    from _blake2 import blake2b as _blake2b
except ImportError:  # pragma: no cover - a Python built without it
    from hashlib import blake2b as _blake2b


def enabled(env: Mapping[str, str] | None = None) -> bool:
    """False when FLIGHTCHECK_NO_CACHE is set to a true value."""
    env = os.environ if env is None else env
    return (env.get("FLIGHTCHECK_NO_CACHE") or "").strip().lower() not in ("1", "true", "yes", "on")


def cache_dir(env: Mapping[str, str] | None = None) -> Path | None:
    """Where flightcheck's caches live: ``$XDG_CACHE_HOME/flightcheck`` (an absolute
    ``XDG_CACHE_HOME`` only: the XDG spec says to ignore a relative one), else
    ``$HOME/.cache/flightcheck``; None (no cache) when caching is off or ``HOME`` is not an
    existing directory. Whether it may be used is :func:`~.cache.usable_dir`'s question."""
    env = os.environ if env is None else env
    if not enabled(env):
        return None
    xdg = env.get("XDG_CACHE_HOME") or ""
    if os.path.isabs(xdg) and _mine_or_absent(xdg):
        return Path(xdg) / "flightcheck"
    home = env.get("HOME") if "HOME" in env else os.path.expanduser("~")
    if not home or not os.path.isabs(home) or not os.path.isdir(home):
        return None  # HOME=/nonexistent (a service account): never create it
    if not _mine_or_absent(home):
        # `sudo -E`: root with another user's HOME (and XDG_CACHE_HOME) would create
        # ~/.cache/flightcheck, root-owned, inside that user's home: root's own home
        # instead (its passwd entry), else no cache
        return _own_home_cache()
    return Path(home) / ".cache" / "flightcheck"


def _mine_or_absent(path: str) -> bool:
    """Whether ``path`` is the caller's (or does not exist yet)."""
    try:
        return os.stat(path).st_uid == os.geteuid()
    except FileNotFoundError:
        return True
    except OSError:
        return False


def _own_home_cache() -> Path | None:
    """``~/.cache/flightcheck`` of the caller's own passwd home, when that home is theirs."""
    import pwd

    try:
        own = pwd.getpwuid(os.geteuid()).pw_dir
    except (KeyError, OSError):
        return None
    if not own or not os.path.isabs(own) or not os.path.isdir(own) or not _mine_or_absent(own):
        return None
    return Path(own) / ".cache" / "flightcheck"


def cache_file(model_dir: str, env: Mapping[str, str] | None = None) -> Path | None:
    """The cache file of a model directory (its real path), or None when caching is off."""
    where = cache_dir(env)
    if where is None:
        return None
    digest = _blake2b(model_dir.encode("utf-8", "surrogatepass"), digest_size=10).hexdigest()
    return where / f"ckpt-{digest}.msgpack"
