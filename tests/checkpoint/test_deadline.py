"""A dead filesystem never hangs the read: every touch of the model's files is bounded.

Stand-ins for a hung mount without FUSE: a path whose ``stat`` or read blocks (in this
process, by patching), and the ``bench/slowfs.c`` LD_PRELOAD shim (compiled here with gcc
when there is one) for the worker processes, where ``FC_HANG`` makes every operation on a
path block forever and ``FC_SLOW_MS`` delays each one (latency-bound storage).
No test here asserts a speed: only that the read ends (bounded by the test's own timeout)
and says which shards did not answer.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from flightcheck._checkpoint import bounded, load
from flightcheck._checkpoint import validate as validate_mod
from flightcheck._checks.checkpoint.kinds import KIND_OF
from support.ckptgen import load_config, shard_name, write_checkpoint

REPO = Path(__file__).resolve().parents[2]
TINY = load_config("tiny-llama")


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("FLIGHTCHECK_NO_CACHE", raising=False)
    monkeypatch.delenv("FLIGHTCHECK_CHECKPOINT_TIMEOUT", raising=False)


@pytest.fixture
def release() -> object:
    """An event the blocked calls wait on; set at teardown so their threads end."""
    ev = threading.Event()
    yield ev
    ev.set()


def test_imap_gives_every_result_and_hung_for_stragglers(release: threading.Event) -> None:
    import time

    def fn(x: int) -> int:
        if x == 3:
            release.wait()
        if x == 5:
            raise ValueError("five")
        return x * 2

    got = dict(bounded.imap(fn, list(range(8)), deadline=time.monotonic() + 0.5, budget=7))
    assert sorted(got) == list(range(8))
    assert isinstance(got[3], bounded.Hung) and "within 7 s" in str(got[3])
    assert isinstance(got[5], ValueError)
    assert all(got[i] == i * 2 for i in (0, 1, 2, 4, 6, 7))


def test_imap_starts_every_thread_only_when_its_calls_are_blocked(
    release: threading.Event, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Calls that keep being taken (local files, in a process whose interpreter is busy
    elsewhere) run on the first few threads; calls that all block (a slow or hung
    filesystem) get the other threads, so that the rest are not queued behind them."""
    import time

    # GROW_S far longer than the 64 calls take even on a loaded machine: the pool must not
    # grow while its calls keep being taken (the rule before: a thread a call, at once)
    monkeypatch.setattr(bounded, "GROW_S", 5.0)
    threads: set[int] = set()

    def busy(x: int) -> int:  # a call that needs the interpreter a while, as a busy process lets it
        threads.add(threading.get_ident())
        end = time.perf_counter() + 0.002
        while time.perf_counter() < end:
            pass
        return x

    got = []
    for _i, r in bounded.imap(busy, list(range(64)), deadline=time.monotonic() + 60):
        end = time.perf_counter() + 0.002  # the caller parses what it got, on the interpreter
        while time.perf_counter() < end:
            pass
        got.append(r)
    assert sorted(got) == list(range(64)) and len(threads) <= bounded.FIRST_THREADS

    threads.clear()
    monkeypatch.setattr(bounded, "GROW_S", 0.05)  # calls that all block: the rest start after it

    def blocked(x: int) -> int:
        threads.add(threading.get_ident())
        release.wait(0.5 if x >= bounded.FIRST_THREADS else 10)  # the first ones never answer in time
        return x

    got = dict(bounded.imap(blocked, list(range(64)), deadline=time.monotonic() + 2, budget=2))
    assert len(threads) == 64  # every call started while the first were stuck
    assert all(got[i] == i for i in range(bounded.FIRST_THREADS, 64))
    assert all(isinstance(got[i], bounded.Hung) for i in range(bounded.FIRST_THREADS))


def test_a_shard_whose_stat_hangs_is_fc508_and_the_rest_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, release: threading.Event
) -> None:
    root = write_checkpoint(tmp_path / "m", TINY, shards=3, dense=True)
    stuck = str(root / shard_name(1, 3))
    real_stat = os.stat

    def stat(path, *a, **k):
        if os.fspath(path) == stuck:
            release.wait()
        return real_stat(path, *a, **k)

    monkeypatch.setattr(os, "stat", stat)
    ck = load(str(root), timeout=1.0, workers=0)
    (f,) = ck.of(KIND_OF["FC508"])
    assert f.subject == f"shard:{shard_name(1, 3)}" and "did not answer within" in f.message
    others = [s for s in ck.shards if s.name != shard_name(1, 3)]
    assert len(others) == 2 and all(s.scan is not None and s.scan.ok for s in others)


