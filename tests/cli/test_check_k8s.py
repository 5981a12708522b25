"""``flightcheck check --k8s MANIFEST|-``: the launch from the pod's vLLM container, the pod's
spec as FC9xx facts; hostile manifests are one line and exit 2."""

from __future__ import annotations

import json
from pathlib import Path

from support.cli import cli
from support.evaluation import host_doc

K8S = Path(__file__).resolve().parents[1] / "fixtures" / "k8s"


def _snapshot(tmp_path: Path) -> str:
    """The b300 node's snapshot with a 1.56 TB checkpoint's file sizes (``collect`` on the node)."""
    doc = host_doc("b300")
    doc["checkpoint"] = {"model": "/data/big-model", "files": {f"s{i:03d}": 9_570_552_147 for i in range(163)}}
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(doc))
    return str(path)


def _fc9(out: str) -> dict[str, dict]:
    report = json.loads(out)
    return {c["code"]: c for c in report["checks"] if c["code"].startswith("FC9")}


def test_check_k8s_reads_the_launch_and_names_the_probe(tmp_path):
    r = cli(
        "check", "--k8s", str(K8S / "production-stack-default.yaml"), "--facts", _snapshot(tmp_path), "--format", "json"
    )
    assert r.returncode in (0, 1, 3), r.stderr
    report = json.loads(r.stdout)
    assert report["intent"]["tensor_parallel_size"] == 8 and report["intent"]["model"] == "/data/big-model"
    fc9 = _fc9(r.stdout)
    assert fc9["FC901"]["status"] == "fail" and "615 s" in fc9["FC901"]["message"]
    assert "failureThreshold" in fc9["FC901"]["fix"]
    assert {fc9[c]["status"] for c in ("FC902", "FC903")} == {"pass"}


def test_check_k8s_from_stdin(tmp_path):
    text = (K8S / "production-stack-fitting.yaml").read_text()
    r = cli("check", "--k8s", "-", "--facts", _snapshot(tmp_path), "--format", "json", input_text=text)
    fc9 = _fc9(r.stdout)
    assert fc9["FC901"]["status"] == "pass", fc9["FC901"]
    assert not [c for c in fc9.values() if c["status"] == "fail"]


def test_check_k8s_hostile_input_is_one_line_exit_2(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: Pod\nspec: {containers: [{name: web, command: [nginx]}]}\n")
    for args, text in (
        (["--k8s", str(bad)], None),
        (["--k8s", str(tmp_path / "absent.yaml")], None),
        (["--k8s", "-"], "{{{"),
        (["--k8s", "/dev/zero"], None),
    ):
        r = cli("check", *args, "--example", "b300", input_text=text)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and "--k8s" in lines[0] and "Traceback" not in r.stderr, r.stderr


def test_the_readmes_probe_excerpt_is_real_output(tmp_path):
    from support import REPO

    readme = (REPO / "README.md").read_text()
    excerpt = [line.strip() for line in readme.split("! FC901 probe-kills-load", 1)[1].split("```", 1)[0].splitlines()]
    r = cli("check", "--k8s", str(K8S / "production-stack-default.yaml"), "--facts", _snapshot(tmp_path))
    real = [line.strip() for line in r.stdout.splitlines()]
    assert "! FC901 probe-kills-load " + excerpt[0] in real
    assert excerpt[1] in real
