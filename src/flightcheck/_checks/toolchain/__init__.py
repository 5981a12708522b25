"""JIT toolchain (FC1xx): nvcc, ninja, host compiler, headers, FlashInfer's JIT inputs, and
the other runtime compilers of a launch, one module per component (Triton, FlashInfer,
DeepGEMM, tokenspeed_triton, CuTe DSL, the host compiler).

Importing the package registers every check of the family.
"""

from flightcheck._checks.toolchain import (  # _shared: the family's gate (CPU / ROCm vLLM)
    _shared,
    build,
    cute_dsl,
    deepgemm,
    deps,
    flashinfer,
    host_compiler,
    kernels,
    nvcc,
    prepared,
    tokenspeed,
    triton,
)

__all__ = [
    "_shared",
    "build",
    "cute_dsl",
    "deepgemm",
    "deps",
    "flashinfer",
    "host_compiler",
    "kernels",
    "nvcc",
    "prepared",
    "tokenspeed",
    "triton",
]
