"""Reading a model directory as root without reading for its owner what they could not.

A model directory is often prepared by another user (a shared NFS path, a container's
volume) and checked by root. Symlinks are followed as the OS follows them (a symlink farm
onto shared storage is a common layout, and the engine opens the targets the same way),
but a link may point at a file its owner could never read (``/etc/shadow``, another
user's key): root would read it and print its first bytes as a "header length" or its
size. :func:`Guard.withheld` says which files must not be read for that reason; the reader
reports them as unreadable for the owner, with neither content nor size.

Only root (euid 0) reading a directory owned by someone else is guarded; the rule is the
classic permission bits along the resolved path (search on each directory, read on the
file) for the owner's uid and groups. ACLs are not consulted, so a file readable only
through an ACL is withheld too: the report then says so, and the owner can fix the mode.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


class Guard:
    """What may be read in ``root`` on behalf of its owner."""

    def __init__(self, root: Path, roots: list[str]) -> None:
        self.roots = [r.rstrip(os.sep) or os.sep for r in roots]
        self.uid: int | None = None
        self.gids: set[int] = set()
        if not hasattr(os, "geteuid") or os.geteuid() != 0:
            return
        try:
            st = os.stat(root)
        except OSError:
            return
        if st.st_uid == 0:
            return  # root's own directory: nothing to withhold from root
        self.uid = st.st_uid
        self.gids = _groups_of(st.st_uid, st.st_gid)

    @property
    def active(self) -> bool:
        return self.uid is not None

    def inside(self, real: str) -> bool:
        return any(real == r or real.startswith(r.rstrip(os.sep) + os.sep) for r in self.roots)

    def withheld(self, path: str | os.PathLike[str]) -> str | None:
        """Why ``path`` must not be read for the directory's owner, or None when it may be."""
        if self.uid is None:
            return None
        real = os.path.realpath(path)
        if self.inside(real) or not os.path.lexists(real):
            return None  # inside, or gone: the reader says "missing" as for anyone
        if _can_read(real, self.uid, self.gids):
            return None
        return (
            f"it links outside the model directory to a file that the directory's owner (uid {self.uid}) "
            "cannot read: not read"
        )


def _groups_of(uid: int, gid: int) -> set[int]:
    try:
        import pwd

        name = pwd.getpwuid(uid).pw_name
        return set(os.getgrouplist(name, gid))
    except (KeyError, OSError, ImportError, AttributeError):
        return {gid}


def _allowed(st: os.stat_result, uid: int, gids: set[int], bit: int) -> bool:
    if st.st_uid == uid:
        return bool((st.st_mode >> 6) & bit)
    if st.st_gid in gids:
        return bool((st.st_mode >> 3) & bit)
    return bool(st.st_mode & bit)


def _can_read(real: str, uid: int, gids: set[int]) -> bool:
    """The classic permission bits of every directory on the way (search) and the file (read)."""
    p = Path(real)
    try:
        for d in reversed(p.parents):
            if not _allowed(os.stat(d), uid, gids, 0o1):
                return False
        st = os.stat(p)
    except OSError:
        return False
    if stat.S_ISDIR(st.st_mode):
        return False
    return _allowed(st, uid, gids, 0o4)
