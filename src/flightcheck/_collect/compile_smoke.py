"""``--deep`` compile smoke test (FC109): build and link a tiny CUDA kernel for every arch the
engine will JIT for, the way FlashInfer's JIT builds a module, with the nvcc, ninja and host
compiler that will be used.

One build.ninja in a temporary directory compiles a host .cpp against
``$cuda_home/include``, one ``.cu`` per arch with ``-gencode=arch=compute_103a,code=sm_103a``,
and links each into a shared object with ``$CXX ... -shared -L$cuda_home/lib64
-L$cuda_home/lib64/stubs -lcudart -lcuda`` (FlashInfer's link line; ``-lcuda`` only where a
driver is installed, as on every GPU node). ninja runs the archs in parallel and keeps
going past a failure, so each arch gets its own verdict and its own compiler output.
Passes are cached under ``$XDG_CACHE_HOME/flightcheck`` by (nvcc path, version, mtime, arch,
host compiler, CUDA home): a repeat run is instant. ``FLIGHTCHECK_NO_CACHE=1`` disables it.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import tempfile
import time
from typing import Any

from flightcheck._collect import CollectContext, probe
from flightcheck._collect.proc import run
from flightcheck._collect.smoke_src import HOST_CPP, KERNEL_CU
from flightcheck._vocabulary.facts import Facts

TIMEOUT = 120.0
RECIPE = 1  # bump when the build below changes: old cache entries no longer apply


def _wanted(cctx: CollectContext) -> bool:
    return cctx.intent.deep or "compile_smoke" in cctx.probes


def target_archs(cctx: CollectContext, facts: Facts) -> tuple[list[str], str]:
    """(FlashInfer arch names to build, where they came from): FLASHINFER_CUDA_ARCH_LIST
    when set (what FlashInfer will compile), else the archs of the GPUs used."""
    from flightcheck._knowledge.derived import visible_gpus
    from flightcheck._knowledge.gpus import arch_of, parse_arch_list

    listed = cctx.env.get("FLASHINFER_CUDA_ARCH_LIST")
    if listed:
        codes, _bad = parse_arch_list(listed, flashinfer=True)  # FC108 reports the bad tokens
        return list(
            dict.fromkeys(f"{major}{minor}{suffix}" for major, minor, suffix, _ in codes)
        ), "FLASHINFER_CUDA_ARCH_LIST"
    used = visible_gpus(facts)[: cctx.intent.gpus_per_node]
    return list(dict.fromkeys(a for a in (arch_of(g.compute_capability) for g in used) if a)), "GPUs used"


def cache_file(env: dict[str, str]) -> str | None:
    """``compile-smoke.json`` in flightcheck's cache directory (the one the checkpoint scans
    use), or None when FLIGHTCHECK_NO_CACHE turns caching off or there is no cache home."""
    from flightcheck._checkpoint.cache import cache_dir, enabled

    where = cache_dir(env)
    if where is None or not enabled():  # the engine's environment or flightcheck's own
        return None
    return str(where / "compile-smoke.json")


MAX_CACHE = 4 << 20


def _load_cache(path: str) -> tuple[dict[str, Any], str | None]:
    """The cached verdicts, and why the cache file was not trusted (another user's file,
    a FIFO planted in its place, a directory that is not the caller's)."""
    from pathlib import Path

    from flightcheck._checkpoint.cache import read_owned

    raw, why = read_owned(Path(path), MAX_CACHE)
    if raw is None:
        return {}, why
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return {}, None
    return (data if isinstance(data, dict) else {}), None


def _save_cache(path: str, data: dict[str, Any]) -> None:
    """A cache that cannot be written only costs the next run its seconds."""
    from pathlib import Path

    from flightcheck._checkpoint.cache import write_owned

    write_owned(Path(path), json.dumps(data, indent=1, sort_keys=True).encode(), ".compile-smoke-")


def cache_key(nvcc: str, version: str | None, arch: str, cxx: str, home: str | None, link_cuda: bool) -> str:
    """The identity of one arch's verdict: the nvcc (path, version, mtime of the real
    binary), the arch, and what else the build depended on."""
    try:
        mtime = os.stat(os.path.realpath(nvcc)).st_mtime_ns
    except OSError:
        mtime = None
    parts = [RECIPE, nvcc, version, mtime, arch, cxx, home, link_cuda]
    import hashlib  # (OpenSSL's hashes: ~3 ms to load, not on a run that compiles nothing)

    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:32]


