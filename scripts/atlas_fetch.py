"""Fetch every release of vLLM, SGLang and FlashInfer and keep only their Python sources.

The release atlas (``scripts/gen_release_atlas.py``) is read from the engines' wheels as
text: this script lists the releases on the package index (``pip index versions``),
downloads each wheel with ``pip download --no-deps --only-binary=:all:`` (never installs or
imports it), extracts the package's ``*.py`` files and its ``METADATA`` into
``CACHE/<package>/<version>/`` and deletes the wheel (a vLLM wheel is 170-500 MB; its
sources are 5-25 MB). A release already in the cache is skipped, so a rerun only fetches
what is new.

    python scripts/atlas_fetch.py --cache ~/.cache/flightcheck-atlas --wheels /tmp/wheels [--jobs 3]
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

#: (distribution on the index, import package, the oldest release the atlas reads)
PACKAGES: dict[str, tuple[str, str, str]] = {
    "vllm": ("vllm", "vllm", "0.6.0"),
    "sglang": ("sglang", "sglang", "0.4.0"),
    "flashinfer": ("flashinfer-python", "flashinfer", "0.2.0"),
}

_PLATFORMS = (
    "manylinux_2_39_x86_64",
    "manylinux_2_35_x86_64",
    "manylinux_2_34_x86_64",
    "manylinux_2_31_x86_64",
    "manylinux_2_28_x86_64",
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
)


def version_key(text: str) -> tuple[int, ...]:
    """A sortable key of a release number (``0.8.5.post1`` after ``0.8.5``, before ``0.8.6``)."""
    m = re.fullmatch(r"(\d+(?:\.\d+)*)(?:\.post(\d+))?", text)
    if m is None:
        raise ValueError(f"not a release number: {text!r}")
    nums = [int(x) for x in m.group(1).split(".")]
    return (*nums, *[0] * (4 - len(nums)), int(m.group(2) or 0))


def releases(dist: str, oldest: str) -> list[str]:
    """The releases of ``dist`` on the index from ``oldest`` on (pre-releases left out)."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", dist], capture_output=True, text=True, check=True
    )
    m = re.search(r"Available versions: (.*)", done.stdout)
    if m is None:
        raise SystemExit(f"pip index versions {dist}: no versions in {done.stdout!r}")
    found = [v.strip() for v in m.group(1).split(",")]
    found = [v for v in found if re.fullmatch(r"\d+(\.\d+)*(\.post\d+)?", v)]
    low = version_key(oldest)
    return sorted((v for v in found if version_key(v) >= low), key=version_key)


def fetch_one(dist: str, package: str, version: str, wheels: Path, cache: Path) -> str:
    """Download one wheel, keep its sources under ``cache/package/version``, delete it."""
    target = cache / package / version
    if (target / "METADATA").exists():
        return f"{package} {version}: cached"
    tmp = wheels / f"{package}-{version}"
    tmp.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q", "-d", str(tmp)]
    cmd += ["--python-version", "3.11"]
    for platform in _PLATFORMS:
        cmd += ["--platform", platform]
    done = subprocess.run([*cmd, f"{dist}=={version}"], capture_output=True, text=True, check=False)
    found = sorted(tmp.glob("*.whl"))
    if done.returncode != 0 or not found:
        shutil.rmtree(tmp, ignore_errors=True)
        tail = (done.stderr.strip().splitlines() or ["no wheel"])[-1]
        return f"{package} {version}: no wheel ({tail})"
    target.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(found[0]) as wheel:
        for info in wheel.infolist():
            name = info.filename
            if name.endswith(".dist-info/METADATA"):
                (target / "METADATA").write_bytes(wheel.read(info))
            elif name.startswith(f"{package}/") and name.endswith(".py") and ".." not in name:
                out = target / name
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes(wheel.read(info))
    shutil.rmtree(tmp, ignore_errors=True)
    return f"{package} {version}: ok"


def main() -> int:
    """Fetch what the cache lacks."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", type=Path, required=True)
    ap.add_argument("--wheels", type=Path, required=True)
    ap.add_argument("--jobs", type=int, default=3)
    ap.add_argument("--only", choices=sorted(PACKAGES), action="append")
    args = ap.parse_args()
    work: list[tuple[str, str, str]] = []
    for name in args.only or sorted(PACKAGES):
        dist, package, oldest = PACKAGES[name]
        work += [(dist, package, v) for v in releases(dist, oldest)]
    with ThreadPoolExecutor(args.jobs) as pool:
        for line in pool.map(lambda w: fetch_one(w[0], w[1], w[2], args.wheels, args.cache), work):
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
