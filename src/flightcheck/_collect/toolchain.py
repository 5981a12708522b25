"""Toolchain collector: the JIT toolchain exactly as FlashInfer will resolve it for the engine.

Command-line equivalents: ``echo $CUDA_HOME``, ``$CUDA_HOME/bin/nvcc --version``,
``nvcc --list-gpu-arch``, ``which ninja && ninja --version``, ``c++ -dumpfullversion``,
``ls $CUDA_HOME/lib64/libcudart.so``, and the engine interpreter's Python.h. The tool calls
run concurrently; a missing tool is a null field with its reason in ``unavailable``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

from flightcheck._collect import CollectContext, collector, run_parallel
from flightcheck._collect import cuda as _cuda
from flightcheck._collect.jit_cache import nearest_existing, workspace_dir, write_test
from flightcheck._collect.pyinfo import engine_info
from flightcheck._knowledge import flashinfer as _fi
from flightcheck._knowledge import triton as _triton
from flightcheck._knowledge import vllm as _vllm
from flightcheck._knowledge.cuda import host_compiler_bounds

#: tools looked up on the engine's PATH besides nvcc/ninja/cc/c++: ``which`` (FlashInfer's
#: CUDA-home lookup runs it), the C compilers Triton tries, the binutils FlashInfer links with.
HOST_TOOLS = ("which", *_triton.C_COMPILERS, "ld", "objcopy")
#: variables naming a tool a runtime compiler executes (``--version`` is read for nvcc ones).
TOOL_VARS = (_triton.PTXAS, _triton.PTXAS_BLACKWELL, _vllm.DG_NVCC_VAR, _fi.CUTE_DSL_PTXAS)
#: compiler variables whose whole value Triton (``runtime/build.py``) and tilelang
#: (``contrib/cc.py``) run as one file: recorded as that file's state, so that a path with
#: a space in it is told from a command line (``ccache gcc``).
COMPILER_VARS = ("CC", "CXX")


def path_state(path: str, *, directory: bool = False) -> dict[str, Any]:
    """What ``path`` is: executable | file | dir | missing; for a directory that is to hold
    files, whether one can be created in it (or in its nearest existing parent)."""
    if os.path.isdir(path):
        kind = "dir"
    elif os.path.isfile(path):
        kind = "executable" if os.access(path, os.X_OK) else "file"
    else:
        kind = "missing"
    out: dict[str, Any] = {"path": path, "kind": kind}
    if directory:
        tested = nearest_existing(path)
        why = write_test(tested)
        out["writable"] = why is None
        out["problem"] = why
    return out


def env_paths(env: dict[str, str]) -> dict[str, dict[str, Any]]:
    """The state of every tool variable that is set, and of Triton's cache directory."""
    out: dict[str, dict[str, Any]] = {}
    for var in TOOL_VARS:
        value = env.get(var)
        if not value:
            continue
        st = path_state(value)
        if st["kind"] == "executable":  # nvcc and ptxas both print "release X.Y,"
            st["version"], st["problem"] = _cuda.nvcc_version(value, env)
        out[var] = st
    for var in COMPILER_VARS:  # what Triton / tilelang run as one argv[0] (FC114)
        value = env.get(var)
        if value:
            found = value if os.sep in value else _cuda.which(value, env)
            out[var] = path_state(found) if found else {"path": value, "kind": "missing"}
    triton_cache = _triton.cache_dir(dict(env))
    if triton_cache:
        out[_triton.CACHE_DIR] = path_state(os.path.abspath(triton_cache), directory=True)
    return out


def venv_ninja(python: str, env: dict[str, str]) -> str | None:
    """A ninja in the engine interpreter's bin dir that the engine's PATH does not reach.

    The pip ``ninja`` package installs ``<venv>/bin/ninja``; an unactivated venv leaves it off
    PATH and FlashInfer's ``run_ninja`` fails with "No such file or directory: 'ninja'".
    """
    bindir = os.path.dirname(python)  # not resolved: a venv's python is a symlink out of it
    candidate = os.path.join(bindir, "ninja")
    if not (os.path.isfile(candidate) and os.access(candidate, os.X_OK)):
        return None
    path_dirs = [os.path.realpath(d) for d in env.get("PATH", "").split(os.pathsep) if d]
    return None if os.path.realpath(bindir) in path_dirs else candidate


