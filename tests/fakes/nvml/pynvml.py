"""A fake ``pynvml`` (nvidia-ml-py) that behaves like a given driver and set of GPUs.

Put this directory first on PYTHONPATH and point FAKE_NVML at a JSON scenario; the real
NVML child (flightcheck/_collect/_nvml_child.py) then imports this module instead of the
real one. Only the calls the collector makes exist, with the real signatures, return
shapes and error classes (``NVMLError`` with ``.value``, one subclass per code).

Scenario keys: ``init_error`` (an NVML error code from nvmlInit), ``driver``, ``cuda``
(e.g. 13010), ``missing`` (functions the driver lacks -> FunctionNotFound), ``hang``
({"call": name, "index": i}: that call never returns), ``no_v2_struct`` (an old
nvidia-ml-py without c_nvmlGpuFabricInfo_v2_t) and ``gpus``: a list of
{name, uuid, bus, cc, mem, mig, persistence, virt, fabric, links, remap, lost, errors}.
"""

from __future__ import annotations

import json
import os
import time
from types import SimpleNamespace
from typing import Any, ClassVar

NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_RESET_REQUIRED = 16
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18
NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25
NVML_ERROR_UNKNOWN = 999
NVML_NVLINK_MAX_LINKS = 36
NVML_NVLINK_DEVICE_TYPE_GPU = 0
NVML_NVLINK_DEVICE_TYPE_SWITCH = 2

_TEXT = {
    2: "Invalid Argument",
    3: "Not Supported",
    4: "Insufficient Permissions",
    9: "Driver Not Loaded",
    12: "NVML Shared Library Not Found",
    13: "Function Not Found",
    15: "GPU is lost",
    16: "GPU requires restart",
    18: "RM has detected an NVML/RM version mismatch.",
    999: "Unknown Error",
}


class NVMLError(Exception):
    """Like pynvml's: ``NVMLError(code)`` builds the subclass for that code."""

    _classes: ClassVar[dict[int, type]] = {}

    def __new__(cls, value: int):
        klass = NVMLError._classes.get(value, cls) if cls is NVMLError else cls
        obj = Exception.__new__(klass)
        obj.value = value
        return obj

    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return _TEXT.get(self.value, f"NVML Error with code {self.value}")


for _name, _code in list(globals().items()):
    if _name.startswith("NVML_ERROR_"):
        _cls_name = "NVMLError_" + "".join(p.capitalize() for p in _name[len("NVML_ERROR_") :].split("_"))
        _cls = type(_cls_name, (NVMLError,), {})
        globals()[_cls_name] = _cls
        NVMLError._classes[_code] = _cls


def _scenario() -> dict[str, Any]:
    path = os.environ.get("FAKE_NVML")
    if not path:
        return {"init_error": NVML_ERROR_LIBRARY_NOT_FOUND}
    with open(path) as fh:
        return json.load(fh)


S = _scenario()


def _enter(call: str, index: int | None = None) -> None:
    hang = S.get("hang") or {}
    if hang.get("call") == call and hang.get("index") in (None, index):
        if os.environ.get("FAKE_NVML_PIDFILE"):
            with open(os.environ["FAKE_NVML_PIDFILE"], "w") as fh:
                fh.write(str(os.getpid()))
        time.sleep(3600)
    if call in S.get("missing", []):
        raise NVMLError(NVML_ERROR_FUNCTION_NOT_FOUND)


def _gpu(handle: Any, call: str) -> dict[str, Any]:
    _enter(call, handle)
    g = S["gpus"][handle]
    if g.get("crash") == call:
        raise RuntimeError("something no NVML binding should do")
    code = (g.get("errors") or {}).get(call)
    if code:
        raise NVMLError(code)
    return g


if not S.get("no_v2_struct"):

    class c_nvmlGpuFabricInfo_v2_t:
        def __init__(self) -> None:
            self.version, self.clusterUuid, self.status, self.cliqueId, self.state, self.healthMask = (
                0x02000024,
                [0] * 16,
                0,
                0,
                0,
                0,
            )


class c_nvmlGpuFabricInfo_t:
    def __init__(self) -> None:
        self.clusterUuid, self.status, self.cliqueId, self.state = [0] * 16, 0, 0, 0


