"""The read guard and POSIX ACLs: root reading a directory another user owns reads a file
outside it only when that owner could read it, ACLs included — an ACL that denies the
owner what the mode bits allow is honoured, one that grants what they deny too, and one
that cannot be decoded denies. The kernel is the judge: each case is also read as the
owner (``nobody``, through ``setpriv``) and the guard must agree with what the kernel did."""

from __future__ import annotations

import errno
import json
import os
import shutil
import struct
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from flightcheck._checkpoint import guard as g
from support.ckptgen import load_config

NOBODY = 65534
SETPRIV = shutil.which("setpriv")
SETFACL = shutil.which("setfacl")
U_OBJ, USER, G_OBJ, GROUP, MASK, OTHER = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20
UNDEF = 0xFFFFFFFF


def acl(*entries: tuple[int, int, int]) -> bytes:
    """A system.posix_acl_access value (include/uapi/linux/posix_acl_xattr.h)."""
    return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", t, p, i) for t, p, i in entries)


def fake_stat(uid: int = 0, gid: int = 0) -> os.stat_result:
    return os.stat_result((0o100644, 0, 0, 1, uid, gid, 0, 0, 0, 0))


# ---- decoding and evaluating, without root ------------------------------------------------


def test_a_named_user_entry_denies_what_other_allows() -> None:
    raw = acl((U_OBJ, 6, UNDEF), (USER, 0, NOBODY), (G_OBJ, 4, UNDEF), (MASK, 4, UNDEF), (OTHER, 4, UNDEF))
    entries = g.decode_acl(raw)
    assert not g.acl_allows(entries, fake_stat(), NOBODY, {NOBODY}, 4)
    assert g.acl_allows(entries, fake_stat(), 1000, {1000}, 4)  # anyone else: other r--


def test_a_named_user_or_group_entry_grants_within_the_mask() -> None:
    grant = acl((U_OBJ, 6, UNDEF), (USER, 4, NOBODY), (G_OBJ, 0, UNDEF), (MASK, 4, UNDEF), (OTHER, 0, UNDEF))
    assert g.acl_allows(g.decode_acl(grant), fake_stat(), NOBODY, {NOBODY}, 4)
    masked = acl((U_OBJ, 6, UNDEF), (USER, 4, NOBODY), (G_OBJ, 0, UNDEF), (MASK, 0, UNDEF), (OTHER, 0, UNDEF))
    assert not g.acl_allows(g.decode_acl(masked), fake_stat(), NOBODY, {NOBODY}, 4)
    group = acl((U_OBJ, 6, UNDEF), (G_OBJ, 0, UNDEF), (GROUP, 4, 4242), (MASK, 4, UNDEF), (OTHER, 0, UNDEF))
    assert g.acl_allows(g.decode_acl(group), fake_stat(), NOBODY, {NOBODY, 4242}, 4)
    assert not g.acl_allows(g.decode_acl(group), fake_stat(), NOBODY, {NOBODY}, 4)
    # a matching group entry that grants nothing: denied, other is not consulted
    deny = acl((U_OBJ, 6, UNDEF), (G_OBJ, 0, UNDEF), (GROUP, 0, 4242), (MASK, 4, UNDEF), (OTHER, 4, UNDEF))
    assert not g.acl_allows(g.decode_acl(deny), fake_stat(), NOBODY, {4242}, 4)
    # the owner's entry is never masked
    assert g.acl_allows(g.decode_acl(masked), fake_stat(uid=NOBODY), NOBODY, {NOBODY}, 4)


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"\x02\0\0",
        struct.pack("<I", 1) + struct.pack("<HHI", U_OBJ, 6, UNDEF),  # version 1
        acl((U_OBJ, 6, UNDEF), (G_OBJ, 4, UNDEF)),  # no OTHER
        acl((U_OBJ, 6, UNDEF), (USER, 4, 5), (G_OBJ, 4, UNDEF), (OTHER, 4, UNDEF)),  # named, no mask
        acl((U_OBJ, 6, UNDEF), (0x40, 4, 5), (G_OBJ, 4, UNDEF), (OTHER, 4, UNDEF)),  # unknown tag
        acl((U_OBJ, 6, UNDEF), (G_OBJ, 4, UNDEF), (OTHER, 4, UNDEF)) + b"\0",  # ragged
    ],
)
def test_an_acl_that_cannot_be_decoded_denies(raw: bytes, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with pytest.raises(g.Undecodable):
        g.decode_acl(raw)
    f = tmp_path / "f"
    f.write_text("x")
    f.chmod(0o644)
    monkeypatch.setattr(os, "getxattr", lambda *a, **k: raw)
    assert not g._allowed(f, f.stat(), NOBODY, {NOBODY}, 4)


def test_no_acl_support_falls_back_to_the_mode(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_text("x")
    f.chmod(0o644)

    def unsupported(*_a: object, **_k: object) -> bytes:
        raise OSError(errno.EOPNOTSUPP, "Operation not supported")

    monkeypatch.setattr(os, "getxattr", unsupported)
    assert g._allowed(f, f.stat(), NOBODY, {NOBODY}, 4)
    f.chmod(0o600)
    assert not g._allowed(f, f.stat(), NOBODY, {NOBODY}, 4)


# ---- as root, against the kernel --------------------------------------------------------

needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or SETPRIV is None, reason="needs root and setpriv to act as another user"
)


@pytest.fixture
def public() -> Iterator[Path]:
    """A directory under /tmp that nobody can search (pytest's temp tree is root's 0700)."""
    d = Path(tempfile.mkdtemp(prefix="flightcheck-acl-", dir="/tmp"))
    try:
        os.chmod(d, 0o755)
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def set_acl(path: Path, spec: str, raw: bytes) -> None:
    """setfacl when this machine has it, else the attribute itself; skip without ACL support."""
    try:
        if SETFACL:
            subprocess.run([SETFACL, "-m", spec, str(path)], check=True, capture_output=True, timeout=30)
        else:
            os.setxattr(path, g.ACL_XATTR, raw)
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"no POSIX ACLs on this filesystem: {exc}")


