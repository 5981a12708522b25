"""A bundle on disk: ``wheels/`` (the official wheels), ``aot/<m>/<m>.so`` (the modules,
FlashInfer's own AOT layout) and ``manifest.json``, which records for each module the arch
read back from the binary, its sha256 and the libraries it needs, and for the bundle the
FlashInfer / torch / CUDA it was built against and what could not be prepared.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from typing import Any

from flightcheck._collect.fatbin import NotFatbin, read_archs
from flightcheck._prepare.elf import needed
from flightcheck._vocabulary.errors import UsageError

MANIFEST = "manifest.json"
FORMAT = 1
#: the copy of the manifest ``prepare install`` leaves beside the placed modules, so the
#: checks know a prepared node (``<flashinfer>/data/aot/flightcheck-bundle.json``)
INSTALLED_RECORD = "flightcheck-bundle.json"
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,199}")


def sha256(path: str) -> str:
    """Hex sha256 of a file."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def module_entry(name: str, so: str, why: str, build_s: float | None) -> dict[str, Any]:
    """The manifest entry of one bundled module (the arch read back from its fatbin)."""
    try:
        cubins, ptx = read_archs(so)
    except (NotFatbin, OSError):
        cubins, ptx = set(), set()
    return {
        "name": name,
        "path": f"aot/{name}/{name}.so",
        "why": why,
        "archs": sorted(cubins),
        "ptx": sorted(ptx),
        "sha256": sha256(so),
        "size": os.path.getsize(so),
        "needs": needed(so),
        "build_s": round(build_s, 1) if build_s is not None else None,
    }


def write_manifest(bundle: str, manifest: dict[str, Any]) -> str:
    """Write ``manifest.json`` atomically; its path."""
    manifest = {"format": FORMAT, **manifest}
    path = os.path.join(bundle, MANIFEST)
    fd, tmp = tempfile.mkstemp(dir=bundle, prefix=".manifest.")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(manifest, fh, indent=2, sort_keys=True)
        fh.write("\n")
    os.replace(tmp, path)
    return path


def read_manifest(bundle: str) -> dict[str, Any]:
    """The bundle's manifest. Raises UsageError (one line) for a missing or bad one."""
    path = os.path.join(bundle, MANIFEST) if os.path.isdir(bundle) else bundle
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError) as exc:
        raise UsageError(f"{bundle}: not a flightcheck bundle ({MANIFEST}: {exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("modules"), list):
        raise UsageError(f"{bundle}: {MANIFEST} is not a format-{FORMAT} flightcheck manifest")
    return data


def verify_files(bundle: str, manifest: dict[str, Any]) -> list[str]:
    """Problems with the bundle's own files: a module missing or not matching its sha256."""
    problems = []
    for m in manifest["modules"]:
        name = str(m.get("name", "")) if isinstance(m, dict) else ""
        if not _NAME.fullmatch(name):
            # the name becomes a directory under flashinfer/data/aot: never a path of its own
            problems.append(f"module name {name[:60]!r} is not a FlashInfer module name")
            continue
        rel = str(m.get("path", ""))
        path = os.path.normpath(os.path.join(bundle, rel))
        if rel.startswith("/") or ".." in rel.split("/") or not os.path.isfile(path):
            problems.append(f"module {m.get('name')}: {rel} is missing from the bundle")
        elif sha256(path) != m.get("sha256"):
            problems.append(f"module {m.get('name')}: {rel} does not match its sha256 (damaged or altered)")
    return problems
