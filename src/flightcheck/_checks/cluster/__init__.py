"""Across nodes (FC8xx): what must agree between the nodes of one launch.

Importing the package registers every check of the family.
"""

from flightcheck._checks.cluster import checks

__all__ = ["checks"]
