"""The scan cache: reused only while a file is unchanged, never trusted when corrupt or
foreign, off with FLIGHTCHECK_NO_CACHE=1, harmless when it cannot be written."""

from __future__ import annotations

import json
import os
from pathlib import Path

import msgspec
import pytest

from flightcheck._checkpoint import load
from flightcheck._checkpoint.cache import FORMAT, CacheFile, ScanCache
from flightcheck._checks.checkpoint.kinds import KIND_OF
from support.ckptgen import load_config, shard_name, write_checkpoint

TINY = load_config("tiny-llama")


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("FLIGHTCHECK_NO_CACHE", raising=False)
    return tmp_path / "xdg" / "flightcheck"


def model(tmp_path: Path) -> Path:
    return write_checkpoint(tmp_path / "m", TINY, shards=3, dense=True)


def cache_file(root: Path) -> Path:
    return ScanCache(root.resolve()).path


def test_cold_then_warm(tmp_path: Path) -> None:
    root = model(tmp_path)
    first = load(str(root))
    assert first.cache == "cold" and first.stats.scanned == 3
    assert cache_file(root).exists() and cache_file(root).parent == tmp_path / "xdg" / "flightcheck"
    second = load(str(root))
    assert second.cache == "warm" and second.stats.cached == 3 and second.stats.scanned == 0
    assert [s.scan for s in second.shards] == [s.scan for s in first.shards]
    assert second.index == first.index


def test_a_changed_file_is_rescanned(tmp_path: Path) -> None:
    root = model(tmp_path)
    load(str(root))
    s2 = root / shard_name(1, 3)
    st = s2.stat()
    data = bytearray(s2.read_bytes())
    data[-1] ^= 0xFF
    s2.write_bytes(bytes(data[:-1]))  # truncated by one byte ...
    os.utime(s2, ns=(st.st_atime_ns, st.st_mtime_ns))  # ... with the old mtime put back
    ck = load(str(root))
    assert ck.cache == "partial" and ck.stats.scanned == 1
    assert ck.of(KIND_OF["FC503"]) and ck.of(KIND_OF["FC503"])[0].subject == f"shard:{s2.name}"


def test_a_shard_in_a_subdirectory_is_cached_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Shards the index names outside the directory listing are scanned after it: their
    scans were written to the cache but never looked up, so every run rescanned them."""
    from flightcheck._checkpoint import crosscheck

    root = model(tmp_path)
    (root / "sub").mkdir()
    name = shard_name(2, 3)
    os.replace(root / name, root / "sub" / name)
    index = root / "model.safetensors.index.json"
    doc = json.loads(index.read_text())
    doc["weight_map"] = {t: (f"sub/{f}" if f == name else f) for t, f in doc["weight_map"].items()}
    index.write_text(json.dumps(doc))
    first = load(str(root))
    # (vLLM refuses the spelling, FC502; the reader still reads the file, and caches it)
    assert [f.evidence.get("index_spelling") for f in first.findings] == [f"sub/{name}"]
    assert any(s.name == f"sub/{name}" and s.scan.ok for s in first.shards)
    scanned: list[str] = []
    real = crosscheck.scan_file
    monkeypatch.setattr(crosscheck, "scan_file", lambda p: scanned.append(p) or real(p))
    second = load(str(root))
    assert scanned == [] and [s.scan for s in second.shards] == [s.scan for s in first.shards]


def test_a_changed_index_is_reread(tmp_path: Path) -> None:
    root = model(tmp_path)
    load(str(root))
    index = root / "model.safetensors.index.json"
    doc = json.loads(index.read_text())
    doc["weight_map"]["model.layers.2.ghost.weight"] = shard_name(0, 3)
    index.write_text(json.dumps(doc))
    ck = load(str(root))
    assert ck.cache == "warm"  # every shard still cached ...
    assert any("ghost" in f.message for f in ck.of(KIND_OF["FC506"]))  # ... the index was read again


def test_corrupt_cache_is_ignored_and_rewritten(tmp_path: Path) -> None:
    root = model(tmp_path)
    load(str(root))
    path = cache_file(root)
    path.write_bytes(b"\x93garbage that is not our msgpack")
    ck = load(str(root))
    assert ck.cache == "cold" and ck.findings == []
    assert msgspec.msgpack.decode(path.read_bytes(), type=CacheFile).format == FORMAT
    path.unlink()
    os.mkfifo(path)  # opening it would block: refused (and said), replaced
    assert load(str(root)).cache == "cold; cache file ignored: not a regular file" and path.is_file()


def test_foreign_entries_are_not_trusted(tmp_path: Path) -> None:
    """A cache written for another directory (or version) never answers for this one."""
    root = model(tmp_path)
    other = write_checkpoint(tmp_path / "other", TINY, shards=3, dense=True)
    load(str(other))
    os.replace(cache_file(other), cache_file(root))  # as if the file names collided
    assert load(str(root)).cache == "cold"
    doc = msgspec.msgpack.decode(cache_file(root).read_bytes(), type=CacheFile)
    doc.format = "flightcheck.ckpt-cache/0"
    cache_file(root).write_bytes(msgspec.msgpack.encode(doc))
    assert load(str(root)).cache == "cold"


def test_a_broken_shard_stays_broken_from_the_cache(tmp_path: Path) -> None:
    root = model(tmp_path)
    s2 = root / shard_name(1, 3)
    s2.write_bytes(s2.read_bytes() + b"pad")
    assert load(str(root)).of(KIND_OF["FC503"])
    warm = load(str(root))
    assert warm.cache == "warm" and warm.of(KIND_OF["FC503"])


def test_no_cache_env_turns_it_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLIGHTCHECK_NO_CACHE", "1")
    root = model(tmp_path)
    assert load(str(root)).cache == "off"
    assert load(str(root)).stats.scanned == 3
    assert not (tmp_path / "xdg" / "flightcheck").exists()


def test_unwritable_cache_costs_only_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    root = model(tmp_path)
    ck = load(str(root))
    assert ck.findings == [] and ck.cache.startswith("cold; cache not used")


def test_nothing_is_written_into_the_model_directory(tmp_path: Path) -> None:
    root = model(tmp_path)
    before = sorted(p.name for p in root.iterdir())
    load(str(root))
    load(str(root), sha=True)
    assert sorted(p.name for p in root.iterdir()) == before
