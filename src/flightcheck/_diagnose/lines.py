"""Reading an engine log: bounded lines from a file, a pipe or a gzip stream, and one line's
prefixes taken off.

A log may be gigabytes (a Slurm output file of a week of serving), compressed, have no
newline for megabytes (a progress bar), or hold any bytes. :func:`iter_blocks` reads it in
bounded memory: every line is cut at :data:`MAX_LINE` bytes (the rest of it is skipped,
counted in ``Source.long_lines``). :func:`strip` takes off what the engine, the process
manager and the log collector put in front of the message, and keeps what they say
(the rank, the level, the time):

- ANSI colours (``\\x1b[1;36m``, and the ``^[[1;36m`` a terminal copy leaves);
- timestamps: ISO 8601 (Kubernetes ``--timestamps``, CI runners, ``[2025-03-10T15:07:20Z]``),
  journald's ``Aug 19 18:34:27 host unit[pid]:``, vLLM's ``INFO 09-26 10:57:34 [file.py:12]``,
  SGLang's ``[2025-03-12 10:11:12 TP0]``, Python logging's ``- name - ERROR -`` after its
  time, glog's ``E0207 07:54:31.862000 4712 file.py:939]``;
- process prefixes: ``(EngineCore_DP0 pid=9526)``, ``(VllmWorker TP3 pid=12)``,
  ``(Worker_TP0 pid=451)``, Ray's ``(RayWorkerWrapper pid=1451, ip=10.0.0.2)``,
  ``[rank0]:``, docker compose's ``vllm-1  | ``, NCCL's ``host:pid:tid [3]``.
"""

from __future__ import annotations

import gzip
import re
import zlib
from collections.abc import Iterator
from datetime import datetime
from typing import BinaryIO

#: bytes kept of one line; the rest of a longer line is skipped (a log line that long is a
#: progress bar or a dump, never the root cause's first 64 KiB)
MAX_LINE = 64 * 1024


class Source:
    """What was read: sizes, and what could not be (a cut gzip stream)."""

    def __init__(self) -> None:
        self.bytes = 0
        self.lines = 0
        self.long_lines = 0
        self.gzip = False
        self.problem: str | None = None  # why reading stopped early (a corrupt gzip stream)


def open_stream(raw: BinaryIO, source: Source) -> BinaryIO:
    """``raw``, decompressed when it starts with gzip's magic bytes."""
    peek = getattr(raw, "peek", None)
    head = peek(2)[:2] if peek is not None else b""
    if head == b"\x1f\x8b":
        source.gzip = True
        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
    return raw


#: bytes read at a time: lines are split out of each block at C speed
BLOCK = 1 << 20


