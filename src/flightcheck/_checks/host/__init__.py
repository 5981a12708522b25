"""Host (FC6xx): shared memory, limits, virtualisation, RAM.

Importing the package registers every check of the family.
"""

from flightcheck._checks.host import system

__all__ = ["system"]