def test_a_shard_whose_read_hangs_is_fc508_and_the_rest_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, release: threading.Event
) -> None:
    root = write_checkpoint(tmp_path / "m", TINY, shards=3, dense=True)
    stuck = os.path.realpath(root / shard_name(2, 3))
    real_read = validate_mod.read_header

    def read_header(path, *a, **k):
        if os.fspath(path) == stuck:
            release.wait()
        return real_read(path, *a, **k)

    monkeypatch.setattr(validate_mod, "read_header", read_header)
    ck = load(str(root), timeout=1.0, workers=0)
    (f,) = ck.of(KIND_OF["FC508"])
    assert f.subject == f"shard:{shard_name(2, 3)}" and "did not answer within" in f.message
    assert sum(1 for s in ck.shards if s.scan is not None and s.scan.ok) == 2
    # an unanswered shard is not cached as broken: the next read tries it again
    release.set()
    assert load(str(root)).of(KIND_OF["FC508"]) == []


def test_a_hung_model_directory_ends_the_read_in_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, release: threading.Event
) -> None:
    from flightcheck._checkpoint import reader as load_mod

    root = write_checkpoint(tmp_path / "m", TINY, shards=2, dense=True)

    def resolve(*a, **k):
        release.wait()

    monkeypatch.setattr(load_mod, "resolve", resolve)
    monkeypatch.setattr(load_mod, "GRACE_S", 0.2)
    ck = load(str(root), timeout=0.5)
    (f,) = ck.of(KIND_OF["FC508"])
    assert f.subject == f"model:{root}" and "did not answer within" in f.message


def test_a_fifo_in_place_of_a_shard_is_refused_without_blocking(tmp_path: Path) -> None:
    root = write_checkpoint(tmp_path / "m", TINY, shards=2, dense=True)
    fifo = root / shard_name(0, 2)
    fifo.unlink()
    os.mkfifo(fifo)
    ck = load(str(root), timeout=5.0)
    (f,) = ck.of(KIND_OF["FC508"])
    assert "not a regular file" in f.message


# --------------------------------------------------------------------------- the LD_PRELOAD shim


@pytest.fixture(scope="module")
def slowfs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None or not sys.platform.startswith("linux"):
        pytest.skip("needs gcc on Linux to build the LD_PRELOAD shim")
    out = tmp_path_factory.mktemp("slowfs") / "slowfs.so"
    subprocess.run(
        [gcc, "-O2", "-shared", "-fPIC", "-o", str(out), str(REPO / "bench" / "slowfs.c"), "-ldl"],
        check=True,
        capture_output=True,
    )
    return out


SCAN = """
import json, sys
from flightcheck._checkpoint.scan import scan_paths
paths = json.loads(sys.argv[1])
scans, stats = scan_paths(paths, workers=2, timeout=float(sys.argv[2]))
print(json.dumps({"workers": stats.workers, "problems": [[p.message for p in s.problems] for s in scans]}))
"""


def _run_scan(paths: list[str], env: dict[str, str], timeout: float) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", SCAN, json.dumps(paths), str(timeout)],
        env={**os.environ, "PYTHONPATH": str(REPO / "src"), **env},
        capture_output=True,
        text=True,
        timeout=60,  # the scan's own deadline is a few seconds: this only guards the test run
        check=True,
    )
    return json.loads(out.stdout)


def test_a_shard_on_a_hung_mount_costs_only_itself_in_the_workers(tmp_path: Path, slowfs: Path) -> None:
    root = write_checkpoint(tmp_path / "m", load_config("qwen3-30b-a3b"), shards=6)
    paths = sorted(str(p) for p in root.glob("*.safetensors"))
    got = _run_scan(paths, {"LD_PRELOAD": str(slowfs), "FC_HANG": paths[4]}, timeout=2.0)
    assert got["workers"] == 2
    bad = [i for i, probs in enumerate(got["problems"]) if probs]
    assert bad == [4] and "did not answer within 2 s" in got["problems"][4][0]


def test_latency_on_every_operation_changes_nothing_but_time(tmp_path: Path, slowfs: Path) -> None:
    root = write_checkpoint(tmp_path / "m", load_config("qwen3-30b-a3b"), shards=6)
    paths = sorted(str(p) for p in root.glob("*.safetensors"))
    slow = _run_scan(paths, {"LD_PRELOAD": str(slowfs), "FC_SLOW_PREFIX": str(root), "FC_SLOW_MS": "20"}, 30.0)
    assert slow["problems"] == [[] for _ in paths]
