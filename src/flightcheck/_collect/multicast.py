"""The active NVLS multicast probe: bind multicast memory on the GPUs, in a child, once.

``flightcheck probe multicast``, ``flightcheck.probe_multicast()`` and the ``multicast``
active probe (``--deep``, and always under ``flightcheck run``) all land here. The CUDA
work happens in :mod:`.multicast_child` (ctypes on libcuda.so.1; see :mod:`.cuda_ctypes`
for why not cuda-bindings), started in its own process group with a hard timeout and always
reaped: a bind that hangs is killed with its whole group and reported as stage
``timeout``, with the last stage it reached. This process never creates a CUDA context.

Why ctypes on libcuda.so.1 rather than ``cuda-bindings``: the probe must work on any
driver from R535 to current. cuda-bindings is versioned with the toolkit (13.x targets
13.x drivers), may be missing from the interpreter flightcheck runs in, and is slow to
import; libcuda's C ABI is stable, a missing entry point on an old driver is an exact
answer, and dlopen picks the libcuda the engine would get (LD_LIBRARY_PATH, cuda-compat).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

from flightcheck._collect import CollectContext, probe
from flightcheck._collect.proc import Proc, json_events, run
from flightcheck._vocabulary.errors import UsageError
from flightcheck._vocabulary.facts import Facts, MulticastProbe

CHILD = str(Path(__file__).with_name("multicast_child.py"))
DEFAULT_TIMEOUT = 30.0
FIELDS = tuple(MulticastProbe.__struct_fields__)


def _empty(detail: str) -> dict[str, Any]:
    out: dict[str, Any] = dict.fromkeys(FIELDS)
    out["detail"] = detail
    return out


def parse(
    proc: Proc, timeout: float, devices: list[int] | None, handle_type: str | None
) -> tuple[dict[str, Any] | None, str | None]:
    """(the ``multicast_probe`` section, why the probe did not run) from the child's lines."""
    events = json_events(proc.out)
    for e in events:
        if e.get("event") == "unavailable":
            return None, str(e.get("reason") or "the probe could not start")
    result = next((e for e in events if e.get("event") == "result"), None)
    stages = [e for e in events if e.get("event") == "stage"]
    count = next((e.get("count") for e in events if e.get("event") == "devices"), None)
    used = next((e.get("handle_type") for e in reversed(stages) if e.get("handle_type")), None)
    libcuda = next((e.get("libcuda") for e in stages if e.get("libcuda")), None)
    n = count if count is not None else (len(devices) if devices else None)
    if result is not None:
        section = {k: result.get(k) for k in FIELDS}
        section["duration_s"] = round(proc.duration_s, 3)
    elif not stages:
        return None, f"the probe child did not start: {proc.why()}"
    else:
        last = stages[-1]
        where = last["stage"] + (f" on device {last['device']}" if last.get("device") is not None else "")
        if proc.timed_out:
            detail = f"no answer within {timeout:g}s; last stage reached: {where}" + (
                " (a bind blocks until the NVSwitch multicast team forms)" if last["stage"] in ("bind", "map") else ""
            )
            stage = "timeout"
        else:  # the driver crashed the child mid-sequence: that stage failed
            detail = f"the probe child died during {where}: {proc.why()}"
            stage = last["stage"]
        section = {
            **dict.fromkeys(FIELDS),
            "ok": False,
            "stage": stage,
            "devices": n,
            "handle_type": used or handle_type,
            "duration_s": round(proc.duration_s, 3),
            "detail": detail,
            "last_stage": last["stage"],
            "device": last.get("device"),
            "libcuda": libcuda,
        }
    try:
        msgspec.convert(section, MulticastProbe)
    except msgspec.ValidationError as exc:
        return None, f"the probe child sent an invalid result: {exc}"
    return section, None


def run_probe(
    devices: list[int] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    handle_type: str | None = None,
    env: Mapping[str, str] | None = None,
) -> tuple[dict[str, Any] | None, str | None]:
    """Run the child and parse it: (section or None, why-not)."""
    cmd = [
        sys.executable,
        CHILD,
        "--devices",
        ",".join(map(str, devices)) if devices else "all",
        "--handle-type",
        handle_type or "auto",
    ]
    proc = run(cmd, timeout=timeout, env=dict(os.environ if env is None else env))
    return parse(proc, timeout, devices, handle_type)


