"""Memory fit (FC4xx): weights, KV cache and reserve per GPU; layouts the model refuses.

Importing the package registers every check of the family.
"""

from flightcheck._checks.memory import balance, fit, layout, slack

__all__ = ["balance", "fit", "layout", "slack"]
