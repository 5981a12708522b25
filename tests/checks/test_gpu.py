"""FC201–FC210 on recorded hosts (tests/fixtures/hosts) and variations of them."""

from __future__ import annotations

from typing import Any

import pytest

from flightcheck import Intent, evaluate
from flightcheck._vocabulary.facts import from_dict
from support.cli import cli
from support.evaluation import assert_fires, assert_silent, host_doc, results, statuses

HEALTHY = ("hgx-b300", 8), ("hgx-h100", 8), ("h200-single", 1), ("pcie-l40s", 4), ("vm-passthrough-h100", 1)
FC2 = ("FC201", "FC202", "FC203", "FC204", "FC205", "FC206", "FC207", "FC208", "FC210")


def host(name: str = "hgx-b300", **sections: Any):
    d = host_doc(name)
    d.update(sections)
    return d


def gpus_with(name: str = "hgx-b300", **fields: Any) -> list[dict[str, Any]]:
    gpus = host_doc(name)["gpus"]
    for g in gpus:
        g.update(fields)
    return gpus


@pytest.mark.parametrize("name,tp", HEALTHY)
@pytest.mark.parametrize("code", FC2)
def test_healthy_recorded_hosts_are_silent(name, tp, code):
    assert_silent(code, from_dict(host(name)), tensor_parallel_size=tp)


def test_fc201_container_without_nvidia_runtime():
    [r] = assert_fires("FC201", from_dict(host("container-no-driver")), tensor_parallel_size=8)
    assert "NVML Shared Library Not Found" in r.message and "--gpus all" in r.fix
    # everything else still evaluates, the GPU checks explain themselves
    res = results(from_dict(host("container-no-driver")), tensor_parallel_size=8)
    assert res["FC202"][0].status.value == "skip" and "FC201" in res["FC202"][0].message
    assert "FC601" in res and "FC304" in res


@pytest.mark.parametrize(
    "error,needle",
    [
        ("Driver Not Loaded", "modprobe nvidia"),
        ("RM has detected an NVML/RM version mismatch.", "reboot"),
        ("NVML Shared Library Not Found", "cuda-drivers"),
        ("NVML did not answer within 12s (nvmlInit never returned): a GPU may have fallen off the bus", "xid"),
    ],
)
def test_fc201_fix_follows_the_error(error, needle):
    d = host("hgx-b300", driver={"loaded": False, "version": None, "cuda_version": None, "error": error}, gpus=[])
    [r] = assert_fires("FC201", from_dict(d))
    assert needle in r.fix


def test_fc201_unknown_when_nvml_could_not_be_asked():
    d = host("hgx-b300", driver=None, gpus=None, unavailable={"driver": "the NVML child failed: exit 1"})
    assert statuses(from_dict(d), "FC201") == {"unknown"}


def test_fc202_fires_on_a_single_gpu_box_and_names_a_layout():
    [r] = assert_fires("FC202", from_dict(host("h200-single")), tensor_parallel_size=8)
    assert "1 GPU(s) visible" in r.message and "-tp 1" in r.fix
    [r] = assert_fires("FC202", from_dict(host("h200-single")), engine="sglang", tensor_parallel_size=2)
    assert "--tp 1" in r.fix  # the one SGLang spelling every fix uses (FC401/FC403 too)


def test_fc202_cuda_visible_devices_selects_too_few_or_stops_early():
    [r] = assert_fires("FC202", from_dict(host(visible_devices="0,1")), tensor_parallel_size=8)
    assert "CUDA_VISIBLE_DEVICES=0,1 selects 2 of 8" in r.message and r.fix.startswith(
        "export CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7"
    )
    [r] = assert_fires("FC202", from_dict(host(visible_devices="0,1,9,2")), tensor_parallel_size=4)
    assert "stops at '9'" in r.message
    assert_silent("FC202", from_dict(host(visible_devices="4,5,6,7")), tensor_parallel_size=4)
    assert_silent("FC202", from_dict(host()), tensor_parallel_size=16, nnodes=2)
    assert_fires("FC202", from_dict(host()), tensor_parallel_size=8, pipeline_parallel_size=2)


def test_fc203_major_behind_is_an_error_with_the_driver_to_install():
    d = host("hgx-b300", driver={"loaded": True, "version": "535.183.01", "cuda_version": "12.2", "error": None})
    [r] = assert_fires("FC203", from_dict(d))
    assert r.severity.value == "error" and "580.65.06" in r.fix and "cu122" in r.fix
    assert r.evidence["needed_driver"] == "580.65.06"


