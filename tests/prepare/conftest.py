"""Fixtures of the prepare tests: a fake engine site (dist-info and package directories
only, read by flightcheck without importing anything) and a PEP 503 index on 127.0.0.1."""

from __future__ import annotations

import base64
import hashlib
import http.server
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest


def dist_info(site: Path, name: str, version: str) -> None:
    d = site / f"{name.replace('-', '_')}-{version}.dist-info"
    d.mkdir(parents=True)
    (d / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


@pytest.fixture
def fake_site(tmp_path: Path) -> Path:
    """flashinfer-python 0.7.2.post1 and torch 2.14.0 (CUDA 13.0), as files only."""
    site = tmp_path / "site"
    dist_info(site, "flashinfer-python", "0.7.2.post1")
    dist_info(site, "torch", "2.14.0")
    (site / "flashinfer").mkdir()
    (site / "flashinfer" / "__init__.py").write_text("raise ImportError('never imported by flightcheck')\n")
    (site / "torch").mkdir()
    (site / "torch" / "__init__.py").write_text("raise ImportError('never imported by flightcheck')\n")
    (site / "torch" / "version.py").write_text("__version__ = '2.14.0'\ncuda = '13.0'\n")
    return site


def make_wheel(where: Path, name: str, version: str) -> Path:
    """A minimal valid pure-Python wheel."""
    dist = name.replace("-", "_")
    path = where / f"{dist}-{version}-py3-none-any.whl"
    files = {
        f"{dist}/__init__.py": b"",
        f"{dist}-{version}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{dist}-{version}.dist-info/WHEEL": (
            b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = []
    for n, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{n},sha256={digest},{len(data)}")
    record.append(f"{dist}-{version}.dist-info/RECORD,,")
    with zipfile.ZipFile(path, "w") as zf:
        for n, data in files.items():
            zf.writestr(n, data)
        zf.writestr(f"{dist}-{version}.dist-info/RECORD", "\n".join(record) + "\n")
    return path


@pytest.fixture
def local_index(tmp_path: Path) -> Iterator[str]:
    """A PEP 503 simple index on 127.0.0.1 serving flashinfer-cubin 0.7.2.post1 (a tiny
    wheel built here); its URL."""
    root = tmp_path / "index"
    files = root / "files"
    files.mkdir(parents=True)
    wheel = make_wheel(files, "flashinfer-cubin", "0.7.2.post1")
    simple = root / "simple" / "flashinfer-cubin"
    simple.mkdir(parents=True)
    (root / "simple" / "index.html").write_text('<a href="flashinfer-cubin/">flashinfer-cubin</a>\n')
    (simple / "index.html").write_text(f'<a href="../../files/{wheel.name}">{wheel.name}</a>\n')

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            super().__init__(*args, directory=str(root), **kwargs)

        def log_message(self, *args):  # type: ignore[no-untyped-def]
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple"
    finally:
        server.shutdown()
        server.server_close()
