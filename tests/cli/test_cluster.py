"""``flightcheck cluster --facts-dir``: loading a snapshot set, bad input, and every output
format (text one line per node, JSON ``flightcheck.cluster-report/v1``, JUnit, Prometheus)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import xmlschema
from prometheus_client.parser import text_string_to_metric_families

from flightcheck._cluster.snapshots import load_dir
from flightcheck._vocabulary.errors import UsageError
from support import FIXTURES
from support.checkpoints import write_tiny_model
from support.cli import cli
from support.evaluation import host_doc

FIX = FIXTURES / "cluster"
XSD = FIXTURES / "junit" / "junit-10.xsd"
LAYOUT = ("-tp", "8", "-pp", "2")


def snapshot_dir(tmp_path: Path, *names: str, edit: dict[str, Any] | None = None) -> Path:
    """A facts directory holding copies of fixtures; ``edit`` maps a fixture name to a
    function that changes its dict."""
    d = tmp_path / "facts"
    d.mkdir()
    for name in names:
        doc = json.loads((FIX / f"{name}.json").read_text())
        if edit and name in edit:
            edit[name](doc)
        (d / f"{name}.json").write_text(json.dumps(doc))
    return d


def run_json(*args: str) -> tuple[int, dict[str, Any]]:
    proc = cli("cluster", *args, "--format", "json")
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def driver_580(doc: dict[str, Any]) -> None:
    doc["driver"]["version"] = doc["fabric_manager"]["version"] = "580.95.05"  # the node's driver and FM, older


def test_json_report_of_a_healthy_pair(tmp_path):
    d = snapshot_dir(tmp_path, "hgx-b300-a", "hgx-b300-b")
    rc, rep = run_json("--facts-dir", str(d), *LAYOUT)
    assert rc == 0 and rep["exit_code"] == 0 and rep["verdict"] == "ready"
    assert rep["schema"] == "flightcheck.cluster-report/v1"
    assert set(rep["nodes"]) == {"gpu-b300-017", "gpu-b300-018"}
    for node in rep["nodes"].values():
        assert node["schema"] == "flightcheck.report/v1" and node["verdict"] == "ready" and node["checks"]
        assert node["intent"]["nnodes"] == 2  # nnodes defaults to the number of snapshots
    assert sorted({c["code"] for c in rep["checks"]}) == ["FC801", "FC802", "FC803", "FC804", "FC805"]
    assert not [c for c in rep["checks"] if c["status"] == "fail"]
    assert rep["source"]["kind"] == "facts-dir" and rep["source"]["files"]["gpu-b300-018"].endswith("hgx-b300-b.json")
    assert rep["intent"]["tensor_parallel_size"] == 8 and rep["intent"]["pipeline_parallel_size"] == 2


def test_fc801_driver_skew_exits_1_and_is_in_the_json(tmp_path):
    d = snapshot_dir(tmp_path, "hgx-b300-a", "hgx-b300-b", edit={"hgx-b300-b": driver_580})
    rc, rep = run_json("--facts-dir", str(d), *LAYOUT)
    assert rc == 1 and rep["verdict"] == "not-ready"
    [f] = [c for c in rep["checks"] if c["code"] == "FC801" and c["status"] == "fail"]
    assert f["subject"] == "node:gpu-b300-018" and "580.95.05" in f["message"] and "590.48.01" in f["message"]


def test_fc802_shard_of_another_size(tmp_path):
    def shrink(doc: dict[str, Any]) -> None:
        doc["checkpoint"]["files"]["model-00002-of-00004.safetensors"] = 1_000_000_000

    d = snapshot_dir(tmp_path, "hgx-b300-a", "hgx-b300-b", edit={"hgx-b300-a": shrink})
    rc, rep = run_json("--facts-dir", str(d), *LAYOUT)
    [f] = [c for c in rep["checks"] if c["code"] == "FC802" and c["status"] == "fail"]
    # two nodes disagree: the message names the shard and both nodes with both sizes
    assert "model-00002-of-00004.safetensors" in f["message"]
    assert "gpu-b300-017" in f["message"] + f["subject"] and "gpu-b300-018" in f["message"] + f["subject"]
    assert "1,000,000,000" in f["message"] and rc == 1


def test_text_one_line_per_node_and_the_cross_node_fix(tmp_path):
    def shm(doc: dict[str, Any]) -> None:
        doc["host"]["shm_bytes"] = 64 << 20

    d = snapshot_dir(tmp_path, "hgx-b300-a", "hgx-b300-b", edit={"hgx-b300-b": lambda doc: (driver_580(doc), shm(doc))})
    proc = cli("cluster", "--facts-dir", str(d), *LAYOUT)
    out = proc.stdout
    assert proc.returncode == 1
    lines = out.splitlines()
    [a] = [ln for ln in lines if "gpu-b300-017" in ln and "ready" in ln and "[" in ln]
    [b] = [ln for ln in lines if ln.lstrip().startswith("[✗] gpu-b300-018")]
    assert "not-ready" in b and "FC601" in b and "FC601" not in a
    assert "FC801 software-skew (node:gpu-b300-018)" in out and "fix: install NVIDIA driver 590.48.01" in out
    assert "FC601 shm-too-small (on gpu-b300-018)" in out  # the node finding, once, naming its node
    assert "Verdict: not ready" in out and "(exit 1)" in out


def test_node_findings_shared_by_nodes_are_printed_once(tmp_path):
    def shm(doc: dict[str, Any]) -> None:
        doc["host"]["shm_bytes"] = 64 << 20

    d = snapshot_dir(tmp_path, "hgx-b300-a", "hgx-b300-b", edit={"hgx-b300-a": shm, "hgx-b300-b": shm})
    out = cli("cluster", "--facts-dir", str(d), *LAYOUT).stdout
    assert out.count("FC601 shm-too-small") == 1
    assert "FC601 shm-too-small (on gpu-b300-017, gpu-b300-018)" in out


def test_junit_validates_and_has_a_suite_per_node(tmp_path):
    d = snapshot_dir(tmp_path, "hgx-b300-a", "hgx-b300-b", edit={"hgx-b300-b": driver_580})
    proc = cli("cluster", "--facts-dir", str(d), *LAYOUT, "--format", "junit")
    assert proc.returncode == 1
    xmlschema.XMLSchema(XSD).validate(proc.stdout)
    root = ET.fromstring(proc.stdout)
    suites = {s.get("hostname"): s for s in root.iter("testsuite")}
    assert set(suites) == {"gpu-b300-017", "gpu-b300-018", "across-nodes"}
    failures = [c.get("name") for c in suites["across-nodes"].iter("testcase") if c.find("failure") is not None]
    assert failures == ["FC801 software-skew [node:gpu-b300-018]"]
    assert int(root.get("failures")) == 1 == len(list(root.iter("failure")))


def test_prometheus_parses_with_node_labels(tmp_path):
    d = snapshot_dir(tmp_path, "hgx-b300-a", "hgx-b300-b", edit={"hgx-b300-b": driver_580})
    out = cli("cluster", "--facts-dir", str(d), *LAYOUT, "--format", "prometheus").stdout
    fams = {f.name: f.samples for f in text_string_to_metric_families(out)}
    status = fams["flightcheck_check_status"]
    keys = [tuple(sorted(s.labels.items())) for s in status]
    assert len(keys) == len(set(keys)), "duplicate series break the textfile collector"
    [skew] = [s for s in status if s.labels["code"] == "FC801"]
    assert skew.labels["node"] == "across-nodes" and skew.value == 1
    assert {s.labels["node"] for s in fams["flightcheck_ready"]} == {"gpu-b300-017", "gpu-b300-018"}
    assert fams["flightcheck_cluster_ready"][0].value == 0
    assert {s.labels["state"]: s.value for s in fams["flightcheck_cluster_nodes"]}["answered"] == 2


def test_output_file_and_nnodes_expectation(tmp_path):
    d = snapshot_dir(tmp_path, "hgx-b300-a", "hgx-b300-b")
    target = tmp_path / "cluster.json"
    proc = cli("cluster", "--facts-dir", str(d), *LAYOUT, "--nnodes", "3", "--format", "json", "-o", str(target))
    assert proc.returncode == 1 and proc.stdout == ""
    rep = json.loads(target.read_text())
    [f] = [c for c in rep["checks"] if c["code"] == "FC803" and c["status"] == "fail"]
    assert "3 nodes expected (--nnodes), 2 gave facts" in f["message"]


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("{not json", "not valid JSON"),
        ('{"host": {"cpu_count": "many"}}', "key host.cpu_count"),
        ("[1, 2]", "must be a JSON object"),
    ],
)
def test_a_bad_snapshot_is_one_line_naming_the_file(tmp_path, content, needle):
    d = snapshot_dir(tmp_path, "hgx-b300-a")
    (d / "broken-node.json").write_text(content)
    proc = cli("cluster", "--facts-dir", str(d), *LAYOUT)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "broken-node.json" in proc.stderr and needle in proc.stderr


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--facts-dir", "/nonexistent/facts"], "not a directory"),
        ([], "give --facts-dir DIR"),
        (["--facts-dir", ".", "--ray"], "alternatives"),
        (["--facts-dir", ".", "--timeout", "0"], "must be positive"),
    ],
)
def test_usage_errors(args, needle):
    proc = cli("cluster", *args)
    assert proc.returncode == 2 and needle in proc.stderr and "Traceback" not in proc.stderr


def test_empty_dir_is_a_usage_error(tmp_path):
    proc = cli("cluster", "--facts-dir", str(tmp_path))
    assert proc.returncode == 2 and "no *.json snapshot" in proc.stderr


def test_duplicate_hostnames_fall_back_to_file_names(tmp_path):
    """One hostname with other GPUs (containers sharing a name): two nodes, named by file.
    One hostname with the same GPUs: one node recorded twice, which must not count as two."""
    d = snapshot_dir(tmp_path, "hgx-b300-a")
    doc = json.loads((d / "hgx-b300-a.json").read_text())
    for g in doc["gpus"]:
        g["uuid"] = g["uuid"][:-4] + "beef"
    (d / "gpu-b300-017-other.json").write_text(json.dumps(doc))
    assert sorted(load_dir(d)) == ["gpu-b300-017-other", "hgx-b300-a"]
    shutil.copy(d / "hgx-b300-a.json", d / "gpu-b300-017-copy.json")
    with pytest.raises(UsageError, match="are one node .* it would count twice"):
        load_dir(d)
    proc = cli("cluster", "--facts-dir", str(d), "-tp", "8", "--nnodes", "3")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "one node" in proc.stderr


def test_rules_and_explain_know_the_cluster_checks():
    rules = json.loads(cli("rules", "--format", "json").stdout)
    assert {r["code"]: r["severity"] for r in rules if r["code"].startswith("FC8")} == {
        "FC801": "error",
        "FC802": "error",
        "FC803": "error",
        "FC804": "warning",
        "FC805": "error",
    }
    proc = cli("explain", "nvlink-domain-split")
    assert proc.returncode == 0 and "IMEX" in proc.stdout and "## How to fix" in proc.stdout


def test_collect_model_then_cluster_end_to_end(tmp_path):
    """The Slurm way on one machine: `collect --model` per node, then `cluster --facts-dir`."""
    good = write_tiny_model(tmp_path / "a" / "tiny")
    bad = write_tiny_model(tmp_path / "b" / "tiny")
    shard = sorted(bad.glob("model-*.safetensors"))[1]
    os.truncate(shard, shard.stat().st_size - 64)  # an interrupted copy on node b
    doc = host_doc("b300")
    facts = tmp_path / "facts"
    facts.mkdir()
    for name, model in (("node-a", good), ("node-b", bad)):
        recorded = tmp_path / f"gpus-{name}.json"  # this machine has no GPU: each node's hardware as recorded
        gpus = [{**g, "uuid": f"{g['uuid']}-{name}"} for g in doc["gpus"]]
        recorded.write_text(json.dumps({**{k: doc[k] for k in ("driver", "fabric_manager", "imex")}, "gpus": gpus}))
        proc = cli("collect", "--model", str(model), "--facts", str(recorded), "-o", str(facts / f"{name}.json"))
        assert proc.returncode == 0, proc.stderr
        section = json.loads((facts / f"{name}.json").read_text())["checkpoint"]
        assert (
            section["path"] == str(model) and len(section["header_sha256"]) == 3 and "config.json" in section["files"]
        )
    rc, rep = run_json("--facts-dir", str(facts), "--model", "tiny", "-tp", "8")
    assert set(rep["nodes"]) == {"node-a", "node-b"}  # one hostname twice: named by file
    [f] = [c for c in rep["checks"] if c["code"] == "FC802" and c["status"] == "fail"]
    assert f["subject"] == "node:node-b" and shard.name in f["message"] and rc == 1
    assert f"rsync -a --checksum node-a:{good}/{shard.name} {bad}/{shard.name}" in f["fix"]
    # each node's own checkpoint verdicts, from what its section recorded on its disk
    b = {
        c["code"]: c for c in rep["nodes"]["node-b"]["checks"] if c["code"].startswith("FC5") and c["status"] == "fail"
    }
    assert b["FC503"]["subject"] == f"shard:{shard.name}" and str(bad) in b["FC503"]["fix"]
    assert not [c for c in rep["nodes"]["node-a"]["checks"] if c["code"] == "FC503" and c["status"] == "fail"]


def test_collect_output_expands_slurms_node_name(tmp_path):
    recorded = tmp_path / "host.json"
    recorded.write_text(json.dumps({k: host_doc("b300")[k] for k in ("driver", "gpus")}))
    proc = cli(
        "collect", "--facts", str(recorded), "-o", str(tmp_path / "%N.json"), env={"SLURMD_NODENAME": "gpu-b300-042"}
    )
    assert proc.returncode == 0, proc.stderr
    assert (
        json.loads((tmp_path / "gpu-b300-042.json").read_text())["driver"]["version"]
        == host_doc("b300")["driver"]["version"]
    )


def test_facts_dir_path_never_imports_ray(tmp_path):
    code = (
        "import sys\nfrom flightcheck._cli.main import main\n"
        f"rc = main(['cluster', '--facts-dir', {str(FIX)!r}, '-tp', '8', '--format', 'json', "
        f"'-o', {str(tmp_path / 'r.json')!r}])\n"
        "print(rc, 'ray' in sys.modules)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert proc.stdout.split() == ["1", "False"], proc.stderr  # the mixed fixture set: HGX and GB200 nodes differ


def test_text_names_unreachable_and_skipped_nodes():
    from flightcheck import Intent
    from flightcheck._checks.cluster.evaluate import evaluate_cluster
    from flightcheck._cli.cluster import render

    nodes = {name: facts for name, (facts, _) in load_dir(FIX).items() if name.startswith("gpu-b300")}
    report = evaluate_cluster(
        nodes,
        Intent(tensor_parallel_size=8, pipeline_parallel_size=3, nnodes=3),
        unreachable={"gpu-b300-019": "no answer within 60s (--timeout)"},
        skipped={"ray-head": "no GPU resource: vLLM places no rank there"},
        source={"kind": "ray", "address": "10.0.0.1:6379"},
    )
    out = render(report, "text", color=False)
    assert "(Ray cluster 10.0.0.1:6379)" in out.splitlines()[0]
    assert "[✗] gpu-b300-019  gave no facts (FC803): no answer within 60s (--timeout)" in out
    assert "[-] ray-head      not checked: no GPU resource" in out
    assert "FC803 node-unreachable (node:gpu-b300-019)" in out and "run `flightcheck collect` by hand" in out
    assert report.exit_code == 1


def test_a_relative_model_is_recorded_absolute_for_fc802s_fix(tmp_path):
    """FC802's rsync line runs on another node: `collect --model ./tiny` records the whole path."""
    model = write_tiny_model(tmp_path / "a" / "tiny")
    out = tmp_path / "node.json"
    proc = cli("collect", "--model", "tiny", "-o", str(out), cwd=str(tmp_path / "a"))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text())["checkpoint"]["path"] == str(model)


