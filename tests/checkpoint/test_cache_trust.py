"""The caches trust only what the caller wrote: a scan (or compile verdict) planted in a
cache directory another user owns, or in a file another user owns, never answers; a cache
directory that is a symbolic link is neither followed nor written; a relative
XDG_CACHE_HOME and a HOME that does not exist mean no cache there."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import msgspec
import pytest

from flightcheck._checkpoint import load
from flightcheck._checkpoint.cache import CacheFile, ScanCache, cache_dir, file_key, usable_dir
from support.ckptgen import load_config, write_checkpoint

TINY = load_config("tiny-llama")
ROOT = os.geteuid() == 0


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("FLIGHTCHECK_NO_CACHE", raising=False)
    return tmp_path / "xdg" / "flightcheck"


def plant_ready_scan(tmp_path: Path) -> tuple[Path, Path]:
    """A model with a truncated shard, and a cache file that says every shard is fine
    (the scans of the intact shards, keyed to the files as they are now)."""
    root = write_checkpoint(tmp_path / "m", TINY, shards=3, dense=True)
    assert load(str(root)).findings == []
    path = ScanCache(root.resolve()).path
    assert path is not None
    doc = msgspec.msgpack.decode(path.read_bytes(), type=CacheFile)
    shard = sorted(root.glob("*.safetensors"))[1]
    os.truncate(shard, shard.stat().st_size - 64)
    for real, entry in doc.shards.items():
        entry.key = file_key(os.stat(real))
    path.write_bytes(msgspec.msgpack.encode(doc))
    return root, path


@pytest.mark.skipif(not ROOT, reason="needs root to make a file another user owns")
def test_a_scan_planted_by_another_user_is_ignored_and_said(tmp_path: Path) -> None:
    root, path = plant_ready_scan(tmp_path)
    os.chown(path, 65534, 65534)
    ck = load(str(root))
    assert ck.findings, "the truncated shard must be found"
    assert "owned by uid 65534, not by you" in ck.cache


def test_the_planted_scan_is_what_would_fool_a_trusting_cache(tmp_path: Path) -> None:
    """The control for the test above: owned by the caller, the same file is believed
    (the caller's own cache is trusted), so the ownership is what protects."""
    root, _path = plant_ready_scan(tmp_path)
    assert load(str(root)).findings == []


@pytest.mark.skipif(not ROOT, reason="needs root to make a directory another user owns")
def test_a_cache_directory_another_user_owns_is_not_used(tmp_path: Path, isolated: Path) -> None:
    root, _path = plant_ready_scan(tmp_path)
    os.chown(isolated, 65534, 65534)
    ck = load(str(root))
    assert ck.findings and f"{isolated} is owned by uid 65534, not by you" in ck.cache


def test_a_group_writable_cache_directory_is_not_used(tmp_path: Path, isolated: Path) -> None:
    root, _path = plant_ready_scan(tmp_path)
    isolated.chmod(0o775)
    ck = load(str(root))
    assert ck.findings and "writable by group or others" in ck.cache


def test_a_symlinked_cache_directory_is_neither_followed_nor_written(tmp_path: Path, isolated: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    isolated.parent.mkdir()
    isolated.symlink_to(elsewhere)
    root = write_checkpoint(tmp_path / "m", TINY, shards=2, dense=True)
    ck = load(str(root))
    assert ck.findings == [] and "is a symbolic link" in ck.cache
    assert list(elsewhere.iterdir()) == []


def test_the_cache_directory_is_created_0700(tmp_path: Path, isolated: Path) -> None:
    os.umask(old := os.umask(0))  # whatever the umask: 0700
    try:
        load(str(write_checkpoint(tmp_path / "m", TINY, shards=2, dense=True)))
    finally:
        os.umask(old)
    assert stat.S_IMODE(isolated.stat().st_mode) == 0o700 and usable_dir(isolated, create=False) is None


def test_relative_xdg_cache_home_and_missing_home(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    assert cache_dir({"XDG_CACHE_HOME": "rel/cache", "HOME": str(home)}) == home / ".cache" / "flightcheck"
    assert cache_dir({"XDG_CACHE_HOME": str(tmp_path / "x"), "HOME": "/nonexistent"}) == tmp_path / "x" / "flightcheck"
    assert cache_dir({"HOME": str(tmp_path / "nonexistent")}) is None
    assert cache_dir({"HOME": ""}) is None
    assert cache_dir({"HOME": str(home), "FLIGHTCHECK_NO_CACHE": "1"}) is None


def test_home_that_does_not_exist_creates_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "nonexistent"))
    root = write_checkpoint(tmp_path / "m", TINY, shards=2, dense=True)
    ck = load(str(root))
    assert ck.findings == [] and ck.cache == "off"
    assert not (tmp_path / "nonexistent").exists()


def test_orphaned_temp_files_are_removed(tmp_path: Path, isolated: Path) -> None:
    root = write_checkpoint(tmp_path / "m", TINY, shards=2, dense=True)
    load(str(root))
    old = isolated / ".ckpt-dead.tmp"
    fresh = isolated / ".ckpt-writing.tmp"
    for p in (old, fresh):
        p.write_bytes(b"half")
    past = time.time() - 2 * 3600
    os.utime(old, (past, past))
    (root / "config.json").touch()  # something to write again
    os.utime(min(root.glob("*.safetensors")))
    load(str(root))
    assert not old.exists() and fresh.exists()  # a writer may still be busy with a fresh one


def test_a_fifo_in_place_of_the_compile_smoke_cache_does_not_stall(tmp_path: Path, isolated: Path) -> None:
    from flightcheck._collect import compile_smoke

    isolated.mkdir(parents=True, mode=0o700)
    path = compile_smoke.cache_file({"XDG_CACHE_HOME": str(isolated.parent)})
    assert path is not None
    os.mkfifo(path)
    t0 = time.monotonic()
    data, why = compile_smoke._load_cache(path)
    assert data == {} and why and "not a regular file" in why and time.monotonic() - t0 < 1


@pytest.mark.skipif(not ROOT, reason="needs root to make a file another user owns")
def test_a_compile_verdict_planted_by_another_user_is_ignored(tmp_path: Path, isolated: Path) -> None:
    import json

    from flightcheck._collect import compile_smoke

    isolated.mkdir(parents=True, mode=0o700)
    path = compile_smoke.cache_file({"XDG_CACHE_HOME": str(isolated.parent)})
    assert path is not None
    Path(path).write_text(json.dumps({"k": {"ok": True}}))
    assert compile_smoke._load_cache(path) == ({"k": {"ok": True}}, None)  # the caller's own: used
    os.chown(path, 65534, 65534)
    data, why = compile_smoke._load_cache(path)
    assert data == {} and why and "owned by uid 65534, not by you" in why


# ---- the directory held open: no window between the checks and the use -----------------


def swap_after_check(monkeypatch: pytest.MonkeyPatch, cache_dir_path: Path, elsewhere: Path) -> Path:
    """Once open_dir has checked the cache directory, move it away and put a link to
    ``elsewhere`` in its place (what another process could do at that moment); the
    checked directory's new path is returned."""
    from flightcheck._checkpoint import cache as c

    real_open = c.open_dir
    moved = cache_dir_path.with_name("moved-away")

    def open_then_swap(path: Path, *, create: bool) -> tuple[int | None, str | None]:
        got = real_open(path, create=create)
        if got[0] is not None and Path(path) == cache_dir_path and not moved.exists():
            os.rename(cache_dir_path, moved)
            os.symlink(elsewhere, cache_dir_path)
        return got

    monkeypatch.setattr(c, "open_dir", open_then_swap)
    return moved


def test_a_directory_swapped_for_a_link_after_the_check_is_not_written_through(
    tmp_path: Path, isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flightcheck._checkpoint.cache import write_owned

    isolated.mkdir(parents=True, mode=0o700)
    victim = tmp_path / "victim"
    victim.mkdir(mode=0o700)
    moved = swap_after_check(monkeypatch, isolated, victim)
    assert write_owned(isolated / "ckpt-x.msgpack", b"data", ".ckpt-") is None
    assert os.path.islink(isolated)  # the swap did happen between the check and the write
    assert list(victim.iterdir()) == []  # nothing written through the link
    assert (moved / "ckpt-x.msgpack").read_bytes() == b"data"  # but into the directory checked
    assert stat.S_IMODE((moved / "ckpt-x.msgpack").stat().st_mode) == 0o600


def test_a_directory_swapped_for_a_link_after_the_check_is_not_read_through(
    tmp_path: Path, isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flightcheck._checkpoint.cache import read_owned

    isolated.mkdir(parents=True, mode=0o700)
    (isolated / "c.msgpack").write_bytes(b"mine")
    victim = tmp_path / "victim"
    victim.mkdir(mode=0o700)
    (victim / "c.msgpack").write_bytes(b"planted")
    swap_after_check(monkeypatch, isolated, victim)
    assert read_owned(isolated / "c.msgpack", 1 << 20) == (b"mine", None)
    assert os.path.islink(isolated)


def test_a_cache_file_that_is_a_link_is_not_followed(tmp_path: Path, isolated: Path) -> None:
    from flightcheck._checkpoint.cache import read_owned, write_owned

    isolated.mkdir(parents=True, mode=0o700)
    target = tmp_path / "elsewhere.msgpack"
    target.write_bytes(b"planted")
    (isolated / "c.msgpack").symlink_to(target)
    data, why = read_owned(isolated / "c.msgpack", 1 << 20)
    assert data is None and why is not None and "not a regular file" in why
    # a write replaces the link itself (rename over it), never the file it points at
    assert write_owned(isolated / "c.msgpack", b"new", ".ckpt-") is None
    assert target.read_bytes() == b"planted" and not (isolated / "c.msgpack").is_symlink()
