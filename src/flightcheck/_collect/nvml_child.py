"""NVML child: read the driver and every GPU through ``pynvml`` and print JSON lines.

Run by :mod:`flightcheck._collect.nvml` as ``python nvml_child.py`` in its own process
group with a hard timeout: NVML can block for the driver's whole timeout on a GPU that fell
off the bus, and the checking process must never hang or load a driver library itself.

Standalone on purpose (stdlib + ``pynvml`` only, no flightcheck import): it starts in a few
tens of milliseconds and a broken flightcheck install cannot change what NVML says.

Protocol, one JSON object per line, flushed as soon as it is known so a hang still leaves
everything read before it:

    {"event": "driver", "loaded": bool, "version", "cuda_version", "error", "count"}
    {"event": "gpu_start", "index": i}
    {"event": "gpu", "gpu": {...facts schema...}, "unavailable": {"gpus[i].field": why}}
    {"event": "done"}

A function the driver lacks (``FunctionNotFound`` on an older driver), ``NotSupported`` or
a lost GPU makes that one field null with the reason; it never fails the collection.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

VIRT_MODES = {0: "none", 1: "passthrough", 2: "vgpu", 3: "host_vgpu", 4: "host_vsga"}
FABRIC_STATES = {0: "not_supported", 1: "not_started", 2: "in_progress", 3: "completed"}
#: healthMask INCORRECT_CONFIGURATION values 2..8 (nvml.h), 1 = none, 0 = not supported.
CONFIG_KINDS = {
    2: "incorrect_sysguid",
    3: "incorrect_chassis_sn",
    4: "no_partition",
    5: "insufficient_nvlinks",
    6: "incompatible_gpu_fw",
    7: "invalid_location",
    8: "gpu_state_invalid",
}
#: NVML return codes a fabric status can carry, spelled as nvidia-smi -q prints them.
STATUS_TEXT = {
    0: "success",
    2: "invalid argument",
    3: "not supported",
    9: "driver not loaded",
    15: "gpu is lost",
    23: "insufficient resources",
    999: "unknown error",
}
MAX_LINKS = 36  # NVML_NVLINK_MAX_LINKS
LINK_TYPE_SWITCH = 2  # NVML_NVLINK_DEVICE_TYPE_SWITCH
#: Errors that mean "this GPU is unusable", not "this field is unavailable".
GPU_FATAL = {
    15: "GPU is lost (fell off the bus; see `dmesg | grep -i xid`, Xid 79)",
    16: "GPU requires a reset (NVML_ERROR_RESET_REQUIRED)",
}


def emit(obj: dict[str, Any]) -> None:
    """One protocol line, flushed at once so a later hang cannot swallow it."""
    sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _err_code(exc: BaseException) -> int | None:
    return getattr(exc, "value", None)


def _why(nv: Any, exc: BaseException, call: str) -> str:
    code = _err_code(exc)
    if code == getattr(nv, "NVML_ERROR_FUNCTION_NOT_FOUND", 13):
        return f"{call}: this driver lacks the function (older driver)"
    if code == getattr(nv, "NVML_ERROR_NOT_SUPPORTED", 3):
        return f"{call}: not supported on this GPU"
    try:
        text = str(exc)
    except Exception:  # noqa: BLE001 - str() of an NVMLError may call into NVML again
        text = f"NVML error {code}"
    return f"{call}: {text}"


class Gpu:
    """Collects one GPU's fields; every query failure lands in ``unavailable``."""

    def __init__(self, nv: Any, index: int) -> None:
        self.nv, self.index = nv, index
        self.unavailable: dict[str, str] = {}
        self.fatal: str | None = None
        self.out: dict[str, Any] = {"index": index}

    def record(self, field: str, call: str, exc: BaseException) -> None:
        """Note why ``field`` is null (a lost GPU is remembered for the whole entry)."""
        code = _err_code(exc)
        if code in GPU_FATAL and self.fatal is None:
            self.fatal = GPU_FATAL[code]
        self.unavailable[f"gpus[{self.index}].{field}"] = _why(self.nv, exc, call)

    def q(self, field: str, call: str, fn: Callable[[], Any]) -> Any:
        """Run one NVML query; None plus a reason on failure."""
        try:
            return fn()
        except self.nv.NVMLError as exc:
            self.record(field, call, exc)
            return None
        except AttributeError:  # an nvidia-ml-py older than the call
            self.unavailable[f"gpus[{self.index}].{field}"] = (
                f"{call}: this nvidia-ml-py lacks it (pip install -U nvidia-ml-py)"
            )
            return None

    def collect(self) -> None:
        """Every field of this GPU; a failing query nulls its field only."""
        nv, out = self.nv, self.out
        try:
            h = nv.nvmlDeviceGetHandleByIndex(self.index)
        except nv.NVMLError as exc:
            code = _err_code(exc)
            fatal = GPU_FATAL.get(code) if code is not None else None
            out["error"] = fatal or _why(nv, exc, "nvmlDeviceGetHandleByIndex")
            self.unavailable[f"gpus[{self.index}]"] = out["error"]
            return
        out["name"] = self.q("name", "nvmlDeviceGetName", lambda: _text(nv.nvmlDeviceGetName(h)))
        out["uuid"] = self.q("uuid", "nvmlDeviceGetUUID", lambda: _text(nv.nvmlDeviceGetUUID(h)))
        out["pci_bus_id"] = self.q(
            "pci_bus_id", "nvmlDeviceGetPciInfo", lambda: _text(nv.nvmlDeviceGetPciInfo(h).busId)
        )
        cc = self.q(
            "compute_capability", "nvmlDeviceGetCudaComputeCapability", lambda: nv.nvmlDeviceGetCudaComputeCapability(h)
        )
        out["compute_capability"] = f"{cc[0]}.{cc[1]}" if cc else None
        mem = self.q("memory_total_bytes", "nvmlDeviceGetMemoryInfo", lambda: nv.nvmlDeviceGetMemoryInfo(h))
        out["memory_total_bytes"] = int(mem.total) if mem is not None else None
        out["memory_used_bytes"] = int(mem.used) if mem is not None else None
        if mem is None:
            self.unavailable[f"gpus[{self.index}].memory_used_bytes"] = self.unavailable[
                f"gpus[{self.index}].memory_total_bytes"
            ]
        out["memory_reserved_bytes"] = self._reserved(nv, h)
        out["mig_enabled"] = self._mig(h)
        pm = self.q("persistence_mode", "nvmlDeviceGetPersistenceMode", lambda: nv.nvmlDeviceGetPersistenceMode(h))
        out["persistence_mode"] = bool(pm) if pm is not None else None
        vm = self.q(
            "virtualization_mode", "nvmlDeviceGetVirtualizationMode", lambda: nv.nvmlDeviceGetVirtualizationMode(h)
        )
        out["virtualization_mode"] = VIRT_MODES.get(vm, f"mode-{vm}") if vm is not None else None
        # a driver-API attribute (CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED): NVML cannot tell,
        # and this process never touches CUDA. The multicast probe reads it.
        out["multicast_supported"] = None
        self.unavailable[f"gpus[{self.index}].multicast_supported"] = (
            "a CUDA driver attribute, not an NVML one: read by the multicast probe (--deep)"
        )
        out["fabric"] = self._fabric(h)
        out["nvlink"] = self._nvlink(h)
        out["remapped_rows"] = self._remap(h)
        if self.fatal:
            out["error"] = self.fatal

    def _reserved(self, nv: Any, h: Any) -> int | None:
        """The driver's reservation (NVML v2 memory info ``reserved``): memory CUDA never
        shows torch, so vLLM's total_memory is memory_total minus it."""
        key = f"gpus[{self.index}].memory_reserved_bytes"
        v2 = getattr(nv, "nvmlMemory_v2", None)
        if v2 is None:
            self.unavailable[key] = "this pynvml has no nvmlMemory_v2 (the v2 memory info with 'reserved')"
            return None
        try:
            return int(nv.nvmlDeviceGetMemoryInfo(h, version=v2).reserved)
        except (nv.NVMLError, TypeError, AttributeError) as exc:
            self.unavailable[key] = f"nvmlDeviceGetMemoryInfo(v2): {exc}"
            return None

    def _mig(self, h: Any) -> bool | None:
        nv = self.nv
        try:
            current, _pending = nv.nvmlDeviceGetMigMode(h)
            return bool(current)
        except nv.NVMLError as exc:
            if _err_code(exc) in (
                getattr(nv, "NVML_ERROR_NOT_SUPPORTED", 3),
                getattr(nv, "NVML_ERROR_FUNCTION_NOT_FOUND", 13),
            ):
                return False  # a GPU (or driver) without MIG cannot have it enabled
            self.record("mig_enabled", "nvmlDeviceGetMigMode", exc)
            return None

    def _fabric(self, h: Any) -> dict[str, Any] | None:
        nv = self.nv
        info, how = None, "nvmlDeviceGetGpuFabricInfoV"
        try:
            if hasattr(nv, "c_nvmlGpuFabricInfo_v2_t") and hasattr(nv, "nvmlDeviceGetGpuFabricInfoV"):
                info = nv.c_nvmlGpuFabricInfo_v2_t()
                nv.nvmlDeviceGetGpuFabricInfoV(h, info)
            else:
                raise nv.NVMLError(getattr(nv, "NVML_ERROR_FUNCTION_NOT_FOUND", 13))
        except nv.NVMLError as exc:
            info = None
            code = _err_code(exc)
            if code == getattr(nv, "NVML_ERROR_NOT_SUPPORTED", 3):
                return {
                    "state": "not_supported",
                    "status": None,
                    "clique_id": None,
                    "cluster_uuid": None,
                    "health": None,
                }
            # no V call (R525..R545), or a V call that refuses the v2 struct (ARGUMENT_VERSION_MISMATCH)
            if code not in (
                getattr(nv, "NVML_ERROR_FUNCTION_NOT_FOUND", 13),
                getattr(nv, "NVML_ERROR_ARGUMENT_VERSION_MISMATCH", 25),
            ):
                self.record("fabric", how, exc)
                return None
            # R525..R545 drivers: the legacy call has state/status/clique but no health mask
            how = "nvmlDeviceGetGpuFabricInfo"
            legacy = self.q("fabric", how, lambda: _legacy_fabric(nv, h))
            if legacy is None:
                return None
            info = legacy
            self.unavailable[f"gpus[{self.index}].fabric.health"] = (
                "no usable nvmlDeviceGetGpuFabricInfoV here (drivers R550+ have it): health flags unknown"
            )
        return _decode_fabric(info, how)

    def _nvlink(self, h: Any) -> dict[str, Any] | None:
        nv = self.nv
        total = active = 0
        to_switch = False
        for link in range(MAX_LINKS):
            try:
                state = nv.nvmlDeviceGetNvLinkState(h, link)
            except nv.NVMLError as exc:
                code = _err_code(exc)
                if code in (getattr(nv, "NVML_ERROR_NOT_SUPPORTED", 3), getattr(nv, "NVML_ERROR_INVALID_ARGUMENT", 2)):
                    break  # past the last link (or no NVLink at all)
                self.record("nvlink", "nvmlDeviceGetNvLinkState", exc)
                return None
            total += 1
            if state:
                active += 1
                try:
                    if nv.nvmlDeviceGetNvLinkRemoteDeviceType(h, link) == LINK_TYPE_SWITCH:
                        to_switch = True
                except nv.NVMLError:
                    pass  # older drivers lack the call; links still count
        return {"total": total, "active": active, "to_switch": to_switch}

    def _remap(self, h: Any) -> dict[str, Any] | None:
        rows = self.q("remapped_rows", "nvmlDeviceGetRemappedRows", lambda: self.nv.nvmlDeviceGetRemappedRows(h))
        if rows is None:
            return None
        _corr, _unc, pending, failure = rows
        return {"pending": bool(pending), "failure": bool(failure)}


