"""The child-process runner: a timeout kills the child's whole process group, and a
grandchild that escaped the group cannot keep ``run`` waiting on its pipes."""

from __future__ import annotations

import os
import signal
import time

from flightcheck._collect.proc import DRAIN_TIMEOUT, run


def test_timeout_kills_the_process_group():
    t0 = time.monotonic()
    proc = run(["sh", "-c", "sleep 30 & echo started; sleep 30"], timeout=0.5)
    assert time.monotonic() - t0 < 5
    assert proc.timed_out and proc.rc is None and proc.out == "started\n"
    assert "timed out" in proc.why()


def test_a_grandchild_in_its_own_session_cannot_hang_the_reaping(tmp_path):
    pidfile = tmp_path / "pid"
    cmd = ["sh", "-c", f"setsid sh -c 'echo $$ > {pidfile}; exec sleep 30' & echo started"]
    t0 = time.monotonic()
    proc = run(cmd, timeout=1.0)
    took = time.monotonic() - t0
    try:
        assert took < 1.0 + DRAIN_TIMEOUT + 3, took
        assert proc.timed_out and proc.out == "started\n"
    finally:
        for _ in range(50):
            if pidfile.exists() and pidfile.read_text().strip():
                break
            time.sleep(0.1)
        os.kill(int(pidfile.read_text()), signal.SIGKILL)


def test_ok_and_missing_binary():
    assert run(["sh", "-c", "echo hi"], timeout=5).out == "hi\n"
    missing = run(["/nonexistent/tool"], timeout=5)
    assert missing.rc is None and missing.error and not missing.timed_out
