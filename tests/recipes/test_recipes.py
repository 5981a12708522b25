"""The recipes are real files that work: parsed, their flightcheck command lines parsed with
flightcheck's own argparse, and the shell scripts run end to end against fakes."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import yaml

from flightcheck._cli.main import parse_args
from support import REPO
from support.launch import FM_STOPPED, MULTICAST_401, base_facts

RECIPES = REPO / "recipes"
POD = RECIPES / "kubernetes" / "vllm-pod.yaml"
NPD_CONFIG = RECIPES / "node-problem-detector" / "flightcheck-monitor.json"
NPD_SCRIPT = RECIPES / "node-problem-detector" / "flightcheck.sh"
SLURM = RECIPES / "slurm" / "flightcheck-slurm.sh"


def parse_flightcheck(argv: list[str]):
    """Parse a flightcheck command line exactly as the CLI would (raises on a bad flag)."""
    assert argv[0] == "flightcheck", argv
    return parse_args(argv[1:])


def wrapper(tmp_path: Path) -> Path:
    """A `flightcheck` executable for the scripts: this checkout, this interpreter."""
    path = tmp_path / "bin" / "flightcheck"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m flightcheck "$@"\n')
    path.chmod(0o755)
    return path


# ---------------------------------------------------------------- Kubernetes


def _container_env(c: dict) -> dict[str, str]:
    return {e["name"]: e["value"] for e in c["env"] if "value" in e}


def test_pod_init_container_checks_the_exact_vllm_launch(tmp_path):
    pod = yaml.safe_load(POD.read_text())
    assert pod["kind"] == "Pod" and pod["apiVersion"] == "v1"
    (init,) = pod["spec"]["initContainers"]
    (server,) = pod["spec"]["containers"]
    assert init["name"] == "flightcheck"
    # same image, environment, mounts and GPUs: the check sees what the server will see
    for key in ("image", "env", "resources"):
        assert init[key] == server[key], key
    # the same mounts, and the service account's token in the init container alone
    sa_dir = "/var/run/secrets/kubernetes.io/serviceaccount"
    assert [m for m in init["volumeMounts"] if m["mountPath"] != sa_dir] == server["volumeMounts"]
    assert pod["spec"]["automountServiceAccountToken"] is False
    assert server["resources"]["limits"]["nvidia.com/gpu"] == 8
    env = _container_env(server)

    script = init["args"][0]
    assert init["command"] == ["/bin/sh", "-c"]
    assert subprocess.run(["sh", "-n", "-c", script], check=False).returncode == 0
    steps = [s.strip() for s in script.split("&&")]
    expanded = [shlex.split(re.sub(r"\$(\w+)", lambda m: env[m.group(1)], s)) for s in steps]
    collect_argv, check_argv = expanded[0], expanded[1][1:] if expanded[1][0] == "exec" else expanded[1]
    collect = parse_flightcheck(collect_argv)
    assert collect.command == "collect" and collect.deep and collect.tensor_parallel_size == 8
    check = parse_flightcheck(check_argv)
    assert check.command == "check" and check.facts == [collect.output] and check.k8s_self

    # the engine command checked is the one the vllm container runs ($(VAR) is Kubernetes' expansion)
    engine = [re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], a) for a in server["command"] + server["args"]]
    assert check.engine_command[1:] == engine

    # the plugin in the server reads the facts the init container wrote, on a shared volume
    assert env["FLIGHTCHECK_FACTS"] == collect.output
    mounts = {m["mountPath"]: m["name"] for m in server["volumeMounts"]}
    assert os.path.dirname(collect.output) in mounts
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert "emptyDir" in volumes[mounts[os.path.dirname(collect.output)]]
    assert volumes[mounts["/dev/shm"]]["emptyDir"]["medium"] == "Memory"
    # the per-boot multicast verdict is on the node, so a pod recreated on the same boot
    # reads it: flightcheck's cache directory ($XDG_CACHE_HOME/flightcheck) is a hostPath
    cache = os.path.join(env["XDG_CACHE_HOME"], "flightcheck")
    assert volumes[mounts[cache]]["hostPath"] == {"path": "/var/cache/flightcheck", "type": "DirectoryOrCreate"}

    # and the check step reads that launch as intended (facts: a recorded healthy node)
    argv = check_argv[1:]
    argv[argv.index("--facts") + 1] = str(base_facts(tmp_path))
    # off any cluster, even where the tests themselves run in a pod: no API server is asked
    off_cluster = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_SERVICE_")}
    out = subprocess.run(
        [sys.executable, "-m", "flightcheck", *argv[:1], "--format", "json", *argv[1:]],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=off_cluster,
    )
    report = json.loads(out.stdout)
    intent = report["intent"]
    assert (intent["model"], intent["tensor_parallel_size"], intent["max_model_len"]) == (
        "/models/Kimi-K2-Instruct",
        8,
        128_000,
    )
    # off a cluster --k8s-self skips the FC9xx family with its reason, and stops nothing
    fc9 = {c["status"] for c in report["checks"] if c["code"].startswith("FC9")}
    assert fc9 == {"skip"}, report["checks"]


def test_pod_service_account_and_rbac_grant_get_on_pods_only():
    pod = yaml.safe_load(POD.read_text())
    (init,) = pod["spec"]["initContainers"]
    env = {e["name"]: e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") for e in init["env"]}
    assert env["POD_NAME"] == "metadata.name" and env["POD_NAMESPACE"] == "metadata.namespace"
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    mount = next(m for m in init["volumeMounts"] if m["mountPath"] == "/var/run/secrets/kubernetes.io/serviceaccount")
    sources = volumes[mount["name"]]["projected"]["sources"]
    assert [next(iter(s)) for s in sources] == ["serviceAccountToken", "configMap", "downwardAPI"]
    assert sources[0]["serviceAccountToken"]["path"] == "token"
    docs = {d["kind"]: d for d in yaml.safe_load_all((RECIPES / "kubernetes" / "flightcheck-rbac.yaml").read_text())}
    assert docs["ServiceAccount"]["metadata"]["name"] == pod["spec"]["serviceAccountName"]
    assert docs["Role"]["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]
    binding = docs["RoleBinding"]
    role = docs["Role"]["metadata"]["name"]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "flightcheck"}]
    from flightcheck._collect.k8s_self import RBAC_FILE

    assert (RECIPES.parent / RBAC_FILE).is_file()


def test_the_pods_own_manifest_reads_its_launch_with_kubelet_expansion():
    from flightcheck._collect.k8s_manifest import read_manifest

    m = read_manifest(str(POD))
    assert m.argv[:3] == ["vllm", "serve", "/models/Kimi-K2-Instruct"]  # $(MODEL) as the kubelet expands it
    assert m.pod["container"] == "vllm" and m.pod["gpu_limit"] == 8 and m.pod["shm_medium"] == "Memory"


# ---------------------------------------------------------------- node-problem-detector


def _go_duration(text: str) -> float:
    m = re.fullmatch(r"(\d+)(ms|s|m|h)", text)
    assert m, f"not a Go duration: {text!r}"
    return int(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[m.group(2)]


def test_npd_config_is_a_valid_custom_plugin_monitor():
    cfg = json.loads(NPD_CONFIG.read_text())
    assert cfg["plugin"] == "custom"
    glob = cfg["pluginConfig"]
    assert glob["max_output_length"] == 80
    conditions = {c["type"] for c in cfg["conditions"]}
    for rule in cfg["rules"]:
        assert rule["type"] in ("permanent", "temporary")
        if rule["type"] == "permanent":
            assert rule["condition"] in conditions  # NPD refuses a permanent rule without its default condition
        assert _go_duration(rule["timeout"]) <= _go_duration(glob["timeout"])  # NPD's own validation
        assert Path(rule["path"]).name == NPD_SCRIPT.name
        parse_flightcheck(["flightcheck", "check", "--format", "prometheus", *rule["args"]])
    assert _go_duration(glob["invoke_interval"]) >= _go_duration(glob["timeout"])
    # the script's own budget (timeout + kill grace) fits inside the rule's timeout
    budget = int(re.search(r"FLIGHTCHECK_TIMEOUT:-(\d+)", NPD_SCRIPT.read_text()).group(1)) + 5
    assert budget < _go_duration(cfg["rules"][0]["timeout"])


def npd(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "FLIGHTCHECK": str(wrapper(tmp_path)), **env}
    return subprocess.run(
        ["bash", str(NPD_SCRIPT), *args], capture_output=True, text=True, env=full, timeout=120, check=False
    )


def test_npd_script_maps_exit_codes_to_the_npd_contract(tmp_path):
    assert subprocess.run(["bash", "-n", str(NPD_SCRIPT)], check=False).returncode == 0
    assert os.access(NPD_SCRIPT, os.X_OK)
    base = base_facts(tmp_path)

    ok = npd(tmp_path, "--facts", str(base), "-tp", "8")
    assert ok.returncode == 0 and ok.stdout == "flightcheck: ready\n"

    fb = npd(tmp_path, "--facts", str(base), "--facts", str(MULTICAST_401), "-tp", "8")
    assert fb.returncode == 0 and fb.stdout.startswith("flightcheck: ready with fallbacks")
    assert "FC304" in fb.stdout

    bad = npd(tmp_path, "--facts", str(base), "--facts", str(FM_STOPPED), "-tp", "8")
    assert bad.returncode == 1
    assert bad.stdout.startswith("flightcheck: FC301 fabric-not-ready")
    assert len(bad.stdout.rstrip("\n")) <= 80 and bad.stdout.count("\n") == 1

    usage = npd(tmp_path, "--facts", str(tmp_path / "missing.json"))
    assert usage.returncode == 3 and "exit 2" in usage.stdout  # flightcheck's usage error: unknown, not a problem


def test_npd_script_timeout_is_unknown(tmp_path):
    slow = tmp_path / "slow"
    slow.write_text("#!/bin/sh\nsleep 30\n")
    slow.chmod(0o755)
    t0 = time.monotonic()
    proc = subprocess.run(
        ["bash", str(NPD_SCRIPT)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "FLIGHTCHECK": str(slow), "FLIGHTCHECK_TIMEOUT": "1"},
        check=False,
    )
    assert proc.returncode == 3 and "no answer within 1s" in proc.stdout
    assert time.monotonic() - t0 < 20


# ---------------------------------------------------------------- Slurm

FAKE_SCONTROL = r'''#!{python}
"""Fake scontrol: `show node N` from a state file, `update` validated and applied to it."""
import json, os, sys
state_file, log_file = os.environ["FAKE_SLURM_STATE"], os.environ["FAKE_SLURM_LOG"]
node = json.load(open(state_file))
args = sys.argv[1:]
with open(log_file, "a") as fh:
    fh.write(json.dumps(args) + "\n")
if args[:2] == ["show", "node"] and len(args) == 3 and args[2] == node["name"]:
    print(f"NodeName={{node['name']}} Arch=x86_64 CoresPerSocket=48\n   CPUAlloc=0 CPUTot=192\n"
          f"   State={{node['state']}} ThreadsPerCore=2 TmpDisk=0 Weight=1 Owner=N/A"
          + (f"\n   Reason={{node['reason']}} [root@2026-11-20T10:00:00]" if node.get("reason") else ""))
    sys.exit(0)
if args and args[0] == "update":
    kv = dict(a.split("=", 1) for a in args[1:])
    if set(kv) - {{"NodeName", "State", "Reason"}} or kv.get("NodeName") != node["name"]:
        sys.exit("scontrol: error: invalid update " + " ".join(args))
    if kv.get("State") == "DRAIN":
        if not kv.get("Reason"):
            sys.exit("scontrol: error: you must specify a reason when DRAINING a node")
        node["state"], node["reason"] = "IDLE+DRAIN", kv["Reason"]
    elif kv.get("State") == "RESUME" and "Reason" not in kv:
        node["state"], node["reason"] = "IDLE", None
    else:
        sys.exit("scontrol: error: invalid state " + str(kv.get("State")))
    json.dump(node, open(state_file, "w"))
    sys.exit(0)
sys.exit("scontrol: error: invalid command " + " ".join(args))
'''


class Slurm:
    """A node in a fake slurmctld, and a way to run the health check on it."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.state = tmp_path / "node.json"
        self.log = tmp_path / "scontrol.log"
        self.scontrol = tmp_path / "bin" / "scontrol"
        self.scontrol.parent.mkdir(parents=True, exist_ok=True)
        self.scontrol.write_text(FAKE_SCONTROL.format(python=sys.executable))
        self.scontrol.chmod(0o755)
        self.set("IDLE")

    def set(self, state: str, reason: str | None = None) -> None:
        self.state.write_text(json.dumps({"name": "gpu-node-17", "state": state, "reason": reason}))

    @property
    def node(self) -> dict:
        return json.loads(self.state.read_text())

    @property
    def updates(self) -> list[list[str]]:
        if not self.log.exists():
            return []
        return [a for a in map(json.loads, self.log.read_text().splitlines()) if a[0] == "update"]

    def run(self, *facts: Path, **env: str) -> subprocess.CompletedProcess[str]:
        args = " ".join(f"--facts {f}" for f in facts)
        full = {
            **{k: v for k, v in os.environ.items() if not k.startswith("SLURM")},
            "PATH": f"{self.scontrol.parent}{os.pathsep}{os.environ['PATH']}",
            "FLIGHTCHECK": str(wrapper(self.tmp)),
            "FLIGHTCHECK_ARGS": f"{args} -tp 8",
            "SLURMD_NODENAME": "gpu-node-17",
            "FAKE_SLURM_STATE": str(self.state),
            "FAKE_SLURM_LOG": str(self.log),
            "FLIGHTCHECK_SLURM_LOG": str(self.tmp / "flightcheck-slurm.log"),
            **env,
        }
        return subprocess.run(["bash", str(SLURM)], capture_output=True, text=True, env=full, timeout=120, check=False)


