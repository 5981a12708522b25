"""The prefixes engines, process managers and log collectors put before a message: each is
taken off, and the rank, level and time it carries are kept."""

from __future__ import annotations

import pytest

from flightcheck._diagnose.lines import decode, strip


@pytest.mark.parametrize(
    ("line", "msg", "rank", "level"),
    [
        (
            "(Worker pid=1360049) (Worker_TP3 pid=1360049) ERROR 03-05 09:56:09 [multiproc_executor.py:880] x: y",
            "x: y",
            "TP3",
            "ERROR",
        ),
        ("(EngineCore_DP0 pid=301) (Worker_TP0 pid=500) ERROR 11-12 16:25:35 [m.py:711] z", "z", "TP0", "ERROR"),
        ("(VllmWorker rank=0 pid=71558) ERROR 07-31 08:44:05 [multiproc_executor.py:594] z", "z", "rank=0", "ERROR"),
        ("(VllmWorker TP3 pid=12) INFO 01-01 00:00:00 [a.py:1] z", "z", "TP3", "INFO"),
        (
            "(RayWorkerWrapper pid=206994, ip=192.168.10.25) ERROR 03-27 10:29:13 [worker_base.py:620] z",
            "z",
            "RayWorkerWrapper",
            "ERROR",
        ),
        (
            '2025-10-09T04:13:06.6372391Z [rank0]:   File "/a.py", line 1, in f',
            'File "/a.py", line 1, in f',
            "rank0",
            None,
        ),
        ("Aug 19 18:34:27 vllm vllm[8727]: (EngineCore pid=8727)     z", "z", "EngineCore", None),
        ("\x1b[1;36m(APIServer pid=1)\x1b[0;0m INFO 08-10 16:37:37 [api_server.py:1853] z", "z", "APIServer", "INFO"),
        ("^[[1;36m(APIServer pid=1)^[[0;0m INFO 08-10 16:37:37 [api_server.py:1853] z", "z", "APIServer", "INFO"),
        ("ubuntu:9621:9688 [3] misc/shmutils.cc:112 NCCL WARN z", "misc/shmutils.cc:112 NCCL WARN z", "dev3", None),
        ("[2025-03-12 10:11:12 TP3] Load weight begin.", "Load weight begin.", "TP3", None),
        ("[2025-03-12 10:11:12 DP1 TP3] z", "z", "DP1 TP3", None),
        ("vllm-1  | ERROR 11-18 18:07:28 engine.py:366] ValueError: z", "ValueError: z", None, "ERROR"),
        ("  | [2025-03-10T15:07:20Z] ERROR 03-10 08:07:20 [core.py:302] z", "z", None, "ERROR"),
        ("[rank1]:E0207 07:54:31.862000 4712 .venv/lib/common_distributed.py:939] z", "z", "rank1", None),
        ("2025-01-01 10:00:00,123 - vllm.engine - ERROR - RuntimeError: boom", "RuntimeError: boom", None, "ERROR"),
        (
            "2024-04-27 10:13:05 | ERROR | stderr | Traceback (most recent call last):",
            "Traceback (most recent call last):",
            None,
            "ERROR",
        ),
        ("INFO 05-05 12:00:00 [a.py:1] Avg - INFO - x", "Avg - INFO - x", None, "INFO"),
    ],
)
def test_prefixes(line: str, msg: str, rank: str | None, level: str | None) -> None:
    p = strip(decode(line.encode()))
    assert (p.msg, p.rank, p.level) == (msg, rank, level)


def test_times_in_each_clock() -> None:
    a = strip(decode(b"INFO 10-11 22:13:01 [a.py:1] x"))
    b = strip(decode(b"INFO 10-11 22:28:17 [a.py:1] y"))
    assert a.ts_kind == b.ts_kind == "engine" and b.ts - a.ts == 916  # type: ignore[operator]
    c = strip(decode(b"2026-05-26T09:00:00.1Z x"))
    assert c.ts_kind == "iso" and c.ts is not None


def test_bad_bytes_decode() -> None:
    assert strip(decode(b"\xff\xfe\x00RuntimeError: \xc3\x28")).msg.startswith("\ufffd\ufffdRuntimeError")
