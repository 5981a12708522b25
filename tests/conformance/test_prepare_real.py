"""``flightcheck prepare`` for real: FlashInfer's ``sampling`` module compiled for sm_103a
with this machine's nvcc (no GPU needed), bundled, installed offline into a fresh venv and
loaded there with no nvcc or ninja on PATH, no CUDA_HOME and FLASHINFER_DISABLE_JIT=1; and a
bundle for another arch refused before any load.

The compile takes minutes (188 s measured on 2 vCPU; FlashInfer 0.7.2.post1, nvcc 13.0). It
needs the conformance venv (flashinfer-python and a CUDA torch) and an nvcc >= 12.9 of
torch's CUDA major; without them it skips and says why. flightcheck itself runs as a child
(``python -m flightcheck``): only children of the engine's interpreter import flashinfer.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.conformance

REPO = Path(__file__).resolve().parents[2]
LOAD = """
import json
from flashinfer.jit import env as jit_env
from flashinfer.jit.sampling import gen_sampling_module
from flashinfer.jit.topk import gen_topk_module
spec = gen_sampling_module()
module = spec.build_and_load()
out = {"aot": spec.is_aot, "path": str(spec.get_library_path()), "module": type(module).__name__}
try:
    gen_topk_module().build_and_load()
    out["topk"] = "loaded"
except Exception as exc:
    out["topk"] = type(exc).__name__
