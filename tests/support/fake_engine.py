"""A fake engine environment for tests: a real venv (so its interpreter is another
interpreter, with its own site-packages) holding dist-info metadata and the files the
collectors read as text: torch/version.py, vllm/envs.py, sglang/srt/environ.py and a
flashinfer_jit_cache tree of synthetic .so files. Nothing in it is importable as the real
thing, except a fake ``torch`` that reports compiled arch flags for ``--deep``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from support.fake_cuda import elf_with_fatbin

VLLM_ENVS = """
import os
from typing import TYPE_CHECKING
if TYPE_CHECKING:
    VLLM_HOST_IP: str = ""
    VLLM_ALLREDUCE_USE_SYMM_MEM: bool = True
environment_variables = {
    "VLLM_HOST_IP": lambda: os.getenv("VLLM_HOST_IP", ""),
    "VLLM_ALLREDUCE_USE_SYMM_MEM": lambda: bool(int(os.getenv("VLLM_ALLREDUCE_USE_SYMM_MEM", "1"))),
    "VLLM_FLASHINFER_ALLREDUCE_BACKEND": lambda: os.getenv("VLLM_FLASHINFER_ALLREDUCE_BACKEND", "auto"),
    "CUDA_VISIBLE_DEVICES": lambda: os.environ.get("CUDA_VISIBLE_DEVICES"),
}
"""

SGLANG_ENVIRON = """
class Envs:
    SGLANG_ENABLE_TORCH_SYMM_MEM = EnvBool(False)
    SGLANG_JIT_DEEPGEMM_PRECOMPILE = EnvBool(True)
    SGL_DG_CACHE_DIR = EnvStr("")
"""

FAKE_TORCH_INIT = """
class _C:
    @staticmethod
    def _cuda_getArchFlags():
        return "sm_80 sm_90 sm_100 sm_103 sm_120"
"""


def site_packages(venv: Path) -> Path:
    return next((venv / "lib").glob("python3*/site-packages"))


def dist(sp: Path, name: str, version: str, requires: list[str] = ()) -> None:
    d = sp / f"{name.replace('-', '_')}-{version}.dist-info"
    d.mkdir(parents=True, exist_ok=True)
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"] + [
        f"Requires-Dist: {r}" for r in requires
    ]
    (d / "METADATA").write_text("\n".join(lines) + "\n")


def make_venv(root: Path) -> Path:
    """A bare venv; returns its interpreter path (bin/python, a symlink out of the venv)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, capture_output=True)
    return root / "bin" / "python"


def make_engine(
    root: Path,
    *,
    engine: str = "vllm",
    flashinfer: str | None = "0.7.2.post1",
    jit_cache: str | None = None,
    jit_cache_archs: list[str] | None = None,
    torch_cuda: str | None = "13.0",
    importable_torch: bool = False,
) -> Path:
    """A fake engine venv; returns its python."""
    python = make_venv(root)
    sp = site_packages(root)
    if engine == "vllm":
        dist(
            sp,
            "vllm",
            "0.33.0",
            [f"flashinfer-python=={flashinfer or '0.7.2.post1'}", "torch==2.14.0", "ray[cgraph]>=2.48; extra == 'ray'"],
        )
        (sp / "vllm").mkdir()
        (sp / "vllm" / "envs.py").write_text(VLLM_ENVS)
    else:
        dist(sp, "sglang", "0.5.23", ["flashinfer_python (==0.7.4)", "torch"])
        (sp / "sglang" / "srt").mkdir(parents=True)
        (sp / "sglang" / "srt" / "environ.py").write_text(SGLANG_ENVIRON)
    dist(sp, "torch", f"2.14.0+cu{(torch_cuda or '0').replace('.', '')}" if torch_cuda else "2.14.0+cpu")
    (sp / "torch").mkdir()
    (sp / "torch" / "version.py").write_text(
        "from typing import Optional\n__version__ = '2.14.0'\n"
        + (f"cuda: Optional[str] = '{torch_cuda}'\n" if torch_cuda else "cuda: Optional[str] = None\n")
    )
    (sp / "torch" / "__init__.py").write_text(
        FAKE_TORCH_INIT if importable_torch else "raise ImportError('fake torch')\n"
    )
    if flashinfer:
        dist(sp, "flashinfer-python", flashinfer)
    if jit_cache:
        dist(sp, "flashinfer-jit-cache", jit_cache)
        pkg = sp / "flashinfer_jit_cache"
        (pkg / "jit_cache").mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        if jit_cache_archs:
            for module in ("norm", "sampling", "page"):
                elf_with_fatbin(pkg / "jit_cache" / module / f"{module}.so", [[("elf", a) for a in jit_cache_archs]])
            # an arch-pinned module must not be sampled (it would narrow nothing, but mislead)
            elf_with_fatbin(pkg / "jit_cache" / "fused_moe_103" / "fused_moe_103.so", [[("elf", "10.3a")]])
    return python
