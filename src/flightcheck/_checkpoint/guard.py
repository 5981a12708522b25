"""Reading a model directory as root without reading for its owner what they could not.

A model directory is often prepared by another user (a shared NFS path, a container's
volume) and checked by root. Symlinks are followed as the OS follows them (a symlink farm
onto shared storage is a common layout, and the engine opens the targets the same way),
but a link may point at a file its owner could never read (``/etc/shadow``, another
user's key): root would read it and print its first bytes as a "header length" or its
size. :func:`Guard.withheld` says which files must not be read for that reason; the reader
reports them as unreadable for the owner, with neither content nor size.

Only root (euid 0) reading a directory owned by someone else is guarded; the rule is the
kernel's access check along the resolved path (search on each directory, read on the file)
for the owner's uid and groups: the permission bits, or the POSIX access ACL where one is
set. An ACL can deny what the bits seem to allow (``user:alice:---`` on a 0644 file) and
allow what they deny, so it is read (the ``system.posix_acl_access`` extended attribute)
and evaluated as Linux's ``posix_acl_permission`` (fs/posix_acl.c) does: owner entry,
named user entry (masked), then the owning and named groups (masked, any that grants),
then other. An ACL that cannot be read back or decoded (an unknown version, a truncated
attribute, an unknown tag) counts as "the owner cannot read it": the file is withheld, the
report says so, and nothing is disclosed on a guess. No dependency: the attribute's binary
layout (``struct posix_acl_xattr_header`` / ``posix_acl_xattr_entry`` in
include/uapi/linux/posix_acl_xattr.h: a little-endian u32 version 2, then u16 tag, u16
perm, u32 id per entry) is decoded here.
"""

from __future__ import annotations

import errno
import os
import stat
import struct
from pathlib import Path

#: the access ACL's extended attribute (a directory's default ACL plays no part in access)
ACL_XATTR = "system.posix_acl_access"
_ACL_VERSION = 2  # POSIX_ACL_XATTR_VERSION
# tags (include/uapi/linux/posix_acl.h)
_USER_OBJ, _USER, _GROUP_OBJ, _GROUP, _MASK, _OTHER = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20
_TAGS = frozenset({_USER_OBJ, _USER, _GROUP_OBJ, _GROUP, _MASK, _OTHER})
#: errors that mean "no ACL here": none set, or a filesystem (or kernel) without them
_NO_ACL = frozenset({errno.ENODATA, getattr(errno, "ENOATTR", errno.ENODATA), errno.ENOTSUP, errno.EOPNOTSUPP})


class Undecodable(ValueError):
    """An ACL attribute flightcheck cannot decode: treated as denying the owner."""


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


def _mode_allows(st: os.stat_result, uid: int, gids: set[int], bit: int) -> bool:
    if st.st_uid == uid:
        return bool((st.st_mode >> 6) & bit)
    if st.st_gid in gids:
        return bool((st.st_mode >> 3) & bit)
    return bool(st.st_mode & bit)


def decode_acl(raw: bytes) -> list[tuple[int, int, int]]:
    """(tag, perm, id) entries of a ``system.posix_acl_access`` value. Raises
    :class:`Undecodable` for anything but a well-formed version-2 ACL."""
    if len(raw) < 4 or (len(raw) - 4) % 8:
        raise Undecodable(f"{len(raw)} bytes: not a POSIX ACL")
    (version,) = struct.unpack_from("<I", raw)
    if version != _ACL_VERSION:
        raise Undecodable(f"ACL version {version}")
    entries = [struct.unpack_from("<HHI", raw, off) for off in range(4, len(raw), 8)]
    tags = [t for t, _, _ in entries]
    if any(t not in _TAGS for t in tags) or any(tags.count(t) != 1 for t in (_USER_OBJ, _GROUP_OBJ, _OTHER)):
        raise Undecodable("an ACL with an unknown tag or without its owner, group and other entries")
    if tags.count(_MASK) > 1 or ((_USER in tags or _GROUP in tags) and _MASK not in tags):
        raise Undecodable("an ACL with named entries but no single mask")
    return entries


def acl_allows(entries: list[tuple[int, int, int]], st: os.stat_result, uid: int, gids: set[int], bit: int) -> bool:
    """Linux's posix_acl_permission (fs/posix_acl.c) for ``uid`` in ``gids`` wanting ``bit``."""
    mask = next((p for t, p, _ in entries if t == _MASK), 0o7)
    if st.st_uid == uid:
        return bool(next(p for t, p, _ in entries if t == _USER_OBJ) & bit)
    for t, p, i in entries:
        if t == _USER and i == uid:
            return bool(p & mask & bit)
    found = False
    for t, p, i in entries:
        if (t == _GROUP_OBJ and st.st_gid in gids) or (t == _GROUP and i in gids):
            found = True
            if p & bit:
                return bool(mask & bit)
    if found:
        return False
    return bool(next(p for t, p, _ in entries if t == _OTHER) & bit)


def _acl(path: Path) -> list[tuple[int, int, int]] | None:
    """The access ACL of ``path`` (followed: ``path`` is resolved), None when it has none.
    Raises :class:`Undecodable` (and OSError for a file that cannot be asked)."""
    if not hasattr(os, "getxattr"):
        return None  # no extended attributes on this OS: the bits are all there is
    try:
        raw = os.getxattr(path, ACL_XATTR)
    except OSError as exc:
        if exc.errno in _NO_ACL:
            return None
        raise
    return decode_acl(raw)


def _allowed(path: Path, st: os.stat_result, uid: int, gids: set[int], bit: int) -> bool:
    """Whether ``uid`` (in ``gids``) has ``bit`` on ``path``: its ACL if it has one, else its
    mode; an ACL that cannot be read or decoded denies."""
    try:
        entries = _acl(path)
    except (OSError, Undecodable):
        return False
    if entries is None:
        return _mode_allows(st, uid, gids, bit)
    return acl_allows(entries, st, uid, gids, bit)


def _can_read(real: str, uid: int, gids: set[int]) -> bool:
    """Search on every directory on the way and read on the file, as the kernel decides it
    for ``uid``: mode bits, or the access ACL where there is one."""
    p = Path(real)
    try:
        for d in reversed(p.parents):
            if not _allowed(d, os.stat(d), uid, gids, 0o1):
                return False
        st = os.stat(p)
    except OSError:
        return False
    if stat.S_ISDIR(st.st_mode):
        return False
    return _allowed(p, st, uid, gids, 0o4)
