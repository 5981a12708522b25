"""scripts/conformance_env.sh tells "this disk cannot hold the venv" (exit 75) apart from
every other failure (exit 1), which .ci/run relies on: exit 75 lets the rest of the suite
run with the conformance tests skipped for that reason, anything else fails CI.

Nothing here installs anything or reaches a network: the too-little-disk path is reached by
raising the script's need, and pip's own ENOSPC by a stand-in interpreter in the venv.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "conformance_env.sh"


def _run(venv: Path, need_gib: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["FLIGHTCHECK_CONFORMANCE_NEED_GIB"] = need_gib
    return subprocess.run(
        ["bash", str(SCRIPT), str(venv)], capture_output=True, text=True, env=env, timeout=60, check=False
    )


def _fake_venv(venv: Path, stderr: str) -> None:
    """A venv whose interpreter fails every call the way pip does, printing ``stderr``."""
    bindir = venv / "bin"
    bindir.mkdir(parents=True)
    py = bindir / "python"
    py.write_text(f"#!/bin/sh\necho '{stderr}' >&2\nexit 1\n")
    py.chmod(py.stat().st_mode | stat.S_IXUSR)


def test_too_little_disk_before_the_install_exits_75_with_one_line(tmp_path: Path) -> None:
    venv = tmp_path / "cv"
    proc = _run(venv, "1000000")
    assert proc.returncode == 75, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "not built: too little disk before the install" in lines[0]
    assert "GiB free" in lines[0] and "needs about 1000000 GiB" in lines[0]
    assert not venv.exists() and not (tmp_path / "cv.tmp").exists()


def test_pip_running_out_of_disk_exits_75_and_removes_the_partial_venv(tmp_path: Path) -> None:
    venv = tmp_path / "cv"
    _fake_venv(venv, "ERROR: Could not install packages due to an OSError: [Errno 28] No space left on device")
    proc = _run(venv, "0")
    assert proc.returncode == 75, proc.stderr
    assert "not built: pip ran out of disk" in proc.stderr
    assert not venv.exists() and not (tmp_path / "cv.tmp").exists()


@pytest.mark.parametrize("message", ["ERROR: No matching distribution found for vllm==0.33.0", "Killed"])
def test_any_other_install_failure_fails(tmp_path: Path, message: str) -> None:
    venv = tmp_path / "cv"
    _fake_venv(venv, message)
    proc = _run(venv, "0")
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    assert message in proc.stderr and "not built" not in proc.stderr
    # The temporary directory goes either way; a venv that failed for another reason is left to look at.
    assert venv.exists() and not (tmp_path / "cv.tmp").exists()


def test_the_readme_test_line_is_what_ci_runs() -> None:
    """The README's test command and ``.ci/run`` are the same steps, in the same order
    (``.ci/run`` adds only its logging and the disk-full handling of exit 75)."""
    import re

    root = Path(__file__).resolve().parents[1]
    readme = (root / "README.md").read_text(encoding="utf-8")
    block = readme.split("Tests (what CI runs", 1)[1].split("```bash\n", 1)[1].split("\n```", 1)[0]
    documented = [step.strip() for step in block.split(" && ")]
    skip = re.compile(r"^(#|set |cd |export |echo |if |elif |fi$|exit |\w+_rc=0$|    )")
    ci = []
    for line in (root / ".ci" / "run").read_text(encoding="utf-8").splitlines():
        if not line.strip() or skip.match(line):
            continue
        step = line.split(" || ", 1)[0].strip()
        ci.append(step.replace(" -q", ""))
    assert documented == ci


def test_the_release_venvs_script_tells_too_little_disk_apart(tmp_path: Path) -> None:
    """scripts/release_venvs.sh: exit 75 and one line when the disk cannot hold the build
    (checked before anything is installed), as .ci/run expects of it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["FLIGHTCHECK_RELEASE_VENVS_NEED_GIB"] = "1000000"
    root = tmp_path / "rv"
    proc = subprocess.run(
        ["bash", str(REPO / "scripts" / "release_venvs.sh"), str(root)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    if "Python 3.11 is needed" in proc.stderr:
        pytest.skip("no Python 3.11 here (the script needs it)")
    assert proc.returncode == 75, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("release venvs: not built: too little disk") and "GiB free" in line
    assert not (root / "_torch").exists()
