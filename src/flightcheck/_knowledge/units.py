"""Units and versions: byte counts as messages write them (GiB for GPU memory, what
``nvidia-smi`` and vLLM's logs say; SI units for files on disk, what ``ls``/``df -H`` and
download tools say) and version strings as the checks compare them."""

from __future__ import annotations

from packaging.version import Version

from flightcheck._vocabulary.version import parse

GiB = 1 << 30


def version(text: str | None) -> Version | None:
    """A parsed version (local tags such as ``+cu130`` kept), or None when unparsable
    (``_vocabulary.version.parse``: the one version reader)."""
    return parse(text)


def major_minor(text: str | None) -> tuple[int, int] | None:
    """'13.1' / '13.1.2' / '12.8.93' -> (13, 1); None when unparsable."""
    if not text:
        return None
    parts = text.split(".")
    try:
        return int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    except ValueError:
        return None


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
