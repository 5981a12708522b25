"""What a launch reaches at run time on the target node, and whether this build box can
compile it: the plan ``flightcheck prepare`` prints (``--dry-run``) and then carries out.

Nothing here compiles or imports the engine: the engine's interpreter answers through
:func:`flightcheck._collect.pyinfo.engine_info` (importlib.metadata, no imports), nvcc
through ``nvcc --version`` in a child with a timeout.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass, field
from typing import Any

from flightcheck._collect.proc import run
from flightcheck._collect.pyinfo import engine_info
from flightcheck._collect.python_env import torch_cuda
from flightcheck._knowledge import engines
from flightcheck._knowledge import flashinfer_modules as fim
from flightcheck._knowledge.units import major_minor
from flightcheck._vocabulary.errors import UsageError
from flightcheck._vocabulary.intent import Intent

_ARCH = re.compile(r"^(\d{1,2})\.(\d)([af]?)$")
_NVCC_RELEASE = re.compile(r"release (\d+)\.(\d+)")


def normalise_arch(arch: str) -> str:
    """'10.3a' / '10.3' / 'sm_103a' / 'sm103a' -> '10.3a' (SM >= 9 gets FlashInfer's 'a', as
    ``compilation_context.py`` gives it). Raises UsageError for anything else."""
    a = arch.strip().lower().removeprefix("sm_").removeprefix("sm")
    if re.fullmatch(r"\d{2,3}[af]?", a):
        digits = a.rstrip("af")
        a = f"{digits[:-1]}.{digits[-1]}{a[len(digits) :]}"
    m = _ARCH.match(a)
    if not m:
        raise UsageError(f"--arch {arch!r}: give an SM arch such as 10.3a (B300), 10.0a (B200), 9.0a (H100)")
    major, minor, suffix = int(m.group(1)), m.group(2), m.group(3)
    if not suffix and major >= 9:
        suffix = "a"
    return f"{major}.{minor}{suffix}"


def arch_from_node(path: str) -> str:
    """The (one) GPU arch of a facts snapshot (``flightcheck collect -o NODE.json``)."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError) as exc:
        raise UsageError(f"--for {path}: cannot read the node's facts: {exc}") from None
    gpus = data.get("gpus") if isinstance(data, dict) else None
    caps = sorted(
        {str(g["compute_capability"]) for g in gpus or [] if isinstance(g, dict) and g.get("compute_capability")}
    )
    if not caps:
        raise UsageError(f"--for {path}: the snapshot names no GPU compute capability")
    if len(caps) > 1:
        raise UsageError(f"--for {path}: GPUs of several archs ({', '.join(caps)}): prepare one bundle per arch")
    return normalise_arch(str(caps[0]))


@dataclass
class Toolchain:
    """The build box's compiler for the target, and what is wrong with it (empty: fine)."""

    nvcc: str | None = None
    nvcc_version: str | None = None
    cuda_home: str | None = None
    problems: list[str] = field(default_factory=list)


def nvcc_version(nvcc: str) -> str | None:
    """'13.0' from ``nvcc --version``; None when it cannot run."""
    proc = run([nvcc, "--version"], timeout=20.0)
    m = _NVCC_RELEASE.search(proc.out) if proc.ok else None
    return f"{m.group(1)}.{m.group(2)}" if m else None


