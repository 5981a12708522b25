"""A set of node snapshots: every ``*.json`` in a directory is one node (the Slurm way:
``srun --ntasks-per-node=1 flightcheck collect -o facts/%N.json``).

A node is named by the hostname its snapshot recorded, else by the file's stem. Two
snapshots with one hostname and the same GPUs (by UUID) are one node recorded twice (a
copied or stale file): refused, since counting it twice would let one node pass for two.
Two with one hostname but other GPUs (containers sharing a name) are each named by their
file's stem, so no node hides another.
"""

from __future__ import annotations

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
    files = sorted(p for p in d.glob("*.json") if p.is_file())
    if not files:
        raise UsageError(
            f"--facts-dir {directory}: no *.json snapshot in it (collect with "
            f"`flightcheck collect -o {directory}/$(hostname).json` on each node)"
        )
    loaded: dict[Path, Facts] = {}
    for path in files:
        loaded[path] = from_dict(load_file(path), f"facts file {path}")
    _refuse_duplicates(loaded)
    bases = {str(p): (f.host.hostname if f.host and f.host.hostname else p.stem) for p, f in loaded.items()}
    names = unique_names(bases, {str(p): p.stem for p in loaded})
    return {names[str(p)]: (f, p) for p, f in loaded.items()}


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
