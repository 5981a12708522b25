"""Fetch every release of vLLM, SGLang and FlashInfer and keep only their Python sources.

The release atlas (``scripts/gen_release_atlas.py``) is read from the engines' wheels as
text: this script lists the releases on the package index (``pip index versions``),
downloads each wheel with ``pip download --no-deps --only-binary=:all:`` (never installs or
imports it; for CPython 3.11, then 3.12: SGLang 0.5.11-0.5.22 publish ``cp312`` wheels only),
extracts the package's ``*.py`` files and its ``METADATA`` into ``CACHE/<package>/<version>/``
and deletes the wheel (a vLLM wheel is 170-500 MB; its sources are 5-25 MB). A release already
in the cache is skipped, so a rerun only fetches what is new.

A release with no wheel at all (flashinfer-python 0.2.0.post1-0.4.1) is taken from its sdist.
``pip download`` cannot fetch an sdist without running its build backend (it prepares the
metadata: flashinfer's ``setup.py`` wants torch), so pip's own finder and HTTP session
(the configured indexes, certificates) locate and download the ``.tar.gz``, its sha256 is
checked against the index's, and :func:`extract_sdist` unpacks only the import package's
``*.py`` files, ``PKG-INFO`` (kept as ``METADATA``) and ``pyproject.toml``, refusing the whole
archive on an absolute path, a ``..`` component, a link or device member, or past a size
bound. Nothing of the sdist is built or run.

    python scripts/atlas_fetch.py --cache ~/.cache/flightcheck-atlas --wheels /tmp/wheels [--jobs 3]
        [--only sglang --from 0.5.11 --to 0.5.22]
"""

from __future__ import annotations

import argparse
import hashlib
import re
import shutil
import subprocess
import sys
import tarfile
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


#: bounds of an sdist extraction: what is kept (sources and metadata), and the archive's members
MAX_KEPT_BYTES = 200 * 2**20
MAX_MEMBER_BYTES = 20 * 2**20
MAX_MEMBERS = 200_000


class HostileArchive(ValueError):
    """An sdist member that could write outside its directory, or an archive past the bounds."""


def _member_parts(name: str) -> list[str]:
    """A member's path components; HostileArchive for an absolute path or a ``..``."""
    if name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name):
        raise HostileArchive(f"absolute path in the archive: {name!r}")
    parts = [p for p in name.replace("\\", "/").split("/") if p not in ("", ".")]
    if ".." in parts:
        raise HostileArchive(f"'..' in an archive path: {name!r}")
    return parts


def extract_sdist(archive: Path, package: str, target: Path) -> int:
    """Unpack from an sdist (``.tar.gz``) the import package's ``*.py`` files (the package
    directory found by its ``__init__.py``: ``sglang-X/python/sglang/`` or ``flashinfer-X/
    flashinfer/``), ``PKG-INFO`` as ``METADATA`` and the ``pyproject.toml`` beside the package;
    returns the bytes kept. Every member is vetted before anything is written: an absolute
    path, a ``..`` component, a symlink, hard link or device, too many members or a member or
    total past the bounds raise :class:`HostileArchive` and nothing is extracted."""
    with tarfile.open(archive, "r:gz") as tar:
        members = []
        for count, info in enumerate(tar):
            if count >= MAX_MEMBERS:
                raise HostileArchive(f"more than {MAX_MEMBERS} members")
            parts = _member_parts(info.name)
            if not (info.isfile() or info.isdir()):
                raise HostileArchive(f"link or special member in the archive: {info.name!r}")
            if info.size > MAX_MEMBER_BYTES:
                raise HostileArchive(f"member of {info.size} bytes: {info.name!r}")
            members.append((parts, info))
        inits = [p for p, i in members if i.isfile() and p[-2:] == [package, "__init__.py"]]
        if not inits:
            raise HostileArchive(f"no {package}/__init__.py in the archive")
        base = min(inits, key=len)[:-2]  # the directory holding the package
        root = base[:1]  # the archive's top directory (PKG-INFO)
        keep: list[tuple[str, tarfile.TarInfo]] = []
        for parts, info in members:
            if not info.isfile():
                continue
            if parts[: len(base) + 1] == [*base, package] and parts[-1].endswith(".py"):
                keep.append(("/".join(parts[len(base) :]), info))
            elif parts == [*root, "PKG-INFO"]:
                keep.append(("METADATA", info))
            elif parts == [*base, "pyproject.toml"]:
                keep.append(("pyproject.toml", info))
        total = sum(i.size for _, i in keep)
        if total > MAX_KEPT_BYTES:
            raise HostileArchive(f"{total} bytes to keep, over {MAX_KEPT_BYTES}")
        for rel, info in keep:
            out = target / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            handle = tar.extractfile(info)
            if handle is None:
                raise HostileArchive(f"unreadable member: {info.name!r}")
            out.write_bytes(handle.read(MAX_MEMBER_BYTES + 1)[:MAX_MEMBER_BYTES])
    return total


