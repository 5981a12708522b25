"""Reading a Kubernetes manifest (``check --k8s FILE|-``): the engine's container as the
kubelet will run it.

A Pod, Deployment, StatefulSet, Job, LeaderWorkerSet (leader template first), a KServe
InferenceService (with the ServingRuntime it names, merged as the controller merges them),
or ``helm template`` output (many documents: the first container whose command runs ``vllm serve`` /
``vllm.entrypoints`` / ``sglang.launch_server`` is the engine; ``$(VAR)`` in its command and
args expanded from its literal env as the kubelet does). The same reader takes the pod the
API server returns for ``check --k8s-self`` (:func:`from_documents`, from
:mod:`flightcheck._collect.k8s_self`). What comes out: the engine's
command line and literal environment (for the caller to read the intent from, never stored)
and the ``pod`` facts section (:class:`flightcheck._vocabulary.facts.Pod`) the FC9xx checks
read. This module only reads; it decides nothing.

Bounded: at most :data:`MAX_MANIFEST` bytes, :data:`MAX_NODES` values with aliases expanded,
:data:`MAX_DEPTH` levels. Anything else (not YAML, no engine container, a wrong type) is one
:class:`~flightcheck._vocabulary.errors.UsageError` line (exit 2).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from flightcheck._vocabulary.errors import UsageError

#: the largest manifest read (``helm template`` of a whole stack is well under 1 MiB)
MAX_MANIFEST = 4 << 20
MAX_NODES = 200_000
MAX_DEPTH = 64
#: the kubelet's probe defaults (core/v1 Probe: initialDelaySeconds 0, periodSeconds 10,
#: failureThreshold 3)
PROBE_DEFAULTS = (0, 10, 3)

_ENGINE = re.compile(r"(^|/)(vllm|sglang)$|vllm\.entrypoints|sglang\.launch_server|^sglang$")
_QUANTITY = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?(?:[eE][0-9]+)?)\s*(Ki|Mi|Gi|Ti|Pi|Ei|k|K|M|G|T|P|E|m)?\s*$")
_FACTORS = {
    None: 1,
    "m": 1e-3,
    "k": 1e3,
    "K": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "E": 1e18,
    "Ki": 1 << 10,
    "Mi": 1 << 20,
    "Gi": 1 << 30,
    "Ti": 1 << 40,
    "Pi": 1 << 50,
    "Ei": 1 << 60,
}


@dataclass
class Manifest:
    """What ``--k8s`` gave: the engine's argv and literal env, and the ``pod`` section."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    pod: dict[str, Any] = field(default_factory=dict)


