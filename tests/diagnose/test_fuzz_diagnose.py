"""Arbitrary bytes into ``flightcheck diagnose``: never a traceback, an exit in {0, 1, 3}."""

from __future__ import annotations

import os
import tempfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support.cli import cli_in_process

REAL = [
    b"(EngineCore_DP0 pid=1) (Worker_TP3 pid=2) ERROR 10-11 22:28:17 [m.py:694] ",
    b"RuntimeError: Could not find nvcc",
    b"Traceback (most recent call last):\n",
    b'  File "/x/vllm/v1/worker/gpu_worker.py", line 1, in load_model\n',
    b"non-default args: {'model': ",
    b"server_args=ServerArgs(tp_size=",
    b"\x1b[1;36m",
    b"2025-10-09T04:13:06.6Z ",
    b"\x1f\x8b",
    b"\n",
    b"INFO ",
]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.one_of(st.binary(max_size=200), st.sampled_from(REAL)), max_size=40), st.sampled_from(["text", "json"])
)
def test_any_bytes(chunks: list[bytes], fmt: str) -> None:
    fd, path = tempfile.mkstemp(suffix=".log")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(b"".join(chunks))
        rc, out, err = cli_in_process("diagnose", "--format", fmt, path)
        assert rc in (0, 1, 3), err
        assert "Traceback" not in err and "internal error" not in err
        assert out
    finally:
        os.unlink(path)
