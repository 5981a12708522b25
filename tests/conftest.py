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
from support.mutation import BREAK_ENV, break_checks, codes_named


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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under ``FLIGHTCHECK_TEST_BREAK=named``, run only the tests that name a check."""
    if os.environ.get(BREAK_ENV) != "named":
        return
    keep = [i for i in items if codes_named(i.name)]
    config.hook.pytest_deselected(items=[i for i in items if not codes_named(i.name)])
    items[:] = keep


@pytest.fixture(autouse=True)
def _break_the_checks_a_test_names(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under ``FLIGHTCHECK_TEST_BREAK=named`` only (tests/checks/test_mutation.py sets it in
    a child pytest): the checks the test names raise, so a test that must not stop a launch
    has to fail. A normal run changes nothing."""
    if os.environ.get(BREAK_ENV) == "named":
        break_checks(monkeypatch, codes_named(request.node.name))


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
