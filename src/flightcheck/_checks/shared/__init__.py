"""Helpers more than one check family uses (which GPUs a launch uses, JIT derivations)."""