@pytest.mark.skipif(os.geteuid() != 0, reason="plays another user's symbolic link: needs root to chown it")
def test_another_users_link_in_a_shared_facts_dir_is_not_followed(tmp_path):
    """A shared --facts-dir: another user's ``evil.json -> /root/secret.json`` is not read
    (root could read what that user cannot); a broken link is passed over; both said."""
    d = snapshot_dir(tmp_path, "hgx-b300-a", "hgx-b300-b")
    secret = tmp_path / "root-only"
    secret.mkdir(mode=0o700)
    target = secret / "facts.json"
    doc = json.loads((FIX / "hgx-b300-a.json").read_text())
    doc["host"]["hostname"] = "root-only-node"
    target.write_text(json.dumps(doc))
    (d / "evil.json").symlink_to(target)
    os.lchown(d / "evil.json", 65534, 65534)
    (d / "broken.json").symlink_to(tmp_path / "nowhere.json")
    proc = cli("cluster", "--facts-dir", str(d), *LAYOUT, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    rep = json.loads(proc.stdout)
    assert set(rep["nodes"]) == {"gpu-b300-017", "gpu-b300-018"}
    assert "evil.json is a symbolic link owned by uid 65534" in proc.stderr
    assert "broken.json" in proc.stderr and "Traceback" not in proc.stderr


def test_terminal_escapes_in_names_are_not_printed_raw(tmp_path):
    """A hostname (or a file name) with an escape sequence: shown escaped in text and in
    Prometheus labels, never as the raw control character."""

    def evil_host(doc: dict[str, Any]) -> None:
        doc["host"]["hostname"] = "node\x1b[2J\x1b]0;pwned\x07"

    d = snapshot_dir(tmp_path, "hgx-b300-a", "hgx-b300-b", edit={"hgx-b300-a": evil_host})
    (d / "hgx-b300-b.json").rename(d / "b\x1b[31m.json")
    for fmt in ("text", "prometheus", "json"):
        proc = cli("cluster", "--facts-dir", str(d), *LAYOUT, "--format", fmt)
        assert proc.returncode in (0, 1), proc.stderr
        assert "\x1b" not in proc.stdout and "\x07" not in proc.stdout, (fmt, proc.stdout[:400])
        assert "node\\x1b[2J" in proc.stdout.replace("\\\\", "\\"), fmt
