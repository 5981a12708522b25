"""Which GPU archs a CUDA shared object carries, read from its ELF ``.nv_fatbin`` section.

A fatbin is a run of containers (16-byte header: magic 0xBA55ED50, or 0x466243B1 in
relocatable objects; u16 header size; u64 size of what follows), each a run of entries
(u16 kind: 1 PTX, 2 ELF cubin; u32 entry header size; u64 padded payload size; u16 minor and
u16 major of the code version at bytes 24 and 26; u32 SM number at byte 28; u64 flags at byte
40). Only headers are read, never the (compressed) payloads, so a 100 MB .so costs a few
dozen small reads.

The code version of a PTX entry is the PTX ISA version of its text (its ``.version``
directive), which says the oldest driver whose JIT accepts it (``_knowledge/cuda.py``
``ptx_needs_cuda``). Established with nvcc 13.0 (V13.0.88): its own PTX (``.version 9.0``)
and the same PTX edited to ``.version 8.4`` and ``8.7``, each embedded with ``nvcc -fatbin
-gencode arch=compute_90,code=compute_90``, give 9.0, 8.4 and 8.7 there; cubin entries read
1.8 (the cubin ABI, not a CUDA release). The payload itself cannot stand in: nvcc 13 stores
PTX zstd-compressed (flag 0x8000; compressed size at byte 16, decompressed at byte 56), and
even ``--no-compress`` PTX has its ``// Cuda compilation tools, release ...`` comments
stripped.

The arch-specific variants are flag bits, established by compiling one kernel for
sm_90a/100a/103a/110a/121a, sm_100f/120f and plain sm_80/90/100 with nvcc 13.0 and comparing
the entries: 0x100000 marks an ``a`` cubin, 0x200000 an ``f`` (family) cubin.
"""

from __future__ import annotations

import os
import re
import struct
from typing import BinaryIO

FATBIN_MAGICS = (0xBA55ED50, 0x466243B1)
KIND_PTX, KIND_ELF, KIND_ELF_ALT = 1, 2, 0x10
FLAG_ARCH_SPECIFIC = 0x100000  # sm_XYa
FLAG_FAMILY = 0x200000  # sm_XYf
_MAX_SECTIONS = 1 << 16
_MAX_ENTRIES = 1 << 16


class NotFatbin(ValueError):
    """The file is not a 64-bit little-endian ELF with a readable ``.nv_fatbin`` section."""


def _read(fh: BinaryIO, offset: int, size: int) -> bytes:
    fh.seek(offset)
    data = fh.read(size)
    if len(data) != size:
        raise NotFatbin(f"truncated at offset {offset}")
    return data


