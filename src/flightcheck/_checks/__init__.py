"""The check catalogue: one module per family, registered on import.

``load_all()`` imports every family module once; the registry in ``_framework`` then holds
every check in code order. Codes are stable: never renumbered, never reused.
"""

from __future__ import annotations

import importlib

#: Family modules, imported in this order. A new family is one more name here.
FAMILY_MODULES = ("toolchain", "gpu", "fabric", "memory", "checkpoint", "host", "engine", "cluster")

_loaded = False


def load_all() -> None:
    """Import every family module (idempotent). A module not written yet is skipped."""
    global _loaded
    if _loaded:
        return
    for name in FAMILY_MODULES:
        try:
            importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
    _loaded = True