def _esc(path: str) -> str:
    """A path as a ninja build-statement token."""
    return path.replace("$", "$$").replace(" ", "$ ").replace(":", "$:")


def build_ninja(
    tmp: str,
    archs: list[str],
    nvcc: str,
    cxx: str,
    home: str,
    version: str | None,
    env: dict[str, str],
    link_cuda: bool,
) -> str:
    """The build.ninja: a FlashInfer-shaped compile + link per arch, one shared host object."""
    q = shlex.quote
    inc = f"-isystem {q(os.path.join(home, 'include'))}"
    cuda_flags = [inc, "--compiler-options=-fPIC", "--expt-relaxed-constexpr", "-std=c++17", "-O2"]
    if env.get("CC"):
        cuda_flags.insert(0, f"-ccbin {q(env['CC'])}")
    if version and tuple(int(x) for x in version.split(".")[:2]) >= (12, 8):
        cuda_flags.append("-static-global-template-stub=false")
    ldflags = f"-shared -L{q(os.path.join(home, 'lib64'))} -L{q(os.path.join(home, 'lib64', 'stubs'))} -lcudart" + (
        " -lcuda" if link_cuda else ""
    )
    lines = [
        "ninja_required_version = 1.3",
        f"nvcc = {q(nvcc)}",
        f"cxx = {cxx}",  # may carry a launcher ("ccache g++"), as FlashInfer allows
        f"cflags = {inc} -fPIC -O2 -std=c++17",
        f"cuda_cflags = {' '.join(cuda_flags)}",
        f"ldflags = {ldflags}",
        "rule compile",
        "  command = $cxx $cflags -c $in -o $out",
        "rule cuda_compile",
        "  command = $nvcc $cuda_cflags $gencode -c $in -o $out",
        "rule link",
        "  command = $cxx $in $ldflags -o $out",
        f"build host.o: compile {_esc(os.path.join(tmp, 'host.cpp'))}",
    ]
    for arch in archs:
        lines += [
            f"build k_{arch}.cuda.o: cuda_compile {_esc(os.path.join(tmp, 'kernel.cu'))}",
            f"  gencode = -gencode=arch=compute_{arch},code=sm_{arch}",
            f"build k_{arch}.so: link k_{arch}.cuda.o host.o",
        ]
    lines.append("default " + " ".join(f"k_{a}.so" for a in archs))
    return "\n".join(lines) + "\n"


def split_output(out: str, archs: list[str]) -> dict[str, str]:
    """Each arch's share of ninja's output: the FAILED blocks naming its targets, plus the
    host object's block (every arch links it)."""
    blocks: list[str] = []
    current: list[str] | None = None
    for line in out.splitlines():
        if line.startswith("FAILED: "):
            current = [line]
            blocks.append("")
        elif line.startswith(("[", "ninja: ")):
            current = None
        elif current is not None:
            current.append(line)
        if current is not None:
            blocks[-1] = "\n".join(current)
    per: dict[str, str] = {}
    for arch in archs:
        mine = [b for b in blocks if f"k_{arch}." in b.splitlines()[0] or "host.o" in b.splitlines()[0]]
        per[arch] = "\n\n".join(mine)
    return per


def driver_installed() -> bool:
    """An NVIDIA kernel driver on this host (its libcuda.so is then what -lcuda finds)."""
    return os.path.exists("/proc/driver/nvidia/version")


PTXAS_TIMEOUT = 30.0