def fatbin_section(fh: BinaryIO) -> tuple[int, int] | None:
    """(file offset, size) of ``.nv_fatbin``, or None when the ELF has none."""
    ident = _read(fh, 0, 64)
    if ident[:4] != b"\x7fELF" or ident[4] != 2 or ident[5] != 1:
        raise NotFatbin("not a 64-bit little-endian ELF file")
    shoff = struct.unpack_from("<Q", ident, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", ident, 0x3A)
    if shoff == 0 or shnum == 0 or shentsize < 64 or shnum > _MAX_SECTIONS or shstrndx >= shnum:
        raise NotFatbin("no usable section header table")
    table = _read(fh, shoff, shentsize * shnum)
    headers = [struct.unpack_from("<IIQQQQ", table, i * shentsize) for i in range(shnum)]
    _n, _t, _f, _a, str_off, str_size = headers[shstrndx]
    names = _read(fh, str_off, min(str_size, 1 << 20))
    for name_off, _type, _flags, _addr, offset, size in headers:
        end = names.find(b"\0", name_off)
        if names[name_off:end] == b".nv_fatbin":
            return offset, size
    return None


def arch_name(sm: int, flags: int) -> str:
    """(103, flags with 0x100000) -> '10.3a'; (120, 0x200000) -> '12.0f'; (80, 0) -> '8.0'."""
    suffix = "a" if flags & FLAG_ARCH_SPECIFIC else "f" if flags & FLAG_FAMILY else ""
    return f"{sm // 10}.{sm % 10}{suffix}"


def code_version(major: int, minor: int) -> str | None:
    """The code version of an entry as ``"8.7"``; None when the field holds nothing
    plausible (zero, or a number no PTX ISA has)."""
    if not 1 <= major <= 99 or minor > 99:
        return None
    return f"{major}.{minor}"


def read_archs(path: str) -> tuple[set[str], set[str]]:
    """(cubin archs, PTX archs) embedded in one ELF file, e.g. ({'10.0a', '10.3a'}, set()).

    Raises:
        NotFatbin: not an ELF file, or its headers are inconsistent.
        OSError: unreadable.
    """
    cubins, ptx = read_fatbin(path)
    return cubins, set(ptx)


def read_fatbin(path: str) -> tuple[set[str], dict[str, set[str]]]:
    """(cubin archs, {PTX arch: PTX ISA versions}) of one ELF file, e.g. ({'9.0a'},
    {'9.0': {'8.7'}}); an empty set of versions: the entry's version field was unreadable.

    Raises:
        NotFatbin: not an ELF file, or its headers are inconsistent.
        OSError: unreadable.
    """
    cubins: set[str] = set()
    ptx: dict[str, set[str]] = {}
    with open(path, "rb") as fh:
        found = fatbin_section(fh)
        if found is None:
            return cubins, ptx
        start, size = found
        pos, end, entries, gap = start, start + size, 0, 0
        while pos + 16 <= end:
            head16 = _read(fh, pos, 16)
            magic, _ver, hsize, fsize = struct.unpack("<IHHQ", head16)
            if magic not in FATBIN_MAGICS:
                # zero padding between containers is skipped; anything else ends the walk
                gap += 1
                nxt = start + (((pos - start) | 7) + 1)  # alignment is relative to the section
                if head16[: nxt - pos].strip(b"\0") or gap > 64:
                    break
                pos = nxt
                continue
            gap = 0
            entry, stop = pos + hsize, min(pos + hsize + fsize, end)
            while entry + 64 <= stop:
                head = _read(fh, entry, 64)
                kind, ehsize, padded = struct.unpack_from("<HxxIQ", head, 0)
                minor, major, sm = struct.unpack_from("<HHI", head, 24)
                flags = struct.unpack_from("<Q", head, 40)[0]
                if ehsize < 64 or not 10 <= sm <= 999:
                    raise NotFatbin(f"implausible fatbin entry at offset {entry}")
                if kind in (KIND_ELF, KIND_ELF_ALT):
                    cubins.add(arch_name(sm, flags))
                elif kind == KIND_PTX:
                    versions = ptx.setdefault(arch_name(sm, flags), set())
                    version = code_version(major, minor)
                    if version is not None:
                        versions.add(version)
                entry += ehsize + padded
                entries += 1
                if entries > _MAX_ENTRIES:
                    raise NotFatbin("too many fatbin entries")
            pos = pos + hsize + fsize
    return cubins, ptx


#: Modules FlashInfer builds with its global arch list (no per-arch restriction), so the
#: archs in one of them are the archs of the whole wheel.
_GENERIC_MODULES = ("norm", "sampling", "page", "activation", "rope", "cascade", "quantization", "topk")
_ARCH_SPECIFIC_NAME = re.compile(r"(sm_?\d{2,3}|_\d{2,3}[af]?$|_\d{2,3}[af]?_)")


def sample_modules(root: str, limit: int = 3) -> list[str]:
    """Up to ``limit`` module .so files of a jit-cache tree (``<root>/<name>/<name>.so``),
    generic modules first, never those whose name pins one arch (``fused_moe_103``)."""
    try:
        names = sorted(e.name for e in os.scandir(root) if e.is_dir())
    except OSError:
        return []
    ordered = [n for n in _GENERIC_MODULES if n in names]
    ordered += [n for n in names if n not in ordered and not _ARCH_SPECIFIC_NAME.search(n)]
    out = []
    for name in ordered:
        so = os.path.join(root, name, f"{name}.so")
        if os.path.isfile(so):
            out.append(so)
            if len(out) >= limit:
                break
    return out


def jit_cache_archs(package_dir: str) -> tuple[list[str] | None, str]:
    """(sorted archs, how they were found) for an installed ``flashinfer_jit_cache`` package."""
    root = os.path.join(package_dir, "jit_cache")
    if not os.path.isdir(root):
        root = package_dir
    files = sample_modules(root)
    if not files:
        return None, f"no module .so files under {root}"
    archs: set[str] = set()
    problems = []
    for so in files:
        try:
            archs |= read_archs(so)[0]
        except (OSError, NotFatbin) as exc:
            problems.append(f"{os.path.basename(so)}: {exc}")
    if not archs:
        return None, "no cubins found in " + ", ".join(os.path.basename(f) for f in files) + (
            f" ({'; '.join(problems)})" if problems else ""
        )
    ordered = sorted(archs, key=lambda a: (int(a.split(".")[0]), int(a.split(".")[1][0]), a))
    return ordered, f"fatbin: read from {len(files)} .so files ({', '.join(os.path.basename(f) for f in files)})"


#: The most extension modules read of one package (its top level first, then one level down).
LIBRARY_FILES = 8


def _arch_key(arch: str) -> tuple[int, int, str]:
    major, _, rest = arch.partition(".")
    return int(major), int(rest.rstrip("af") or 0), arch


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in version.split("."))


