"""The NVML collector: the real child process against a fake pynvml per driver generation.

The fake (tests/fakes/nvml/pynvml.py) is put first on the child's PYTHONPATH; the child and
the parent's parsing are the production code. The last tests use the real nvidia-ml-py on
this machine, which has no NVML library.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from flightcheck._collect import nvml
from support import FAKES
from support.cli import cli

FAKES = FAKES / "nvml"
GB = 1 << 30
HEALTHY_MASK = 2 | 2 << 2 | 2 << 4 | 2 << 6 | 1 << 8  # every flag FALSE, configuration NONE
CLUSTER = "9e5c1b7a2d444f7e8a115b0c6d2e7f90"


def gpu(i: int, name: str = "NVIDIA B300 SXM6 AC", cc=(10, 3), **over: Any) -> dict[str, Any]:
    g = {
        "name": name,
        "uuid": f"GPU-00000000-0000-0000-0000-00000000000{i}",
        "bus": f"00000000:{0x17 + 16 * i:02X}:00.0",
        "cc": list(cc),
        "mem": [288 * GB, GB // 2],
        "mig": 0,
        "persistence": 1,
        "virt": 0,
        "fabric": {"state": 3, "status": 0, "clique": 32766, "uuid": CLUSTER, "mask": HEALTHY_MASK},
        "links": {"count": 18, "active": 18, "remote": 2},
        "remap": [0, 0, 0, 0],
    }
    g.update(over)
    return g


def r570(n: int = 8, **over: Any) -> dict[str, Any]:
    """R570+: the V call with a health mask."""
    return {"driver": "590.44.01", "cuda": 13010, "gpus": [gpu(i) for i in range(n)], **over}


def r550_h100(n: int = 8) -> dict[str, Any]:
    """R550: the V call exists but this driver fills no health bits."""
    gpus = [
        gpu(
            i,
            "NVIDIA H100 80GB HBM3",
            (9, 0),
            mem=[80 * GB, GB // 2],
            fabric={"state": 3, "status": 0, "clique": 7, "uuid": "00" * 16, "mask": 0},
        )
        for i in range(n)
    ]
    return {"driver": "550.127.05", "cuda": 12040, "gpus": gpus}


def r535_h100(n: int = 8) -> dict[str, Any]:
    """R535: no nvmlDeviceGetGpuFabricInfoV (R550+); the legacy call still works."""
    s = r550_h100(n)
    s.update(driver="535.183.01", cuda=12020, missing=["nvmlDeviceGetGpuFabricInfoV"])
    return s


def collect(tmp_path: Path, scenario: dict[str, Any], timeout: float = 10.0) -> dict[str, Any]:
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(scenario))
    env = {**os.environ, "PYTHONPATH": str(FAKES), "FAKE_NVML": str(path), "FAKE_NVML_PIDFILE": str(tmp_path / "pid")}
    parsed = nvml.parse_child(nvml.run_child(timeout, env), timeout)
    return nvml.assemble(
        parsed,
        {
            "fabric_manager": {"service": "active", "version": "590.44.01"},
            "imex": {"channels": [], "service": "not-installed"},
            "evidence": [],
        },
    )


def test_r570_healthy_b300_every_field(tmp_path):
    out = collect(tmp_path, r570())
    assert out["driver"] == {"loaded": True, "version": "590.44.01", "cuda_version": "13.1", "error": None}
    assert len(out["gpus"]) == 8
    g = out["gpus"][3]
    assert g["name"] == "NVIDIA B300 SXM6 AC" and g["compute_capability"] == "10.3" and g["index"] == 3
    assert g["pci_bus_id"] == "00000000:47:00.0" and g["memory_total_bytes"] == 288 * GB
    assert g["mig_enabled"] is False and g["persistence_mode"] is True and g["virtualization_mode"] == "none"
    assert (
        g["fabric"]["state"] == "completed" and g["fabric"]["status"] == "success" and g["fabric"]["clique_id"] == 32766
    )
    assert g["fabric"]["cluster_uuid"] == "9e5c1b7a-2d44-4f7e-8a11-5b0c6d2e7f90"
    assert (
        g["fabric"]["health"]["route_unhealthy"] is False and g["fabric"]["health"]["incorrect_configuration"] is False
    )
    assert g["nvlink"] == {"total": 18, "active": 18, "to_switch": True}
    assert g["remapped_rows"] == {"pending": False, "failure": False}
    # a CUDA attribute, not NVML's: honestly null, with the reason
    assert g["multicast_supported"] is None and "probe" in out["unavailable"]["gpus[3].multicast_supported"]
    assert out["fabric_manager"]["nvswitch_system"] is True
    assert "NVSwitch" in out["fabric_manager"]["detected_by"][0]


def test_health_mask_decoding_and_state_low_byte(tmp_path):
    s = r570(2)
    s["gpus"][0]["fabric"].update(mask=2 | 2 << 2 | 1 << 4 | 2 << 6 | 4 << 8, state_junk=0x5A00)
    out = collect(tmp_path, s)
    f = out["gpus"][0]["fabric"]
    assert f["state"] == "completed"  # junk above the low byte ignored (pynvml's c_uint)
    assert f["health"]["route_unhealthy"] is True
    assert f["health"]["incorrect_configuration"] is True and f["health"]["configuration"] == "no_partition"
    assert f["health_mask"] == 2 | 2 << 2 | 1 << 4 | 2 << 6 | 4 << 8


def test_r550_without_health_bits_gives_nulls_not_false(tmp_path):
    out = collect(tmp_path, r550_h100(2))
    h = out["gpus"][0]["fabric"]["health"]
    assert h["degraded_bandwidth"] is None and h["route_unhealthy"] is None and h["incorrect_configuration"] is None
    assert out["driver"]["cuda_version"] == "12.4"


def test_r535_legacy_fabric_call_and_reason_for_missing_health(tmp_path):
    out = collect(tmp_path, r535_h100(2))
    f = out["gpus"][1]["fabric"]
    assert f["state"] == "completed" and f["clique_id"] == 7 and f["health"] is None
    assert "R550" in out["unavailable"]["gpus[1].fabric.health"]
    assert out["driver"]["version"] == "535.183.01"


def test_v_call_refusing_the_v2_struct_falls_back_to_the_legacy_call(tmp_path):
    s = r570(2)
    for g in s["gpus"]:
        g["errors"] = {"nvmlDeviceGetGpuFabricInfoV": 25}  # NVML_ERROR_ARGUMENT_VERSION_MISMATCH
    out = collect(tmp_path, s)
    assert out["gpus"][0]["fabric"]["state"] == "completed" and out["gpus"][0]["fabric"]["health"] is None


def test_a_surprise_in_one_gpu_costs_only_that_gpu(tmp_path):
    s = r570(3)
    s["gpus"][1]["crash"] = "nvmlDeviceGetName"
    out = collect(tmp_path, s)
    assert "RuntimeError" in out["gpus"][1]["error"] and out["gpus"][2]["name"] and len(out["gpus"]) == 3


def test_old_nvidia_ml_py_without_v2_struct_uses_the_legacy_call(tmp_path):
    s = r570(1)
    s["no_v2_struct"] = True
    out = collect(tmp_path, s)
    assert out["gpus"][0]["fabric"]["state"] == "completed" and out["gpus"][0]["fabric"]["health"] is None


def test_missing_function_nulls_one_field_only(tmp_path):
    s = r570(2)
    s["missing"] = ["nvmlDeviceGetRemappedRows", "nvmlDeviceGetVirtualizationMode"]
    out = collect(tmp_path, s)
    g = out["gpus"][0]
    assert g["remapped_rows"] is None and g["virtualization_mode"] is None
    assert "lacks the function" in out["unavailable"]["gpus[0].remapped_rows"]
    assert g["fabric"]["state"] == "completed" and g["name"]  # the rest is intact


def test_lost_gpu_is_marked_and_the_others_survive(tmp_path):
    s = r570(4)
    s["gpus"][2]["lost"] = True
    s["gpus"][1]["errors"] = {"nvmlDeviceGetMemoryInfo": 15}
    out = collect(tmp_path, s)
    assert len(out["gpus"]) == 4
    assert "GPU is lost" in out["gpus"][2]["error"] and out["gpus"][2].get("name") is None
    assert out["gpus"][1]["memory_total_bytes"] is None and "lost" in out["gpus"][1]["error"]
    assert out["gpus"][0]["error"] is None and out["gpus"][3]["name"]


def test_pcie_gpu_has_no_nvlink_and_no_switch(tmp_path):
    s = {
        "driver": "580.95.05",
        "cuda": 13000,
        "gpus": [
            gpu(i, "NVIDIA L40S", (8, 9), fabric="unsupported", links="unsupported", mig="unsupported")
            for i in range(4)
        ],
    }
    out = collect(tmp_path, s)
    g = out["gpus"][0]
    assert g["nvlink"] == {"total": 0, "active": 0, "to_switch": False}
    assert g["fabric"]["state"] == "not_supported" and g["mig_enabled"] is False
    assert out["fabric_manager"]["nvswitch_system"] is False


@pytest.mark.parametrize(
    "code,text", [(12, "NVML Shared Library Not Found"), (9, "Driver Not Loaded"), (18, "version mismatch")]
)
def test_init_errors_mean_driver_not_loaded(tmp_path, code, text):
    out = collect(tmp_path, {"init_error": code})
    assert out["driver"]["loaded"] is False and text in out["driver"]["error"]
    assert out["gpus"] == []


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return True
    return state == "Z"


def test_hung_gpu_keeps_the_ones_before_and_names_it(tmp_path):
    s = r570(8)
    s["hang"] = {"call": "nvmlDeviceGetHandleByIndex", "index": 5}
    out = collect(tmp_path, s, timeout=3.0)
    gpus = out["gpus"]
    assert [g["index"] for g in gpus] == list(range(8))
    assert gpus[4]["name"] == "NVIDIA B300 SXM6 AC" and gpus[4].get("error") is None
    assert "did not answer" in gpus[5]["error"] and "GPU 5" in gpus[5]["error"]
    assert "hung on GPU 5" in gpus[6]["error"]
    pid = int((tmp_path / "pid").read_text())
    assert _gone(pid), "the hung NVML child must be killed and reaped"


def test_hung_nvml_init_is_driver_unavailable(tmp_path):
    out = collect(tmp_path, {"hang": {"call": "nvmlInit"}}, timeout=2.0)
    assert out["driver"]["loaded"] is False and "did not answer" in out["driver"]["error"]
    assert _gone(int((tmp_path / "pid").read_text()))


def test_pynvml_not_importable_is_unknown_not_absent(tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "pynvml.py").write_text("raise ImportError('no module')\n")
    proc = nvml.run_child(5, {**os.environ, "PYTHONPATH": str(broken)})
    out = nvml.parse_child(proc)
    assert out["driver"]["loaded"] is None and out["gpus"] is None
    assert "nvidia-ml-py" in out["unavailable"]["gpus"]


def test_real_nvidia_ml_py_on_this_machine_reports_no_library():
    """This machine has nvidia-ml-py but no libnvidia-ml.so.1: the real failure path."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FAKE_NVML")}
    out = nvml.parse_child(nvml.run_child(10, env))
    if out["driver"] and out["driver"]["loaded"]:
        pytest.skip("this machine has an NVIDIA driver")
    assert out["driver"]["loaded"] is False and out["driver"]["error"] == "NVML Shared Library Not Found"
    assert out["gpus"] == []


def test_collect_cli_end_to_end_with_the_fake(tmp_path):
    (tmp_path / "s.json").write_text(json.dumps(r570(8)))
    r = cli("collect", env={"PYTHONPATH": str(FAKES), "FAKE_NVML": str(tmp_path / "s.json")})
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert len(doc["gpus"]) == 8 and doc["driver"]["version"] == "590.44.01"
    assert doc["fabric_manager"]["nvswitch_system"] is True
