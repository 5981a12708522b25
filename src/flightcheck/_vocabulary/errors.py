"""Exceptions that cross module boundaries.

``UsageError`` is bad input from the user (a flag, a facts file, a model path that cannot
be parsed): the CLI prints its one line and exits 2, never a traceback.
"""

from __future__ import annotations


class UsageError(Exception):
    """Bad usage or unreadable input; the message is one line meant for the user."""
