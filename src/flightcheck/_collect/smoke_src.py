"""Sources of the ``--deep`` compile smoke test: the smallest module shaped like a FlashInfer
JIT module (a host .cpp that calls the CUDA runtime, a .cu with one kernel and its launcher)."""

from __future__ import annotations

HOST_CPP = r"""// flightcheck compile smoke test: host side, compiled by $CXX against $cuda_home/include
#include <cuda_runtime.h>

extern "C" void fc_smoke_launch(float* x, int n);

extern "C" int fc_smoke_entry(float* x, int n) {
  fc_smoke_launch(x, n);
  return static_cast<int>(cudaGetLastError());  // needs libcudart at link time
}
"""

KERNEL_CU = r"""// flightcheck compile smoke test: device side, compiled by nvcc for one -gencode
#include <cuda_runtime.h>

__global__ void fc_smoke_kernel(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * 2.0f + 1.0f;
}

extern "C" void fc_smoke_launch(float* x, int n) {
  fc_smoke_kernel<<<(n + 255) / 256, 256>>>(x, n);
}
"""