def test_fc203_minor_behind_is_a_warning():
    d = host("hgx-h100", driver={"loaded": True, "version": "550.127.05", "cuda_version": "12.4", "error": None})
    d["fabric_manager"]["version"] = "550.127.05"  # else FC308 rightly fails
    [r] = assert_fires("FC203", from_dict(d))
    assert r.severity.value == "warning" and "570.86.10" in r.fix and "PTX" in r.message
    assert evaluate(from_dict(d), Intent(tensor_parallel_size=8)).exit_code == 0


def test_fc203_skipped_without_torch():
    d = host("hgx-b300")
    d["python"]["torch_cuda"] = None
    d["python"]["torch_arch_list"] = None
    assert statuses(from_dict(d), "FC203") == {"skip"}


def h100_with(libraries: dict[str, Any], cuda: str = "12.4", driver: str = "550.127.05", torch: str | None = "12.4"):
    """H100 x8 whose driver supports CUDA ``cuda`` and torch is built for ``torch`` (so the
    torch comparison passes), with ``python.cuda_libraries`` recorded."""
    d = host("hgx-h100", driver={"loaded": True, "version": driver, "cuda_version": cuda, "error": None})
    d["fabric_manager"]["version"] = driver  # else FC308 rightly fails
    d["python"]["torch_cuda"] = torch
    if torch is None:
        d["python"]["torch_arch_list"] = None
    d["python"]["cuda_libraries"] = libraries
    return from_dict(d)


def vllm_lib(cubins: list[str], ptx: dict[str, list[str]]) -> dict[str, Any]:
    return {"vllm": {"version": "0.11.0", "files": ["_C.abi3.so"], "cubins": cubins, "ptx": ptx}}


def test_fc203_ptx_only_newer_than_the_driver_is_an_error():
    # kernels built as CUDA 12.8 PTX (ISA 8.7) with no sm_90 cubin, driver 12.4: the JIT refuses them
    f = h100_with(vllm_lib(["8.0"], {"9.0": ["8.7"]}))
    [r] = assert_fires("FC203", f, tensor_parallel_size=8)
    assert r.severity.value == "error" and r.subject == "gpus:0-7"
    assert "CUDA_ERROR_UNSUPPORTED_PTX_VERSION (222)" in r.message and "needs CUDA 12.8" in r.message
    assert (
        "vllm 0.11.0 has no cubin for GPU 0 (NVIDIA H100 80GB HBM3, sm_90) and 7 more" in r.message
        and "compute_90 (PTX ISA 8.7)" in r.message
    )
    assert r.fix.startswith("install NVIDIA driver >= 570.86.10 (CUDA 12.8's)") and "cubins for sm_90" in r.fix
    assert r.evidence["ptx_isa"] == "8.7" and r.evidence["needed_driver"] == "570.86.10"
    assert evaluate(f, Intent(tensor_parallel_size=8)).exit_code == 1


def test_fc203_does_not_stop_when_a_cubin_for_the_gpu_exists():
    # the same PTX 8.7 and the same 12.4 driver, but an sm_90 cubin: the PTX is never JIT-compiled
    assert_silent("FC203", h100_with(vllm_lib(["8.0", "9.0"], {"9.0": ["8.7"]})), tensor_parallel_size=8)
    assert_silent("FC203", h100_with(vllm_lib(["9.0a"], {"9.0": ["8.7"]})), tensor_parallel_size=8)
    # a B300 (sm_103) runs plain sm_100 cubins (same major, lower minor), never sm_100a ones
    b300 = from_dict(host("hgx-b300"))
    assert b300.python is not None and b300.driver is not None and b300.driver.cuda_version == "13.0"
    d = host("hgx-b300")
    d["python"]["cuda_libraries"] = {"vllm": {"cubins": ["10.0"], "ptx": {"10.0": ["9.1"]}}}
    assert_silent("FC203", from_dict(d), tensor_parallel_size=8)
    d["python"]["cuda_libraries"] = {"vllm": {"cubins": ["10.0a"], "ptx": {"10.0": ["9.1"]}}}
    [r] = assert_fires("FC203", from_dict(d), tensor_parallel_size=8)
    assert r.severity.value == "error" and "needs CUDA 13.1" in r.message


def test_fc203_ptx_the_driver_accepts_and_libraries_not_loaded_are_silent():
    got = assert_silent("FC203", h100_with(vllm_lib(["8.0"], {"9.0": ["8.4"]})), tensor_parallel_size=8)
    assert any("PTX for sm_90 the driver accepts" in r.message for r in got)
    # sgl-kernel is not what vLLM loads; a jit-cache FlashInfer refuses (version mismatch) neither
    libs = {
        "sglang-kernel": {"cubins": [], "ptx": {"9.0": ["8.7"]}},
        "flashinfer-jit-cache": {"cubins": [], "ptx": {"9.0": ["8.7"]}},
    }
    f = h100_with(libs)
    assert f.python is not None and f.python.packages is not None
    assert_silent("FC203", f, tensor_parallel_size=8)
    assert_fires("FC203", h100_with(libs), tensor_parallel_size=8, engine="sglang")


