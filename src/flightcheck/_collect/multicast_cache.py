"""The multicast verdict of this boot: cached so one probe per boot serves every launch.

The NVSwitch multicast team is set up at run time, and what breaks it (a warm reboot, a
fabric manager restart without a GPU reset) or repairs it (the reset sequence: stop the
fabric manager, ``nvidia-smi -r``, start it) changes one of these, which are the key:

- the boot: ``/proc/sys/kernel/random/boot_id`` (a container reads the host's);
- the fabric manager's start: systemd's ``ActiveEnterTimestampMonotonic`` of
  nvidia-fabricmanager, else the nv-fabricmanager process's start time
  (``/proc/<pid>/stat`` field 22), read when the cache is asked (:func:`.fabric.fabric_manager_started`);
- the driver version (NVML) and the UUIDs of the GPUs probed, in CUDA order (a GPU
  swapped, another CUDA_VISIBLE_DEVICES, another GPU count);
- the handle type asked for and the IMEX channels (``auto`` picks fabric handles only when
  an IMEX channel works, so a channel appearing changes what the engine binds).

A verdict is reused only when every part of the key is equal, so the first launch after a
boot, a fabric manager restart or a GPU change pays the probe and later ones pay nothing.
Where the fabric manager's start cannot be seen (a container without the host's systemd
or PID namespace), a passing verdict is still reused for the boot but a failing one is
never: its repair is a restart this process cannot see, and a stale failure would keep
a repaired node on the fallback or stopped. Only definite verdicts are stored: a bind
that passed, failed with a CUDA error, or found multicast unsupported; never a timeout,
a CUDA that cannot start (the fabric manager may still be coming up), or full GPUs.

The file is ``multicast-probe.json`` in flightcheck's cache directory, with the rules of
every cache here (docs/security.md): the caller's own directory and file only (owner
checked on a descriptor, ``O_NOFOLLOW``, never another user's), written atomically 0600;
``FLIGHTCHECK_NO_CACHE=1`` turns it off. Entries of other boots are dropped on write.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from flightcheck._vocabulary.facts import Facts

FILE = "multicast-probe.json"
FORMAT = "flightcheck.multicast-cache/1"
MAX_BYTES = 1 << 20
MAX_ENTRIES = 16  # GPU sets of one boot (two servers on GPUs 0-3 and 4-7, ...)


def now_iso() -> str:
    """When a probe ran, as the facts write times (UTC, seconds)."""
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def cache_path(env: Mapping[str, str]) -> Path | None:
    """The cache file, or None when caching is off (for the engine's environment or for
    flightcheck's own) or there is no cache home."""
    from flightcheck._checkpoint.cache import cache_dir, enabled

    where = cache_dir(env)
    if where is None or not enabled():
        return None
    return where / FILE


def make_key(
    facts: Facts,
    env: Mapping[str, str],
    devices: list[int],
    handle_type: str | None,
    *,
    root: Path = Path("/"),
    boot: str | None = None,
) -> tuple[dict[str, Any] | None, str | None]:
    """(the key of a verdict on ``devices``, why there is none): read now, on this host."""
    from flightcheck._collect.fabric import fabric_manager_started
    from flightcheck._collect.host import BOOT_ID, boot_id, container
    from flightcheck._knowledge.derived import visible_gpus

    boot = boot if boot is not None else boot_id(str(root / BOOT_ID.lstrip("/")))
    if boot is None:
        return None, "not cached: no boot id (/proc/sys/kernel/random/boot_id)"
    driver = facts.driver.version if facts.driver is not None else None
    if not driver:
        return None, "not cached: the driver version is unknown"
    gpus = visible_gpus(facts)
    if not devices or max(devices) >= len(gpus):
        return None, "not cached: the GPUs probed are not all in the facts"
    uuids = [gpus[d].uuid for d in devices]
    if any(not u for u in uuids):
        return None, "not cached: a GPU probed has no UUID"
    fm, _secs = fabric_manager_started(root, container(dict(env)) != "none")
    return {
        "boot_id": boot,
        "fabric_manager": fm,  # None: its start is out of sight (a failure is then never reused)
        "driver": driver,
        "gpus": uuids,
        "handle_type": handle_type or "auto",
        "imex_channels": (facts.imex.channels if facts.imex is not None else None),
    }, None


def durable(section: Mapping[str, Any]) -> bool:
    """A verdict that lasts as long as its key: a pass, a CUDA error at a multicast stage,
    or multicast unsupported; not a timeout, a CUDA that cannot start, or full GPUs."""
    if section.get("ok") is True:
        return True
    if section.get("ok") is not False or section.get("stage") in (None, "timeout"):
        return False
    if section.get("last_stage") == "init":
        return False  # cuInit / a context failed: the fabric manager may still be starting
    return not (section.get("stage") == "mem_create" and section.get("cuda_error") == 2)


def _load(path: Path) -> tuple[list[dict[str, Any]], str | None]:
    from flightcheck._checkpoint.cache import read_owned

    raw, why = read_owned(path, MAX_BYTES)
    if raw is None:
        return [], why
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError):
        return [], "cache file ignored: not JSON"
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("entries"), list):
        return [], "cache file ignored: another format"
    return [e for e in doc["entries"] if isinstance(e, dict) and isinstance(e.get("result"), dict)], None


def lookup(path: Path, key: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """(the cached verdict for ``key`` or None, why the cache was not used)."""
    from flightcheck._vocabulary.facts import MulticastProbe

    entries, why = _load(path)
    for entry in entries:
        if entry.get("key") != key:
            continue
        result = entry["result"]
        if result.get("ok") is not True and key.get("fabric_manager") is None:
            return None, "a failed verdict is not reused where the fabric manager's restarts cannot be seen"
        try:
            import msgspec

            msgspec.convert(result, MulticastProbe)
        except Exception:  # noqa: BLE001 - a bad entry is a miss, never a verdict
            return None, "cache entry ignored: not a probe result"
        return result, None
    return None, why


def store(path: Path, key: dict[str, Any], result: dict[str, Any]) -> str | None:
    """Remember a durable verdict (replacing one with the same key; other boots' dropped);
    None, or why nothing was written (a cache that cannot be written costs the next launch
    its probe, nothing else)."""
    from flightcheck._checkpoint.cache import write_owned

    entries, _why = _load(path)
    kept = [
        e
        for e in entries
        if isinstance(e.get("key"), dict) and e["key"].get("boot_id") == key["boot_id"] and e["key"] != key
    ]
    stored = {k: v for k, v in result.items() if k not in ("cached", "cache", "budget_s")}
    kept = [*kept[-(MAX_ENTRIES - 1) :], {"key": key, "result": stored}]
    data = json.dumps({"format": FORMAT, "entries": kept}, indent=1, sort_keys=True).encode()
    return write_owned(path, data, ".multicast-")
