"""recipes/prepare: the Slurm script runs the two prepare steps as documented; the
Dockerfile builds the bundle in one stage and installs it in the serving stage."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

RECIPES = Path(__file__).resolve().parents[2] / "recipes" / "prepare"


def _run(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    stub = tmp_path / "flightcheck"
    stub.write_text('#!/bin/sh\necho "ARGS $*"\necho "export FLASHINFER_DISABLE_JIT=1"\n')
    stub.chmod(0o755)
    return subprocess.run(
        ["bash", str(RECIPES / "slurm-prepare.sh"), *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "FLIGHTCHECK": str(stub), **env},
    )


def test_build_passes_the_target_and_the_engine_command(tmp_path: Path) -> None:
    got = _run(tmp_path, "build", str(tmp_path / "b"), "--", "vllm", "serve", "M", "-tp", "8", ENGINE_PY="/venv/py")
    assert got.returncode == 0, got.stderr
    assert f"ARGS prepare --arch 10.3a --python /venv/py -o {tmp_path / 'b'} -- vllm serve M -tp 8" in got.stdout
    got = _run(tmp_path, "build", str(tmp_path / "b"), NODE_FACTS="/facts/n1.json")
    assert "--for /facts/n1.json" in got.stdout


def test_install_prints_and_keeps_the_launch_environment(tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    got = _run(tmp_path, "install", str(tmp_path / "b"))
    assert got.returncode == 0 and "export FLASHINFER_DISABLE_JIT=1" in got.stdout
    assert any(p.name.startswith("launch.env.") for p in (tmp_path / "b").iterdir())


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    assert _run(tmp_path).returncode == 2
    assert _run(tmp_path, "bake", str(tmp_path)).returncode == 2


def test_the_dockerfile_prepares_in_the_build_stage_and_installs_in_the_serving_stage() -> None:
    text = (RECIPES / "Dockerfile").read_text()
    build, _, serve = text.partition("\nFROM ${VLLM_IMAGE}\n")
    assert "flightcheck prepare --arch" in build and "COPY --from=build /bundle" in serve
    assert "flightcheck prepare install /opt/flightcheck-bundle" in serve and "nvcc" not in serve.split("RUN", 1)[1]
