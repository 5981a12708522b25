"""The shared libraries an ELF object names (``DT_NEEDED``), read from its dynamic section:
what a bundled module needs on the node (libcudart, libcuda, tvm_ffi), recorded in the
manifest so a missing one is named before a load fails."""

from __future__ import annotations

import struct

_DT_NEEDED, _DT_STRTAB = 1, 5
_SHT_DYNAMIC = 6


def needed(path: str) -> list[str]:
    """The DT_NEEDED names of a 64-bit little-endian ELF file, in order; [] when it has none
    or is not one (never raises for a bad file)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        return []
    try:
        return _needed(data)
    except (struct.error, IndexError, ValueError):
        return []


def _needed(data: bytes) -> list[str]:
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return []
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQII", data, shoff + i * shentsize) for i in range(shnum)]
    for _name, stype, _flags, _addr, offset, size, link, _info in sections:
        if stype != _SHT_DYNAMIC:
            continue
        str_off = sections[link][4]  # sh_link of .dynamic is its string table
        out: list[str] = []
        for pos in range(offset, offset + size, 16):
            tag, val = struct.unpack_from("<qQ", data, pos)
            if tag == 0:
                break
            if tag == _DT_NEEDED:
                end = data.index(b"\0", str_off + val)
                out.append(data[str_off + val : end].decode("utf-8", "replace"))
        return out
    return []
