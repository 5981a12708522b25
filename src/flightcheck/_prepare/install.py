"""``flightcheck prepare install BUNDLE --python ENGINE_PY``, on the node, offline: install
the bundle's wheels with ``pip --no-index``, place its modules where FlashInfer looks first
(``<flashinfer>/data/aot/<m>/<m>.so``, ``jit/env.py`` ``get_aot_artifacts``), leave a record
of the bundle beside them for the checks, and print the environment to launch with."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field

from flightcheck._collect.proc import run
from flightcheck._collect.pyinfo import engine_info
from flightcheck._collect.python_env import torch_cuda
from flightcheck._knowledge import flashinfer_modules as fim
from flightcheck._prepare import bundle as _bundle
from flightcheck._vocabulary.errors import UsageError

PIP_TIMEOUT = 900.0


@dataclass
class Installed:
    """What ``install`` did and the environment it recommends."""

    modules: list[str] = field(default_factory=list)
    wheels: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def launch_env(manifest: dict[str, object]) -> dict[str, str]:
    """The environment a node launches with: no downloads; JIT off only when the bundle
    built every module it planned (a miss then fails at once instead of compiling)."""
    env = {fim.NO_DOWNLOAD_VAR: "1"}
    if manifest.get("complete"):
        env[fim.DISABLE_JIT_VAR] = "1"
    for item in manifest.get("not_prepared") or []:  # type: ignore[attr-defined]
        avoid = item.get("avoid") if isinstance(item, dict) else None
        if avoid and "=" in avoid:
            name, _, value = avoid.partition("=")
            env[name] = value
    return env


def install(
    bundle: str, python: str, env: dict[str, str], say: Callable[[str], None], *, gpu_ccs: list[str] | None = None
) -> Installed:
    """Install ``bundle`` into ``python``'s environment. Raises UsageError (nothing placed)
    when the bundle is damaged or does not fit the installed FlashInfer / CUDA / GPU."""
    manifest = _bundle.read_manifest(bundle)
    problems = _bundle.verify_files(bundle, manifest)
    info = engine_info(python, env)
    if "error" in info:
        raise UsageError(f"--python {python}: {info['error']}")
    dirs = info.get("dirs") or {}
    fi_dir = dirs.get("flashinfer")
    if not fi_dir:
        raise UsageError(f"flashinfer is not installed in {python}: install the engine first, then the bundle")
    fi_version = (info.get("packages") or {}).get("flashinfer-python")
    t_cuda = torch_cuda(str(dirs["torch"]))[0] if dirs.get("torch") else None
    problems += fim.bundle_mismatches(manifest, flashinfer=fi_version, torch_cuda=t_cuda, gpu_ccs=gpu_ccs or [])
    if problems:
        raise UsageError(f"refusing the bundle {bundle}: " + "; ".join(problems))
    done = Installed()
    wheelhouse = os.path.join(bundle, "wheels")
    wheels = sorted(w for w in os.listdir(wheelhouse) if w.endswith(".whl")) if os.path.isdir(wheelhouse) else []
    if wheels:
        say(f"installing {len(wheels)} wheel(s) offline: {', '.join(wheels)}")
        proc = run(
            [
                python,
                "-m",
                "pip",
                "install",
                "--no-index",
                "--no-deps",
                "--disable-pip-version-check",
                "--find-links",
                wheelhouse,
                *(os.path.join(wheelhouse, w) for w in wheels),
            ],
            timeout=PIP_TIMEOUT,
            env=env,
            cwd="/",
        )
        if not proc.ok:
            raise UsageError(f"pip install --no-index failed: {proc.why()}")
        done.wheels = wheels
    else:
        done.notes.append("the bundle has no wheels (built without network): only its modules are installed")
    aot = os.path.join(str(fi_dir), "data", "aot")
    for m in manifest["modules"]:
        name = str(m["name"])
        dest_dir = os.path.join(aot, name)
        os.makedirs(dest_dir, exist_ok=True)
        tmp = os.path.join(dest_dir, f".{name}.so.tmp")
        shutil.copyfile(os.path.join(bundle, str(m["path"])), tmp)
        os.replace(tmp, os.path.join(dest_dir, f"{name}.so"))  # a half-copied .so is never seen
        done.modules.append(name)
        say(f"placed {name} -> {os.path.join(dest_dir, name + '.so')}")
    record = dict(manifest, installed_from=os.path.abspath(bundle))
    with open(os.path.join(aot, _bundle.INSTALLED_RECORD), "w", encoding="utf-8") as fh:
        json.dump(record, fh, indent=2, sort_keys=True)
    done.env = launch_env(manifest)
    return done
