"""GPUs and driver (FC2xx): visibility, driver and CUDA compatibility, GPU state.

Importing the package registers every check of the family.
"""

from flightcheck._checks.gpu import driver, state

__all__ = ["driver", "state"]