def libcuda_lookup(env: dict[str, str]) -> dict[str, Any]:
    """Triton's ``libcuda_dirs`` (backends/nvidia/driver.py) replayed: ``/sbin/ldconfig -p``
    lines naming libcuda.so.1, else LD_LIBRARY_PATH entries holding it."""
    from flightcheck._collect.proc import run

    if not os.path.exists(_triton.LDCONFIG):
        state = "missing"
    else:
        proc = run([_triton.LDCONFIG, "-p"], timeout=5.0, env=env)
        locs = [ln.split()[-1] for ln in proc.out.splitlines() if _triton.LIBCUDA in ln] if proc.ok else []
        state = "none" if not locs else ("found" if any(os.path.exists(p) for p in locs) else "stale")
    ld = [
        d
        for d in (env.get("LD_LIBRARY_PATH") or "").split(":")
        if d and os.path.exists(os.path.join(d, _triton.LIBCUDA))
    ]
    known = [d for d in _triton.LIBCUDA_DIRS if os.path.exists(os.path.join(d, _triton.LIBCUDA))]
    return {"ldconfig": state, "ld_library_path": ld, "known": known}


def link_libcuda(home: str | None, env: dict[str, str]) -> list[str]:
    """The unversioned libcuda.so files ``-lcuda`` can resolve to in FlashInfer's link line:
    under the CUDA home's lib64 and lib64/stubs, LIBRARY_PATH, and the linker's usual dirs."""
    dirs = [os.path.join(home, sub) for sub in _fi.LINK_SUBDIRS] if home else []
    dirs += [d for d in (env.get("LIBRARY_PATH") or "").split(":") if d]
    dirs += list(_fi.LINKER_DEFAULT_DIRS)
    return [p for p in (os.path.join(d, "libcuda.so") for d in dict.fromkeys(dirs)) if os.path.exists(p)]


def cute_dsl_flavors(py: dict[str, Any]) -> list[int] | None:
    """The CUDA majors nvidia-cutlass-dsl has a ``_cutlass_ir.cu{N}`` build for (None when it
    is not installed)."""
    import re

    root = (py.get("dirs") or {}).get("nvidia_cutlass_dsl")
    if not root:
        return None
    try:
        names = os.listdir(os.path.join(str(root), _fi.CUTE_DSL_LIBS))
    except OSError:
        return []
    return sorted({int(m.group(1)) for n in names if (m := re.match(_fi.CUTE_DSL_FLAVOR, n))})


def _sha256(path: str) -> str | None:
    try:
        with open(path, "rb") as fh:
            import hashlib  # (OpenSSL's hashes: ~3 ms to load, only when a file is hashed)

            return hashlib.sha256(fh.read(1 << 24)).hexdigest()
    except OSError:
        return None


def flashinfer_cubins(env: dict[str, str], py: dict[str, Any]) -> dict[str, Any] | None:
    """FlashInfer's cubin directory resolved as ``jit/env.py`` ``_get_cubin_dir`` does, and
    whether each trtllm-gen ``checksums.txt`` is there with the hash ``artifacts.py`` pins
    (read as text from the engine's FlashInfer). None without flashinfer-python."""
    fdir = (py.get("dirs") or {}).get("flashinfer")
    packages = py.get("packages") or {}
    fi = packages.get("flashinfer-python")
    if not fdir or not fi:
        return None
    try:
        with open(os.path.join(str(fdir), "artifacts.py"), encoding="utf-8") as fh:
            pins = _fi.parse_artifacts(fh.read())
    except OSError:
        pins = {}
    cubin = packages.get("flashinfer-cubin")
    repo = env.get(_fi.CUBINS_REPOSITORY) or _fi.DEFAULT_CUBINS_REPOSITORY
    out: dict[str, Any] = {"repository": repo, "dir": None, "artifacts": None}
    if env.get(_fi.CUBIN_DIR):
        out.update(dir=env[_fi.CUBIN_DIR], source=_fi.CUBIN_DIR)
    elif cubin and (cubin == fi or cubin == "0.0.0+unknown"):
        out.update(source="flashinfer-cubin")  # the wheel carries every published cubin
        return out
    else:
        ws = workspace_dir(env)
        out.update(dir=os.path.join(ws, "cubins") if ws else None, source="cache")
    if out["dir"] and pins:
        arts = {}
        for name, (sub, sha) in pins.items():
            got = _sha256(os.path.join(out["dir"], sub, "checksums.txt"))
            arts[name] = "ok" if got == sha else ("missing" if got is None else "checksum-mismatch")
        out["artifacts"] = arts
        base = repo if repo.endswith("/") else repo + "/"
        out["urls"] = [base + pins[n][0].rstrip("/") + "/checksums.txt" for n, st in arts.items() if st != "ok"]
    return out