def quantity(value: Any) -> int | None:
    """A Kubernetes quantity (``16Gi``, ``20G``, ``1e9``, ``8``) in units; None if unreadable."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return int(value) if value >= 0 else None
    if not isinstance(value, str):
        return None
    m = _QUANTITY.match(value)
    if not m:
        return None
    try:
        return int(float(m.group(1)) * _FACTORS[m.group(2)])
    except (OverflowError, ValueError):
        return None


def check_size(data: Any, name: str) -> None:
    """Raise :class:`UsageError` when ``data`` holds over :data:`MAX_NODES` values or nests
    deeper than :data:`MAX_DEPTH`."""
    count = 0
    stack: list[tuple[Any, int]] = [(data, 0)]
    while stack:
        value, depth = stack.pop()
        count += 1
        if count > MAX_NODES:
            raise UsageError(f"{name}: more than {MAX_NODES:,} values (aliases expanded)")
        if depth > MAX_DEPTH:
            raise UsageError(f"{name}: nested more than {MAX_DEPTH} levels deep")
        if isinstance(value, dict):
            stack.extend((v, depth + 1) for kv in value.items() for v in kv)
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value)


def load_documents(raw: bytes, name: str) -> list[Any]:
    """The YAML documents of ``raw`` (safe loader only: no Python objects)."""
    import yaml

    try:
        docs = list(yaml.safe_load_all(raw.decode("utf-8")))
    except UnicodeDecodeError:
        raise UsageError(f"{name}: not UTF-8 text") from None
    except yaml.YAMLError as exc:
        raise UsageError(f"{name}: not valid YAML: {str(exc).splitlines()[0]}") from None
    except RecursionError:
        raise UsageError(f"{name}: nested too deeply") from None
    check_size(docs, name)
    return docs


def _map(value: Any) -> dict[str, Any]:
    """``value`` when it is a mapping, else an empty one (a manifest may hold anything)."""
    return value if isinstance(value, dict) else {}


#: the strategic-merge key of the container and pod lists KServe merges (core/v1 types.go
#: ``patchMergeKey``); any other list is replaced by the overlay's
_MERGE_KEYS = {"env": "name", "volumeMounts": "mountPath", "ports": "containerPort", "volumes": "name"}
#: what KServe takes from a ServingRuntime's pod spec (``MergePodSpec``; hostIPC is not among them)
_RUNTIME_POD = ("nodeSelector", "affinity", "tolerations", "volumes", "imagePullSecrets", "schedulerName")


def _patch(base: Any, overlay: Any, key: str = "") -> Any:
    """``overlay`` laid over ``base`` as a strategic merge patch does for these types."""
    if isinstance(base, dict) and isinstance(overlay, dict):
        out = dict(base)
        for k, v in overlay.items():
            out[k] = _patch(base[k], v, k) if k in base else v
        return out
    merge_key = _MERGE_KEYS.get(key)
    if merge_key and isinstance(base, list) and isinstance(overlay, list):
        merged = [x for x in base if isinstance(x, dict)]
        index = {x.get(merge_key): i for i, x in enumerate(merged)}
        for item in overlay:
            if isinstance(item, dict) and item.get(merge_key) in index:
                merged[index[item[merge_key]]] = _patch(merged[index[item[merge_key]]], item)
            elif isinstance(item, dict):
                merged.append(item)
        return merged
    return overlay


def _kserve(spec: dict[str, Any], runtimes: dict[str, dict[str, Any]]) -> list[tuple[dict[str, Any], int]]:
    """The predictor pod of a KServe InferenceService, as the controller builds it
    (kserve pkg/controller/v1beta1/inferenceservice/utils/utils.go,
    ``MergeServingRuntimeAndInferenceServiceSpecs``, read at aaac4e29): a custom predictor's
    own containers; else the ServingRuntime's ``kserve-container`` with the predictor's
    ``model`` merged over it (args appended, resources and env merged) and the runtime's
    volumes under the predictor's pod fields."""
    predictor = _map(spec.get("predictor"))
    if isinstance(predictor.get("containers"), list) and predictor["containers"]:
        return [(predictor, 1)]
    model = _map(predictor.get("model"))
    name = model.get("runtime")
    runtime = (
        runtimes.get(name) if isinstance(name, str) else (next(iter(runtimes.values())) if len(runtimes) == 1 else None)
    )
    containers = _map(runtime).get("containers")
    if not model or not isinstance(containers, list):
        return []
    target = next((c for c in containers if isinstance(c, dict) and c.get("name") == "kserve-container"), None)
    if target is None:
        return []
    overlay = {k: v for k, v in model.items() if k not in ("modelFormat", "runtime", "storageUri", "protocolVersion")}
    merged = _patch(target, overlay)
    runtime_args, model_args = target.get("args") or [], model.get("args") or []
    if isinstance(runtime_args, list) and isinstance(model_args, list):
        merged["args"] = runtime_args + model_args  # concatenated, not replaced (MergeRuntimeContainers)
    pod = {k: runtime[k] for k in _RUNTIME_POD if runtime is not None and k in runtime}
    pod = _patch(pod, {k: v for k, v in predictor.items() if k != "model"})
    pod["containers"] = [merged]
    return [(pod, 1)]