def check_toolchain(arch: str, torch_cuda_version: str | None, env: dict[str, str]) -> Toolchain:
    """nvcc present; its major equals torch's CUDA major; new enough for ``arch``; the CUDA
    headers and a linkable libcuda stub beside it."""
    tc = Toolchain()
    home = env.get("CUDA_HOME") or env.get("CUDA_PATH")
    nvcc = os.path.join(home, "bin", "nvcc") if home else shutil.which("nvcc", path=env.get("PATH"))
    if not nvcc or not os.access(nvcc, os.X_OK):
        tc.problems.append("no nvcc on this build box (set CUDA_HOME or put a CUDA toolkit's bin on PATH)")
        return tc
    tc.nvcc = nvcc
    tc.nvcc_version = nvcc_version(nvcc)
    have = major_minor(tc.nvcc_version)
    if have is None:
        tc.problems.append(f"{nvcc} --version printed no release")
        return tc
    # the toolkit root: CUDA_HOME, else the one holding nvcc, else the versioned default
    # (a /usr/local/bin/nvcc wrapper script resolves to nothing useful)
    candidates = [home] if home else []
    candidates += [os.path.dirname(os.path.dirname(os.path.realpath(nvcc))), f"/usr/local/cuda-{have[0]}.{have[1]}"]
    candidates.append("/usr/local/cuda")
    tc.cuda_home = next(
        (c for c in candidates if os.path.exists(os.path.join(c, "include", "cuda_runtime.h"))), candidates[0]
    )
    major = fim.arch_major(arch)
    need = fim.MIN_NVCC_FOR_MAJOR.get(major or 0)
    if need and have < need:
        tc.problems.append(f"nvcc {tc.nvcc_version} cannot target {arch}: it needs nvcc >= {need[0]}.{need[1]}")
    torch_mm = major_minor(torch_cuda_version)
    if torch_mm and torch_mm[0] != have[0]:
        tc.problems.append(
            f"nvcc {tc.nvcc_version} is CUDA {have[0]} but the engine's torch is CUDA {torch_cuda_version}: "
            f"modules must be built with a CUDA {torch_mm[0]}.x nvcc (a CUDA 13 module on a CUDA 12 stack dies "
            "with error 35)"
        )
    roots = {tc.cuda_home, os.path.join(tc.cuda_home, "targets", "x86_64-linux")}
    if not any(os.path.exists(os.path.join(r, "include", "cuda_runtime.h")) for r in roots):
        tc.problems.append(f"no CUDA headers (include/cuda_runtime.h) under {tc.cuda_home}")
    stubs = [os.path.join(r, d, "libcuda.so") for r in roots for d in ("lib64/stubs", "lib/stubs", "lib64", "lib")]
    if not any(os.path.exists(s) for s in stubs):
        tc.problems.append(f"no linkable libcuda stub (lib64/stubs/libcuda.so) under {tc.cuda_home}")
    return tc


@dataclass
class Plan:
    """Everything ``prepare`` will do, decided before it does any of it."""

    arch: str
    python: str
    flashinfer: str | None
    torch: str | None
    torch_cuda: str | None
    flashinfer_dir: str | None
    modules: list[tuple[fim.Module, str]]
    toolchain: Toolchain
    cuda_label: str | None  # the official wheels' CUDA label for this stack, None: none published
    index_url: str
    wheels: list[str]
    not_preparable: list[fim.NotPreparable]
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The plan as ``--dry-run --format json`` prints it."""
        return {
            "arch": self.arch,
            "python": self.python,
            "flashinfer": self.flashinfer,
            "torch": self.torch,
            "torch_cuda": self.torch_cuda,
            "modules": [{"name": m.name, "why": why, "generator": m.generator} for m, why in self.modules],
            "toolchain": {
                "nvcc": self.toolchain.nvcc,
                "nvcc_version": self.toolchain.nvcc_version,
                "problems": self.toolchain.problems,
            },
            "wheels": self.wheels,
            "index_url": self.index_url,
            "not_preparable": [{"what": n.what, "why": n.why, "avoid": n.avoid} for n in self.not_preparable],
            "notes": self.notes,
        }


def _model_hints(model: str | None) -> tuple[str | None, bool | None]:
    """(quant method, uses MLA) from a local model directory's config.json; (None, None)
    when it is not one (a repo id is not resolved here)."""
    if not model or not os.path.isfile(os.path.join(model, "config.json")):
        return None, None
    try:
        with open(os.path.join(model, "config.json"), encoding="utf-8") as fh:
            cfg = json.load(fh)
    except (OSError, ValueError):
        return None, None
    if not isinstance(cfg, dict):
        return None, None
    q = cfg.get("quantization_config")
    method = q.get("quant_method") if isinstance(q, dict) else None
    return (str(method) if method else None), ("kv_lora_rank" in cfg)


def cuda_label(torch_cuda_version: str | None) -> str | None:
    """The official jit-cache label matching torch's CUDA ('13.0'), None when none is published."""
    mm = major_minor(torch_cuda_version)
    label = f"{mm[0]}.{mm[1]}" if mm else None
    return label if label in fim.OFFICIAL_CUDA_LABELS else None


