"""``check --k8s-self``: the pod's own spec from a real HTTPS API server started on 127.0.0.1
(a self-signed certificate made with the ``openssl`` command, else ``cryptography``), with a
service-account directory in tmp_path. The pods served are the production-stack manifests of
tests/fixtures/k8s (written from the chart's values) turned into what the API server returns
for a pod of that Deployment, with the flightcheck init container of the recipe."""

from __future__ import annotations

import copy
import json
import shutil
import socket
import ssl
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from flightcheck._collect import k8s_self
from flightcheck._collect.k8s_self import read_own_pod
from flightcheck._launch import parse_command
from support.cli import cli_in_process
from support.evaluation import assert_fires, assert_silent, facts, host_doc

K8S = Path(__file__).resolve().parents[1] / "fixtures" / "k8s"
TOKEN = "eyJhbGciOiJSUzI1NiJ9.c2VydmljZWFjY291bnQ.c2lnbmF0dXJl"  # the shape of a projected token
NS = "serving"
NAME = "vllm-big-deployment-vllm-6b9d7c5f4-x2kqp"
#: the 1.56 TB checkpoint of the issue: 163 shards of about 9.6 GB
BIG = {f"model-{i:05d}-of-00163.safetensors": 9_570_552_147 for i in range(163)}
FITS = ("FC901", "FC902", "FC903", "FC904", "FC905")


def _api_pod(fixture: str) -> dict[str, Any]:
    """The Deployment's pod as ``GET /api/v1/namespaces/NS/pods/NAME`` returns it: the
    template's spec with the API server's defaults filled in (probe timeoutSeconds and
    successThreshold, terminationMessagePath, ...), the recipe's init container, a status."""
    doc = next(d for d in yaml.safe_load_all((K8S / fixture).read_text()) if d and d.get("kind") == "Deployment")
    spec = copy.deepcopy(doc["spec"]["template"]["spec"])
    for c in spec["containers"]:
        c.setdefault("terminationMessagePath", "/dev/termination-log")
        c.setdefault("terminationMessagePolicy", "File")
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            if probe in c:
                c[probe].setdefault("timeoutSeconds", 1)
                c[probe].setdefault("successThreshold", 1)
                c[probe]["httpGet"].setdefault("scheme", "HTTP")
    spec["initContainers"] = [
        {
            "name": "flightcheck",
            "image": spec["containers"][0]["image"],
            "command": ["/bin/sh", "-c"],
            "args": ["exec flightcheck check --k8s-self -- vllm serve /data/big-model -tp 8"],
            "env": [
                {"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}}
            ],
        }
    ]
    spec.update(
        serviceAccountName="flightcheck",
        restartPolicy="Always",
        dnsPolicy="ClusterFirst",
        schedulerName="default-scheduler",
        terminationGracePeriodSeconds=30,
        nodeName="b300-node-07",
    )
    return {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {
            "name": NAME,
            "generateName": "vllm-big-deployment-vllm-6b9d7c5f4-",
            "namespace": NS,
            "uid": "0b6f2c4e-8a1d-4c1e-9f3a-2d7e5b1c9a40",
            "labels": doc["spec"]["template"]["metadata"]["labels"],
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": NAME.rsplit("-", 1)[0]}],
        },
        "spec": spec,
        "status": {"phase": "Pending", "podIP": "10.244.3.17"},
    }


def _certificate(tmp: Path) -> tuple[Path, Path]:
    """(cert, key) of a self-signed certificate for IP 127.0.0.1."""
    cert, key = tmp / "server.crt", tmp / "server.key"
    if shutil.which("openssl"):
        r = subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
            + ["-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=kubernetes"]
            + ["-addext", "subjectAltName=IP:127.0.0.1"],
            capture_output=True,
            timeout=60,
            check=False,
        )
        if r.returncode == 0:
            return cert, key
    try:
        import datetime
        import ipaddress

        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError:
        pytest.skip("neither the openssl command nor the cryptography package can make a test certificate")
    pkey = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubernetes")])
    now = datetime.datetime.now(datetime.timezone.utc)
    crt = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(pkey.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(pkey, hashes.SHA256())
    )
    cert.write_bytes(crt.public_bytes(serialization.Encoding.PEM))
    key.write_bytes(
        pkey.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert, key


class _ApiServer(ThreadingHTTPServer):
    """What the handler serves: ``answer`` is (status, body bytes, extra headers)."""

    daemon_threads = True
    answer: tuple[int, bytes, dict[str, str]] = (500, b"", {})
    seen: list[tuple[str, str | None]]


class _Handler(BaseHTTPRequestHandler):
    server: _ApiServer

    def do_GET(self) -> None:
        self.server.seen.append((self.path, self.headers.get("Authorization")))
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            status, body, headers = 401, b'{"kind":"Status","message":"Unauthorized","code":401}', {}
        elif self.path != f"/api/v1/namespaces/{NS}/pods/{NAME}":
            status, body, headers = 404, b'{"kind":"Status","message":"not found","code":404}', {}
        else:
            status, body, headers = self.server.answer
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return _certificate(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def api(tls: tuple[Path, Path]) -> Iterator[_ApiServer]:
    cert, key = tls
    server = _ApiServer(("127.0.0.1", 0), _Handler)
    server.seen = []
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(cert), str(key))
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _sa(tmp_path: Path, tls: tuple[Path, Path], *, token: str = TOKEN) -> Path:
    """A service-account directory as the kubelet mounts it (token, ca.crt, namespace)."""
    sa = tmp_path / "serviceaccount"
    sa.mkdir()
    (sa / "token").write_text(token)
    (sa / "ca.crt").write_bytes(tls[0].read_bytes())
    (sa / "namespace").write_text(NS)
    return sa


def _env(port: int) -> dict[str, str]:
    return {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(port), "POD_NAME": NAME}


def _serve(api: _ApiServer, fixture: str) -> None:
    api.answer = (200, json.dumps(_api_pod(fixture)).encode(), {})


def _read(api: _ApiServer, sa: Path, **env: str) -> k8s_self.SelfPod:
    return read_own_pod({**_env(api.server_address[1]), **env}, sa_dir=str(sa), timeout=0.5)


def _case(own: k8s_self.SelfPod) -> tuple[Any, dict[str, Any]]:
    assert own.manifest is not None, own.reason
    i = parse_command(own.manifest.argv).intent
    intent = {"model": i.model, "tensor_parallel_size": i.tensor_parallel_size}
    return facts("b300", pod=own.manifest.pod, checkpoint={"model": i.model, "files": BIG}), intent


def test_a_pod_that_fits_is_silent(api, tls, tmp_path):
    _serve(api, "production-stack-fitting.yaml")
    own = _read(api, _sa(tmp_path, tls))
    assert own.reason is None
    assert own.manifest.pod["kind"] == "Pod" and own.manifest.pod["name"] == NAME
    assert own.manifest.pod["container"] == "vllm"  # by its command, not the init container
    assert own.manifest.pod["source"] == f"pod {NS}/{NAME} (API server)"
    f, intent = _case(own)
    for code in FITS:
        assert_silent(code, f, **intent)
    # one request, at the pod's path, with the service account's token
    assert api.seen == [(f"/api/v1/namespaces/{NS}/pods/{NAME}", f"Bearer {TOKEN}")]


def test_production_stack_default_probes_are_named_with_the_fix(api, tls, tmp_path):
    _serve(api, "production-stack-default.yaml")
    f, intent = _case(_read(api, _sa(tmp_path, tls)))
    assert intent == {"model": "/data/big-model", "tensor_parallel_size": 8}
    [r] = assert_fires("FC901", f, **intent)
    assert "startupProbe restarts the container after 615 s" in r.message and "1.56 TB" in r.message
    assert "failureThreshold: 191" in r.fix
    for code in ("FC902", "FC903"):
        assert_silent(code, f, **intent)


def test_the_namespace_comes_from_the_service_account_and_hostname_names_the_pod(api, tls, tmp_path):
    _serve(api, "production-stack-fitting.yaml")
    env = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(api.server_address[1])}
    own = read_own_pod({**env, "HOSTNAME": NAME}, sa_dir=str(_sa(tmp_path, tls)), timeout=0.5)
    assert own.manifest is not None, own.reason


