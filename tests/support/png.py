"""A tiny PNG reader (standard library only) for the screenshot tests: it checks the
signature, every chunk's CRC and the IDAT stream's length, and decodes the rows asked for
(8-bit RGB / RGBA, not interlaced: what Chromium writes) to say which colours they hold."""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

SIGNATURE = b"\x89PNG\r\n\x1a\n"


@dataclass
class Png:
    """What the tests look at: the size and the distinct RGB colours of the decoded rows."""

    width: int
    height: int
    colours: set[bytes]


def read_png(data: bytes, rows: int | None = None) -> Png:
    """Check ``data`` is a whole, valid PNG and decode its first ``rows`` rows (all: None).

    Raises:
        ValueError: not a PNG, a bad CRC, a missing IEND, a format this reader does not
            decode, or an image stream of the wrong length (a truncated file).
    """
    if data[:8] != SIGNATURE:
        raise ValueError("not a PNG (bad signature)")
    pos, idat, ihdr, ended = 8, [], None, False
    while pos + 12 <= len(data):
        (n,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + n]
        (crc,) = struct.unpack(">I", data[pos + 8 + n : pos + 12 + n])
        if zlib.crc32(kind + body) != crc:
            raise ValueError(f"bad CRC in chunk {kind!r}")
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            ended = True
            break
        pos += 12 + n
    if ihdr is None or not ended:
        raise ValueError("no IHDR or no IEND: truncated")
    width, height, depth, ctype, _compression, _filter, interlace = ihdr
    if depth != 8 or ctype not in (2, 6) or interlace:
        raise ValueError(f"unsupported PNG: depth {depth}, colour type {ctype}, interlace {interlace}")
    bpp = 3 if ctype == 2 else 4
    raw = zlib.decompress(b"".join(idat))
    stride = 1 + width * bpp
    if len(raw) != height * stride:
        raise ValueError(f"image data is {len(raw)} bytes, expected {height * stride}")
    colours: set[bytes] = set()
    prev = bytearray(width * bpp)
    for y in range(height if rows is None else min(rows, height)):
        line = _unfilter(raw[y * stride], bytearray(raw[y * stride + 1 : (y + 1) * stride]), prev, bpp)
        colours.update(bytes(line[i : i + 3]) for i in range(0, len(line), bpp))
        prev = line
    return Png(width, height, colours)


def _unfilter(kind: int, line: bytearray, prev: bytearray, bpp: int) -> bytearray:
    """One row with its PNG filter undone (None, Sub, Up, Average, Paeth)."""
    if kind == 1:
        for i in range(bpp, len(line)):
            line[i] = (line[i] + line[i - bpp]) & 255
    elif kind == 2:
        line = bytearray((a + b) & 255 for a, b in zip(line, prev, strict=True))
    elif kind == 3:
        for i in range(len(line)):
            left = line[i - bpp] if i >= bpp else 0
            line[i] = (line[i] + (left + prev[i]) // 2) & 255
    elif kind == 4:
        for i in range(len(line)):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], (prev[i - bpp] if i >= bpp else 0)
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    elif kind != 0:
        raise ValueError(f"unknown PNG row filter {kind}")
    return line