def _ptxas_release(path: str, env: dict[str, str]) -> str | None:
    """The ``release X.Y`` of ``path --version`` the way Triton's ``NvidiaTool.from_path``
    reads it; None when it cannot run (Triton then tries the next candidate)."""
    try:
        proc = run([path, "--version"], timeout=10.0, env=env)
    except OSError:
        return None
    m = re.search(r".*release (\d+\.\d+).*", proc.out) if proc.ok else None
    return m.group(1) if m else None


def triton_ptxas(cctx: CollectContext, facts: Facts) -> dict[str, dict[str, Any]] | None:
    """For each GPU arch used: resolve the ptxas Triton will use (its variable, else the
    bundled one; ``triton/knobs.py``) and assemble a ten-line PTX kernel with it, as Triton
    does (``--gpu-name=sm_103a``). None when Triton is not installed for the engine."""
    from flightcheck._collect.pyinfo import engine_info
    from flightcheck._knowledge import triton as _triton
    from flightcheck._knowledge.derived import visible_gpus
    from flightcheck._knowledge.units import major_minor

    env = cctx.env
    tdir = (engine_info(cctx.python, env).get("dirs") or {}).get("triton")
    if not tdir:
        return None
    caps = dict.fromkeys(
        mm for mm in (major_minor(g.compute_capability) for g in visible_gpus(facts)[: cctx.intent.gpus_per_node]) if mm
    )
    out: dict[str, dict[str, Any]] = {}
    tmp = tempfile.mkdtemp(prefix="flightcheck-ptxas-")
    try:
        for major, minor in caps:
            sm = _triton.sm_arch(major, minor)
            var = _triton.ptxas_var(major)
            candidates = [(env[var], var)] if env.get(var) else []
            candidates.append((_triton.bundled_ptxas(str(tdir), major), "bundled"))
            chosen = next(((p, src, v) for p, src in candidates if (v := _ptxas_release(p, env))), None)
            if chosen is None:
                out[sm] = {"ok": False, "output": f"Cannot find {os.path.basename(candidates[-1][0])}"}
                continue
            path, source, release = chosen
            src = os.path.join(tmp, f"{sm}.ptx")
            with open(src, "w", encoding="utf-8") as fh:
                fh.write(_triton.PTX_TEMPLATE.format(version=_triton.ptx_version(release) or "8.0", sm=sm))
            proc = run(
                [path, "-v", f"--gpu-name={sm}", src, "-o", os.path.join(tmp, f"{sm}.cubin")],
                timeout=PTXAS_TIMEOUT,
                env=env,
            )
            out[sm] = {
                "ok": proc.ok,
                "ptxas": path,
                "version": release,
                "source": source,
                "output": (proc.out + proc.err).strip()[-4000:] or proc.why(),
            }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


REPO_TIMEOUT = 3.0


def cubin_repository(facts: Facts) -> tuple[bool | None, str | None]:
    """Ask FlashInfer's cubin repository for the first checksums.txt a first use would fetch
    (one GET, ``REPO_TIMEOUT`` seconds): (answered, why not); (None, None) when nothing
    would be fetched."""
    import urllib.error
    import urllib.request

    cubins = facts.toolchain.flashinfer_cubins if facts.toolchain else None
    url = cubins.urls[0] if cubins and cubins.urls else None
    if not url:
        return None, None
    if not url.startswith(("http://", "https://")):
        return os.path.exists(url), None if os.path.exists(url) else f"{url} does not exist"
    try:
        with urllib.request.urlopen(url, timeout=REPO_TIMEOUT) as resp:
            resp.read(1 << 16)
        return True, None
    except urllib.error.HTTPError as exc:
        return False, f"{url}: HTTP {exc.code}"
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        return False, f"{url}: {reason}"