def nvmlInit() -> None:
    _enter("nvmlInit")
    if S.get("init_error"):
        raise NVMLError(S["init_error"])


def nvmlShutdown() -> None:
    pass


def nvmlSystemGetDriverVersion() -> str:
    _enter("nvmlSystemGetDriverVersion")
    return S["driver"]


def nvmlSystemGetCudaDriverVersion() -> int:
    _enter("nvmlSystemGetCudaDriverVersion")
    return S["cuda"]


def nvmlDeviceGetCount() -> int:
    _enter("nvmlDeviceGetCount")
    return len(S["gpus"])


def nvmlDeviceGetHandleByIndex(index: int) -> int:
    _enter("nvmlDeviceGetHandleByIndex", index)
    if S["gpus"][index].get("lost"):
        raise NVMLError(NVML_ERROR_GPU_IS_LOST)
    return index


def nvmlDeviceGetName(h: int) -> str:
    return _gpu(h, "nvmlDeviceGetName")["name"]


def nvmlDeviceGetUUID(h: int) -> str:
    return _gpu(h, "nvmlDeviceGetUUID")["uuid"]


def nvmlDeviceGetPciInfo(h: int) -> Any:
    return SimpleNamespace(busId=_gpu(h, "nvmlDeviceGetPciInfo")["bus"])


def nvmlDeviceGetCudaComputeCapability(h: int) -> tuple[int, int]:
    return tuple(_gpu(h, "nvmlDeviceGetCudaComputeCapability")["cc"])


def nvmlDeviceGetMemoryInfo(h: int, version: Any = None) -> Any:
    total, used = _gpu(h, "nvmlDeviceGetMemoryInfo")["mem"]
    return SimpleNamespace(total=total, used=used, free=total - used)


def nvmlDeviceGetMigMode(h: int) -> list[int]:
    mig = _gpu(h, "nvmlDeviceGetMigMode").get("mig", 0)
    if mig == "unsupported":
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    return [mig, mig]


def nvmlDeviceGetPersistenceMode(h: int) -> int:
    return _gpu(h, "nvmlDeviceGetPersistenceMode").get("persistence", 1)


def nvmlDeviceGetVirtualizationMode(h: int) -> int:
    return _gpu(h, "nvmlDeviceGetVirtualizationMode").get("virt", 0)


def _fill_fabric(h: int, call: str, info: Any) -> None:
    f = _gpu(h, call).get("fabric", "unsupported")
    if f == "unsupported":
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    info.clusterUuid = list(bytes.fromhex(f.get("uuid", "00" * 16)))
    info.status, info.cliqueId = f.get("status", 0), f.get("clique", 0)
    # the real struct declares state as c_uint: simulate junk above the low byte
    info.state = f["state"] | f.get("state_junk", 0)
    if hasattr(info, "healthMask"):
        info.healthMask = f.get("mask", 0)


def nvmlDeviceGetGpuFabricInfoV(h: int, info: Any) -> int:
    _fill_fabric(h, "nvmlDeviceGetGpuFabricInfoV", info)
    return NVML_SUCCESS


def nvmlDeviceGetGpuFabricInfo(h: int, info: Any) -> int:
    _fill_fabric(h, "nvmlDeviceGetGpuFabricInfo", info)
    return NVML_SUCCESS


def nvmlDeviceGetNvLinkState(h: int, link: int) -> int:
    links = _gpu(h, "nvmlDeviceGetNvLinkState").get("links", "unsupported")
    if links == "unsupported":
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    if link >= links["count"]:
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    return 1 if link < links["active"] else 0


def nvmlDeviceGetNvLinkRemoteDeviceType(h: int, link: int) -> int:
    return _gpu(h, "nvmlDeviceGetNvLinkRemoteDeviceType")["links"].get("remote", NVML_NVLINK_DEVICE_TYPE_GPU)


def nvmlDeviceGetRemappedRows(h: int) -> tuple[int, int, int, int]:
    remap = _gpu(h, "nvmlDeviceGetRemappedRows").get("remap", [0, 0, 0, 0])
    if remap == "unsupported":
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    return tuple(remap)