def _templates(
    doc: dict[str, Any], runtimes: dict[str, dict[str, Any]] | None = None
) -> list[tuple[dict[str, Any], int]]:
    """The pod specs of one object, each with its group size (LeaderWorkerSet: ``size``);
    ``runtimes``: the KServe ServingRuntimes given beside it, by name."""
    kind = doc.get("kind")
    spec = _map(doc.get("spec"))
    if kind == "Pod":
        return [(spec, 1)]
    if kind == "List":
        out: list[tuple[dict[str, Any], int]] = []
        for item in doc.get("items") or []:
            if isinstance(item, dict):
                out += _templates(item, runtimes)
        return out
    if kind == "InferenceService":
        return _kserve(spec, runtimes or {})
    if kind == "LeaderWorkerSet":
        lwt = _map(spec.get("leaderWorkerTemplate"))
        size = lwt.get("size", 1)
        size = size if isinstance(size, int) and not isinstance(size, bool) and size > 0 else 1
        out = []
        for key in ("leaderTemplate", "workerTemplate"):
            t = lwt.get(key)
            if isinstance(t, dict) and isinstance(t.get("spec"), dict):
                out.append((t["spec"], size))
        return out
    if kind == "CronJob":
        spec = _map(_map(spec.get("jobTemplate")).get("spec"))
    template = _map(spec.get("template"))
    if isinstance(template.get("spec"), dict):
        return [(template["spec"], 1)]
    return []


def expand(word: str, env: dict[str, str]) -> str:
    """``word`` with ``$(VAR)`` replaced as the kubelet does in command and args: a variable
    the container defines is replaced, an undefined one (or one only its runtime knows, a
    ``valueFrom``) stays as written, ``$$`` is one ``$``
    (k8s.io/kubernetes third_party/forked/golang/expansion/expand.go)."""
    if "$" not in word:
        return word
    out: list[str] = []
    i, n = 0, len(word)
    while i < n:
        if word[i] == "$" and i + 1 < n:
            nxt = word[i + 1]
            if nxt == "$":
                out.append("$")
                i += 2
                continue
            if nxt == "(":
                end = word.find(")", i + 2)
                if end > i + 2:
                    name = word[i + 2 : end]
                    out.append(env[name] if name in env else word[i : end + 1])
                    i = end + 1
                    continue
        out.append(word[i])
        i += 1
    return "".join(out)


def literal_env(container: dict[str, Any]) -> dict[str, str]:
    """The container's environment variables that have a literal ``value``."""
    return {
        str(e["name"]): str(e["value"])
        for e in container.get("env") or []
        if isinstance(e, dict) and "name" in e and isinstance(e.get("value"), (str, int, float))
    }


def engine_argv(container: dict[str, Any]) -> list[str] | None:
    """The engine command of a container (command + args, ``$(VAR)`` expanded as the
    kubelet does; ``sh -c "... vllm serve ..."`` split as the shell would), or None when it
    does not run vLLM / SGLang."""
    env = literal_env(container)
    parts = (
        [expand(str(x), env) for x in (container.get("command") or []) + (container.get("args") or [])]
        if all(isinstance(container.get(k) or [], list) for k in ("command", "args"))
        else []
    )
    if len(parts) >= 3 and parts[0].rsplit("/", 1)[-1] in ("sh", "bash", "dash") and parts[1] in ("-c", "-ec", "-xc"):
        try:
            words = shlex.split(parts[2], comments=True)
        except ValueError:
            return None
        # the segment of the script that starts the engine (after `cd x &&`, `exec`, ...)
        segment: list[str] = []
        for w in words:
            if w in ("&&", ";", "||", "|"):
                if any(_ENGINE.search(x) for x in segment):
                    break
                segment = []
            else:
                segment.append(w)
        parts = [w for w in segment if w != "exec"]
    for i, word in enumerate(parts):
        if _ENGINE.search(word):
            start = i - 2 if i >= 2 and parts[i - 1] == "-m" else i
            return parts[start:]
    return None


def _probe(value: Any) -> dict[str, int] | None:
    if not isinstance(value, dict):
        return None
    out = {}
    for key, ours, default in zip(
        ("initialDelaySeconds", "periodSeconds", "failureThreshold"),
        ("initial_delay_s", "period_s", "failure_threshold"),
        PROBE_DEFAULTS,
        strict=True,
    ):
        v = value.get(key, default)
        out[ours] = v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else default
    return out