def test_fc203_ptx_undecidable_is_a_warning():
    # the version field unreadable (zero): cannot tell, so a warning
    [r] = assert_fires("FC203", h100_with(vllm_lib([], {"9.0": []})), tensor_parallel_size=8)
    assert r.severity.value == "warning" and "could not be read" in r.message
    # an ISA past the table on a driver past it too: extrapolation, a warning
    f = h100_with(vllm_lib([], {"9.0": ["9.7"]}), cuda="13.4", driver="610.10", torch="13.0")
    [r] = assert_fires("FC203", f, tensor_parallel_size=8)
    assert r.severity.value == "warning" and "extrapolating" in r.message
    # ... but a driver no newer than the table's newest CUDA refuses it for certain
    f = h100_with(vllm_lib([], {"9.0": ["9.7"]}), cuda="13.0", driver="580.65.06", torch="13.0")
    [r] = assert_fires("FC203", f, tensor_parallel_size=8)
    assert r.severity.value == "error" and "newer than 13.1" in r.message
    # two PTX archs the GPU can JIT, one the driver accepts: a warning, not a stop
    [r] = assert_fires("FC203", h100_with(vllm_lib([], {"8.0": ["8.4"], "9.0": ["8.7"]})), tensor_parallel_size=8)
    assert r.severity.value == "warning"


def test_fc203_judges_the_ptx_without_torch():
    [r] = assert_fires("FC203", h100_with(vllm_lib([], {"9.0": ["8.7"]}), torch=None), tensor_parallel_size=8)
    assert r.severity.value == "error"
    assert statuses(h100_with({}, torch=None), "FC203", tensor_parallel_size=8) == {"skip"}


def test_fc204_arch_list_without_blackwell():
    d = host("hgx-b300")
    d["python"].update(
        torch_cuda="12.6", torch_arch_list=["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"]
    )
    [r] = assert_fires("FC204", from_dict(d), tensor_parallel_size=8)
    assert "sm_103" in r.message and r.subject == "gpus:0-7" and "cu130" in r.fix


def test_fc204_without_the_list_infers_from_torch_cuda():
    d = host("hgx-b300")
    d["python"].update(torch_cuda="12.6", torch_arch_list=None)
    [r] = assert_fires("FC204", from_dict(d))
    assert "CUDA 12.6" in r.message
    d["python"].update(torch_cuda="13.0")
    res = results(from_dict(d))["FC204"]
    assert res[0].status.value == "pass" and "--deep" in res[0].message


def test_fc205_mixed_models():
    gpus = host_doc("hgx-h100")["gpus"]
    for g in gpus[4:]:
        g["name"] = "NVIDIA H200"
    [r] = assert_fires("FC205", from_dict(host("hgx-h100", gpus=gpus)), tensor_parallel_size=8)
    assert "4x NVIDIA H100 80GB HBM3" in r.message and "CUDA_VISIBLE_DEVICES=0,1,2,3" in r.fix
    assert_silent("FC205", from_dict(host("hgx-h100", gpus=gpus)), tensor_parallel_size=4)


def test_fc206_memory_held_by_another_process():
    gpus = host_doc("hgx-h100")["gpus"]
    gpus[2]["memory_used_bytes"] = 30 << 30
    f = from_dict(host("hgx-h100", gpus=gpus))
    [r] = assert_fires("FC206", f, tensor_parallel_size=8, gpu_memory_utilization=0.9)
    assert (
        r.subject == "gpu:2" and "30.0 of 80.0 GiB" in r.message and "--query-compute-apps" in r.fix and "0.62" in r.fix
    )
    assert_silent("FC206", f, tensor_parallel_size=8, gpu_memory_utilization=0.6)


def test_fc206_sglang_memory_in_use_is_a_warning_not_a_refusal():
    """SGLang sizes its pool from free memory (kv_cache_configurator.py
    _profile_available_bytes): 30 GiB held on an 80 GiB H100 is more than the slack its
    default fraction keeps, a warning with what it costs — not vLLM's refusal."""
    gpus = host_doc("hgx-h100")["gpus"]
    gpus[2]["memory_used_bytes"] = 30 << 30
    f = from_dict(host("hgx-h100", gpus=gpus))
    [r] = assert_fires("FC206", f, engine="sglang", tensor_parallel_size=8)
    assert r.severity.value == "warning" and r.subject == "gpu:2"
    assert "KV pool shrinks" in r.message and "--query-compute-apps" in r.fix and "-i 2" in r.fix
    # the launch's own --mem-fraction-static decides the slack: 0.5 keeps 40 GiB outside
    assert_silent("FC206", f, engine="sglang", tensor_parallel_size=8, gpu_memory_utilization=0.5)


