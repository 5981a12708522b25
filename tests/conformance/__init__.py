"""Conformance tests against the real engines. A package so that, under pytest's default
(prepend) import mode, its conftest does not take the module name ``conftest`` from
tests/conftest.py; nothing imports it."""
