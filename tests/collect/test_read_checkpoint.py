"""The checkpoint of a launch is read once: a model directory starts being read before the
facts are collected (the read then overlaps the collection), a repo id after them (the
engine's environment says where its Hugging Face cache is)."""

from __future__ import annotations

from pathlib import Path

import pytest

from flightcheck._collect.checkpoint import read_checkpoint, start_reading
from flightcheck._vocabulary.facts import Facts
from flightcheck._vocabulary.intent import Intent
from support.ckptgen import load_config, write_checkpoint, write_hf_cache


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "FLIGHTCHECK_NO_CACHE"):
        monkeypatch.delenv(var, raising=False)


def test_a_model_directory_is_read_early_and_used(tmp_path: Path) -> None:
    root = write_checkpoint(tmp_path / "m", load_config("tiny-llama"), shards=2, dense=True)
    early = start_reading(Intent(model=str(root)))
    assert early is not None
    ck = read_checkpoint(Intent(model=str(root)), Facts(), early)
    assert ck is not None and ck.found and ck.findings == [] and len(ck.shards) == 2


def test_a_repo_id_waits_for_the_engines_environment(tmp_path: Path) -> None:
    hub = tmp_path / "hub"
    write_hf_cache(hub, "acme/tiny", load_config("tiny-llama"), shards=2, commit="a" * 40)
    assert start_reading(Intent(model="acme/tiny")) is None
    ck = read_checkpoint(Intent(model="acme/tiny"), Facts(env={"HF_HUB_CACHE": str(hub)}))
    assert ck is not None and ck.found and ck.resolved.kind == "hf-cache"


def test_a_path_that_is_no_directory_is_read_again_with_the_facts(tmp_path: Path) -> None:
    missing = str(tmp_path / "nowhere")
    early = start_reading(Intent(model=missing))
    assert early is not None
    ck = read_checkpoint(Intent(model=missing), Facts(), early)
    assert ck is not None and not ck.found


def test_a_directory_read_before_is_read_when_asked_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A big index with a scan cache file (most likely a warm read, a few ms) is read on
    the caller's thread when read_checkpoint asks, not on a thread of its own meanwhile
    (which would contend with the imports): what it reads is the directory as it is then."""
    from flightcheck._checkpoint import workers

    monkeypatch.setattr(workers, "cpus", lambda: 2)
    monkeypatch.setattr(workers, "PARALLEL_MIN_BYTES", 1)  # this tiny index counts as big
    monkeypatch.setattr(workers, "WORKER_START_BYTES", 1)
    root = write_checkpoint(tmp_path / "m", load_config("tiny-llama"), shards=2, dense=True)
    intent = Intent(model=str(root))
    first = read_checkpoint(intent, Facts(), start_reading(intent))  # cold: writes the cache file
    assert first is not None and first.cache == "cold" and first.findings == []
    assert workers.look_early(str(root)) == ([], True)
    early = start_reading(intent)
    assert early is not None
    gone = sorted(root.glob("*.safetensors"))[1]
    gone.unlink()  # after start_reading: a read already under way could not see it
    ck = read_checkpoint(intent, Facts(), early)
    assert ck is not None and ck.cache == "warm"  # the shard left is cached
    assert [f.subject for f in ck.findings if f.kind == "missing-file"] == [f"shard:{gone.name}"]
