"""What CUDA knows: which arch runs kernels built for which, what torch's CUDA can build,
the driver each CUDA release needs."""

from __future__ import annotations

from flightcheck._checks.shared.gpus import subject
from flightcheck._knowledge.cuda import driver_for, runs_on, torch_cuda_can_build
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
