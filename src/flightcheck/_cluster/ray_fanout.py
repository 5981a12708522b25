"""``flightcheck cluster --ray``: one collection task per alive Ray node, pinned to it.

vLLM's multi-node launches run on Ray, so Ray reaches exactly the nodes the engine will
use. Each task is pinned with a hard node affinity (it runs on that node or not at all),
asks for no CPU (a busy node still answers) and is never retried; tasks that have not
answered within the timeout are cancelled (their worker killed) and their nodes reported
by FC803. Nodes without a GPU resource (a CPU-only head) are left out when any node has
one, since vLLM places no rank there. Ray is imported only on this path.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from flightcheck._cluster.snapshots import unique_names
from flightcheck._vocabulary.errors import UsageError
from flightcheck._vocabulary.facts import loads

if TYPE_CHECKING:
    from flightcheck._vocabulary.facts import Facts
    from flightcheck._vocabulary.intent import Intent


@dataclass
class Gathered:
    """What the fan-out brought back."""

    nodes: dict[str, Facts] = field(default_factory=dict)
    unreachable: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    address: str = ""


def _one_line(exc: BaseException) -> str:
    """A task's failure in one line: the cause of a RayTaskError, not its traceback."""
    cause = getattr(exc, "cause", None)
    err = cause if isinstance(cause, BaseException) else exc
    text = str(err).strip().splitlines()
    last = next((t for t in reversed(text) if t.strip()), "") if text else ""
    return f"{type(err).__name__}: {last}"[:300]


def _check_listening(address: str, timeout: float) -> None:
    """Fail fast when nothing listens at an explicit ``host:port``: ``ray.init`` would retry
    for minutes. ``auto`` is left to Ray, which looks for a local cluster and fails at once."""
    target = os.environ.get("RAY_ADDRESS", "") if address == "auto" else address
    host, sep, port = target.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as exc:
        raise UsageError(f"--ray {address}: nothing answers at {host}:{port} ({exc.strerror or exc})") from None


def _connect(address: str, timeout: float) -> Any:
    try:
        import ray
    except ImportError:
        raise UsageError("--ray needs Ray in this environment: pip install 'flightcheck[ray]'") from None
    if ray.is_initialized():  # a library caller already connected: use its connection
        return ray, False
    _check_listening(address, min(timeout, 10.0))
    try:
        ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR, configure_logging=True)
    except Exception as exc:  # noqa: BLE001 - ConnectionError, ValueError, RuntimeError: all mean "no cluster there"
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise UsageError(f"--ray {address}: cannot connect to a Ray cluster: {first}") from None
    return ray, True


def gather(address: str, intent: Intent, timeout: float) -> Gathered:
    """Collect every alive (GPU) Ray node's facts within ``timeout`` seconds.

    Raises:
        UsageError: Ray is not installed or no cluster answers at ``address``.
    """
    ray, owned = _connect(address, timeout)
    try:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        from flightcheck._cluster.node import ray_task

        alive = [n for n in ray.nodes() if n.get("Alive")]
        with_gpu = [n for n in alive if (n.get("Resources") or {}).get("GPU", 0) > 0]
        targets = with_gpu or alive
        names = unique_names(
            {n["NodeID"]: n.get("NodeManagerHostname") or n["NodeID"][:12] for n in alive},
            {n["NodeID"]: f"{n.get('NodeManagerHostname') or 'node'}-{n['NodeID'][:8]}" for n in alive},
        )
        out = Gathered(address=address)
        for n in alive:
            if n not in targets:
                out.skipped[names[n["NodeID"]]] = "no GPU resource: vLLM places no rank there"
        task = ray.remote(ray_task)
        fields = dataclasses.asdict(intent)
        refs = {}
        for n in targets:
            strategy = NodeAffinitySchedulingStrategy(node_id=n["NodeID"], soft=False)
            ref = task.options(
                scheduling_strategy=strategy, num_cpus=0, max_retries=0, name="flightcheck-collect"
            ).remote(fields)
            refs[ref] = names[n["NodeID"]]
        ready, pending = ray.wait(list(refs), num_returns=len(refs), timeout=timeout) if refs else ([], [])
        for ref in pending:
            out.unreachable[refs[ref]] = f"no answer within {timeout:g}s (--timeout)"
            try:
                ray.cancel(ref, force=True)  # kill the hung worker rather than leave it on the node
            except Exception:  # noqa: BLE001, S110 - best effort: the node is already reported unreachable
                pass
        for ref in ready:
            name = refs[ref]
            try:
                answer = ray.get(ref)
                out.nodes[name] = loads(answer["facts"], f"facts from Ray node {name}")
            except UsageError as exc:
                out.unreachable[name] = f"sent an invalid snapshot: {exc}"
            except Exception as exc:  # noqa: BLE001 - the task raised, or its worker died
                out.unreachable[name] = f"collection failed: {_one_line(exc)}"
        return out
    finally:
        if owned:
            ray.shutdown()
