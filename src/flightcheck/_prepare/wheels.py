"""The wheelhouse: the official FlashInfer wheels (``flashinfer-cubin`` at the exact
version, ``flashinfer-jit-cache`` and its per-arch provider) fetched with the engine
interpreter's own pip (``pip download --no-deps``) when the index answers; skipped, and
said so, when it does not (an air-gapped build box)."""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from dataclasses import dataclass

from flightcheck._collect.proc import run

REACH_TIMEOUT = 5.0
DOWNLOAD_TIMEOUT = 1800.0


@dataclass
class Fetched:
    """One requirement: the wheel file it gave, or why not."""

    requirement: str
    file: str | None = None
    skipped: str | None = None


def reachable(index_url: str) -> str | None:
    """None when ``index_url`` answers over HTTP(S), else why not (one line)."""
    if not index_url.startswith(("http://", "https://")):
        return f"{index_url} is not an http(s) index"
    try:
        with urllib.request.urlopen(index_url.rstrip("/") + "/", timeout=REACH_TIMEOUT) as resp:
            resp.read(1)
    except urllib.error.HTTPError as exc:
        if exc.code >= 500:
            return f"{index_url} answered HTTP {exc.code}"
    except (OSError, ValueError) as exc:
        return f"{index_url} cannot be reached ({getattr(exc, 'reason', exc)})"
    return None


def fetch(python: str, requirements: list[str], index_url: str, wheelhouse: str, env: dict[str, str]) -> list[Fetched]:
    """``pip download`` each requirement into ``wheelhouse``; one that the index lacks is skipped."""
    why = reachable(index_url)
    if why is not None:
        return [Fetched(r, skipped=f"no network: {why}") for r in requirements]
    os.makedirs(wheelhouse, exist_ok=True)
    out = []
    for req in requirements:
        before = set(os.listdir(wheelhouse))
        proc = run(
            [
                python,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--only-binary=:all:",
                "--disable-pip-version-check",
                "--index-url",
                index_url,
                "-d",
                wheelhouse,
                req,
            ],
            timeout=DOWNLOAD_TIMEOUT,
            env=env,
            cwd="/",
        )
        new = sorted(set(os.listdir(wheelhouse)) - before)
        if proc.ok and new:
            out.append(Fetched(req, file=new[0]))
        elif proc.ok:  # already there from an earlier run
            out.append(Fetched(req, file=_existing(wheelhouse, req)))
        else:
            tail = (proc.err or proc.out).strip().splitlines()
            out.append(Fetched(req, skipped=f"not on {index_url}: {tail[-1][:200] if tail else proc.why()}"))
    return out


def _existing(wheelhouse: str, req: str) -> str | None:
    stem = req.split("==", 1)[0].replace("-", "_").lower()
    for name in sorted(os.listdir(wheelhouse)):
        if name.lower().startswith(stem + "-"):
            return name
    return None
