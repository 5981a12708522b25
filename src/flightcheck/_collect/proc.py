"""Run a child process with a hard timeout, and always reap it.

Collectors and probes call tools that can hang (nvcc on a broken NFS, NVML on a GPU that
fell off the bus, a multicast bind waiting for a peer). Each child runs in its own process
group so a timeout kills it *and* its children; the result says what happened instead of
raising, so a collector can record the reason in ``unavailable``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

#: After a kill, how long to keep reading what the child wrote: a grandchild that left its
#: process group (a daemon such as a compiler cache's server) can hold the pipes open for ever.
DRAIN_TIMEOUT = 2.0


class Proc(msgspec.Struct, frozen=True):
    """What a child did: exit code (None when it never ran or was killed), output, timing."""

    rc: int | None
    out: str = ""
    err: str = ""
    timed_out: bool = False
    error: str | None = None  # could not start (not found, permission)
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        """Ran and exited 0."""
        return self.rc == 0

    def why(self) -> str:
        """One line on what went wrong, for ``unavailable``."""
        if self.error:
            return self.error
        if self.timed_out:
            return f"timed out after {self.duration_s:.1f}s"
        tail = (self.err or self.out).strip().splitlines()
        return f"exit {self.rc}" + (f": {tail[-1][:200]}" if tail else "")


def run(
    cmd: Sequence[str],
    *,
    timeout: float,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    stdin: str | None = None,
) -> Proc:
    """Run ``cmd``; kill its whole process group at ``timeout``. Never raises for the child."""
    t0 = time.perf_counter()
    try:
        child = subprocess.Popen(
            list(cmd),
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            text=True,
            errors="replace",
            start_new_session=True,  # own process group: a timeout kills grandchildren too
        )
    except OSError as exc:
        return Proc(None, error=f"{cmd[0]}: {exc.strerror or exc}", duration_s=time.perf_counter() - t0)
    try:
        out, err = child.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(child)
        out, err = _drain(child)
        return Proc(None, out, err, True, None, time.perf_counter() - t0)
    except BaseException:
        kill_group(child)
        child.wait()
        raise
    return Proc(child.returncode, out or "", err or "", False, None, time.perf_counter() - t0)


def _drain(child: subprocess.Popen[str]) -> tuple[str, str]:
    """What a killed child wrote, then reap it, even when an escaped grandchild keeps the
    pipes open (the output read so far is kept)."""
    try:
        out, err = child.communicate(timeout=DRAIN_TIMEOUT)
        return out or "", err or ""
    except subprocess.TimeoutExpired as exc:
        for pipe in (child.stdout, child.stderr):
            if pipe is not None:
                pipe.close()
        child.wait()  # the child itself is dead (SIGKILL): this returns at once
        return _decoded(exc.stdout), _decoded(exc.stderr)


def _decoded(data: bytes | str | None) -> str:
    # TimeoutExpired carries raw bytes even for a text-mode child
    if isinstance(data, bytes):
        return data.decode(errors="replace")
    return data or ""


def kill_group(child: subprocess.Popen[str]) -> None:
    """SIGKILL the child's process group (it leads its own session), then the child."""
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        child.kill()
    except ProcessLookupError:
        pass


def json_events(text: str) -> list[dict[str, Any]]:
    """The JSON objects a child printed one per line (anything else on stdout is skipped).

    Children stream one event per line so that a child killed at its timeout still leaves
    what it had found (the GPUs read before one hung, the probe stage it reached).
    """
    events: list[dict[str, Any]] = []
    for line in text.splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict):
            events.append(obj)
    return events
