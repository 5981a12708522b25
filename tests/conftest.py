"""Fixtures for every test module; the helpers they use live in ``tests/support``.

Tests never read ``../shared`` (users do not have it).
"""

from __future__ import annotations

import os
from typing import Any

import pytest

# the helpers' asserts report like the tests' own: register before the first import of support
pytest.register_assert_rewrite("support")

from support.ckptgen import load_config, write_checkpoint
from support.evaluation import host_doc


@pytest.fixture(autouse=True, scope="session")
def _caches_out_of_home(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """flightcheck caches (header scans, compile smoke) under $XDG_CACHE_HOME: a test run
    must not fill the user's ~/.cache. Tests that study a cache still set their own."""
    old = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg-cache"))
    yield
    if old is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = old


@pytest.fixture
def b300_doc() -> dict[str, Any]:
    """The healthy 8x B300 snapshot, as a fresh dict."""
    return host_doc("b300")


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A small but complete checkpoint (2 shards, index, config) that fits at TP 8, so the
    checkpoint and memory checks pass and the launch decision is about the node."""
    return str(
        write_checkpoint(
            tmp_path_factory.mktemp("models") / "tiny-llama", load_config("tiny-llama"), shards=2, dense=True
        )
    )