def _legacy_fabric(nv: Any, h: Any) -> Any:
    info = nv.c_nvmlGpuFabricInfo_t()
    nv.nvmlDeviceGetGpuFabricInfo(h, info)
    return info


def _bits(mask: int, shift: int, width: int) -> int:
    return (mask >> shift) & width


def _flag(mask: int, shift: int) -> bool | None:
    value = _bits(mask, shift, 0x3)
    return {1: True, 2: False}.get(value)  # 0 = not supported


def _decode_fabric(info: Any, how: str) -> dict[str, Any]:
    """The facts ``fabric`` block from an NVML fabric-info struct (v1 legacy or v2)."""
    # pynvml declares state as c_uint where nvml.h has unsigned char: keep the low byte
    state = int(info.state) & 0xFF
    status_code = int(info.status)
    raw = bytes(bytearray(int(b) & 0xFF for b in info.clusterUuid))
    hexs = raw.hex()
    fabric: dict[str, Any] = {
        "state": FABRIC_STATES.get(state, f"state-{state}"),
        "status": STATUS_TEXT.get(status_code, f"nvml error {status_code}") if state == 3 else None,
        "clique_id": int(info.cliqueId),
        "cluster_uuid": f"{hexs[:8]}-{hexs[8:12]}-{hexs[12:16]}-{hexs[16:20]}-{hexs[20:]}",
        "health": None,
    }
    mask = getattr(info, "healthMask", None)
    if mask is not None and how.endswith("V"):
        mask = int(mask)
        cfg = _bits(mask, 8, 0xF)
        fabric["health_mask"] = mask
        fabric["health"] = {
            "degraded_bandwidth": _flag(mask, 0),
            "route_recovery": _flag(mask, 2),
            "route_unhealthy": _flag(mask, 4),
            "access_timeout_recovery": _flag(mask, 6),
            "incorrect_configuration": None if cfg == 0 else cfg != 1,
            "configuration": CONFIG_KINDS.get(cfg) if cfg > 1 else None,
        }
    return fabric


