"""The check catalogue: one module per family, registered on import.

``load_all()`` imports every family module once; the registry in :mod:`.framework` then holds
every check in code order. Codes are stable: never renumbered, never reused.
"""

from __future__ import annotations

import importlib

#: Family modules, imported in this order. A new family is one more name here.
FAMILY_MODULES = ("toolchain", "gpu", "fabric", "memory", "checkpoint", "host", "engine", "cluster", "k8s")

_loaded = False


def load_all() -> None:
    """Import every family module (idempotent). A missing one is an install error, never a
    family of checks silently gone from the report."""
    global _loaded
    if _loaded:
        return
    for name in FAMILY_MODULES:
        importlib.import_module(f"{__name__}.{name}")
    _loaded = True
