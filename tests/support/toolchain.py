"""Recorded toolchain states (tests/fixtures/toolchain) and this machine's CUDA toolkit."""

from __future__ import annotations

import copy
import json
import os
import shutil

from flightcheck._examples import load_example
from support import FIXTURES

#: Where the real toolkit is expected on this machine; tests that need it skip without it.
CUDA = "/usr/local/cuda"
HAVE_TOOLS = (
    os.path.exists(f"{CUDA}/bin/nvcc") and shutil.which("ninja") is not None and shutil.which("c++") is not None
)

GPU_SECTIONS = ("driver", "gpus", "visible_devices", "fabric_manager", "imex", "host")


def sections(name: str) -> dict:
    """The toolchain / python / env / jit_cache sections of a recorded node state."""
    return json.loads((FIXTURES / "toolchain" / f"{name}.json").read_text())


def gpu_doc() -> dict:
    """Only the GPU sections of the bundled 8x B300 node (arch 103a)."""
    doc = copy.deepcopy(load_example("b300")[0][0])
    return {k: doc[k] for k in GPU_SECTIONS if k in doc}
