"""The few CUDA driver API calls the multicast probe makes, bound with ctypes to libcuda.so.1.

Why ctypes and not ``cuda-bindings``: the probe has to work on every driver from R535 to
current. ``cuda-bindings`` is versioned with the toolkit (a 13.x wheel targets a 13.x
driver; whether it runs on R535/R550/R570 is not promised), it may be absent from the
interpreter that runs flightcheck, and importing it costs hundreds of milliseconds.
``libcuda.so.1`` is the driver itself: its C ABI is stable, every entry point used here is
exported by name since CUDA 12.1 (R530; multicast needs R535+ anyway, as PyTorch checks),
and a missing symbol on an older driver is an exact, reportable answer
("this driver has no cuMulticastCreate") instead of an import error. The library that
answers is the one the engine will get: ``dlopen`` honours the engine's LD_LIBRARY_PATH,
so a cuda-compat (forward compatibility) libcuda is probed when the engine would use it.

Only standard-library imports: this module is loaded by the probe child, never by the
checking process.
"""

from __future__ import annotations

import ctypes as C
import os
from typing import Any

CUresult = C.c_int
CUdevice = C.c_int
CUcontext = C.c_void_p
CUdeviceptr = C.c_ulonglong
Handle = C.c_ulonglong  # CUmemGenericAllocationHandle

ATTR_HANDLE_TYPE_FABRIC_SUPPORTED = 128
ATTR_MULTICAST_SUPPORTED = 132
HANDLE_POSIX_FD, HANDLE_FABRIC = 1, 8
HANDLE_TYPES = {"posix_fd": HANDLE_POSIX_FD, "fabric": HANDLE_FABRIC}
ALLOC_PINNED, LOCATION_DEVICE, ACCESS_READWRITE = 1, 1, 3
GRANULARITY_MINIMUM = 0

#: Fallback names when the driver cannot name a code (an older driver, or a code it predates).
ERROR_NAMES = {
    0: "CUDA_SUCCESS",
    1: "CUDA_ERROR_INVALID_VALUE",
    2: "CUDA_ERROR_OUT_OF_MEMORY",
    3: "CUDA_ERROR_NOT_INITIALIZED",
    34: "CUDA_ERROR_STUB_LIBRARY",
    36: "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER",
    47: "CUDA_ERROR_MULTICAST_RESOURCE_FULL",
    100: "CUDA_ERROR_NO_DEVICE",
    101: "CUDA_ERROR_INVALID_DEVICE",
    201: "CUDA_ERROR_INVALID_CONTEXT",
    304: "CUDA_ERROR_OPERATING_SYSTEM",
    401: "CUDA_ERROR_ILLEGAL_STATE",
    800: "CUDA_ERROR_NOT_PERMITTED",
    801: "CUDA_ERROR_NOT_SUPPORTED",
    802: "CUDA_ERROR_SYSTEM_NOT_READY",
    803: "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
    804: "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
    919: "CUDA_ERROR_FABRIC_NOT_READY",
    999: "CUDA_ERROR_UNKNOWN",
}


class MulticastProp(C.Structure):
    """CUmulticastObjectProp."""

    _fields_ = [
        ("numDevices", C.c_uint),
        ("size", C.c_size_t),
        ("handleTypes", C.c_ulonglong),
        ("flags", C.c_ulonglong),
    ]


class Location(C.Structure):
    """CUmemLocation."""

    _fields_ = [("type", C.c_int), ("id", C.c_int)]


class AllocFlags(C.Structure):
    """CUmemAllocationProp.allocFlags."""

    _fields_ = [
        ("compressionType", C.c_ubyte),
        ("gpuDirectRDMACapable", C.c_ubyte),
        ("usage", C.c_ushort),
        ("reserved", C.c_ubyte * 4),
    ]


class AllocProp(C.Structure):
    """CUmemAllocationProp."""

    _fields_ = [
        ("type", C.c_int),
        ("requestedHandleTypes", C.c_int),
        ("location", Location),
        ("win32HandleMetaData", C.c_void_p),
        ("allocFlags", AllocFlags),
    ]


class AccessDesc(C.Structure):
    """CUmemAccessDesc."""

    _fields_ = [("location", Location), ("flags", C.c_int)]


