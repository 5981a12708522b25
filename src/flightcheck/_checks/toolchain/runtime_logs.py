"""The engine-log lines the checks of :mod:`.runtime` explain (``flightcheck diagnose``).

Kept here, applied with :func:`~flightcheck._checks.framework.declare_logs`, while
``runtime.py`` is being split into per-component modules: each entry moves into its
check's ``@check(..., logs=...)`` then. The messages, as the components raise them:
Triton 3.5 ``runtime/build.py`` ("Failed to find C compiler") and
``backends/nvidia/driver.py`` ("libcuda.so cannot found!"); DeepGEMM's JIT
``compiler.hpp`` (vLLM's vendored copy, 0.33.0: "NVCC version should be >= 12.3" on
SM 9.0, "must be at least 12.9" for SM 10.x); FlashInfer 0.7.2.post1
``jit/attention/modules.py`` / ``jit/gemm/core.py`` ("Failed to get checksums.txt from")
and ``jit/cubin_loader.py`` ("Artifact not found locally"); CUDA's ``crt/host_config.h``
("unsupported GNU version"); ptxas's "Value 'sm_…' is not defined for option 'gpu-name'".
"""

from __future__ import annotations

from flightcheck._checks.framework import Log, declare_logs

LOGS: dict[str, tuple[str | Log, ...]] = {
    "FC114": (
        "Failed to preprocess host compiler properties",
        r"No such file or directory: '(?:ccache|sccache|distcc) [^']*'",
    ),
    "FC115": (r"Failed to find C compiler\. Please specify via CC environment variable",),
    "FC117": (r"PermissionError: \[Errno 13\] Permission denied: '[^']*/\.triton",),
    "FC119": (r"NVCC version (?:must be at least|should be >=) 12\.\d",),
    "FC121": (
        Log(
            r"ptxas fatal\s*: Value 'sm_\d+[af]?' is not defined for option 'gpu-name'",
            note="the ptxas Triton (or FlashInfer) runs predates the GPU's arch",
        ),
    ),
    "FC122": (r"Failed to get checksums\.txt", r"Artifact not found locally: "),
    "FC123": (r"unsupported GNU version! gcc versions later than \d+ are not supported",),
    "FC124": (r"libcuda\.so cannot found",),
    "FC125": (r"cannot find -lcuda\b", r"(?:^|\s)(?:ld|objcopy): (?:command )?not found"),
    "FC128": (r"RuntimeError: ptxas not found: ",),
}


def declare() -> None:
    """Add :data:`LOGS` to the checks (once, after :mod:`.runtime` registered them)."""
    for code, logs in LOGS.items():
        declare_logs(code, logs)
