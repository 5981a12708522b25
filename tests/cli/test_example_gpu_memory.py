"""The bundled H100 example carries NVML's v2 ``reserved`` and the memory model budgets from
what CUDA reports: NVML's total less it (issue 12: the torch-visible total)."""

from __future__ import annotations

import json

from support import REPO, ckptgen
from support.cli import cli

MiB = 1 << 20
GiB = 1 << 30


def test_h100_example_total_is_nvml_total_less_the_reservation(tmp_path) -> None:
    # the figures of a public `nvidia-smi -q` of an H100 80GB HBM3 (driver 565.57.01):
    # "FB Memory Usage / Total : 81559 MiB / Reserved : 454 MiB"; other public records of
    # the same board give 328 - 551 MiB by driver
    facts = json.loads((REPO / "src" / "flightcheck" / "_examples" / "h100-hgx.json").read_text())
    assert {g["memory_total_bytes"] for g in facts["gpus"]} == {81559 * MiB}
    assert {g["memory_reserved_bytes"] for g in facts["gpus"]} == {454 * MiB}
    model = ckptgen.write_checkpoint(tmp_path / "m", ckptgen.load_config("llama-3-8b"))
    proc = cli("check", "--example", "h100-hgx", "--model", str(model), "-tp", "8", "--format", "json")
    mem = json.loads(proc.stdout)["memory"]
    assert mem["gpu"]["memory_total_bytes"] == (81559 - 454) * MiB
    assert mem["gpu"]["memory_reserved_bytes"] == 454 * MiB
    # what CUDA reports on an H100 80GB in public vLLM logs: "Free memory on device
    # (78.66/79.19 GiB)"; NVML's total less the reservation is within 0.02 GiB of it
    assert abs(mem["gpu"]["memory_total_bytes"] / GiB - 79.19) < 0.02
