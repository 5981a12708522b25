"""The multi-node recipes are real scripts that work: run end to end with a fake ``srun`` /
``vllm`` (and the real flightcheck), and every flightcheck command line they ran parses with
flightcheck's own CLI. The Ray recipe also runs against a real Ray cluster in
``tests/cluster/test_ray_cluster.py``."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from flightcheck._cli.main import parse_args
from support import FIXTURES, REPO
from support.checkpoints import write_tiny_model

RECIPES = REPO / "recipes"
SBATCH = RECIPES / "slurm-cluster" / "flightcheck-cluster.sbatch"
RAY_SERVE = RECIPES / "ray" / "preflight-and-serve.sh"
FIX = FIXTURES / "cluster"

FAKE_SRUN = r"""#!/usr/bin/env bash
# fake srun: skip srun's own options, run the command once per node of FAKE_NODES
while [ $# -gt 0 ]; do case "$1" in -*) shift ;; *) break ;; esac; done
rc=0
for node in $FAKE_NODES; do SLURMD_NODENAME="$node" "$@" || rc=$?; done
exit $rc
"""

# the real flightcheck, logging its argv; `collect` gets the node's recorded hardware
# (this machine has no GPU) through --facts, everything else is the real command
WRAPPER = r"""#!/usr/bin/env bash
printf '%s\n' "$(printf '%q ' flightcheck "$@")" >> "$FLIGHTCHECK_LOG"
if [ "$1" = collect ]; then set -- "$@" --facts "$RECORDED/$SLURMD_NODENAME.json"; fi
exec "{python}" -m flightcheck "$@"
"""

FAKE_VLLM = r"""#!/usr/bin/env bash
printf '%s\n' "$*" > "$VLLM_LOG"
"""


def parse_flightcheck(argv: list[str]) -> Any:
    """Parse a flightcheck command line exactly as the CLI would (raises on a bad flag)."""
    assert argv[0] == "flightcheck", argv
    return parse_args(argv[1:])


def script(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def logged(log: Path) -> list[list[str]]:
    return [shlex.split(line) for line in log.read_text().splitlines()]


def test_sbatch_header_is_slurm_options():
    lines = [ln for ln in SBATCH.read_text().splitlines() if ln.startswith("#SBATCH")]
    opts = dict(re.fullmatch(r"#SBATCH --([a-z-]+)=(\S+)", ln).groups() for ln in lines)  # type: ignore[union-attr]
    assert opts["ntasks-per-node"] == "1" and int(opts["nodes"]) >= 2 and "%j" in opts["output"]
    assert SBATCH.stat().st_mode & 0o111 and RAY_SERVE.stat().st_mode & 0o111
    for path in (SBATCH, RAY_SERVE):
        subprocess.run(["bash", "-n", str(path)], check=True)


def slurm_job(tmp_path: Path, edit_b: Any = None) -> tuple[subprocess.CompletedProcess[str], Path, Path]:
    """Run the sbatch script as Slurm would on the batch host of a 2-node allocation."""
    model = write_tiny_model(tmp_path / "models" / "tiny", shards=2)
    recorded = tmp_path / "recorded"
    recorded.mkdir()
    for fixture, node in (("hgx-b300-a", "gpu-b300-017"), ("hgx-b300-b", "gpu-b300-018")):
        doc = json.loads((FIX / f"{fixture}.json").read_text())
        doc.pop("checkpoint")  # each node reads the model itself
        if edit_b and node == "gpu-b300-018":
            edit_b(doc)
        (recorded / f"{node}.json").write_text(json.dumps(doc))
    bin_dir = tmp_path / "bin"
    script(bin_dir / "srun", FAKE_SRUN)
    script(bin_dir / "flightcheck", WRAPPER.replace("{python}", sys.executable))
    log = tmp_path / "flightcheck.log"
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "FLIGHTCHECK_LOG": str(log),
        "RECORDED": str(recorded),
        "FAKE_NODES": "gpu-b300-017 gpu-b300-018",
        "SLURM_JOB_NUM_NODES": "2",
        "SLURM_JOB_ID": "4242",
        "SLURM_SUBMIT_DIR": str(tmp_path),
        "MODEL": str(model),
        "TP": "8",
        "PP": "2",
    }
    proc = subprocess.run(
        ["bash", str(SBATCH)], capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path, check=False
    )
    return proc, tmp_path / "facts-4242", log


def test_slurm_recipe_collects_every_node_then_judges_the_set(tmp_path):
    proc, facts, log = slurm_job(tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(p.name for p in facts.glob("*.json")) == ["gpu-b300-017.json", "gpu-b300-018.json"]
    report = json.loads(facts.with_name("facts-4242-report.json").read_text())
    assert report["schema"] == "flightcheck.cluster-report/v1" and report["verdict"] == "ready"
    assert set(report["nodes"]) == {"gpu-b300-017", "gpu-b300-018"}
    [fc802] = [c for c in report["checks"] if c["code"] == "FC802"]
    assert fc802["status"] == "pass" and "2 nodes hold the same copy" in fc802["message"]  # read on each node
    assert "Verdict: ready" in proc.stdout and "report in" in proc.stdout
    commands = [parse_flightcheck(argv) for argv in logged(log)]
    assert [c.command for c in commands] == ["collect", "collect", "cluster", "cluster"]
    assert commands[0].output.endswith("/%N.json") and commands[0].model.endswith("tiny")
    assert all(c.facts_dir == str(facts) and c.nnodes == 2 and c.tensor_parallel_size == 8 for c in commands[2:])


def test_slurm_recipe_fails_the_job_on_driver_skew(tmp_path):
    def older_driver(doc: dict[str, Any]) -> None:
        doc["driver"]["version"] = doc["fabric_manager"]["version"] = "580.95.05"

    proc, facts, _ = slurm_job(tmp_path, older_driver)
    assert proc.returncode == 1
    report = json.loads(facts.with_name("facts-4242-report.json").read_text())
    [f] = [c for c in report["checks"] if c["code"] == "FC801" and c["status"] == "fail"]
    assert f["subject"] == "node:gpu-b300-018" and "580.95.05" in f["message"]
    assert "FC801 software-skew" in proc.stdout


def ray_recipe(
    tmp_path: Path, rc: int, *extra: str, **env_extra: str
) -> tuple[subprocess.CompletedProcess[str], Path, Path]:
    bin_dir = tmp_path / "bin"
    fake_fc = script(
        bin_dir / "flightcheck",
        "#!/usr/bin/env bash\n"
        f'printf \'%s\\n\' "$(printf \'%q \' flightcheck "$@")" >> "$FLIGHTCHECK_LOG"\nexit {rc}\n',
    )
    fake_vllm = script(bin_dir / "vllm", FAKE_VLLM)
    log, vllm_log = tmp_path / "fc.log", tmp_path / "vllm.log"
    env = {
        **os.environ,
        "FLIGHTCHECK": str(fake_fc),
        "VLLM": str(fake_vllm),
        "FLIGHTCHECK_LOG": str(log),
        "VLLM_LOG": str(vllm_log),
        "TP": "8",
        "PP": "2",
        **env_extra,
    }
    env.pop("RAY_ADDRESS", None)
    proc = subprocess.run(
        ["bash", str(RAY_SERVE), "/models/Kimi-K3-MXFP4", *extra],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    return proc, log, vllm_log


def test_ray_recipe_serves_only_when_ready(tmp_path):
    proc, log, vllm_log = ray_recipe(tmp_path, 0, "--max-model-len", "128k")
    assert proc.returncode == 0
    assert vllm_log.read_text().split() == [
        "serve",
        "/models/Kimi-K3-MXFP4",
        "--distributed-executor-backend",
        "ray",
        "--tensor-parallel-size",
        "8",
        "--pipeline-parallel-size",
        "2",
        "--max-model-len",
        "128k",
    ]
    [argv] = logged(log)
    args = parse_flightcheck(argv)
    assert args.command == "cluster" and args.ray == "auto" and args.model == "/models/Kimi-K3-MXFP4"
    assert (args.tensor_parallel_size, args.pipeline_parallel_size, args.timeout) == (8, 2, 60.0)
    assert args.distributed_executor_backend == "ray"


@pytest.mark.parametrize(
    ("rc", "allow", "started"), [(1, "1", False), (3, "0", False), (3, "1", True), (2, "1", False)]
)
def test_ray_recipe_stops_on_a_blocking_or_unknown_verdict(tmp_path, rc, allow, started):
    proc, _, vllm_log = ray_recipe(tmp_path, rc, ALLOW_UNKNOWN=allow)
    assert vllm_log.exists() is started
    assert proc.returncode == (0 if started else rc)
    if not started:
        assert "not starting vLLM" in proc.stderr
