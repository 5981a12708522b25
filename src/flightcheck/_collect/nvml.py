"""NVML collector: the ``driver``, ``gpus``, ``fabric_manager`` and ``imex`` sections.

NVML is read in a child process (:mod:`.nvml_child`) with a hard timeout, because
``nvmlInit`` or a per-GPU query can block for a long time on a GPU that fell off the bus,
and because the checking process must not load driver libraries into itself (vLLM forks
its workers from it). The child streams one JSON line per GPU, so a hang still yields every
GPU read before it and names the one that hung. The parent validates every line against
the facts schema before using it.

Command line equivalent: ``nvidia-smi -q`` (driver, GPUs, Fabric block, NVLink, remapped
rows) plus the host-side fabric manager / IMEX checks of :mod:`.fabric`.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import Any

import msgspec

from flightcheck._collect import CollectContext, collector
from flightcheck._collect.proc import Proc, json_events, run
from flightcheck._vocabulary.facts import Driver, Gpu

CHILD = str(Path(__file__).with_name("nvml_child.py"))
#: The child's own limit; the collector's is longer so the host-side part still reports.
CHILD_TIMEOUT = 12.0
FABRIC_STATES_ON_SWITCH = ("not_started", "in_progress", "completed")


def run_child(timeout: float = CHILD_TIMEOUT, env: dict[str, str] | None = None) -> Proc:
    """Run the NVML child with flightcheck's interpreter (pynvml is our dependency)."""
    return run([sys.executable, CHILD], timeout=timeout, env=env if env is not None else dict(os.environ))


def _hung_text(seconds: float, what: str) -> str:
    return (
        f"NVML did not answer within {seconds:.0f}s ({what}): a GPU may have fallen off the bus "
        "(look for Xid 79 in `dmesg`), or the driver is wedged"
    )


def parse_child(proc: Proc, timeout: float = CHILD_TIMEOUT) -> dict[str, Any]:
    """Turn the child's JSON lines into ``driver`` and ``gpus`` sections plus reasons."""
    unavailable: dict[str, str] = {}
    events = json_events(proc.out)
    drv = next((e for e in events if e.get("event") == "driver"), None)
    if drv is None:
        if proc.timed_out:
            why = _hung_text(timeout, "nvmlInit never returned")
            return {
                "driver": {"loaded": False, "version": None, "cuda_version": None, "error": why},
                "gpus": [],
                "unavailable": unavailable,
            }
        why = proc.error or f"the NVML child failed: {proc.why()}"
        unavailable.update({"driver": why, "gpus": why})
        return {"driver": None, "gpus": None, "unavailable": unavailable}
    unavailable.update(drv.get("unavailable") or {})
    driver = {
        "loaded": drv.get("loaded"),
        "version": drv.get("version"),
        "cuda_version": drv.get("cuda_version"),
        "error": drv.get("error"),
    }
    try:
        msgspec.convert(driver, Driver)
    except msgspec.ValidationError as exc:
        unavailable["driver"] = f"the NVML child sent an invalid driver record: {exc}"
        return {"driver": None, "gpus": None, "unavailable": unavailable}
    if driver["loaded"] is None:
        unavailable["driver.loaded"] = unavailable["gpus"] = driver["error"] or "unknown"
        return {"driver": driver, "gpus": None, "unavailable": unavailable}
    if not driver["loaded"]:
        return {"driver": driver, "gpus": [], "unavailable": unavailable}
    count = drv.get("count")
    if count is None:
        unavailable.setdefault("gpus", "nvmlDeviceGetCount failed")
        return {"driver": driver, "gpus": None, "unavailable": unavailable}
    gpus: dict[int, dict[str, Any]] = {}
    started: list[int] = []
    for e in events:
        if e.get("event") == "gpu_start":
            started.append(int(e.get("index", -1)))
        elif e.get("event") == "gpu" and isinstance(e.get("gpu"), dict):
            g = e["gpu"]
            try:
                gpus[int(g["index"])] = msgspec.to_builtins(msgspec.convert(g, Gpu))
                unavailable.update(e.get("unavailable") or {})
            except (msgspec.ValidationError, KeyError, TypeError, ValueError) as exc:
                idx = int(g.get("index", len(gpus)))
                gpus[idx] = {"index": idx, "error": None}
                unavailable[f"gpus[{idx}]"] = f"the NVML child sent an invalid record: {exc}"
    done = any(e.get("event") == "done" for e in events)
    if not done:
        hung = next((i for i in started if i not in gpus), None)
        why = (
            _hung_text(timeout, f"stuck on GPU {hung}")
            if proc.timed_out
            else f"the NVML child stopped early: {proc.why()}"
        )
        for i in range(count):
            if i not in gpus:
                msg = why if i == hung or hung is None else f"not queried: NVML hung on GPU {hung} first"
                gpus[i] = {"index": i, "error": msg}
                unavailable[f"gpus[{i}]"] = msg
    return {"driver": driver, "gpus": [gpus[i] for i in sorted(gpus)], "unavailable": unavailable}


