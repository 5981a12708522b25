"""FC9xx: the engine's pod as Kubernetes runs it, on manifests written from the charts'
own values (tests/fixtures/k8s: vLLM production-stack's defaults, the LWS vLLM example)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from flightcheck._collect.k8s_manifest import quantity, read_manifest
from flightcheck._launch import parse_command
from flightcheck._vocabulary.errors import UsageError
from support.evaluation import assert_fires, assert_silent, evaluated, facts, statuses

K8S = Path(__file__).resolve().parents[1] / "fixtures" / "k8s"
#: the 1.56 TB checkpoint of the issue: 163 shards of about 9.6 GB
BIG = {f"model-{i:05d}-of-00163.safetensors": 9_570_552_147 for i in range(163)}
FITS = ("FC901", "FC902", "FC903", "FC904")


def _case(name: str, **pod: Any) -> tuple[Any, dict[str, Any]]:
    """(facts with the manifest's pod section and a 1.56 TB checkpoint, the launch's intent)."""
    m = read_manifest(str(K8S / name))
    section = copy.deepcopy(m.pod)
    section.update(pod)
    i = parse_command(m.argv).intent
    intent = {
        "model": i.model,
        "tensor_parallel_size": i.tensor_parallel_size,
        "pipeline_parallel_size": i.pipeline_parallel_size,
    }
    return facts("b300", pod=section, checkpoint={"model": i.model, "files": BIG}), intent


def test_checkpoint_fixture_is_the_issues_size():
    assert 1.55e12 < sum(BIG.values()) < 1.57e12


def test_fc901_production_stack_default_probe_is_named_with_the_fix():
    f, intent = _case("production-stack-default.yaml")
    [r] = assert_fires("FC901", f, **intent)
    assert "startupProbe restarts the container after 615 s" in r.message
    assert "1.56 TB" in r.message and "assumed" in r.message
    assert r.severity.value == "warning"  # the speed was not measured: never a stop
    assert "failureThreshold:" in r.fix and "periodSeconds: 10" in r.fix
    # the fix is YAML to paste, and it covers the estimate twice over
    import yaml

    probe = yaml.safe_load(r.fix.split("#")[0])["startupProbe"]
    assert (
        probe["initialDelaySeconds"] + probe["failureThreshold"] * probe["periodSeconds"]
        >= 2 * r.evidence["estimate_s"]
    )


class _Read:
    """The slice of a checkpoint read on this node that FC901 uses (``--deep`` measured it)."""

    def __init__(self, bytes_per_s: float) -> None:
        self.total_bytes = sum(BIG.values())
        self.throughput = {"bytes_per_s": bytes_per_s, "method": "O_DIRECT"}


def test_fc901_measured_speed_makes_it_an_error_and_fast_disks_pass():
    from flightcheck._checks.framework import REGISTRY, Context, run_check
    from flightcheck._vocabulary.intent import Intent

    f, intent = _case("production-stack-default.yaml")
    [r] = evaluated("FC901", run_check(REGISTRY["FC901"], Context(f, Intent(**intent), _Read(1.7e9))))
    assert r.status.value == "fail" and r.severity.value == "error", r.message
    assert "measured 1.70 GB/s" in r.message
    # local NVMe RAID at 20 GB/s: 78 s + 180 s fits 615 s
    [r] = evaluated("FC901", run_check(REGISTRY["FC901"], Context(f, Intent(**intent), _Read(20e9))))
    assert r.status.value == "pass", r.message


def test_fc901_liveness_only_counts():
    f, intent = _case("production-stack-default.yaml", startup_probe=None)
    [r] = assert_fires("FC901", f, **intent)
    assert "livenessProbe restarts the container after 45 s" in r.message


def test_fc901_does_not_stop_a_fitting_probe_or_a_pod_without_probes():
    f, intent = _case("production-stack-fitting.yaml")
    [r] = assert_silent("FC901", f, **intent)
    assert "startupProbe allows 3615 s" in r.message
    f, intent = _case("production-stack-default.yaml", startup_probe=None, liveness_probe=None)
    assert_silent("FC901", f, **intent)


def test_fc901_eager_launch_needs_no_compile_time():
    f, intent = _case("production-stack-default.yaml")
    [slow] = assert_fires("FC901", f, **intent)
    [eager] = assert_fires("FC901", f, enforce_eager=True, **intent)
    assert slow.evidence["estimate_s"] - eager.evidence["estimate_s"] == pytest.approx(120, abs=0.2)


def test_fc9xx_fitting_production_stack_manifest_is_silent():
    f, intent = _case("production-stack-fitting.yaml")
    for code in FITS:
        assert_silent(code, f, **intent)


def test_fc9xx_lws_two_node_manifest_is_silent():
    f, intent = _case("lws-vllm.yaml")
    assert intent["tensor_parallel_size"] * intent["pipeline_parallel_size"] == 16
    for code in FITS:
        assert_silent(code, f, **intent)


def test_fc9xx_kserve_runtime_and_inference_service_merged_are_silent():
    f, intent = _case("kserve-vllm.yaml")
    assert intent == {"model": "/mnt/models", "tensor_parallel_size": 8, "pipeline_parallel_size": 1}
    for code in FITS:
        assert_silent(code, f, **intent)
    m = read_manifest(str(K8S / "kserve-vllm.yaml"))
    # the runtime's probe (30 s + 60 x 30 s) and /dev/shm, the InferenceService's GPUs and args
    assert m.pod["startup_probe"] == {"initial_delay_s": 30, "period_s": 30, "failure_threshold": 60}
    assert m.pod["gpu_limit"] == 8 and m.pod["shm_medium"] == "Memory" and m.pod["kind"] == "InferenceService"
    assert m.argv[-2:] == ["--tensor-parallel-size=8", "--max-model-len=16384"]


def test_fc9xx_llm_d_pd_chart_output_stops_nothing():
    # the decode Deployment (the first engine container): one GPU, no probes, NIXL KV transfer
    f, intent = _case("llm-d-pd.yaml")
    assert intent["tensor_parallel_size"] == 1
    for code in ("FC901", "FC902", "FC903", "FC905"):
        assert_silent(code, f, **intent)
    # without hostIPC the KV transfer is named, as a warning only (never a stop)
    [r] = assert_fires("FC904", f, **intent)
    assert r.severity.value == "warning" and "hostIPC: true" in r.fix


def test_kserve_merge_keeps_the_runtime_without_the_services_gpus(tmp_path):
    import yaml

    docs = list(yaml.safe_load_all((K8S / "kserve-vllm.yaml").read_text()))
    isvc = docs[1]["spec"]["predictor"]["model"]
    for part in ("limits", "requests"):
        isvc["resources"][part]["nvidia.com/gpu"] = "4"
    isvc["env"] = [{"name": "HF_HOME", "value": "/models/hf"}]
    path = tmp_path / "isvc.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    m = read_manifest(str(path))
    assert m.pod["gpu_limit"] == 4 and m.env["HF_HOME"] == "/models/hf"  # merged by name
    assert m.env["VLLM_WORKER_MULTIPROC_METHOD"] == "spawn"  # the runtime's stays
    f, intent = _case("kserve-vllm.yaml", gpu_limit=4)
    [r] = assert_fires("FC903", f, **intent)
    assert "given 4 nvidia.com/gpu" in r.message
    # a custom predictor's own container; a service whose runtime is not given is no pod
    custom = {
        "kind": "InferenceService",
        "metadata": {"name": "custom"},
        "spec": {"predictor": {"containers": [{"name": "c", "command": ["vllm", "serve", "/m", "-tp", "2"]}]}},
    }
    path.write_text(yaml.safe_dump(custom))
    assert read_manifest(str(path)).argv == ["vllm", "serve", "/m", "-tp", "2"]
    path.write_text(yaml.safe_dump(docs[1]))
    with pytest.raises(UsageError, match="no container runs vLLM"):
        read_manifest(str(path))


def test_fc902_fires_without_a_shm_volume_and_on_a_small_one():
    f, intent = _case("production-stack-default.yaml", shm_mounted=False, shm_medium=None, shm_size_limit_bytes=None)
    [r] = assert_fires("FC902", f, **intent)
    assert "64 MiB" in r.message and "8 ranks" in r.message
    assert "medium: Memory" in r.fix and "mountPath: /dev/shm" in r.fix
    f, intent = _case("production-stack-default.yaml", shm_size_limit_bytes=256 << 20)
    [r] = assert_fires("FC902", f, **intent)
    assert "256 MiB" in r.message


def test_fc902_does_not_stop_host_ipc_one_rank_or_the_charts_volume():
    f, intent = _case("production-stack-default.yaml")
    assert_silent("FC902", f, **intent)
    f, intent = _case("production-stack-default.yaml", shm_mounted=False, host_ipc=True)
    assert_silent("FC902", f, **intent)
    f, intent = _case("production-stack-default.yaml", shm_mounted=False)
    intent["tensor_parallel_size"] = 1
    assert statuses(f, "FC902", **intent) == {"skip"}


def test_fc903_fires_when_the_limit_is_under_tp_x_pp():
    f, intent = _case("production-stack-default.yaml", gpu_limit=4)
    [r] = assert_fires("FC903", f, **intent)
    assert "given 4 nvidia.com/gpu" in r.message and "uses 8 per pod" in r.message
    assert 'nvidia.com/gpu: "8"' in r.fix
    f, intent = _case("lws-vllm.yaml", gpu_limit=4)
    [r] = assert_fires("FC903", f, **intent)
    assert "over 2 pods" in r.message


def test_fc903_does_not_stop_mig_resources_or_more_gpus():
    f, intent = _case("production-stack-default.yaml", gpu_limit=0, other_gpu_resources=["nvidia.com/mig-4g.71gb"])
    assert statuses(f, "FC903", **intent) == {"skip"}
    f, intent = _case("production-stack-default.yaml", gpu_limit=16)
    assert_silent("FC903", f, **intent)


def test_fc904_fires_for_pd_without_host_ipc():
    f, intent = _case("production-stack-default.yaml", kv_transfer=True)
    [r] = assert_fires("FC904", f, **intent)
    assert r.fix.startswith("hostIPC: true")


def test_fc904_does_not_stop_pd_with_host_ipc():
    f, intent = _case("production-stack-default.yaml", kv_transfer=True, host_ipc=True)
    assert_silent("FC904", f, **intent)


def test_fc905_fires_when_the_driver_is_older_than_the_image():
    # the b300 snapshot: driver 590.48.01, CUDA 13.1
    f, intent = _case("production-stack-default.yaml", require_cuda="cuda>=13.2 brand=tesla,driver>=535,driver<536")
    [r] = assert_fires("FC905", f, **intent)
    assert "requires cuda>=13.2" in r.message and "CUDA 13.1" in r.message
    assert r.fix.startswith("image:")


def test_fc905_does_not_stop_a_met_requirement_or_a_matching_driver_branch():
    f, intent = _case("production-stack-default.yaml", require_cuda="cuda>=12.8 brand=tesla,driver>=470,driver<471")
    assert_silent("FC905", f, **intent)
    req = "cuda>=99.0 brand=tesla,driver>=590,driver<591"  # the driver's branch carries compat libraries
    f, intent = _case("production-stack-default.yaml", require_cuda=req)
    assert_silent("FC905", f, **intent)
    f, intent = _case("production-stack-default.yaml", require_cuda="cuda>=99.0", disable_require=True)
    assert statuses(f, "FC905", **intent) == {"skip"}


def test_no_manifest_skips_the_family():
    f = facts("b300")
    for code in (*FITS, "FC905"):
        assert statuses(f, code, tensor_parallel_size=8) == {"skip"}


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (b"{{ not yaml", "not valid YAML"),
        (b"\xff\xfe", "not UTF-8"),
        (b"kind: Pod\nspec: {containers: [{name: x, command: [nginx]}]}\n", "no container runs vLLM"),
        (
            (
                b"a: &a [1,1,1,1,1,1,1,1,1]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
                b"c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
                b"e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n"
            ),
            "aliases expanded",
        ),
        (b"[" * 200 + b"]" * 200, "nested"),
        (b"kind: Deployment\nspec: {template: {spec: {containers: [{command: 5}]}}}\n", "no container"),
        (b"- 1\n- 2\n", "no container"),
    ],
)
def test_hostile_manifests_are_one_line(tmp_path, text, problem):
    p = tmp_path / "m.yaml"
    p.write_bytes(text)
    with pytest.raises(UsageError) as exc:
        read_manifest(str(p))
    assert problem in str(exc.value) and "\n" not in str(exc.value)


def test_quantities():
    assert quantity("20Gi") == 20 << 30 and quantity("16G") == 16_000_000_000 and quantity("8") == 8
    assert quantity(4) == 4 and quantity("lots") is None and quantity(True) is None and quantity("1e3") == 1000


def test_command_and_args_expand_as_the_kubelet_does():
    from flightcheck._collect.k8s_manifest import engine_argv, expand

    env = {"MODEL": "/models/m", "TP": "8"}
    assert expand("$(MODEL)", env) == "/models/m"
    assert expand("--x=$(TP)$(TP)", env) == "--x=88"
    assert expand("$$(MODEL)", env) == "$(MODEL)"  # escaped
    assert expand("$(UNSET) $( $MODEL $", env) == "$(UNSET) $( $MODEL $"  # left as written
    c = {
        "command": ["vllm", "serve"],
        "args": ["$(MODEL)", "-tp", "$(TP)", "--served-model-name", "$(POD_IP)"],
        "env": [{"name": "MODEL", "value": "/models/m"}, {"name": "TP", "value": 8}]
        + [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
    }
    assert engine_argv(c) == ["vllm", "serve", "/models/m", "-tp", "8", "--served-model-name", "$(POD_IP)"]
