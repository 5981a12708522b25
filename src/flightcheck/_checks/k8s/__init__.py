"""Orchestration (FC9xx): the launch as Kubernetes will run it (``check --k8s``).

Importing the package registers every check of the family.
"""

from flightcheck._checks.k8s import pod

__all__ = ["pod"]