def tilelang_cuda(env: dict[str, str], py: dict[str, Any]) -> dict[str, Any] | None:
    """tilelang's ``_find_cuda_home`` (``tilelang/env.py``) replayed for the engine's
    environment, and the ``<home>/bin/nvcc`` it compiles with; None without tilelang."""
    from flightcheck._knowledge import tilelang as _tl

    packages = py.get("packages") or {}
    version = packages.get("tilelang")
    if not version:
        return None
    home: str | None = None
    source: str | None = None
    problem: str | None = None
    value = env.get("CUDA_HOME") or env.get("CUDA_PATH")  # tilelang's own `or`
    if value is not None:
        home, source = value, "CUDA_HOME" if env.get("CUDA_HOME") else "CUDA_PATH"
    elif nvcc_on_path := _cuda.which("nvcc", env):
        source = "nvcc-on-path"
        home = _cuda.toolkit_root(nvcc_on_path)
        if _fi.at_least(version, _tl.RESOLVES_NVCC_SYMLINK_SINCE) and not os.path.exists(
            os.path.join(home, "include", "cuda_runtime.h")
        ):
            home = _cuda.toolkit_root(os.path.realpath(nvcc_on_path))
        elif "hpc_sdk" in nvcc_on_path.lower() and "cuda" not in nvcc_on_path.lower():
            home = os.path.dirname(home)
    elif packages.get(_tl.PIP_NVCC):
        source = _tl.PIP_NVCC
        files = (py.get("dist_files") or {}).get(_tl.PIP_NVCC) or []
        if files:
            home = _cuda.toolkit_root(files[0])
        else:
            problem = f"AssertionError: `{_tl.PIP_NVCC}` installed but no `nvcc` found"
    else:
        home, source = next(((h, "default") for h in _tl.DEFAULT_HOMES if os.path.exists(h)), (None, None))
    if home is not None and not (home and os.path.exists(home)):
        problem = f"{source}={home!r} does not exist"
        home = None
    nvcc = None
    if home:
        path = os.path.join(home, "bin", "nvcc")
        if os.path.isfile(path) and os.access(path, os.X_OK):
            nvcc = {"path": path, "version": _cuda.nvcc_version(path, env)[0]}
        else:
            problem = f"{path} is not an executable file"
    return {"home": home or None, "source": source, "nvcc": nvcc, "problem": problem}


def _cuda_env_version(root: str, env: dict[str, str]) -> tuple[int | None, int | None]:
    """humming's ``_read_cuda_system_version``: version.json / version.txt, ``nvcc -V``,
    then a ``cuda-X.Y`` directory name."""
    import re

    text = _cuda._toolkit_version_file(root)
    nvcc = os.path.join(root, "bin", "nvcc")
    if text is None and os.path.exists(nvcc):
        text = _cuda.nvcc_version(nvcc, env)[0]
    if text is None:
        m = re.match(r"cuda-(\d+(?:\.\d+)?)$", os.path.basename(os.path.realpath(root)))
        text = m.group(1) if m else None
    if not text:
        return None, None
    parts = (text.split(".") + ["0"])[:2]
    try:
        return int(parts[0]), int(parts[1])
    except ValueError:
        return None, None


def _nvrtc_lib(root: str) -> str | None:
    """humming's ``_select_nvrtc_lib`` over ``_find_nvrtc_lib_dir``'s candidates."""
    import glob

    from flightcheck._knowledge import humming as _hm

    dirs = [os.path.join(root, d) for d in _hm.LIB_SUBDIRS]
    dirs += [p for d in _hm.LIB_SUBDIRS for p in sorted(glob.glob(os.path.join(root, "*", d)))]
    for d in dirs:
        if os.path.exists(os.path.join(d, "libnvrtc.so")):
            return os.path.join(d, "libnvrtc.so")
        versioned = sorted(glob.glob(os.path.join(d, "libnvrtc.so.*")))
        if versioned:
            return versioned[-1]
    return None