def test_slurm_drains_with_a_flightcheck_reason_and_resumes_only_its_own(tmp_path):
    assert subprocess.run(["bash", "-n", str(SLURM)], check=False).returncode == 0 and os.access(SLURM, os.X_OK)
    s = Slurm(tmp_path)
    base = base_facts(tmp_path)

    assert s.run(base).returncode == 0 and s.updates == []  # healthy, idle: nothing to do

    proc = s.run(base, FM_STOPPED)
    assert proc.returncode == 0  # HealthCheckProgram: Slurm ignores the code, the drain is the action
    assert s.node["state"] == "IDLE+DRAIN" and s.node["reason"].startswith("flightcheck: FC301 fabric-not-ready")
    assert len(s.node["reason"]) <= 120
    assert s.updates[-1][:3] == ["update", "NodeName=gpu-node-17", "State=DRAIN"]

    assert s.run(base).returncode == 0  # fixed: our own drain is undone
    assert s.node == {"name": "gpu-node-17", "state": "IDLE", "reason": None}
    assert s.updates[-1] == ["update", "NodeName=gpu-node-17", "State=RESUME"]
    assert "resumed" in (tmp_path / "flightcheck-slurm.log").read_text()


def test_slurm_never_touches_an_administrators_drain(tmp_path):
    s = Slurm(tmp_path)
    base = base_facts(tmp_path)
    s.set("IDLE+DRAIN", "replacing DIMM B3 -- ops ticket 4411")
    s.run(base, FM_STOPPED)
    s.run(base)
    assert s.updates == [] and s.node["reason"] == "replacing DIMM B3 -- ops ticket 4411"


