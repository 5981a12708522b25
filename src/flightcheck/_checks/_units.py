"""Byte counts as the messages and reports write them: GiB for GPU memory (what
``nvidia-smi`` and vLLM's logs say), SI units for files on disk (what ``ls``/``df -H`` and
download tools say)."""

from __future__ import annotations

from ._derive import GiB


def gib(n: float) -> str:
    """'181.6 GiB'."""
    return f"{n / GiB:,.1f} GiB"


def mem_size(n: int) -> str:
    """'1.5 GiB', or '64 MiB' under a GiB (a container's /dev/shm)."""
    return gib(n) if n >= GiB else f"{n / (1 << 20):.0f} MiB"


def si_bytes(n: float) -> str:
    """'1.56 TB', '740.00 MB', '512 bytes'."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n:,.0f} bytes"