def cuda_envs(env: dict[str, str], py: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The CUDA environments humming considers (``humming/utils/cuda.py``
    ``find_all_cuda_paths``), with whether each has ``nvrtc.h`` and a libnvrtc; None without
    humming-kernels."""
    import glob

    from flightcheck._knowledge import humming as _hm

    if not (py.get("packages") or {}).get("humming-kernels"):
        return None
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    cands = [*_hm.SYSTEM_ROOTS, *sorted(glob.glob(_hm.SYSTEM_GLOB))]
    cands += [env[v] for v in ("CUDA_HOME", "CUDA_PATH") if v in env]
    for path in cands:
        if not os.path.isdir(path) or os.path.realpath(path) in seen:
            continue
        seen.add(os.path.realpath(path))
        major, minor = _cuda_env_version(path, env)
        header = os.path.exists(os.path.join(path, "include", _hm.HEADER))
        out.append(
            {
                "path": path,
                "source": "system",
                "major": major,
                "minor": minor,
                "header": header,
                "nvrtc_lib": _nvrtc_lib(path),
            }
        )
    for root in py.get("nvidia_roots") or ():
        root = str(root)
        if any(os.path.isdir(os.path.join(root, sub)) for sub in ("cuda_runtime", "cuda_nvcc")):
            incs = [os.path.join(root, "include")] + [
                os.path.join(root, n, "include")
                for n in sorted(os.listdir(root))
                if not (n.startswith("cu") and n[2:].isdigit())
            ]
            header = any(os.path.exists(os.path.join(i, _hm.HEADER)) for i in incs)
            out.append(
                {
                    "path": root,
                    "source": "pypi",
                    "major": 12,
                    "minor": None,
                    "header": header,
                    "nvrtc_lib": _nvrtc_lib(root),
                }
            )
        cu13 = os.path.join(root, "cu13")
        if os.path.isdir(os.path.join(cu13, "include")):
            header = os.path.exists(os.path.join(cu13, "include", _hm.HEADER))
            out.append(
                {
                    "path": cu13,
                    "source": "pypi",
                    "major": 13,
                    "minor": None,
                    "header": header,
                    "nvrtc_lib": _nvrtc_lib(cu13),
                }
            )
    return out


#: the record `flightcheck prepare install` writes beside the modules it places
PREPARED_RECORD = "flightcheck-bundle.json"


def prepared_bundle(py: dict[str, Any]) -> dict[str, Any] | None:
    """The installed ``flightcheck prepare`` bundle's record, None when there is none."""
    fi_dir = (py.get("dirs") or {}).get("flashinfer")
    if not fi_dir:
        return None
    aot = os.path.join(str(fi_dir), "data", "aot")
    path = os.path.join(aot, PREPARED_RECORD)
    if not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError) as exc:
        return {"record": path, "problem": f"{type(exc).__name__}: {exc}"}
    if not isinstance(data, dict) or not isinstance(data.get("modules"), list):
        return {"record": path, "problem": "not a flightcheck bundle record"}
    modules = []
    for m in data["modules"]:
        if not isinstance(m, dict) or not isinstance(m.get("name"), str) or "/" in m["name"]:
            continue
        name = m["name"]
        archs = [str(a) for a in m.get("archs") or [] if isinstance(a, str)]
        modules.append({"name": name, "archs": archs, "present": os.path.isfile(os.path.join(aot, name, f"{name}.so"))})
    return {
        "record": path,
        "arch": str(data.get("arch")) if data.get("arch") else None,
        "flashinfer": str(data.get("flashinfer")) if data.get("flashinfer") else None,
        "torch_cuda": str(data.get("torch_cuda")) if data.get("torch_cuda") else None,
        "nvcc": str(data.get("nvcc")) if data.get("nvcc") else None,
        "complete": bool(data.get("complete")),
        "modules": modules,
    }