def _one_line(reason: str | None) -> str:
    assert reason and "\n" not in reason and "Traceback" not in reason, reason
    assert TOKEN not in reason
    return reason


def test_403_is_one_line_that_says_what_rbac_grants_it(api, tls, tmp_path):
    message = (
        f'pods "{NAME}" is forbidden: User "system:serviceaccount:{NS}:default" cannot get resource "pods" '
        f'in API group "" in the namespace "{NS}" (token {TOKEN})'
    )
    api.answer = (403, json.dumps({"kind": "Status", "reason": "Forbidden", "message": message}).encode(), {})
    reason = _one_line(_read(api, _sa(tmp_path, tls)).reason)
    assert "403" in reason and "cannot get resource" in reason
    assert f"`get` on `pods` in namespace {NS}" in reason and "flightcheck-rbac.yaml" in reason


def test_a_wrong_token_is_refused_and_not_shown(api, tls, tmp_path):
    _serve(api, "production-stack-fitting.yaml")
    reason = _one_line(_read(api, _sa(tmp_path, tls, token="not-the-token")).reason)
    assert "401" in reason and "not-the-token" not in reason


def test_no_service_account_is_one_line(api, tls, tmp_path):
    empty = tmp_path / "none"
    empty.mkdir()
    reason = _one_line(_read(api, empty).reason)
    assert "no service account token" in reason and "automountServiceAccountToken" in reason
    assert api.seen == []
    assert "KUBERNETES_SERVICE_HOST" in _one_line(read_own_pod({}, sa_dir=str(empty)).reason)


def test_a_server_that_never_answers_is_given_up_at_the_timeout(tls, tmp_path):
    # a listening socket nobody accepts on: the TCP connection opens, the TLS handshake
    # never gets an answer
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        own = read_own_pod(_env(silent.getsockname()[1]), sa_dir=str(_sa(tmp_path, tls)), timeout=0.5)
    assert "did not answer within 0.5 s" in _one_line(own.reason)