@probe("compile_smoke", "compile_smoke", timeout=TIMEOUT + 10, wanted=_wanted)
def probe_compile_smoke(cctx: CollectContext, facts: Facts) -> dict[str, Any]:
    """The ``compile_smoke`` section."""
    tc = facts.toolchain
    nvcc = tc.nvcc.path if tc and tc.nvcc else None
    ninja = tc.ninja.path if tc and tc.ninja else None
    section: dict[str, Any] = {"nvcc": nvcc, "ninja": ninja, "archs": None, "error": None}
    section["triton_ptxas"] = triton_ptxas(cctx, facts)
    section["cubin_repository_ok"], section["cubin_repository_error"] = cubin_repository(facts)
    archs, origin = target_archs(cctx, facts)
    home = tc.cuda_home.path if tc and tc.cuda_home else None
    cxx = cctx.env.get("CXX") or (tc.cxx.path if tc and tc.cxx else None)
    problem = (
        (not archs and f"no arch to build for ({origin}: no GPU facts)")
        or (not nvcc and "no nvcc will be found (FC101)")
        or (not ninja and "no ninja on the engine's PATH (FC103)")
        or (not cxx and "no host C++ compiler (FC104)")
        or (not home and "no CUDA home (FC101)")
        or (
            not os.path.exists(str(nvcc)) and f"{nvcc} does not exist on this host (toolchain facts from another node?)"
        )
    )
    if problem:
        section["error"] = problem
        return {"compile_smoke": section}
    assert nvcc and ninja and cxx and home
    version = tc.nvcc.version if tc and tc.nvcc else None
    link_cuda = driver_installed()
    cpath = cache_file(cctx.env)
    cache, ignored = _load_cache(cpath) if cpath else ({}, None)
    if ignored:
        section["cache"] = ignored  # said in FC109's evidence: a planted verdict is never trusted
    keys = {a: cache_key(nvcc, version, a, cxx, home, link_cuda) for a in archs}
    results: dict[str, dict[str, Any]] = {}
    for arch in archs:
        hit = cache.get(keys[arch])
        if isinstance(hit, dict) and hit.get("ok"):
            results[arch] = {"ok": True, "cached": True, "duration_s": 0.0, "output": hit.get("output", "")}
    todo = [a for a in archs if a not in results]
    if todo:
        note = "" if link_cuda else "(-lcuda left out: no NVIDIA driver on this host)\n"
        tmp = tempfile.mkdtemp(prefix="flightcheck-smoke-")
        try:
            for name, text in (("host.cpp", HOST_CPP), ("kernel.cu", KERNEL_CU)):
                with open(os.path.join(tmp, name), "w", encoding="utf-8") as fh:
                    fh.write(text)
            with open(os.path.join(tmp, "build.ninja"), "w", encoding="utf-8") as fh:
                fh.write(build_ninja(tmp, todo, nvcc, cxx, home, version, cctx.env, link_cuda))
            t0 = time.perf_counter()
            proc = run(
                [ninja, "-v", "-k", "0", "-C", tmp, "-f", os.path.join(tmp, "build.ninja")],
                timeout=TIMEOUT,
                env=cctx.env,
                cwd=tmp,
            )
            took = round(time.perf_counter() - t0, 2)
            output = (proc.out + proc.err).strip()
            per = split_output(output, todo)
            for arch in todo:
                ok = proc.error is None and os.path.exists(os.path.join(tmp, f"k_{arch}.so"))
                text = note + (output if ok else (per[arch] or output))
                results[arch] = {"ok": ok, "cached": False, "duration_s": took, "output": text[-8000:]}
            if proc.timed_out:
                section["error"] = f"the build timed out after {TIMEOUT:.0f}s"
            elif proc.error:
                section["error"] = f"ninja could not run: {proc.error}"
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        if cpath and any(results[a]["ok"] for a in todo):
            for arch in todo:
                if results[arch]["ok"]:  # failures are not cached: a fixed toolchain must be retried
                    cache[keys[arch]] = {
                        "ok": True,
                        "arch": arch,
                        "nvcc": nvcc,
                        "version": version,
                        "at": int(time.time()),
                        "output": note.strip(),
                    }
            _save_cache(cpath, cache)
    section["archs"] = results
    return {"compile_smoke": section}
