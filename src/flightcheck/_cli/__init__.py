"""The command line: ``check``, ``collect``, ``run``, ``cluster``, ``probe``, ``rules``, ``explain``."""

from flightcheck._cli.main import main

__all__ = ["main"]
