"""Conformance tests against the real engines (a package, so that its conftest does not
shadow tests/conftest.py under the module name ``conftest``)."""