def decide_nvswitch(
    gpus: list[dict[str, Any]] | None, host_evidence: list[str]
) -> tuple[bool | None, list[str], str | None]:
    """(nvswitch_system, what showed it, why-unknown). NVLinks that end at a switch or a
    GPU taking part in an NVLink fabric (any fabric state but not_supported) count, as
    do the host's own NVSwitch devices; a complete NVML reading without any is a no."""
    evidence = list(host_evidence)
    complete = gpus is not None and len(gpus) > 0
    for g in gpus or []:
        idx = g.get("index")
        link, fabric = g.get("nvlink") or {}, g.get("fabric") or {}
        if link.get("to_switch"):
            evidence.append(f"GPU {idx}: NVLinks reach an NVSwitch")
            break
        if fabric.get("state") in FABRIC_STATES_ON_SWITCH:
            evidence.append(f"GPU {idx}: NVLink fabric state {fabric['state']}")
            break
        if g.get("nvlink") is None or g.get("fabric") is None:
            complete = False
    if evidence:
        return True, evidence, None
    if complete:
        return False, ["no GPU NVLink reaches a switch; no fabric state; no NVSwitch device on the host"], None
    return None, [], "NVML could not read NVLink/fabric state and the host shows no NVSwitch"


@collector("nvml", sections=("driver", "gpus", "fabric_manager", "imex"), timeout=20.0)
def collect_nvml(cctx: CollectContext) -> dict[str, Any]:
    """The driver and GPUs (NVML, in a child) and the fabric manager / IMEX state."""
    from flightcheck._collect.fabric import collect_host_side
    from flightcheck._collect.host import container

    in_container = container(cctx.env) != "none"
    side: dict[str, Any] = {}

    def host_part() -> None:
        side.update(collect_host_side(Path("/"), in_container))

    t = threading.Thread(target=host_part, name="flightcheck-fabric", daemon=True)
    t.start()
    nvml = parse_child(run_child())
    t.join(6.0)
    return assemble(nvml, side)


def assemble(nvml: dict[str, Any], side: dict[str, Any]) -> dict[str, Any]:
    """Merge the NVML reading and the host-side reading into the four sections."""
    unavailable = dict(nvml["unavailable"])
    if not side:
        why: str | None = "host-side fabric manager / IMEX checks timed out"
        unavailable.update({"fabric_manager.service": why, "fabric_manager.version": why, "imex": why})
        side = {"fabric_manager": {"service": None, "version": None}, "imex": None, "evidence": []}
    unavailable.update(side.get("unavailable") or {})
    nvswitch, detected_by, why = decide_nvswitch(nvml["gpus"], side.get("evidence") or [])
    if why:
        unavailable["fabric_manager.nvswitch_system"] = why
    fm = side["fabric_manager"]
    return {
        "driver": nvml["driver"],
        "gpus": nvml["gpus"],
        "fabric_manager": {
            "nvswitch_system": nvswitch,
            "service": fm.get("service"),
            "version": fm.get("version"),
            "detected_by": detected_by or None,
            "started_s": fm.get("started_s"),
        },
        "imex": side.get("imex"),
        "unavailable": unavailable,
    }