@collector("toolchain", sections=("toolchain",), timeout=30.0)  # > the engine interpreter query (20 s)
def collect_toolchain(cctx: CollectContext) -> dict[str, Any]:
    """The ``toolchain`` section."""
    env = cctx.env
    unavailable: dict[str, str] = {}
    home, source = _cuda.resolve_cuda_home(env)
    nvcc_path = _cuda.nvcc_binary(home, env)
    has_nvcc = bool(nvcc_path and os.path.isfile(nvcc_path) and os.access(nvcc_path, os.X_OK))
    jobs: dict[str, Callable[[], Any]] = {
        "ninja": lambda: _cuda.ninja(env),
        "cxx": lambda: _cuda.compiler("CXX", "c++", env),
        "cc": lambda: _cuda.compiler("CC", "cc", env),
        "nvcc_host": lambda: _cuda.compiler("CC", "gcc", env),
        "alternatives": lambda: _cuda.alternatives(env),
        "py": lambda: engine_info(cctx.python, env),
        "env_paths": lambda: env_paths(env),
        "libcuda": lambda: libcuda_lookup(env),
    }
    if has_nvcc:
        assert nvcc_path is not None
        jobs["nvcc_version"] = lambda: _cuda.nvcc_version(nvcc_path, env)
        jobs["nvcc_archs"] = lambda: _cuda.nvcc_archs(nvcc_path, env)
    got, failed = run_parallel({name: (fn, None) for name, fn in jobs.items()})  # each query bounds itself
    for name, exc in failed.items():
        unavailable[f"toolchain.{name}"] = f"{type(exc).__name__}: {exc}"

    nvcc: dict[str, Any] | None = None
    if has_nvcc:
        version, why_v = got.get("nvcc_version") or (None, "nvcc --version failed")
        archs, why_a = got.get("nvcc_archs") or (None, "nvcc --list-gpu-arch failed")
        nvcc = {"path": nvcc_path, "version": version, "archs": archs}
        if why_v:
            unavailable["toolchain.nvcc.version"] = why_v
        if why_a:
            unavailable["toolchain.nvcc.archs"] = why_a
    elif home is None:
        unavailable["toolchain.nvcc"] = "no CUDA_HOME/CUDA_PATH, no nvcc on the engine's PATH, no /usr/local/cuda"
    else:
        unavailable["toolchain.nvcc"] = f"{nvcc_path} does not exist (CUDA home {home} from {source})"

    for key in ("cxx", "cc"):
        value = got.get(key)
        tool, why = value if value else (None, f"{key} lookup failed")
        got[key] = tool
        if why:
            unavailable[f"toolchain.{key}"] = why
    if got.get("ninja") is None:
        unavailable["toolchain.ninja"] = "no ninja on the engine's PATH"

    py = got.get("py") or {"error": "engine interpreter query failed"}
    headers: bool | None = py.get("python_h")
    if "error" in py:
        unavailable["toolchain.python_headers"] = py["error"]
        headers = None

    if not os.path.exists("/proc/driver/nvidia/version"):
        unavailable["toolchain.link_libcuda"] = "no NVIDIA driver on this host: -lcuda not judged"
    host, _why = got.get("nvcc_host") or (None, None)
    bounds = None
    # nvcc includes the crt/host_config.h of the toolkit it lives in (a /usr/local/bin wrapper
    # resolves to it), else the CUDA home's
    roots = [_cuda.toolkit_root(os.path.realpath(nvcc_path))] if has_nvcc and nvcc_path else []
    version = (got.get("nvcc_version") or (None, None))[0]
    roots += [  # a shell wrapper: the toolkit of the same version found on this host
        _cuda.toolkit_root(str(a["path"]))
        for a in got.get("alternatives") or ()
        if version and a.get("path") and a.get("version") == version
    ]
    for root in [*roots, home]:
        if bounds is None and root:
            try:
                header = os.path.join(root, "include", "crt", "host_config.h")
                with open(header, encoding="utf-8", errors="replace") as fh:
                    bounds = host_compiler_bounds(fh.read()) or None
            except OSError:
                continue
    kind = None
    if host and host.get("path"):
        kind = "clang" if "clang" in os.path.basename(os.path.realpath(str(host["path"]))) else "gcc"
    libcudart = os.path.exists(os.path.join(home, "lib64", "libcudart.so")) if home else False
    toolchain = {
        "cuda_home": {"path": home, "source": source, "exists": bool(home and os.path.isdir(home))},
        "nvcc": nvcc,
        "ninja": got.get("ninja"),
        "cxx": got.get("cxx"),
        "cc": got.get("cc"),
        "libcudart": libcudart,
        "python_headers": headers,
        "ninja_in_venv": venv_ninja(cctx.python, env),
        "alternatives": got.get("alternatives"),
        "python_include": py.get("include"),
        "host_tools": {name: _cuda.which(name, env) for name in HOST_TOOLS},
        "env_paths": got.get("env_paths"),
        "flashinfer_cubins": None if "error" in py else flashinfer_cubins(env, py),
        "nvcc_host": host,
        "nvcc_host_kind": kind,
        "host_compiler_bounds": bounds,
        "libcuda_lookup": got.get("libcuda"),
        # judged where a driver is installed, as the compile smoke test links -lcuda only there
        "link_libcuda": link_libcuda(home, env) if os.path.exists("/proc/driver/nvidia/version") else None,
        "cute_dsl_flavors": None if "error" in py else cute_dsl_flavors(py),
        "tilelang_cuda": None if "error" in py else tilelang_cuda(env, py),
        "cuda_envs": None if "error" in py else cuda_envs(env, py),
        "prepared_bundle": None if "error" in py else prepared_bundle(py),
    }
    return {"toolchain": toolchain, "unavailable": unavailable}