def library_files(package_dir: str, limit: int = LIBRARY_FILES) -> list[str]:
    """Up to ``limit`` ``*.so`` files of a package: its top level (vLLM's ``_C.abi3.so``),
    then one directory down (``sgl_kernel/sm100/common_ops.abi3.so``), each sorted."""
    out: list[str] = []
    subdirs: list[str] = []
    try:
        with os.scandir(package_dir) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError:
        return out
    for e in entries:
        if e.name.endswith(".so") or ".so." in e.name:
            if e.is_file():
                out.append(e.path)
        elif e.is_dir(follow_symlinks=False) and not e.name.startswith((".", "__")):
            subdirs.append(e.path)
    for d in subdirs:
        if len(out) >= limit:
            break
        try:
            with os.scandir(d) as it:
                out += sorted(e.path for e in it if e.name.endswith(".so") and e.is_file())
        except OSError:
            continue
    return out[:limit]


def library_fatbins(package_dir: str, files: list[str] | None = None) -> dict[str, object]:
    """One ``python.cuda_libraries`` entry: the device code in a package's extension
    modules (``files``, else :func:`library_files`) as ``{files, cubins, ptx, problem}``:
    the archs with a cubin, and per PTX arch the PTX ISA versions carried (``{"9.0":
    ["8.7"]}``; ``[]`` where the version field was unreadable). Files without a fatbin
    count as read; one that is not an ELF file is named in ``problem``."""
    chosen = library_files(package_dir) if files is None else files
    cubins: set[str] = set()
    ptx: dict[str, set[str]] = {}
    read: list[str] = []
    problems: list[str] = []
    for so in chosen:
        try:
            c, p = read_fatbin(so)
        except (OSError, NotFatbin) as exc:
            problems.append(f"{os.path.relpath(so, package_dir)}: {exc}")
            continue
        read.append(os.path.relpath(so, package_dir))
        cubins |= c
        for arch, versions in p.items():
            ptx.setdefault(arch, set()).update(versions)
    if not chosen:
        problems.append(f"no .so files under {package_dir}")
    return {
        "files": read,
        "cubins": sorted(cubins, key=_arch_key),
        "ptx": {
            a: sorted(ptx[a], key=lambda v: tuple(int(x) for x in v.split("."))) for a in sorted(ptx, key=_arch_key)
        },
        "problem": "; ".join(problems) or None,
    }
