"""What runs on a node for ``flightcheck cluster --ray``: collection only, never evaluation.

The Ray task collects this node's facts as ``flightcheck collect [--model M]`` would on
the node itself: in the environment the node's Ray workers (and so the engine's ranks)
get, with the node's own ``FLIGHTCHECK_FACTS`` honoured, and returns the snapshot as JSON
text; the command that launched the tasks evaluates it. This module never imports Ray at
the top: the task body only asks Ray what it changed in the worker's environment.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import time
from collections.abc import Mapping
from typing import Any

#: Test hook: seconds a node's collection sleeps first, set in the environment of the
#: node's ``ray start``. It makes a node that does not answer in time reproducible.
DELAY_ENV = "FLIGHTCHECK_TEST_COLLECT_DELAY_S"


def collect_node(intent_fields: dict[str, Any], env: Mapping[str, str] | None = None) -> str:
    """This node's snapshot as JSON text, with the checkpoint section when a model is named.

    A model this node cannot read leaves ``checkpoint`` null with the reason in
    ``unavailable`` (FC802 names the node), instead of losing the node's other facts.

    Raises:
        UsageError: a facts file named by FLIGHTCHECK_FACTS is unreadable or invalid.
    """
    from flightcheck._collect import collect, env_facts_files
    from flightcheck._vocabulary.intent import Intent

    known = {f.name for f in dataclasses.fields(Intent)}  # a newer caller may send more fields
    intent = Intent(**{k: v for k, v in intent_fields.items() if k in known})
    environ = dict(os.environ if env is None else env)
    facts = collect(intent, env_facts_files(environ), env=environ, probes=["checkpoint"])
    return facts.to_json()


def worker_env() -> dict[str, str]:
    """The Ray worker's environment as the engine's ranks on this node will see it.

    Ray may rewrite CUDA_VISIBLE_DEVICES for a task (to the GPUs it was given: none here);
    the value the worker process started with is the node's own, which is what vLLM's Ray
    workers start from.
    """
    env = dict(os.environ)
    try:
        from ray._private.worker import global_worker  # private, so guarded: fall back to os.environ

        original = global_worker.original_visible_accelerator_ids["GPU"]
    except Exception:  # noqa: BLE001 - a private Ray API may change in any way: use os.environ
        return env
    if original is None:
        env.pop("CUDA_VISIBLE_DEVICES", None)
    else:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in original)
    return env


def ray_task(intent_fields: dict[str, Any]) -> dict[str, Any]:
    """The body of the per-node Ray task: collect and return the snapshot (JSON text)."""
    t0 = time.monotonic()
    delay = os.environ.get(DELAY_ENV)
    if delay:
        time.sleep(float(delay))
    text = collect_node(intent_fields, worker_env())
    return {"facts": text, "hostname": socket.gethostname(), "duration_s": round(time.monotonic() - t0, 3)}