def test_slurm_prolog_refuses_the_job_and_unknown_changes_nothing(tmp_path):
    s = Slurm(tmp_path)
    base = base_facts(tmp_path)
    assert s.run(base, FM_STOPPED, SLURM_JOB_ID="991").returncode == 1  # Prolog: requeue the job
    assert s.node["state"] == "IDLE+DRAIN"
    s.set("IDLE")
    assert s.run(tmp_path / "missing.json").returncode == 0  # exit 2 from flightcheck: leave the node
    assert s.run(base, MULTICAST_401).returncode == 0  # a fallback exists: the node serves
    assert s.node["state"] == "IDLE" and len(s.updates) == 1


def test_slurm_stays_within_the_60_second_budget(tmp_path):
    s = Slurm(tmp_path)
    slow = tmp_path / "slow-flightcheck"
    slow.write_text("#!/bin/sh\nsleep 120\n")
    slow.chmod(0o755)
    t0 = time.monotonic()
    assert s.run(FLIGHTCHECK=str(slow), FLIGHTCHECK_TIMEOUT="1").returncode == 0
    assert time.monotonic() - t0 < 20 and s.updates == []
    text = SLURM.read_text()
    default = int(re.search(r"FLIGHTCHECK_TIMEOUT:-(\d+)", text).group(1))
    assert default + 5 + 2 * (5 + 2) < 60  # flightcheck + kill grace + two bounded scontrol calls


def test_slurm_strict_drain_names_the_warning_that_blocked(tmp_path):
    s = Slurm(tmp_path)
    base = base_facts(tmp_path)
    memlock = tmp_path / "memlock.json"
    memlock.write_text(json.dumps({"host": {**json.loads(base.read_text())["host"], "ulimit_memlock": 65536}}))
    assert s.run(base, memlock).returncode == 0 and s.updates == []  # a warning alone does not drain
    s.run(base, memlock, FLIGHTCHECK_ARGS=f"--facts {base} --facts {memlock} -tp 8 --strict")
    assert s.node["state"] == "IDLE+DRAIN" and s.node["reason"].startswith("flightcheck: FC602 memlock-limited"), s.node
