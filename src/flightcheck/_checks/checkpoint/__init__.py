"""Checkpoint (FC5xx): the weights on disk, read before the engine loads them.

Importing the package registers every check of the family.
"""

from flightcheck._checks.checkpoint import files, headers

__all__ = ["files", "headers"]
