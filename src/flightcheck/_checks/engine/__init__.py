"""Engine (FC7xx): the engine's interpreter and its packages.

Importing the package registers every check of the family.
"""

from flightcheck._checks.engine import command, flashinfer_api, versions

__all__ = ["command", "flashinfer_api", "versions"]