def download_sdist(dist: str, version: str, into: Path) -> Path:
    """The ``.tar.gz`` sdist of ``dist==version``, found and downloaded by pip's own finder
    and session (never ``pip download``: that runs the sdist's build backend), sha256-checked.
    Raises RuntimeError when the index has none."""
    from pip._internal.commands import create_command  # pip's internals: only this script uses them

    cmd = create_command("download")
    opts, _ = cmd.parse_args(["--no-deps", "--no-binary=:all:", f"{dist}=={version}"])
    with cmd.main_context():
        session = cmd.get_default_session(opts)
        finder = cmd._build_package_finder(options=opts, session=session, ignore_requires_python=True)
        links = [
            c.link
            for c in finder.find_all_candidates(dist)
            if str(c.version) == version and c.link.filename.endswith(".tar.gz")
        ]
        if not links:
            raise RuntimeError("no sdist on the index")
        link = links[0]
        out = into / link.filename
        digest = hashlib.sha256()
        with session.get(link.url.split("#", 1)[0], stream=True, timeout=180) as resp:
            resp.raise_for_status()
            with out.open("wb") as fh:
                for chunk in resp.iter_content(1 << 20):
                    digest.update(chunk)
                    fh.write(chunk)
        if link.hash_name == "sha256" and link.hash and digest.hexdigest() != link.hash:
            raise RuntimeError(f"sha256 mismatch for {link.filename}")
    return out


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
    found: list[Path] = []
    tail = "no wheel"
    for python in ("3.11", "3.12"):
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q", "-d", str(tmp)]
        cmd += ["--python-version", python]
        for platform in _PLATFORMS:
            cmd += ["--platform", platform]
        done = subprocess.run([*cmd, f"{dist}=={version}"], capture_output=True, text=True, check=False)
        found = sorted(tmp.glob("*.whl"))
        if done.returncode == 0 and found:
            break
        tail = (done.stderr.strip().splitlines() or ["no wheel"])[-1]
    if not found:
        try:
            archive = download_sdist(dist, version, tmp)
            target.mkdir(parents=True, exist_ok=True)
            kept = extract_sdist(archive, package, target)
        except (RuntimeError, OSError, tarfile.TarError, HostileArchive) as exc:
            shutil.rmtree(target, ignore_errors=True)
            return f"{package} {version}: no wheel ({tail}), no sdist ({exc})"
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return f"{package} {version}: ok (sdist, {kept:,} bytes kept)"
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
    ap.add_argument("--from", dest="low", help="the oldest release to fetch (default: the atlas' oldest)")
    ap.add_argument("--to", dest="high", help="the newest release to fetch")
    args = ap.parse_args()
    work: list[tuple[str, str, str]] = []
    for name in args.only or sorted(PACKAGES):
        dist, package, oldest = PACKAGES[name]
        found = releases(dist, args.low or oldest)
        if args.high:
            found = [v for v in found if version_key(v) <= version_key(args.high)]
        work += [(dist, package, v) for v in found]
    with ThreadPoolExecutor(args.jobs) as pool:
        for line in pool.map(lambda w: fetch_one(w[0], w[1], w[2], args.wheels, args.cache), work):
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
