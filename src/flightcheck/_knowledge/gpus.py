"""GPU architectures: compute capability <-> FlashInfer's arch names, arch lists as torch
and FlashInfer read them, and which compiled code runs on which GPU."""

from __future__ import annotations

import re
from collections.abc import Iterable

from flightcheck._knowledge.units import major_minor

#: compute capability -> FlashInfer's arch name (compilation_context.py normalisation).
_ARCH_SUFFIX = {"12.0": "120f"}


def arch_of(cc: str | None) -> str | None:
    """FlashInfer's arch for a compute capability: 9.0 -> 90a, 10.3 -> 103a, 12.0 -> 120f.

    Majors below 9 have no arch-specific variant (8.0 -> 80).
    """
    if not cc or "." not in cc:
        return None
    if cc in _ARCH_SUFFIX:
        return _ARCH_SUFFIX[cc]
    major, _, minor = cc.partition(".")
    if not (major.isdigit() and minor.isdigit()):
        return None
    base = f"{int(major)}{int(minor)}"
    return base + "a" if int(major) >= 9 else base


def arch_to_cc(arch: str) -> str:
    """'103a' -> '10.3'; '120f' -> '12.0'; '80' -> '8.0'."""
    digits = arch.rstrip("af")
    return f"{digits[:-1]}.{digits[-1]}"


#: Code built for one arch: (major, minor, suffix "a" | "f" | "", PTX rather than a cubin).
ArchCode = tuple[int, int, str, bool]


_ARCH_TOKEN = re.compile(r"^(\d+)\.(\d+)([af]?)(\+PTX)?$")


#: Architecture names TORCH_CUDA_ARCH_LIST takes besides numbers.
_NAMED_ARCHS = {"Turing": ["7.5"], "Ampere": ["8.0", "8.6"], "Ada": ["8.9"], "Hopper": ["9.0"]}


def parse_arch_list(value: str, flashinfer: bool) -> tuple[list[ArchCode], list[str]]:
    """(codes, bad tokens) of an arch list. FlashInfer (FLASHINFER_CUDA_ARCH_LIST) splits
    on single spaces and compiles an unsuffixed token as :func:`arch_of` names it (9.0 ->
    ``a``, 12.0 -> ``f``); torch (TORCH_CUDA_ARCH_LIST) splits on spaces or semicolons and
    also takes ``+PTX`` and a few architecture names."""
    tokens = value.split(" ") if flashinfer else [t for t in re.split(r"[ ;]+", value.strip()) if t]
    codes: list[ArchCode] = []
    bad: list[str] = []
    for tok in tokens:
        for t in [tok] if flashinfer else _NAMED_ARCHS.get(tok, [tok]):
            m = _ARCH_TOKEN.match(t)
            if m is None or (flashinfer and m.group(4)):
                bad.append(tok or "''")
                continue
            major, minor, suffix = int(m.group(1)), int(m.group(2)), m.group(3)
            if flashinfer and not suffix:
                suffix = (arch_of(f"{major}.{minor}") or "").lstrip("0123456789")
            codes.append((major, minor, suffix, bool(m.group(4))))
    return codes, bad


def arch_code(arch: str, ptx: bool) -> ArchCode | None:
    """A fatbin arch (``"10.3a"``, ``"9.0"``: ``_collect/fatbin.py`` ``arch_name``) as the
    code it names; None when it is no arch."""
    m = _ARCH_TOKEN.match(arch)
    if m is None or m.group(4):
        return None
    return int(m.group(1)), int(m.group(2)), m.group(3), ptx


def code_runs_on(code: ArchCode, cc: tuple[int, int]) -> bool:
    """Whether code built for ``code`` runs on a GPU of compute capability ``cc``: ``a``
    code only on exactly its arch, ``f`` (family) code and plain cubins on the same major
    at the same or a later minor, plain PTX on any GPU at least as new (the driver
    JIT-compiles it)."""
    major, minor, suffix, ptx = code
    if suffix == "a":
        return (major, minor) == cc
    if ptx and not suffix:
        return (major, minor) <= cc
    return major == cc[0] and minor <= cc[1]


def covers(codes: Iterable[ArchCode], cc: str | None) -> bool:
    """Whether any of ``codes`` runs on compute capability ``cc`` (``"10.3"``)."""
    mm = major_minor(cc)
    return mm is not None and any(code_runs_on(c, mm) for c in codes)


#: Streaming multiprocessors by board, from NVIDIA's datasheets and architecture whitepapers
#: (what ``torch.cuda.get_device_properties().multi_processor_count`` reports on each): the
#: name as NVML / torch print it, lower-cased, matched longest key first. A board not listed
#: gets ``SM_COUNT_DEFAULT`` (an H100 / H200's), an estimate: vLLM's Triton top-k/top-p buffer
#: (``vllm.triton_sampler_buffer_bytes``) is the one consumer, and over 108 - 188 SMs it moves
#: by at most 0.06 GiB at a 152k vocabulary.
SM_COUNT = {
    "h100 pcie": 114,
    "h800 pcie": 114,
    "h100": 132,  # SXM5 (h100 80gb hbm3) and NVL
    "h800": 132,
    "h200": 132,  # SXM and NVL
    "gh200": 132,
    "h20": 78,
    "a100": 108,
    "a800": 108,
    "a10g": 80,
    "a10": 72,
    "a30": 56,
    "a40": 84,
    "l40s": 142,
    "l40": 142,
    "l20": 92,
    "l4": 58,
    "b200": 148,
    "gb10": 48,
    "rtx pro 6000 blackwell": 188,
    "rtx 6000 ada": 142,
    "rtx a6000": 84,
    "rtx 5090": 170,
    "rtx 4090": 128,
    "rtx 4080": 76,
    "rtx 3090": 82,
    "rtx 3060": 28,
    "tesla t4": 40,
    "tesla v100": 80,
}
SM_COUNT_DEFAULT = 132


def sm_count(name: str | None) -> int | None:
    """The board's SM count (``SM_COUNT``: the longest key contained in its name), None when
    the name is absent or not listed."""
    if not name:
        return None
    low = name.lower()
    hits = [k for k in SM_COUNT if k in low]
    return SM_COUNT[max(hits, key=len)] if hits else None
