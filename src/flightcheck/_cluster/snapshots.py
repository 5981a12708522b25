"""A set of node snapshots: every ``*.json`` in a directory is one node (the Slurm way:
``srun --ntasks-per-node=1 flightcheck collect -o facts/%N.json``).

A node is named by the hostname its snapshot recorded, else by the file's stem. Two
snapshots with one hostname and the same GPUs (by UUID) are one node recorded twice (a
copied or stale file): refused, since counting it twice would let one node pass for two.
Two with one hostname but other GPUs (containers sharing a name) are each named by their
file's stem, so no node hides another.
"""

from __future__ import annotations

import os
import re
import stat
import sys
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from flightcheck._vocabulary.errors import UsageError
from flightcheck._vocabulary.facts import from_dict, load_file

if TYPE_CHECKING:
    from flightcheck._vocabulary.facts import Facts


def unique_names(bases: dict[str, str], fallbacks: dict[str, str]) -> dict[str, str]:
    """key -> a unique node name: ``bases[key]``, or ``fallbacks[key]`` where bases collide."""
    counts = Counter(bases.values())
    names = {key: (base if counts[base] == 1 else fallbacks[key]) for key, base in bases.items()}
    if len(set(names.values())) != len(names):  # the fallbacks collide too: make them unique
        names = {key: f"{name}#{i}" for i, (key, name) in enumerate(sorted(names.items()))}
    return names


def load_dir(directory: str | Path) -> dict[str, tuple[Facts, Path]]:
    """Node name -> (facts, file) for every ``*.json`` in ``directory``.

    Raises:
        UsageError: the directory is missing or holds no snapshot, or one file is not a
            valid snapshot (the message names the file).
    """
    d = Path(directory)
    if not d.is_dir():
        raise UsageError(f"--facts-dir {directory}: not a directory")
    files = _snapshot_files(d)
    if not files:
        raise UsageError(
            f"--facts-dir {directory}: no *.json snapshot in it (collect with "
            f"`flightcheck collect -o {directory}/$(hostname).json` on each node)"
        )
    loaded: dict[Path, Facts] = {}
    for path in files:
        loaded[path] = from_dict(load_file(path), f"facts file {path}")
    _refuse_duplicates(loaded)
    # a name is printed (text, Prometheus labels): a control character in a hostname or a
    # file name must not reach a terminal raw (escape sequences can rewrite the screen)
    bases = {str(p): printable(f.host.hostname if f.host and f.host.hostname else p.stem) for p, f in loaded.items()}
    names = unique_names(bases, {str(p): printable(p.stem) for p in loaded})
    return {names[str(p)]: (f, p) for p, f in loaded.items()}


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def printable(name: str) -> str:
    """``name`` with every control character (C0, DEL, C1: ESC, BEL, CSI ...) as ``\\xNN``."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", name)


def _snapshot_files(d: Path) -> list[Path]:
    """The ``*.json`` files of ``d`` to read. A symbolic link is followed only when the
    caller or root owns it (in a shared directory another user's link could point at a
    file only root may read, docs/security.md); a broken link, or one refused, is passed
    over with a line on stderr, so the set says what it left out."""
    me = os.geteuid()
    out: list[Path] = []
    for p in sorted(d.glob("*.json")):
        try:
            st = p.lstat()
        except OSError:
            continue
        if stat.S_ISLNK(st.st_mode):
            if st.st_uid not in (me, 0):
                _say(f"{printable(str(p))} is a symbolic link owned by uid {st.st_uid}, not by you: not following it")
                continue
            if not p.exists():
                _say(f"{printable(str(p))} is a broken symbolic link: passed over")
                continue
        if p.is_file():
            out.append(p)
    return out


def _say(line: str) -> None:
    sys.stderr.write(f"flightcheck: warning: --facts-dir: {line}\n")


def _refuse_duplicates(loaded: dict[Path, Facts]) -> None:
    """Raise when two snapshots are of one node: one hostname and the same GPU UUIDs."""
    seen: dict[tuple[str, frozenset[str]], Path] = {}
    for path, f in loaded.items():
        hostname = f.host.hostname if f.host else None
        uuids = frozenset(g.uuid for g in (f.gpus or []) if g.uuid)
        if not hostname or not uuids:
            continue  # nothing to tell one node from another by
        other = seen.setdefault((hostname, uuids), path)
        if other != path:
            raise UsageError(
                f"facts files {other.name} and {path.name} are one node ({hostname}, the same "
                f"{len(uuids)} GPUs): it would count twice; remove the stale one"
            )
