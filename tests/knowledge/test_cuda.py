"""What CUDA knows: which arch runs kernels built for which, what torch's CUDA can build,
the driver each CUDA release needs."""

from __future__ import annotations

from flightcheck._checks.shared.gpus import subject
from flightcheck._knowledge.cuda import driver_for, ptx_accepted, ptx_needs_cuda, runs_on, torch_cuda_can_build
from flightcheck._vocabulary.facts import from_dict
from support.evaluation import host_doc


def test_arch_compatibility_rules():
    assert runs_on("10.3", ["sm_90", "sm_100"]) == "sm_100"  # same major, lower minor
    assert runs_on("10.0", ["sm_103"]) is None  # never a higher minor
    assert runs_on("9.0", ["sm_90a"]) == "sm_90a" and runs_on("9.1", ["sm_90a"]) is None
    assert runs_on("12.0", ["sm_90", "compute_90"]) == "compute_90"  # PTX JIT
    assert (
        runs_on("10.0", ["compute_90a"]) is None and runs_on("9.0", ["compute_90a"]) == "compute_90a"
    )  # arch-specific PTX
    assert (
        runs_on("10.3", ["compute_100f"]) == "compute_100f" and runs_on("12.0", ["compute_100f"]) is None
    )  # family PTX
    assert runs_on("8.9", ["sm_80", "sm_86"]) == "sm_80"
    assert torch_cuda_can_build("10.3", (12, 8)) is True and torch_cuda_can_build("10.0", (12, 6)) is False
    assert torch_cuda_can_build("7.0", (13, 0)) is False
    assert driver_for((13, 1)) == "590.44.01" and driver_for((12, 7)) == "570.86.10"
    assert subject(from_dict(host_doc("hgx-b300")).gpus[:1]) == "gpu:0"


def test_ptx_isa_needs_the_cuda_that_emits_it():
    # NVIDIA's PTX ISA release history (as cuda-python's _ptx_utils.py carries it)
    assert ptx_needs_cuda((8, 4)) == ((12, 4), True) and ptx_needs_cuda((8, 7)) == ((12, 8), True)
    assert ptx_needs_cuda((8, 6)) == ((12, 7), True) and ptx_needs_cuda((9, 0)) == ((13, 0), True)
    assert ptx_needs_cuda((9, 7)) == ((13, 1), False)  # past the table: newer than 13.1
    assert ptx_needs_cuda((6, 5)) == ((0, 0), True)  # before CUDA 11: any driver
    assert ptx_accepted((8, 7), (12, 8)) is True and ptx_accepted((8, 7), (12, 4)) is False
    assert ptx_accepted((8, 5), (12, 6)) is True  # CUDA 12.6 still emits 8.5
    assert ptx_accepted((9, 7), (13, 1)) is False  # a 13.1 driver takes up to 9.1
    assert ptx_accepted((9, 7), (13, 4)) is None  # past the table on both sides: unknown
    assert ptx_accepted((8, 9), (13, 0)) is True  # unlisted, but below 9.0, which 13.0 takes
    assert ptx_accepted((8, 9), (12, 9)) is False  # above 8.8, the most 12.9 takes
