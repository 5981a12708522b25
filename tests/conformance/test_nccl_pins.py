"""The NCCL the installed engine runs, against flightcheck._knowledge.nccl / vllm: the
torch it pins requires the nvidia-nccl wheel ``NCCL_BY_TORCH`` names, and vLLM no longer
sets NCCL_CUMEM_ENABLE=0 itself (``vllm.NCCL_CUMEM_OFF_UNTIL``), so NCCL's default (cuMem
on: connections made on first use) is what runs."""

from __future__ import annotations

import json
import subprocess

from flightcheck._knowledge import nccl, vllm

PROBE = r"""
import importlib.metadata as m, json, pathlib
import importlib.util
torch = m.version("torch").split("+")[0]
reqs = [r for r in (m.requires("torch") or []) if r.startswith("nvidia-nccl")]
spec = importlib.util.find_spec("vllm")
root = pathlib.Path(spec.origin).parent
sets = [str(p.relative_to(root)) for p in root.rglob("*.py")
        if "os.environ['NCCL_CUMEM_ENABLE'] = '0'" in p.read_text(errors="replace")
        or 'os.environ["NCCL_CUMEM_ENABLE"] = "0"' in p.read_text(errors="replace")]
print(json.dumps({"torch": torch, "nccl_reqs": reqs, "vllm": m.version("vllm"), "sets_cumem_off": sets}))
"""


def test_nccl_pin_and_cumem_default_match_the_installed_engine(engine_python: str, tmp_path) -> None:
    run = subprocess.run(
        [engine_python, "-c", PROBE], capture_output=True, text=True, check=False, timeout=300, cwd=tmp_path
    )
    assert run.returncode == 0, run.stderr[-2000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert vllm.TORCH_BY_RELEASE[got["vllm"]] == got["torch"]
    pinned = nccl.NCCL_BY_TORCH[got["torch"]]
    assert any(r.split(";")[0].strip().endswith(f"=={pinned}") for r in got["nccl_reqs"]), got["nccl_reqs"]
    # no module of the installed vLLM forces cuMem off for its workers
    assert got["sets_cumem_off"] == [], got["sets_cumem_off"]
    v = tuple(int(x) for x in got["vllm"].split("."))
    assert not vllm.nccl_cumem_forced_off(v)