print("@@" + json.dumps(out))
"""


def _nvcc() -> tuple[str, tuple[int, int]] | None:
    for cand in [shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc"]:
        if cand and os.access(cand, os.X_OK):
            out = subprocess.run([cand, "--version"], check=False, capture_output=True, text=True, timeout=30).stdout
            m = re.search(r"release (\d+)\.(\d+)", out)
            if m:
                return cand, (int(m.group(1)), int(m.group(2)))
    return None


def _flightcheck(*args: str, timeout: float, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(env or os.environ)
    env["PYTHONPATH"] = str(REPO / "src")
    return subprocess.run(
        [sys.executable, "-m", "flightcheck", *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def _fresh_venv(engine_python: str, where: Path) -> str:
    """A new venv whose own flashinfer-python is a copy (hard links; its data/ headers left
    out: nothing compiles) of the engine's, the rest of the engine's packages reached
    through a .pth after it. `prepare install` writes into this copy only."""
    subprocess.run([engine_python, "-m", "venv", "--without-pip", str(where)], check=True, timeout=120)
    probe = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = Path(
        subprocess.run(
            [str(where / "bin" / "python"), "-c", probe], capture_output=True, text=True, check=True
        ).stdout.strip()
    )
    engine_site = Path(
        subprocess.run([engine_python, "-c", probe], capture_output=True, text=True, check=True).stdout.strip()
    )

    def link(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    src = engine_site / "flashinfer"
    shutil.copytree(
        src,
        site / "flashinfer",
        ignore=lambda d, names: [n for n in names if n == "__pycache__" or (Path(d) == src and n == "data")],
        copy_function=link,
    )
    (site / "flashinfer" / "data").mkdir()
    for dist in engine_site.glob("flashinfer_python-*.dist-info"):
        shutil.copytree(dist, site / dist.name)
    (site / "zz-engine-site.pth").write_text(str(engine_site) + "\n")
    return str(where / "bin" / "python")


@pytest.fixture(scope="module")
def bundle(engine_python: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sampling module compiled for 10.3a and bundled (once per run of this file).
    ``FLIGHTCHECK_PREPARED_BUNDLE`` reuses the bundle an earlier run built (the compile takes
    minutes on a small machine); every test then checks it as it checks a new one."""
    reuse = os.environ.get("FLIGHTCHECK_PREPARED_BUNDLE")
    if reuse and (Path(reuse) / "manifest.json").is_file():
        return Path(reuse)
    nvcc = _nvcc()
    if nvcc is None:
        pytest.skip("no nvcc on this machine: the real AOT compile needs one")
    if nvcc[1] < (12, 9):
        pytest.skip(f"nvcc {nvcc[1]} cannot target sm_103a (12.9 or newer needed)")
    work = tmp_path_factory.mktemp("prepare")
    args = [
        "--arch",
        "10.3a",
        "--python",
        engine_python,
        "--modules",
        "sampling",
        "--no-wheels",
        "-o",
        str(work / "bundle"),
    ]
    home = Path(os.path.realpath(nvcc[0])).parents[1]
    if not any((home / d / "libcuda.so").exists() for d in ("lib64/stubs", "targets/x86_64-linux/lib/stubs")):
        cc = shutil.which("cc") or shutil.which("gcc")
        if cc is None:
            pytest.skip("no libcuda stub in the toolkit and no C compiler to make one")
        (work / "stub").mkdir()
        (work / "stub" / "s.c").write_text("int flightcheck_test_stub;\n")
        subprocess.run(
            [cc, "-shared", "-o", str(work / "stub" / "libcuda.so"), str(work / "stub" / "s.c")], check=True, timeout=60
        )
        args += ["--libcuda-stub", str(work / "stub")]
    t0 = time.monotonic()
    proc = _flightcheck("prepare", *args, timeout=3600)
    print(proc.stderr)  # the progress lines, for the record
    print(f"prepare (sampling, sm_103a): {time.monotonic() - t0:.0f}s")
    if "cannot compile" in proc.stderr and proc.returncode == 2:
        pytest.skip(f"this build box cannot compile for 10.3a: {proc.stderr.strip().splitlines()[-1]}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return work / "bundle"


def test_the_bundle_records_what_was_built(bundle: Path) -> None:
    manifest = json.loads((bundle / "manifest.json").read_text())
    (m,) = manifest["modules"]
    assert m["name"] == "sampling" and m["path"] == "aot/sampling/sampling.so"
    assert m["archs"] == ["10.3a"] and m["ptx"] == []  # read back from the fatbin: SASS only
    assert any(lib.startswith("libcudart.so.") for lib in m["needs"])
    assert manifest["complete"] is True and manifest["arch"] == "10.3a"
    assert manifest["wheels"] == []  # --no-wheels
    assert {"DeepGEMM"} <= {n["what"] for n in manifest["not_prepared"]}


def test_installed_into_a_fresh_venv_it_loads_without_a_toolchain(
    bundle: Path, engine_python: str, tmp_path: Path
) -> None:
    venv_py = _fresh_venv(engine_python, tmp_path / "venv")
    proc = _flightcheck("prepare", "install", str(bundle), "--python", venv_py, "--gpu-cc", "10.3", timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "export FLASHINFER_DISABLE_JIT=1" in proc.stdout and "export FLASHINFER_NO_DOWNLOAD=1" in proc.stdout
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    # FLASHINFER_CUDA_ARCH_LIST stands in for the B300 this machine lacks: without a GPU,
    # FlashInfer's gen_jit_spec refuses ("Detected TARGET_CUDA_ARCHS=[]") before any lookup
    env = {
        "PATH": str(empty),
        "HOME": str(tmp_path),
        "FLASHINFER_DISABLE_JIT": "1",
        "FLASHINFER_NO_DOWNLOAD": "1",
        "FLASHINFER_CUDA_ARCH_LIST": "10.3a",
    }
    load = subprocess.run([venv_py, "-c", LOAD], check=False, capture_output=True, text=True, timeout=600, env=env)
    assert load.returncode == 0, load.stderr[-3000:]
    got = json.loads(next(ln for ln in load.stdout.splitlines() if ln.startswith("@@"))[2:])
    assert got["aot"] is True and got["module"] == "Module"
    assert got["path"].startswith(str(tmp_path / "venv")) and got["path"].endswith("data/aot/sampling/sampling.so")
    assert got["topk"] == "MissingJITCacheError"  # not in the bundle, and JIT is really off


def test_a_bundle_for_another_arch_is_refused_before_any_load(bundle: Path, engine_python: str, tmp_path: Path) -> None:
    from flightcheck._collect.toolchain import prepared_bundle
    from support.evaluation import assert_fires, facts
    from support.toolchain import sections

    venv_py = _fresh_venv(engine_python, tmp_path / "venv")
    refused = _flightcheck("prepare", "install", str(bundle), "--python", venv_py, "--gpu-cc", "10.0", timeout=300)
    assert refused.returncode == 2 and "error 209" in refused.stderr
    assert _flightcheck("prepare", "install", str(bundle), "--python", venv_py, timeout=300).returncode == 0
    site = next((tmp_path / "venv" / "lib").glob("python*/site-packages"))
    record = prepared_bundle({"dirs": {"flashinfer": str(site / "flashinfer")}})
    doc = sections("driver-only")
    doc["toolchain"]["prepared_bundle"] = record
    b200 = facts("b300", **doc)
    for gpu in b200.gpus or []:
        gpu.compute_capability = "10.0"
    failing = assert_fires("FC131", b200, tensor_parallel_size=1)
    assert "error 209" in failing[0].message
