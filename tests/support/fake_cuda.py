"""Test fakes for the CUDA toolchain: shell-script nvcc / ninja / compilers, fake toolkit
trees, and synthetic ELF shared objects with an ``.nv_fatbin`` section (so the fatbin
reader is tested on machines without nvcc too)."""

from __future__ import annotations

import json
import os
import stat
import struct
from pathlib import Path

ARCH_FLAG = {"a": 0x100000, "f": 0x200000, "": 0}


def script(path: Path, body: str) -> Path:
    """An executable /bin/sh script."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def fake_nvcc(
    path: Path, release: str = "12.8", archs: tuple[str, ...] = ("90", "100", "120"), compile_error: str | None = None
) -> Path:
    """An nvcc that answers --version / --list-gpu-arch like the real one; compiling either
    fails with ``compile_error`` or touches the output file."""
    arch_lines = "\\n".join(f"compute_{a}" for a in archs)
    compile_part = (
        f'echo "{compile_error}" >&2; exit 1'
        if compile_error
        else 'out=""; while [ $# -gt 0 ]; do [ "$1" = "-o" ] && out="$2"; shift; done; : > "$out"'
    )
    return script(
        path,
        f"""case "$1" in
  --version)
    echo "nvcc: NVIDIA (R) Cuda compiler driver"
    echo "Cuda compilation tools, release {release}, V{release}.93"
    exit 0;;
  --list-gpu-arch) printf '{arch_lines}\\n'; exit 0;;
esac
{compile_part}""",
    )


def fake_toolkit(root: Path, release: str, *, libcudart: bool = True, version_file: bool = True) -> Path:
    """A CUDA toolkit tree: bin/nvcc, include/cuda_runtime.h, lib64/libcudart.so, version.json."""
    fake_nvcc(root / "bin" / "nvcc", release=release)
    (root / "include").mkdir(parents=True, exist_ok=True)
    (root / "include" / "cuda_runtime.h").write_text("/* fake */\n")
    if libcudart:
        (root / "lib64").mkdir(parents=True, exist_ok=True)
        (root / "lib64" / "libcudart.so").write_bytes(b"")
    if version_file:
        (root / "version.json").write_text(json.dumps({"cuda": {"name": "CUDA SDK", "version": f"{release}.1"}}))
    return root


def _entry(kind: int, sm: int, suffix: str, payload: int, version: str | None = None) -> bytes:
    padded = (payload + 7) & ~7
    head = bytearray(64)
    struct.pack_into("<HHIQ", head, 0, kind, 0x0101, 64, padded)
    struct.pack_into("<I", head, 20, payload)
    major, minor = (int(x) for x in version.split(".")) if version else (0, 0)
    struct.pack_into("<HHI", head, 24, minor, major, sm)
    struct.pack_into("<Q", head, 40, 0x11 | ARCH_FLAG[suffix])
    return bytes(head) + b"\xab" * payload + b"\0" * (padded - payload)


def fatbin(entries: list[tuple[str, ...]]) -> bytes:
    """One fatbin container; entries are (kind 'elf'|'ptx', arch like '10.3a'[, code
    version like '8.7': a PTX entry's PTX ISA; none: the field is zero])."""
    body = b""
    for kind, arch, *version in entries:
        suffix = arch[-1] if arch[-1] in "af" else ""
        major, minor = arch.rstrip("af").split(".")
        body += _entry(2 if kind == "elf" else 1, int(major) * 10 + int(minor), suffix, 37, *version)
    return struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(body)) + body


def elf_with_fatbin(
    path: Path, containers: list[list[tuple[str, ...]]] | None, pad_between: int = 0, blob: bytes | None = None
) -> Path:
    """A minimal ELF64 LE file whose sections are .shstrtab and (unless None) .nv_fatbin,
    built from ``containers`` or holding ``blob`` (a real fatbin, e.g. ``nvcc -fatbin``'s)."""
    names = b"\0.shstrtab\0.nv_fatbin\0.text\0"
    has_fatbin = bool(containers) or blob is not None
    if blob is None:
        blob = (b"\0" * pad_between).join(fatbin(c) for c in containers) if containers else b"\x90" * 16
    sec_name = 11 if has_fatbin else 22  # ".nv_fatbin" or ".text"
    str_off = 64
    data_off = (str_off + len(names) + 7) & ~7  # sections are 8-byte aligned, as the linker does
    shoff = (data_off + len(blob) + 7) & ~7
    header = bytearray(64)
    header[:16] = b"\x7fELF\x02\x01\x01" + b"\0" * 9
    struct.pack_into("<HHIQQQIHHHHHH", header, 16, 3, 62, 1, 0, 0, shoff, 0, 64, 0, 0, 64, 3, 1)
    sections = bytes(64)  # null section
    sections += struct.pack("<IIQQQQIIQQ", 1, 3, 0, 0, str_off, len(names), 0, 0, 1, 0)
    sections += struct.pack("<IIQQQQIIQQ", sec_name, 1, 2, 0, data_off, len(blob), 0, 0, 8, 0)
    out = bytes(header) + names + b"\0" * (data_off - str_off - len(names)) + blob
    out += b"\0" * (shoff - len(out)) + sections
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(out)
    return path


def clean_path(*dirs: os.PathLike[str] | str) -> str:
    """A PATH of exactly the given dirs (the fakes' shebang is an absolute /bin/sh)."""
    return os.pathsep.join(str(d) for d in dirs)


def tool_bin(root: Path, *names: str) -> Path:
    """A directory of symlinks to the real ``names`` (those this machine has): a PATH that
    has, say, nvcc and the compilers but no ninja."""
    import shutil

    root.mkdir(parents=True, exist_ok=True)
    for name in names:
        real = shutil.which(name)
        if real and not (root / name).exists():
            (root / name).symlink_to(real)
    return root
