"""Reading the pod flightcheck runs in (``check --k8s-self``): its own spec from the
Kubernetes API server, for the same FC9xx checks as ``--k8s MANIFEST``.

Inside a pod (an init container, typically) the kubelet gives what an in-cluster client
needs: ``KUBERNETES_SERVICE_HOST`` / ``KUBERNETES_SERVICE_PORT`` and the service account's
``token``, ``ca.crt`` and ``namespace`` under :data:`SA_DIR`. The pod's name comes from the
downward API (``POD_NAME`` from ``fieldRef: metadata.name``), else ``HOSTNAME`` (the pod's
name unless ``spec.hostname`` sets another); its namespace from ``POD_NAMESPACE``, else the
service account's ``namespace`` file. One ``GET /api/v1/namespaces/NS/pods/NAME`` over TLS
verified against ``ca.crt``, with the token as ``Authorization: Bearer``, and the answer goes
through the manifest reader (:func:`flightcheck._collect.k8s_manifest.from_documents`).

Why the API server and not the downward API alone: the downward API exposes the pod's name,
namespace, uid, labels, annotations, node, service account and IPs (``fieldRef``) and the
container's cpu, memory, ephemeral-storage and hugepages requests and limits
(``resourceFieldRef``); it exposes neither probes, volumes, ``hostIPC`` nor an extended
resource such as ``nvidia.com/gpu`` (admission refuses ``limits.nvidia.com/gpu``:
kubernetes pkg/apis/core/validation/validation.go, ``validContainerResourceFieldPathExpressions``;
https://kubernetes.io/docs/concepts/workloads/pods/downward-api/). FC901-FC905 need those.

Bounded and quiet: the request runs on a daemon thread given up on after :data:`TIMEOUT_S`
(the socket has the same timeout, so the thread ends too); a redirect is not followed
(``http.client`` follows none); no proxy is used (the service address is in-cluster); the
answer is read up to :data:`MAX_POD` bytes. Whatever goes wrong is one line in
:attr:`SelfPod.reason`, never an exception; the token never appears in it. This module only
reads; the checks decide (a pod that could not be read skips the FC9xx family).

Why :data:`SA_DIR` is a module constant and not an environment variable or a flag: the
token is a credential the kubelet mounts at a fixed path, and flightcheck may run as root
on a node. A variable naming the directory would let whoever sets the environment of a
root ``flightcheck`` (a wrapper, a job template) make it read a token file of their choosing
(another pod's projected token under /var/lib/kubelet) and send it to the host in
``KUBERNETES_SERVICE_HOST``. The service address itself comes from the environment, as every
in-cluster client (client-go ``rest.InClusterConfig``) takes it; the token does not. Tests
change the constant in process.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from flightcheck._collect.k8s_manifest import MAX_MANIFEST, Manifest, from_documents

#: where the kubelet mounts the pod's service account (token, ca.crt, namespace)
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
#: seconds for the whole request (connect, TLS, answer); an init container must not hang
TIMEOUT_S = 3.0
#: the largest answer read (a pod's JSON with managedFields is tens of KB)
MAX_POD = MAX_MANIFEST
#: the file of the recipe that grants what the request needs
RBAC_FILE = "recipes/kubernetes/flightcheck-rbac.yaml"

_MAX_TOKEN = 64 << 10
_MAX_CA = 1 << 20
_TOKEN = re.compile(r"^[\x21-\x7e]+$")  # printable, no space: nothing a header could split on
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")  # DNS-1123 subdomain (pod names)
_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")  # DNS-1123 label
_HOST = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9.]{0,251}[A-Za-z0-9])?$")


@dataclass
class SelfPod:
    """The pod's engine container read from the API server, or why it could not be."""

    manifest: Manifest | None = None
    reason: str | None = None  # one line, when manifest is None


def _grant(namespace: str | None) -> str:
    where = f"namespace {namespace}" if namespace else "its namespace"
    return f"grant the pod's service account `get` on `pods` in {where} (a Role and RoleBinding: {RBAC_FILE})"


