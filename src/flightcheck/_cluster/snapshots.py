"""A set of node snapshots: every ``*.json`` in a directory is one node (the Slurm way:
``srun --ntasks-per-node=1 flightcheck collect -o facts/%N.json``).

A node is named by the hostname its snapshot recorded, else by the file's stem; when two
snapshots claim one hostname (a copied file, containers sharing a name) each is named by
its file's stem instead, so no node hides another.
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
    bases = {str(p): (f.host.hostname if f.host and f.host.hostname else p.stem) for p, f in loaded.items()}
    names = unique_names(bases, {str(p): p.stem for p in loaded})
    return {names[str(p)]: (f, p) for p, f in loaded.items()}