def main() -> int:
    """Initialise NVML, stream the driver and each GPU, always shut NVML down."""
    try:
        import pynvml as nv
    except ImportError as exc:
        emit({"event": "driver", "loaded": None, "error": f"nvidia-ml-py is not importable: {exc}"})
        return 0
    try:
        nv.nvmlInit()
    except nv.NVMLError as exc:
        emit({"event": "driver", "loaded": False, "error": str(exc), "code": _err_code(exc)})
        return 0
    try:
        driver: dict[str, Any] = {"event": "driver", "loaded": True, "error": None, "unavailable": {}}
        try:
            driver["version"] = _text(nv.nvmlSystemGetDriverVersion())
        except nv.NVMLError as exc:
            driver["version"] = None
            driver["unavailable"]["driver.version"] = _why(nv, exc, "nvmlSystemGetDriverVersion")
        try:
            cv = int(nv.nvmlSystemGetCudaDriverVersion())
            driver["cuda_version"] = f"{cv // 1000}.{(cv % 1000) // 10}"
        except nv.NVMLError as exc:
            driver["cuda_version"] = None
            driver["unavailable"]["driver.cuda_version"] = _why(nv, exc, "nvmlSystemGetCudaDriverVersion")
        try:
            driver["count"] = int(nv.nvmlDeviceGetCount())
        except nv.NVMLError as exc:
            driver["count"] = None
            driver["unavailable"]["gpus"] = _why(nv, exc, "nvmlDeviceGetCount")
        emit(driver)
        for i in range(driver["count"] or 0):
            emit({"event": "gpu_start", "index": i})
            gpu = Gpu(nv, i)
            try:
                gpu.collect()
            except Exception as exc:  # noqa: BLE001 - one GPU's surprise must not cost the others
                gpu.out["error"] = f"NVML collection failed: {type(exc).__name__}: {exc}"
                gpu.unavailable[f"gpus[{i}]"] = gpu.out["error"]
            emit({"event": "gpu", "gpu": gpu.out, "unavailable": gpu.unavailable})
        emit({"event": "done"})
    finally:
        try:
            nv.nvmlShutdown()
        except Exception:  # noqa: BLE001, S110 - best effort on the way out: a failing shutdown changes nothing
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