def _read_small(path: str, limit: int) -> bytes | None:
    """The file's bytes, at most ``limit``; None when absent or unreadable. The service
    account files are symbolic links into the kubelet's ``..data`` directory: followed."""
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except OSError:
        return None
    return data if len(data) <= limit else None


def _one_line(text: str, secret: str, limit: int = 240) -> str:
    """Server-sent text made safe for one report line: printable, short, no token."""
    text = text.replace(secret, "<token>") if secret else text
    text = "".join(ch if ch.isprintable() else " " for ch in text)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _address(env: Mapping[str, str]) -> tuple[str, int] | str:
    """(host, port) of the API server from the kubelet's variables, or why not."""
    host = (env.get("KUBERNETES_SERVICE_HOST") or "").strip()
    port_text = (env.get("KUBERNETES_SERVICE_PORT") or "").strip()
    if not host or not port_text:
        return "not in a Kubernetes pod (KUBERNETES_SERVICE_HOST / KUBERNETES_SERVICE_PORT are not set)"
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        return "KUBERNETES_SERVICE_PORT is not a port number"
    try:
        ipaddress.ip_address(host)
    except ValueError:
        if not _HOST.match(host):
            return "KUBERNETES_SERVICE_HOST is not an address or host name"
    return host, int(port_text)


def _identity(env: Mapping[str, str], sa_dir: str) -> tuple[str, str] | str:
    """(namespace, pod name), or why they are not known."""
    namespace = (env.get("POD_NAMESPACE") or "").strip()
    if not namespace:
        raw = _read_small(os.path.join(sa_dir, "namespace"), 256)
        namespace = raw.decode("ascii", "replace").strip() if raw else ""
    if not namespace:
        return "the pod's namespace is unknown: set POD_NAMESPACE from the downward API (fieldRef metadata.namespace)"
    name = (env.get("POD_NAME") or env.get("HOSTNAME") or "").strip()
    if not name:
        return "the pod's name is unknown: set POD_NAME from the downward API (fieldRef metadata.name)"
    if not _NAMESPACE.match(namespace):
        return "POD_NAMESPACE is not a namespace name"
    if not _NAME.match(name):
        return "POD_NAME (or HOSTNAME) is not a pod name"
    return namespace, name


def _get(host: str, port: int, path: str, token: str, cafile: str, timeout: float) -> tuple[int, bytes]:
    """One GET over TLS verified against ``cafile``: (status, body up to MAX_POD + 1 bytes)."""
    import http.client
    import ssl

    context = ssl.create_default_context(cafile=cafile)
    conn = http.client.HTTPSConnection(host, port, context=context, timeout=timeout)
    try:
        conn.request(
            "GET",
            path,
            headers={
                "Authorization": f"Bearer {token}",
                "Accept": "application/json",
                "User-Agent": "flightcheck",
            },
        )
        response = conn.getresponse()
        return response.status, response.read(MAX_POD + 1)
    finally:
        conn.close()


def _failure(exc: BaseException, where: str, timeout: float) -> str:
    import socket
    import ssl

    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"the API server at {where} does not verify against the service account's ca.crt ({exc.verify_message})"
    if isinstance(exc, ssl.SSLError):
        return f"TLS with the API server at {where} failed ({exc.reason or type(exc).__name__})"
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return f"the API server at {where} did not answer within {timeout:g} s"
    if isinstance(exc, OSError):
        return f"cannot reach the API server at {where} ({exc.strerror or type(exc).__name__})"
    return f"the API server at {where} gave an answer flightcheck cannot read ({type(exc).__name__})"