def test_garbage_oversized_or_foreign_answers_are_one_line(api, tls, tmp_path, monkeypatch):
    sa = _sa(tmp_path, tls)
    for body, expect in (
        (b"<html>gateway</html>", "not JSON"),
        (b"[" * 100_000 + b"]" * 100_000, "not JSON"),  # nested past the decoder's recursion
        (b'{"kind": "Status"}', "not a Pod"),
        (json.dumps({"kind": "Pod", "spec": {"containers": "x"}}).encode(), "no container runs vLLM"),
        (json.dumps({"kind": "Pod", "spec": {"containers": [{"command": ["nginx"]}]}}).encode(), "no container"),
    ):
        api.answer = (200, body, {})
        assert expect in _one_line(_read(api, sa).reason), body[:40]
    monkeypatch.setattr(k8s_self, "MAX_POD", 1024)
    _serve(api, "production-stack-fitting.yaml")
    assert "over" in _one_line(_read(api, sa).reason)


def test_a_redirect_is_not_followed(api, tls, tmp_path):
    api.answer = (302, b"", {"Location": "https://203.0.113.9/steal"})
    assert "302" in _one_line(_read(api, _sa(tmp_path, tls)).reason)
    assert len(api.seen) == 1


def test_a_certificate_the_ca_does_not_sign_is_refused(api, tls, tmp_path):
    other = _certificate(tmp_path)[0]  # another self-signed certificate as the "CA"
    sa = _sa(tmp_path, tls)
    (sa / "ca.crt").write_bytes(other.read_bytes())
    assert "does not verify" in _one_line(_read(api, sa).reason)
    assert api.seen == []


def test_names_that_would_change_the_path_are_refused(api, tls, tmp_path):
    sa = _sa(tmp_path, tls)
    for env in ({"POD_NAME": "../../secrets/x"}, {"POD_NAMESPACE": "kube-system/pods"}):
        assert "not a" in _one_line(_read(api, sa, **env).reason)
    assert api.seen == []


def _snapshot(tmp_path: Path) -> str:
    doc = host_doc("b300")
    doc["checkpoint"] = {"model": "/data/big-model", "files": BIG}
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(doc))
    return str(path)


def test_check_k8s_self_reads_the_launch_from_the_pod(api, tls, tmp_path, monkeypatch):
    _serve(api, "production-stack-default.yaml")
    monkeypatch.setattr(k8s_self, "SA_DIR", str(_sa(tmp_path, tls)))
    monkeypatch.setattr(k8s_self, "TIMEOUT_S", 0.5)
    for k, v in _env(api.server_address[1]).items():
        monkeypatch.setenv(k, v)
    rc, out, err = cli_in_process("check", "--k8s-self", "--facts", _snapshot(tmp_path), "--format", "json")
    assert rc in (0, 1, 3), err
    report = json.loads(out)
    assert report["intent"]["tensor_parallel_size"] == 8 and report["intent"]["model"] == "/data/big-model", err
    fc9 = {c["code"]: c for c in report["checks"] if c["code"].startswith("FC9")}
    assert fc9["FC901"]["status"] == "fail" and "615 s" in fc9["FC901"]["message"]
    assert fc9["FC901"]["subject"] == f"pod:Pod/{NAME}/vllm"


def test_check_k8s_self_without_rbac_skips_the_family_in_one_line(api, tls, tmp_path, monkeypatch):
    api.answer = (403, b'{"kind":"Status","message":"forbidden","code":403}', {})
    monkeypatch.setattr(k8s_self, "SA_DIR", str(_sa(tmp_path, tls)))
    monkeypatch.setattr(k8s_self, "TIMEOUT_S", 0.5)
    for k, v in _env(api.server_address[1]).items():
        monkeypatch.setenv(k, v)
    launch = ("--", "vllm", "serve", "/data/big-model", "-tp", "8")
    args = ("check", "--k8s-self", "--facts", _snapshot(tmp_path))
    rc, out, err = cli_in_process(*args, *launch)
    lines = [line for line in out.splitlines() if "403" in line]
    assert len(lines) == 1 and lines[0].startswith("[-] Orchestration — skipped: "), out
    assert "`get` on `pods`" in lines[0] and err == ""
    rc_json, out, err = cli_in_process(*args, "--format", "json", *launch)
    # the skip stops nothing: the verdict is the one without --k8s-self
    assert rc == rc_json == cli_in_process("check", "--facts", args[-1], *launch)[0]
    fc9 = {c["code"]: c["status"] for c in json.loads(out)["checks"] if c["code"].startswith("FC9")}
    assert set(fc9.values()) == {"skip"} and len(fc9) == 5


def test_k8s_and_k8s_self_exclude_each_other():
    rc, _out, err = cli_in_process("check", "--k8s", "pod.yaml", "--k8s-self", "--example", "b300")
    assert rc == 2 and "not allowed with" in err
