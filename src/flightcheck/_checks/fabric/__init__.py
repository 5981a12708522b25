"""NVLink fabric and multicast (FC3xx): NVSwitch, fabric manager, IMEX, the multicast probe and its fallback.

Importing the package registers every check of the family.
"""

from flightcheck._checks.fabric import multicast, nvswitch

__all__ = ["multicast", "nvswitch"]
