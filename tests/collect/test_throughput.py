"""--deep read throughput (FC510): a child process that samples the shards, skips holes,
and gives up cleanly on a filesystem that hangs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from flightcheck._checkpoint import load
from flightcheck._collect import throughput
from flightcheck._memory import build
from flightcheck._vocabulary.intent import Intent
from support.ckptgen import load_config, write_checkpoint


def test_plan_spreads_chunks_over_all_bytes() -> None:
    plan = throughput._plan([100 << 20, 300 << 20], budget=64 << 20, chunk=16 << 20)
    assert len(plan) == 4 and [i for i, _, _ in plan] == [0, 1, 1, 1]
    assert len(throughput._plan([40 << 20])) == 3  # a small checkpoint is read whole
    assert all(off % throughput.ALIGN == 0 and length == 16 << 20 for _, off, length in plan)
    assert throughput._plan([0, 0]) == []


def test_measures_real_data(tmp_path: Path) -> None:
    files = []
    for i in range(2):
        p = tmp_path / f"s{i}.safetensors"
        p.write_bytes(os.urandom(20 << 20))
        files.append(p)
    r = throughput.measure(files)
    assert r is not None and "error" not in r, r
    assert r["bytes"] == 48 << 20 and r["bytes_per_s"] > 0 and r["holes"] == 0  # 3 chunks of 16 MiB
    assert r["method"] in ("O_DIRECT", "fadvise", "O_DIRECT+fadvise")


def test_sparse_files_are_not_measured(tmp_path: Path) -> None:
    p = tmp_path / "sparse.safetensors"
    with open(p, "wb") as fh:
        fh.truncate(64 << 20)
    r = throughput.measure([p])
    assert r is not None and r["bytes"] == 0 and r["holes"] == 4 and r["bytes_per_s"] is None


def test_a_hanging_read_times_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hang = tmp_path / "hang.py"
    hang.write_text("import time\ntime.sleep(60)\n")  # a child stuck in a read of a dead NFS mount
    monkeypatch.setattr(throughput, "SCRIPT", str(hang))
    r = throughput.measure([tmp_path / "x.safetensors"], timeout=1.0)
    assert r is not None and "took over 1 s" in r["error"]
    fifo = tmp_path / "f.safetensors"
    os.mkfifo(fifo)
    monkeypatch.undo()
    assert throughput.measure([fifo], timeout=5.0)["bytes"] == 0  # never opened: it would block


def test_load_estimate_reaches_the_memory_block(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLIGHTCHECK_NO_CACHE", "1")
    root = write_checkpoint(tmp_path / "m", load_config("tiny-llama"), shards=2, dense=True)
    ck = load(str(root))
    ck.throughput = {"bytes": 1 << 30, "seconds": 0.5, "bytes_per_s": 2e9, "method": "O_DIRECT"}
    m = build(ck, Intent(model=str(root)), total=80 << 30)
    d = m.to_dict()
    assert d["load_bytes"] == ck.total_bytes - sum(s.scan.header_len + 8 for s in ck.shards)
    assert d["load_seconds_estimate"] == round(d["load_bytes"] / 2e9, 1) and d["read_bytes_per_s"] == 2_000_000_000