def test_fc207_pending_is_a_warning_failure_an_error():
    gpus = host_doc("hgx-b300")["gpus"]
    gpus[1]["remapped_rows"] = {"pending": True, "failure": False}
    gpus[5]["remapped_rows"] = {"pending": False, "failure": True}
    rs = assert_fires("FC207", from_dict(host(gpus=gpus)), tensor_parallel_size=8)
    by = {r.subject: r for r in rs}
    assert by["gpu:1"].severity.value == "warning" and "nvidia-smi -r -i 1" in by["gpu:1"].fix
    assert by["gpu:5"].severity.value == "error" and "RMA" in by["gpu:5"].fix
    assert evaluate(from_dict(host(gpus=gpus)), Intent(tensor_parallel_size=8)).exit_code == 1


def test_fc208_mig():
    gpus = host_doc("hgx-b300")["gpus"]
    gpus[2]["mig_enabled"] = True
    [r] = assert_fires("FC208", from_dict(host(gpus=gpus)), tensor_parallel_size=8)
    assert "nvidia-smi -i 2 -mig 0" in r.fix
    assert_silent("FC208", from_dict(host(gpus=gpus)), tensor_parallel_size=2)  # GPU 2 not used


def test_fc209_passthrough_vm():
    [r] = assert_fires("FC209", from_dict(host("vm-passthrough-h100")))
    assert "passthrough" in r.message and "hypervisor" in r.fix
    assert_silent("FC209", from_dict(host()), tensor_parallel_size=8)


def test_fc210_lost_gpu():
    gpus = host_doc("hgx-b300")["gpus"]
    gpus[6] = {"index": 6, "error": "GPU is lost (fell off the bus; see `dmesg | grep -i xid`, Xid 79)"}
    [r] = assert_fires("FC210", from_dict(host(gpus=gpus)), tensor_parallel_size=8)
    assert r.subject == "gpu:6" and "nvidia-smi -r -i 6" in r.fix
    assert_silent("FC210", from_dict(host(gpus=gpus)), tensor_parallel_size=4)


def test_family_headline():
    report = evaluate(from_dict(host()), Intent(tensor_parallel_size=8))
    assert report.summaries["FC2"] == "8x NVIDIA B300 SXM6 AC (compute 10.3), driver 580.95.05 (CUDA 13.0)"
    report = evaluate(from_dict(host("container-no-driver")), Intent())
    assert "NVML Shared Library Not Found" in report.summaries["FC2"]


def test_fc201_check_on_this_machine_reports_it_and_evaluates_the_rest():
    """The issue's 'done when': no GPU here; FC201 names the reason, nothing crashes."""
    r = cli("check", "-tp", "8", "--format", "json")
    assert "Traceback" not in r.stderr and r.returncode in (0, 1, 3), r.stderr
    import json

    doc = json.loads(r.stdout)
    codes = {c["code"]: c for c in doc["checks"]}
    if codes["FC201"]["status"] == "pass":
        pytest.skip("this machine has an NVIDIA driver")
    assert codes["FC201"]["status"] == "fail" and codes["FC201"]["message"]
    assert not [c for c in doc["checks"] if "crashed" in c["message"]]
    assert {"FC101", "FC304", "FC601"} <= set(codes)


@pytest.mark.parametrize(
    "vllm_version,torch_version,env,platform",
    [
        ("0.33.0+cpu", "2.14.0+cpu", {}, "CPU"),
        ("0.33.0", "2.14.0", {"VLLM_TARGET_DEVICE": "cpu"}, "CPU"),
        ("0.33.0+rocm711", "2.14.0+rocm7.1", {}, "ROCm"),
        ("0.33.0", "2.14.0+rocm7.1", {}, "ROCm"),
        ("0.33.0", "2.14.0+cu130", {}, None),
    ],
)
def test_fc201_skips_a_vllm_that_does_not_run_on_cuda(vllm_version, torch_version, env, platform):
    """A vLLM built for the CPU or ROCm (vllm/platforms/__init__.py 0.33.0: VLLM_TARGET_DEVICE,
    the version's "cpu", a ROCm torch) needs no NVIDIA driver: FC201 skips, saying why."""
    doc = host("container-no-driver")
    doc["python"] = {**(doc.get("python") or {}), "packages": {"vllm": vllm_version, "torch": torch_version}}
    doc["env"] = {**(doc.get("env") or {}), **env}
    if platform is None:
        assert_fires("FC201", from_dict(doc), tensor_parallel_size=1)
        return
    (r,) = results(from_dict(doc), tensor_parallel_size=1)["FC201"]
    assert r.status.value == "skip" and f"{platform} platform" in r.message, r