def kernel_lets_nobody_read(path: Path) -> bool:
    assert SETPRIV is not None
    proc = subprocess.run(
        [SETPRIV, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "cat", str(path)],
        capture_output=True,
        timeout=30,
        check=False,
    )
    return proc.returncode == 0


def hostile_dir(public: Path, target: Path) -> Path:
    """A model directory nobody made, whose only shard links to ``target``."""
    d = public / "hostile"
    d.mkdir()
    os.chown(d, NOBODY, NOBODY)
    assert SETPRIV is not None
    subprocess.run(
        [SETPRIV, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "sh", "-c",
         f"cd {d} && ln -s {target} model.safetensors && echo '{json.dumps(load_config('tiny-llama'))}' > config.json"],
        check=True,
        timeout=30,
    )  # fmt: skip
    return d


@needs_root
def test_an_acl_denying_the_owner_withholds_a_world_readable_file(public: Path) -> None:
    from flightcheck._checkpoint import load

    secret = public / "secret"
    secret.write_bytes(b"\x41\x42\x43\x44\x45\x46\x47\x48" + b"s3cr3t" * 1000)
    secret.chmod(0o644)
    set_acl(
        secret,
        f"u:{NOBODY}:---",
        acl((U_OBJ, 6, UNDEF), (USER, 0, NOBODY), (G_OBJ, 4, UNDEF), (MASK, 4, UNDEF), (OTHER, 4, UNDEF)),
    )
    assert secret.stat().st_mode & 0o004  # the bits alone say "anyone may read"
    assert not kernel_lets_nobody_read(secret)
    d = hostile_dir(public, secret)
    ck = load(str(d))
    (f,) = ck.findings
    assert f.kind == "unreadable" and "uid 65534" in f.message and "cannot read" in f.message
    text = json.dumps([(x.subject, x.message, x.fix, x.evidence) for x in ck.findings])
    assert str(0x4847464544434241) not in text and str(secret.stat().st_size) not in text


@needs_root
def test_an_acl_granting_the_owner_lets_a_private_file_be_read(public: Path) -> None:
    from flightcheck._checkpoint import load

    shard = public / "shard.safetensors"
    shard.write_bytes(b"\x02\0\0\0\0\0\0\0{}")  # an empty safetensors file
    shard.chmod(0o600)
    set_acl(
        shard,
        f"u:{NOBODY}:r--",
        acl((U_OBJ, 6, UNDEF), (USER, 4, NOBODY), (G_OBJ, 0, UNDEF), (MASK, 4, UNDEF), (OTHER, 0, UNDEF)),
    )
    assert kernel_lets_nobody_read(shard)
    d = hostile_dir(public, shard)
    ck = load(str(d))
    assert not [f for f in ck.findings if f.kind == "unreadable"], ck.findings
    assert g.Guard(d, [str(d)]).withheld(d / "model.safetensors") is None


@needs_root
def test_an_acl_on_a_directory_on_the_way_counts(public: Path) -> None:
    """Search permission on a directory comes from its ACL too."""
    inner = public / "inner"
    inner.mkdir(mode=0o755)
    f = inner / "weights"
    f.write_bytes(b"x" * 16)
    f.chmod(0o644)
    set_acl(
        inner,
        f"u:{NOBODY}:---",
        acl((U_OBJ, 7, UNDEF), (USER, 0, NOBODY), (G_OBJ, 5, UNDEF), (MASK, 5, UNDEF), (OTHER, 5, UNDEF)),
    )
    assert not kernel_lets_nobody_read(f)
    d = hostile_dir(public, f)
    why = g.Guard(d, [str(d)]).withheld(d / "model.safetensors")
    assert why is not None and "uid 65534" in why
