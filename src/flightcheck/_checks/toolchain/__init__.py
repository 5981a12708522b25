"""JIT toolchain (FC1xx): nvcc, ninja, host compiler, headers, FlashInfer's JIT inputs.

Importing the package registers every check of the family.
"""

from flightcheck._checks.toolchain import build, deps, kernels, nvcc, runtime, runtime_logs

runtime_logs.declare()

__all__ = ["build", "deps", "kernels", "nvcc", "runtime"]