P = C.POINTER
#: name -> argument types (every call returns CUresult). Names are the exported symbols.
PROTOS: dict[str, list[Any]] = {
    "cuInit": [C.c_uint],
    "cuDriverGetVersion": [P(C.c_int)],
    "cuDeviceGetCount": [P(C.c_int)],
    "cuDeviceGet": [P(CUdevice), C.c_int],
    "cuDeviceGetAttribute": [P(C.c_int), C.c_int, CUdevice],
    "cuDevicePrimaryCtxRetain": [P(CUcontext), CUdevice],
    "cuDevicePrimaryCtxRelease_v2": [CUdevice],
    "cuCtxSetCurrent": [CUcontext],
    "cuGetErrorName": [C.c_int, P(C.c_char_p)],
    "cuMulticastGetGranularity": [P(C.c_size_t), P(MulticastProp), C.c_int],
    "cuMemGetAllocationGranularity": [P(C.c_size_t), P(AllocProp), C.c_int],
    "cuMulticastCreate": [P(Handle), P(MulticastProp)],
    "cuMulticastAddDevice": [Handle, CUdevice],
    "cuMemCreate": [P(Handle), C.c_size_t, P(AllocProp), C.c_ulonglong],
    "cuMulticastBindMem": [Handle, C.c_size_t, Handle, C.c_size_t, C.c_size_t, C.c_ulonglong],
    "cuMulticastUnbind": [Handle, CUdevice, C.c_size_t, C.c_size_t],
    "cuMemAddressReserve": [P(CUdeviceptr), C.c_size_t, C.c_size_t, CUdeviceptr, C.c_ulonglong],
    "cuMemAddressFree": [CUdeviceptr, C.c_size_t],
    "cuMemMap": [CUdeviceptr, C.c_size_t, C.c_size_t, Handle, C.c_ulonglong],
    "cuMemSetAccess": [CUdeviceptr, C.c_size_t, P(AccessDesc), C.c_size_t],
    "cuMemUnmap": [CUdeviceptr, C.c_size_t],
    "cuMemRelease": [Handle],
    "cuMemExportToShareableHandle": [C.c_void_p, Handle, C.c_int, C.c_ulonglong],
    "cuMemImportFromShareableHandle": [P(Handle), C.c_void_p, C.c_int],
}
#: Older exports to try when the versioned symbol is missing.
ALIASES = {"cuDevicePrimaryCtxRelease_v2": "cuDevicePrimaryCtxRelease"}
#: Multicast entry points: missing means the driver predates multicast (< R530).
MULTICAST_SYMBOLS = (
    "cuMulticastCreate",
    "cuMulticastAddDevice",
    "cuMulticastBindMem",
    "cuMulticastUnbind",
    "cuMulticastGetGranularity",
)


class Driver:
    """libcuda.so.1 with typed entry points; ``fn(name)`` is None when the driver lacks it."""

    def __init__(self, lib: C.CDLL) -> None:
        self.lib = lib
        self._fns: dict[str, Any] = {}
        for name, argtypes in PROTOS.items():
            fn = getattr(lib, name, None) or (getattr(lib, ALIASES[name], None) if name in ALIASES else None)
            if fn is not None:
                fn.argtypes, fn.restype = argtypes, CUresult
            self._fns[name] = fn

    def fn(self, name: str) -> Any:
        """The bound entry point, or None when this driver does not export it."""
        return self._fns.get(name)

    def call(self, name: str, *args: Any) -> int:
        """Call an entry point known to exist; the CUresult as an int."""
        return int(self._fns[name](*args))

    def error_name(self, code: int) -> str:
        """The driver's name for a CUresult, else the built-in table's."""
        fn, out = self._fns.get("cuGetErrorName"), C.c_char_p()
        if fn is not None:
            try:
                if fn(code, C.byref(out)) == 0 and out.value:
                    return out.value.decode(errors="replace")
            except Exception:  # noqa: BLE001, S110 - best effort: fall back to the built-in table
                pass
        return ERROR_NAMES.get(code, f"CUDA_ERROR_{code}")


def load() -> tuple[Driver | None, str | None, str | None]:
    """(driver, the file that was loaded, why-not). Linux's libcuda.so.1, then WSL's."""
    errors = []
    for name in ("libcuda.so.1", "/usr/lib/wsl/lib/libcuda.so.1"):
        try:
            lib = C.CDLL(name)
        except OSError as exc:
            errors.append(str(exc))
            continue
        return Driver(lib), loaded_path("libcuda.so") or name, None
    return None, None, "libcuda.so.1 cannot be loaded (no NVIDIA driver here): " + "; ".join(errors[:1])


def loaded_path(fragment: str) -> str | None:
    """The mapped file whose name contains ``fragment`` (which libcuda answered)."""
    try:
        with open(f"/proc/{os.getpid()}/maps", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                path = line.rstrip().split(" ")[-1]
                if fragment in os.path.basename(path):
                    return path
    except OSError:
        pass
    return None