def make_plan(
    arch: str,
    python: str,
    intent: Intent,
    env: dict[str, str],
    *,
    only: list[str] | None = None,
    index_url: str | None = None,
) -> Plan:
    """Resolve the plan. ``only``: build just these modules (names from the inventory)."""
    info = engine_info(python, env)
    if "error" in info:
        raise UsageError(f"--python {python}: {info['error']}")
    packages = info.get("packages") or {}
    dirs = info.get("dirs") or {}
    fi_version = packages.get("flashinfer-python")
    t_cuda = torch_cuda(str(dirs["torch"]))[0] if dirs.get("torch") else None
    quant, mla = _model_hints(intent.model)
    quant = intent.quantization or quant
    notes: list[str] = []
    if only:
        unknown = [n for n in only if n not in fim.MODULES]
        if unknown:
            raise UsageError(f"--modules: unknown module(s) {', '.join(unknown)}; known: {', '.join(fim.MODULES)}")
        modules = [(fim.MODULES[n], "asked for with --modules") for n in only]
    else:
        modules = fim.modules_for_launch(arch, tensor_parallel=intent.tensor_parallel_size, quantization=quant, mla=mla)
    if not fi_version:
        notes.append(f"flashinfer-python is not installed in {python}: nothing of FlashInfer to prepare")
        modules = []
    elif fi_version != fim.FLASHINFER_READ:
        notes.append(
            f"FlashInfer {fi_version}: the module inventory was read in {fim.FLASHINFER_READ} "
            f"(vLLM {fim.VLLM_READ}); extrapolated"
        )
    fetching = [m.name for m, _why in modules if m.downloads]
    if fetching:
        notes.append(
            f"{', '.join(fetching)}: FlashInfer's trtllm-gen generators fetch headers and checksums while the "
            "module is generated: the build box needs egress or a FLASHINFER_CUBINS_REPOSITORY mirror"
        )
    if not engines.get(intent.engine).probes_flashinfer_apis:
        notes.append(f"the launch-path table is vLLM {fim.VLLM_READ}'s; engine {intent.engine}: extrapolated")
    label = cuda_label(t_cuda)
    wheels: list[str] = []
    if fi_version:
        wheels.append(f"flashinfer-cubin=={fi_version}")
        if label:
            tag = "cu" + label.replace(".", "")
            wheels.append(f"flashinfer-jit-cache=={fi_version}+{tag}")
            wheels.append(f"flashinfer-jit-cache-sm{arch.replace('.', '')}=={fi_version}+{tag}")
        else:
            notes.append(
                f"torch's CUDA {t_cuda or 'unknown'} has no official flashinfer-jit-cache "
                f"({'/'.join(fim.OFFICIAL_CUDA_LABELS)} only): every module is compiled here"
            )
    url = index_url or (fim.OFFICIAL_INDEX.format(label=label.replace(".", "")) if label else "https://pypi.org/simple")
    return Plan(
        arch=arch,
        python=python,
        flashinfer=fi_version,
        torch=packages.get("torch"),
        torch_cuda=t_cuda,
        flashinfer_dir=dirs.get("flashinfer"),
        modules=modules,
        toolchain=check_toolchain(arch, t_cuda, env),
        cuda_label=label,
        index_url=url,
        wheels=wheels,
        not_preparable=list(fim.NOT_PREPARABLE),
        notes=notes,
    )


def render(plan: Plan) -> str:
    """The plan as text."""
    lines = [
        (
            f"prepare for SM {plan.arch}: FlashInfer {plan.flashinfer or '-'}, torch {plan.torch or '-'} "
            f"(CUDA {plan.torch_cuda or '-'}), engine interpreter {plan.python}"
        ),
        f"build box: nvcc {plan.toolchain.nvcc_version or '-'} ({plan.toolchain.nvcc or 'none'})",
    ]
    lines += [f"  problem: {p}" for p in plan.toolchain.problems]
    lines.append(f"modules to compile AOT for {plan.arch} ({len(plan.modules)}):")
    lines += [f"  {m.name:<24} {why}" for m, why in plan.modules]
    lines.append(f"wheels from {plan.index_url}:")
    lines += [f"  {w}" for w in plan.wheels] or ["  (none)"]
    lines.append("cannot be prepared (the setting that avoids it):")
    lines += [f"  {n.what}: {n.why}" + (f"  -> {n.avoid}" if n.avoid else "") for n in plan.not_preparable]
    lines += [f"note: {n}" for n in plan.notes]
    return "\n".join(lines)