def probe_multicast(
    devices: list[int] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    handle_type: str | None = None,
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Run the NVLS multicast bind probe in a child process and return its result.

    Args:
        devices: CUDA device ordinals (as the engine's CUDA_VISIBLE_DEVICES shows them);
            None: every visible device.
        timeout: seconds before the child and its process group are killed (stage ``timeout``).
        handle_type: ``"posix_fd"`` or ``"fabric"``; None: what PyTorch would pick.
        env: the environment the child runs in (default: this process's).

    Returns:
        The ``multicast_probe`` facts section as a dict. ``ok`` is True or False when the
        probe ran, None when it could not run (no driver, no device), ``detail`` says why.
    """
    section, why = run_probe(devices, timeout, handle_type, env)
    return section if section is not None else _empty(why or "did not run")


def probe_cached(
    facts: Facts,
    devices: list[int],
    env: Mapping[str, str],
    *,
    timeout: float = DEFAULT_TIMEOUT,
    handle_type: str | None = None,
    fresh: bool = False,
    budget: float | None = None,
) -> tuple[dict[str, Any] | None, str | None]:
    """The probe on ``devices`` through this boot's cache (:mod:`.multicast_cache`): the
    cached verdict when its key matches, else a probe whose durable verdict is stored.

    ``fresh``: probe even on a hit (the verdict still refreshes the cache). ``budget``: an
    entry point's time limit (the plugin's); it replaces ``timeout`` and is recorded in the
    section, so a timeout within it reads as inconclusive (FC304 unknown), never a failure.
    Returns (section, why the probe did not run), as :func:`run_probe`."""
    from flightcheck._collect import multicast_cache as mc

    path = mc.cache_path(env)
    key, note = mc.make_key(facts, env, devices, handle_type) if path is not None else (None, None)
    if key is not None and path is not None and not fresh:
        hit, note = mc.lookup(path, key)
        if hit is not None:
            return {**hit, "cached": True, "cache": None, "budget_s": budget}, None
    probed_at = mc.now_iso()
    section, why = run_probe(devices, budget if budget is not None else timeout, handle_type, env)
    if section is None:
        return None, why
    section.update(cached=False, probed_at=probed_at, budget_s=budget)
    if key is not None and path is not None and mc.durable(section):
        note = mc.store(path, key, section) or note
    section["cache"] = note
    return section, None


def _wanted(cctx: CollectContext) -> bool:
    return cctx.intent.deep or "multicast" in cctx.probes


def devices_for(cctx: CollectContext, facts: Facts) -> tuple[list[int] | None, str | None]:
    """(the CUDA ordinals of this node's GPUs that form the launch's groups, or why none)."""
    from flightcheck._knowledge.derived import visible_gpus

    intent = cctx.intent
    if intent.world_size <= 1:
        return None, "one GPU: no group of GPUs, so no multicast to test"
    if facts.driver is None or not facts.driver.loaded:
        return None, "no NVIDIA driver: " + ((facts.driver.error if facts.driver else None) or "NVML unavailable")
    n = min(intent.gpus_per_node, len(visible_gpus(facts)))
    if n < 2:
        return None, f"{n} GPU of the launch on this node: a multicast team needs two"
    return list(range(n)), None


@probe("multicast", section="multicast_probe", timeout=DEFAULT_TIMEOUT + 5.0, wanted=_wanted)
def collect_probe(cctx: CollectContext, facts: Facts) -> dict[str, Any]:
    """The ``multicast_probe`` section for the launch: every GPU it uses on this node,
    through this boot's cache (``run``, ``check --deep``, ``collect --deep``)."""
    devices, why = devices_for(cctx, facts)
    if devices is None:
        return {"multicast_probe": None, "unavailable": {"multicast_probe": why or "did not run"}}
    section, why = probe_cached(facts, devices, cctx.env)
    if section is None:
        return {"multicast_probe": None, "unavailable": {"multicast_probe": why or "did not run"}}
    return {"multicast_probe": section}


def probe_for_launch(
    facts: Facts,
    devices: list[int],
    env: Mapping[str, str],
    *,
    fresh: bool = False,
    budget: float | None = None,
) -> float:
    """Run the probe on ``devices`` for a launch already collected (the plugin: the launch
    was found to reach a multicast path) and put the section, or why it did not run, into
    ``facts``; the seconds it took here (about 0 for this boot's cached verdict)."""
    import time

    t0 = time.perf_counter()
    section, why = probe_cached(facts, devices, env, fresh=fresh, budget=budget)
    if section is None:
        facts.multicast_probe = None
        facts.unavailable["multicast_probe"] = why or "did not run"
    else:
        facts.multicast_probe = msgspec.convert(section, MulticastProbe)
    return time.perf_counter() - t0


def _parse_devices(text: str | None) -> list[int] | None:
    if not text or text == "all":
        return None
    try:
        out = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise UsageError(f"--devices {text!r}: expected device ordinals such as 0,1,2,3") from None
    if not out or any(d < 0 for d in out) or len(set(out)) != len(out):
        raise UsageError(f"--devices {text!r}: expected distinct, non-negative device ordinals")
    return out


def render_text(result: dict[str, Any]) -> str:
    """One human line (and a hint on failure) for ``probe multicast``."""
    from flightcheck._fixes.fabric import probe_hint

    n, ht, secs = result.get("devices"), result.get("handle_type"), result.get("duration_s")
    tail = f"{n} device(s), {ht} handles, {secs:.2f}s" if secs is not None else ""
    if result.get("cached"):
        tail += f"; this boot's verdict, probed at {result.get('probed_at')}: --fresh probes again"
    if result.get("ok") is None:
        return f"multicast probe did not run: {result.get('detail')}\n"
    if result["ok"]:
        return f"multicast probe: ok ({tail})\n"
    err = (
        f"CUDA error {result['cuda_error']} {result.get('cuda_error_name')}"
        if result.get("cuda_error") is not None
        else result.get("detail")
    )
    where = f" (device {result['device']})" if result.get("device") is not None else ""
    lines = [f"multicast probe: FAILED at {result['stage']}{where}: {err} ({tail})"]
    if result.get("detail") and result.get("cuda_error") is not None:
        lines.append(f"  {result['detail']}")
    lines.append("  fix: " + probe_hint(result).replace("\n", "\n       "))
    return "\n".join(lines) + "\n"


def key_facts(env: Mapping[str, str]) -> Facts:
    """What the cache key needs when no launch was collected (``probe multicast``): the
    driver, the GPUs (NVML, in its child), IMEX and CUDA_VISIBLE_DEVICES."""
    from flightcheck._collect import context_for
    from flightcheck._collect.nvml import collect_nvml
    from flightcheck._vocabulary.facts import from_dict

    doc = collect_nvml(context_for(env=env))
    doc["visible_devices"] = env.get("CUDA_VISIBLE_DEVICES")
    doc.pop("unavailable", None)
    return from_dict(doc, "collected facts")


def main(args: Any) -> tuple[str, int]:
    """``flightcheck probe multicast``: the output to print, and the exit code (0 ok, 1
    multicast failed, 3 the probe could not run); the command line prints it.

    Through this boot's cache, as every other entry point (``--fresh`` probes anyway);
    without a driver NVML can read, straight to the probe."""
    devices = _parse_devices(getattr(args, "devices", None))
    timeout = float(getattr(args, "timeout", DEFAULT_TIMEOUT))
    if timeout <= 0:
        raise UsageError("--timeout must be positive")
    handle_type = getattr(args, "handle_type", None)
    env = dict(os.environ)
    result: dict[str, Any] | None = None
    from flightcheck._collect.multicast_cache import cache_path

    if cache_path(env) is not None:
        facts = key_facts(env)
        if facts.driver is not None and facts.driver.loaded and facts.gpus:
            from flightcheck._knowledge.derived import visible_gpus

            wanted = devices if devices is not None else list(range(len(visible_gpus(facts))))
            if wanted:
                section, why = probe_cached(
                    facts,
                    wanted,
                    env,
                    timeout=timeout,
                    handle_type=handle_type,
                    fresh=bool(getattr(args, "fresh", False)),
                )
                result = section if section is not None else _empty(why or "did not run")
    if result is None:
        result = probe_multicast(devices, timeout, handle_type)
    text = json.dumps(result, indent=1) + "\n" if getattr(args, "format", "text") == "json" else render_text(result)
    if result.get("ok") is None:
        return text, 3
    return text, 0 if result["ok"] else 1