def _pod_section(
    doc: dict[str, Any], spec: dict[str, Any], c: dict[str, Any], size: int, argv: list[str]
) -> dict[str, Any]:
    resources = _map(c.get("resources"))
    gpus: int | None = None
    others: list[str] = []
    for part in ("limits", "requests"):  # an extended resource's request equals its limit
        res = resources.get(part)
        if not isinstance(res, dict):
            continue
        if gpus is None and "nvidia.com/gpu" in res:
            gpus = quantity(res["nvidia.com/gpu"])
        others += [
            str(k) for k in res if str(k).startswith("nvidia.com/") and k != "nvidia.com/gpu" and k not in others
        ]
    volumes = {v.get("name"): v for v in spec.get("volumes") or [] if isinstance(v, dict)}
    shm: dict[str, Any] = {"shm_mounted": False, "shm_medium": None, "shm_size_limit_bytes": None}
    for mount in c.get("volumeMounts") or []:
        if isinstance(mount, dict) and str(mount.get("mountPath", "")).rstrip("/") == "/dev/shm":
            vol = volumes.get(mount.get("name")) or {}
            shm["shm_mounted"] = True
            if isinstance(vol.get("emptyDir"), dict):
                ed = vol["emptyDir"]
                shm["shm_medium"] = str(ed.get("medium") or "")
                shm["shm_size_limit_bytes"] = quantity(ed.get("sizeLimit")) if "sizeLimit" in ed else None
            else:
                shm["shm_medium"] = next((k for k in vol if k != "name"), "unknown")
    env = {e["name"]: str(e.get("value", "")) for e in c.get("env") or [] if isinstance(e, dict) and "name" in e}
    meta = _map(doc.get("metadata"))
    return {
        "kind": str(doc.get("kind")),
        "name": str(meta.get("name")) if meta.get("name") is not None else None,
        "container": str(c.get("name")) if c.get("name") is not None else None,
        "image": str(c.get("image")) if c.get("image") is not None else None,
        "group_size": size,
        "gpu_limit": gpus if gpus is not None else 0,
        "other_gpu_resources": others,
        "host_ipc": spec.get("hostIPC") is True,
        **shm,
        "startup_probe": _probe(c.get("startupProbe")),
        "liveness_probe": _probe(c.get("livenessProbe")),
        "require_cuda": env.get("NVIDIA_REQUIRE_CUDA"),
        "disable_require": bool(env.get("NVIDIA_DISABLE_REQUIRE")),
        "kv_transfer": any(a == "--kv-transfer-config" or a.startswith("--kv-transfer-config=") for a in argv),
    }


def from_documents(docs: list[Any], source: str) -> Manifest | None:
    """The first container of ``docs`` that runs the engine, as a :class:`Manifest` whose
    ``pod.source`` is ``source``; None when no container runs vLLM or SGLang."""
    runtimes = {
        str(_map(d.get("metadata")).get("name")): _map(d.get("spec"))
        for d in docs
        if isinstance(d, dict) and d.get("kind") in ("ServingRuntime", "ClusterServingRuntime")
    }
    for doc in docs:
        if not isinstance(doc, dict):
            continue
        for spec, size in _templates(doc, runtimes):
            containers = spec.get("containers")
            for c in containers if isinstance(containers, list) else []:
                if not isinstance(c, dict):
                    continue
                argv = engine_argv(c)
                if argv:
                    pod = _pod_section(doc, spec, c, size, argv)
                    pod["source"] = source
                    return Manifest(argv, literal_env(c), pod)
    return None


#: what the reader says when no container runs an engine
NO_ENGINE = "no container runs vLLM or SGLang (looked for `vllm serve` / `sglang` in command and args)"


def read_manifest(path: str, stdin: bytes | None = None) -> Manifest:
    """The engine container of the manifest at ``path`` (``-``: ``stdin``'s bytes).

    Raises:
        UsageError: unreadable, not YAML, over the bounds, or no container runs an engine.
    """
    from flightcheck._vocabulary.inputs import read_bounded, shown

    name = "--k8s " + ("-" if path == "-" else shown(path))
    if path == "-":
        raw = stdin if stdin is not None else b""
        if len(raw) > MAX_MANIFEST:
            raise UsageError(f"{name}: over the {MAX_MANIFEST >> 20} MiB flightcheck reads")
    else:
        raw = read_bounded(path, MAX_MANIFEST, "--k8s")
    manifest = from_documents(load_documents(raw, name), "-" if path == "-" else shown(path))
    if manifest is None:
        raise UsageError(f"{name}: {NO_ENGINE}")
    return manifest