def _status_reason(status: int, body: bytes, token: str, namespace: str, name: str) -> str:
    message = ""
    try:
        doc = json.loads(body[:65536].decode("utf-8", "replace"))
        if isinstance(doc, dict) and isinstance(doc.get("message"), str):
            message = ": " + _one_line(doc["message"], token)
    except (ValueError, RecursionError):
        pass
    if status == 401:
        return f"the API server refused the service account's token (401{message})"
    if status == 403:
        return f"the service account may not read pod {namespace}/{name} (403{message}); {_grant(namespace)}"
    if status == 404:
        return (
            f"pod {namespace}/{name} not found (404): set POD_NAME and POD_NAMESPACE from the downward API "
            "(fieldRef metadata.name, metadata.namespace)"
        )
    if 300 <= status < 400:
        return f"the API server answered {status} (a redirect; flightcheck follows none)"
    return f"the API server answered {status}{message}"


def read_own_pod(
    env: Mapping[str, str] | None = None, *, sa_dir: str | None = None, timeout: float | None = None
) -> SelfPod:
    """The engine container of the pod this process runs in, read from the API server;
    or, in :attr:`SelfPod.reason`, one line saying why not (and what RBAC grants it)."""
    env = os.environ if env is None else env
    sa_dir = SA_DIR if sa_dir is None else sa_dir
    timeout = TIMEOUT_S if timeout is None else timeout
    address = _address(env)
    if isinstance(address, str):
        return SelfPod(reason=address)
    host, port = address
    raw_token = _read_small(os.path.join(sa_dir, "token"), _MAX_TOKEN)
    if raw_token is None:
        return SelfPod(
            reason=(
                f"no service account token in {sa_dir} (automountServiceAccountToken: false?): "
                f"{_grant(env.get('POD_NAMESPACE'))}"
            )
        )
    token = raw_token.decode("ascii", "replace").strip()
    if not _TOKEN.match(token):
        return SelfPod(reason=f"the service account token in {sa_dir} is not a bearer token")
    cafile = os.path.join(sa_dir, "ca.crt")
    if _read_small(cafile, _MAX_CA) is None:
        return SelfPod(reason=f"no service account ca.crt in {sa_dir}: the API server cannot be verified")
    identity = _identity(env, sa_dir)
    if isinstance(identity, str):
        return SelfPod(reason=identity)
    namespace, name = identity
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    path = f"/api/v1/namespaces/{namespace}/pods/{name}"

    result: dict[str, Any] = {}

    def ask() -> None:
        try:
            result["answer"] = _get(host, port, path, token, cafile, timeout)
        except Exception as exc:  # noqa: BLE001 - every failure becomes the skip's one line
            result["error"] = exc

    # a daemon thread: a server that drips bytes cannot hold the checking process past the
    # deadline (the socket timeout bounds each read, not their sum)
    worker = threading.Thread(target=ask, name="flightcheck-k8s-self", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        return SelfPod(reason=f"the API server at {where} did not answer within {timeout:g} s")
    if "error" in result:
        return SelfPod(reason=_failure(result["error"], where, timeout))
    status, body = result["answer"]
    if status != 200:
        return SelfPod(reason=_status_reason(status, body, token, namespace, name))
    if len(body) > MAX_POD:
        return SelfPod(reason=f"the API server's answer for pod {namespace}/{name} is over {MAX_POD >> 20} MiB")
    try:
        doc = json.loads(body.decode("utf-8"))
    except (ValueError, RecursionError):
        return SelfPod(reason=f"the API server's answer for pod {namespace}/{name} is not JSON")
    if not isinstance(doc, dict) or doc.get("kind") != "Pod":
        return SelfPod(reason=f"the API server's answer for pod {namespace}/{name} is not a Pod")
    from flightcheck._collect.k8s_manifest import NO_ENGINE, check_size
    from flightcheck._vocabulary.errors import UsageError

    source = f"pod {namespace}/{name} (API server)"
    try:
        check_size([doc], source)
        manifest = from_documents([doc], source)
    except UsageError as exc:
        return SelfPod(reason=str(exc))
    except Exception as exc:  # noqa: BLE001 - a pod the reader cannot take is a skip, not a crash
        return SelfPod(reason=f"{source}: unreadable ({type(exc).__name__})")
    if manifest is None:
        return SelfPod(reason=f"{source}: {NO_ENGINE}")
    return SelfPod(manifest=manifest)