def iter_blocks(stream: BinaryIO, source: Source) -> Iterator[list[bytes]]:
    """The lines of ``stream`` (without newlines), a block's worth at a time; each line at
    most :data:`MAX_LINE` bytes (the rest of a longer one is skipped and counted in
    ``source.long_lines``). Memory: one block plus one line.

    Never raises on bad data: a corrupt or cut gzip stream ends the lines, with the reason
    in ``source.problem``.
    """
    carry = b""
    skipping = False  # inside a line longer than MAX_LINE: drop bytes up to its newline
    try:
        while True:
            block = stream.read(BLOCK)
            if not block:
                break
            source.bytes += len(block)
            if skipping:
                nl = block.find(b"\n")
                if nl < 0:
                    continue
                block, skipping = block[nl + 1 :], False
            lines = block.split(b"\n")
            tail = lines.pop()
            if lines:
                lines[0] = carry + lines[0]
                carry = tail
            else:
                carry += tail
            if len(carry) > MAX_LINE:  # a line longer than MAX_LINE that has not ended yet
                lines.append(carry[:MAX_LINE])
                source.long_lines += 1
                carry, skipping = b"", True
            for i, line in enumerate(lines):
                if len(line) > MAX_LINE:
                    lines[i] = line[:MAX_LINE]
                    source.long_lines += 1
            source.lines += len(lines)
            if lines:
                yield lines
    except (EOFError, OSError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
        source.problem = f"stopped reading at byte {source.bytes:,}: {type(exc).__name__}: {exc}"
    if carry:
        source.lines += 1
        yield [carry]


_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\^\[\[[0-9;]*m|\x1b")

# One prefix at the start of the line; tried in turn until none matches.
_PREFIXES = re.compile(
    r"""
    (?P<iso>\[?(?P<iso_t>\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2})(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?
        (?:\ (?P<sg_rank>(?:(?:DP|PP|TP|EP|CP|ATTN_DP)\d+\ ?)+))?\]?(?:\s+|$))
    | (?P<journal>(?P<j_t>[A-Z][a-z]{2}\ [\ \d]\d\ \d{2}:\d{2}:\d{2})\ \S+\ [\w@./-]+\[\d+\]:\ ?)
    | (?P<level>(?P<lvl>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+(?P<l_t>\d{2}-\d{2}\ \d{2}:\d{2}:\d{2})(?:\.\d+)?
        \s+(?:\[[^\]\n]{1,120}\]|[\w./-]{1,120}:\d+\])\ ?)
    | (?P<pylog>(?:-?\s?[\w.]{1,60}\s[-|]\s|\|\s)?(?P<plvl>DEBUG|INFO|WARNING|ERROR|CRITICAL)\s[-|]\s(?:stderr\s\|\s)?)
    | (?P<glog>[EWIF](?P<g_t>\d{4}\ \d{2}:\d{2}:\d{2})\.\d+\s+\d+\s+\S+:\d+\]\ ?)
    | (?P<proc>\((?P<p>[^()\n]{0,100}?\bpid=\d+[^()\n]{0,80})\)\s*)
    | (?P<rank>\[rank(?P<r>\d+)\]:\s?)
    | (?P<compose>[\w.-]+-\d+\s+\|\ ?)
    | (?P<ci>\s*\|\ )
    | (?P<nccl>[\w.-]+:\d+:\d+\ \[(?P<dev>\d+)\]\ )
    """,
    re.VERBOSE,
)

_RANK_IN_PROC = re.compile(r"(?<![A-Za-z])(?:(?:TP|DP|PP|EP)\d+(?:_(?:TP|EP|PP)\d+)*|rank[=_ ]?\d+)")


class Parsed:
    """One line, prefixes off."""

    __slots__ = ("level", "msg", "rank", "ts", "ts_kind")

    def __init__(self, msg: str, rank: str | None, level: str | None, ts: float | None, ts_kind: str | None) -> None:
        self.msg, self.rank, self.level, self.ts, self.ts_kind = msg, rank, level, ts, ts_kind


def _seconds(text: str, fmt: str) -> float | None:
    try:
        return datetime.strptime(text, fmt).timestamp()
    except (ValueError, OverflowError, OSError):
        return None


def decode(raw: bytes) -> str:
    """``raw`` as text: UTF-8, a byte it cannot decode replaced; NUL and ANSI removed."""
    text = raw.decode("utf-8", "replace").replace("\x00", "").rstrip("\r")
    return _ANSI.sub("", text) if ("\x1b" in text or "^[[" in text) else text


def strip(text: str) -> Parsed:
    """The message of a decoded line and what its prefixes said."""
    rank: str | None = None
    level: str | None = None
    ts: float | None = None
    kind: str | None = None
    pos = 0
    last = None
    for _ in range(8):  # prefixes nest: "(Worker pid=1) (Worker_TP3 pid=1) ERROR 03-05 09:56:09 [x.py:1] "
        while pos < len(text) and text[pos] in " \t":
            pos += 1
        m = _PREFIXES.match(text, pos)
        if m is None or m.end() == pos:
            break
        g = m.lastgroup
        if g == "pylog" and last != "iso":  # Python logging's "- name - LEVEL -" follows its asctime
            break
        pos, last = m.end(), g
        if g == "iso":
            if ts is None:
                ts, kind = _seconds(m.group("iso_t").replace("T", " "), "%Y-%m-%d %H:%M:%S"), "iso"
            if m.group("sg_rank"):
                rank = m.group("sg_rank").strip()
        elif g == "journal" and ts is None:
            ts, kind = _seconds("2000 " + " ".join(m.group("j_t").split()), "%Y %b %d %H:%M:%S"), "journal"
        elif g == "level":
            level = m.group("lvl")
            if ts is None:
                ts, kind = _seconds("2000-" + m.group("l_t"), "%Y-%m-%d %H:%M:%S"), "engine"
        elif g == "pylog":
            level = m.group("plvl")
        elif g == "glog" and ts is None:
            ts, kind = _seconds("2000" + m.group("g_t"), "%Y%m%d %H:%M:%S"), "glog"
        elif g == "proc":
            found = _RANK_IN_PROC.search(m.group("p"))
            name = m.group("p").split(" pid=")[0].split(",")[0].strip()
            label = found.group(0) if found else name
            if rank is None or found:
                rank = label
        elif g == "rank":
            rank = "rank" + m.group("r")
        elif g == "nccl" and rank is None:
            rank = "dev" + m.group("dev")
    return Parsed(text[pos:].strip(), rank, level, ts, kind)
