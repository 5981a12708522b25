"""Multicast probe child: the NVLS multicast sequence an engine runs, on real GPUs, once.

Run by :mod:`flightcheck._collect.multicast` as ``python multicast_child.py`` in its own
process group with a hard timeout (a bind can block forever when the NVSwitch multicast
team never forms). The sequence is the one NCCL and PyTorch symmetric memory use:

    cuInit; CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED (132) on every device; granularity;
    cuMulticastCreate; cuMulticastAddDevice for ALL devices; then per device cuMemCreate,
    cuMulticastBindMem; then per device reserve / cuMemMap / cuMemSetAccess of the
    multicast VA. Teardown in the safe order: unmap and free the VAs, unbind every device,
    release the physical handles, release the multicast handle, release the contexts.

Adding every device before any bind matters: the driver blocks a bind until the team is
complete. Output is one JSON line per step (so a timeout still says how far it got) and a
final ``{"event": "result", ...}`` line. Only the standard library and the sibling
:mod:`cuda_ctypes` are imported.
"""

from __future__ import annotations

import ctypes as C
import json
import math
import os
import sys
import time
from typing import TYPE_CHECKING, Any

# the sibling bindings module; explicit because PYTHONSAFEPATH drops the script's directory
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
if TYPE_CHECKING:  # the same file, under the name mypy can find
    from flightcheck._collect import cuda_ctypes as cu
else:
    import cuda_ctypes as cu


def emit(obj: dict[str, Any]) -> None:
    """One protocol line, flushed at once: the parent reads how far a hung child got."""
    sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
    sys.stdout.flush()


class Failed(Exception):
    """A driver call failed: the stage, the call, the device ordinal and the CUresult."""

    def __init__(self, stage: str, call: str, code: int | None, device: int | None = None, detail: str = "") -> None:
        super().__init__(call)
        self.stage, self.call, self.code, self.device, self.detail = stage, call, code, device, detail


class Probe:
    """One run of the sequence; its fields keep what teardown must undo."""

    def __init__(self, drv: cu.Driver, ordinals: list[int], handle_type: str) -> None:
        self.drv, self.ordinals, self.want = drv, ordinals, handle_type
        self.devs: list[int] = []
        self.ctxs: list[C.c_void_p] = []
        self.supported: list[bool | None] = []
        self.mc: C.c_ulonglong | None = None
        self.ucs: list[tuple[int, C.c_ulonglong]] = []
        self.bound: list[int] = []
        self.vas: list[list[int]] = []  # [device index, va, mapped 0/1]
        self.size = self.gran = 0
        self.handle_type = handle_type if handle_type != "auto" else "posix_fd"
        self.notes: list[str] = []

    def call(self, stage: str, name: str, *args: Any, device: int | None = None) -> None:
        if self.drv.fn(name) is None:
            raise Failed(stage, name, None, device, f"this driver has no {name}")
        rc = self.drv.call(name, *args)
        if rc != 0:
            raise Failed(stage, name, rc, device)

    def use(self, i: int, stage: str) -> None:
        self.call(stage, "cuCtxSetCurrent", self.ctxs[i], device=self.ordinals[i])

    def run(self) -> None:
        """cuInit has succeeded; everything after it, stage by stage."""
        missing = [s for s in cu.MULTICAST_SYMBOLS if self.drv.fn(s) is None]
        for ordinal in self.ordinals:
            cdev, val = C.c_int(), C.c_int()
            self.call("attribute", "cuDeviceGet", C.byref(cdev), ordinal, device=ordinal)
            self.call(
                "attribute", "cuDeviceGetAttribute", C.byref(val), cu.ATTR_MULTICAST_SUPPORTED, cdev, device=ordinal
            )
            self.devs.append(cdev.value)
            self.supported.append(bool(val.value) and not missing)
        if missing:
            raise Failed(
                "attribute",
                missing[0],
                None,
                None,
                f"this driver has no {missing[0]}: multicast needs driver R535 or newer",
            )
        off = [o for o, ok in zip(self.ordinals, self.supported, strict=False) if not ok]
        if off:
            raise Failed(
                "attribute",
                "cuDeviceGetAttribute",
                None,
                off[0],
                f"CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED is 0 on device(s) {', '.join(map(str, off))}",
            )
        for ordinal, dev in zip(self.ordinals, self.devs, strict=False):
            ctx = C.c_void_p()
            self.call("attribute", "cuDevicePrimaryCtxRetain", C.byref(ctx), dev, device=ordinal)
            self.ctxs.append(ctx)
        if self.want == "auto":
            self.handle_type = self.pick_handle_type()
        ht = cu.HANDLE_TYPES[self.handle_type]
        emit({"event": "stage", "stage": "create", "handle_type": self.handle_type})
        prop = cu.MulticastProp(numDevices=len(self.devs), size=2 << 20, handleTypes=ht, flags=0)
        g_mc, g_uc = C.c_size_t(), C.c_size_t()
        self.use(0, "create")
        self.call("create", "cuMulticastGetGranularity", C.byref(g_mc), C.byref(prop), cu.GRANULARITY_MINIMUM)
        self.call(
            "create",
            "cuMemGetAllocationGranularity",
            C.byref(g_uc),
            C.byref(self.alloc_prop(self.devs[0], ht)),
            cu.GRANULARITY_MINIMUM,
        )
        self.gran = max(g_mc.value, 1)
        self.size = math.lcm(self.gran, max(g_uc.value, 1))
        prop.size = self.size
        self.mc = C.c_ulonglong()
        self.call("create", "cuMulticastCreate", C.byref(self.mc), C.byref(prop))
        for i, (ordinal, dev) in enumerate(zip(self.ordinals, self.devs, strict=False)):  # ALL before any bind
            emit({"event": "stage", "stage": "add_device", "device": ordinal})
            self.use(i, "add_device")
            self.call("add_device", "cuMulticastAddDevice", self.mc, dev, device=ordinal)
        for i, ordinal in enumerate(self.ordinals):
            emit({"event": "stage", "stage": "mem_create", "device": ordinal})
            self.use(i, "mem_create")
            h = C.c_ulonglong()
            self.call(
                "mem_create",
                "cuMemCreate",
                C.byref(h),
                self.size,
                C.byref(self.alloc_prop(self.devs[i], ht)),
                0,
                device=ordinal,
            )
            self.ucs.append((i, h))
        for i, h in self.ucs:
            emit({"event": "stage", "stage": "bind", "device": self.ordinals[i]})
            self.use(i, "bind")
            self.call("bind", "cuMulticastBindMem", self.mc, 0, h, 0, self.size, 0, device=self.ordinals[i])
            self.bound.append(i)
        for i, dev in enumerate(self.devs):
            ordinal = self.ordinals[i]
            emit({"event": "stage", "stage": "map", "device": ordinal})
            self.use(i, "map")
            va = C.c_ulonglong()
            self.call("map", "cuMemAddressReserve", C.byref(va), self.size, self.gran, 0, 0, device=ordinal)
            entry = [i, va.value, 0]
            self.vas.append(entry)
            self.call("map", "cuMemMap", va, self.size, 0, self.mc, 0, device=ordinal)
            entry[2] = 1
            desc = cu.AccessDesc(location=cu.Location(type=cu.LOCATION_DEVICE, id=dev), flags=cu.ACCESS_READWRITE)
            self.call("map", "cuMemSetAccess", va, self.size, C.byref(desc), 1, device=ordinal)

    def alloc_prop(self, dev: int, ht: int) -> cu.AllocProp:
        return cu.AllocProp(
            type=cu.ALLOC_PINNED, requestedHandleTypes=ht, location=cu.Location(type=cu.LOCATION_DEVICE, id=dev)
        )

    def pick_handle_type(self) -> str:
        """What PyTorch symmetric memory will use: FABRIC when every device supports it and a
        FABRIC allocation survives export and import (an IMEX channel exists), else POSIX fd."""
        d, val = self.drv, C.c_int()
        for dev in self.devs:
            if (
                d.call("cuDeviceGetAttribute", C.byref(val), cu.ATTR_HANDLE_TYPE_FABRIC_SUPPORTED, dev) != 0
                or not val.value
            ):
                return "posix_fd"
        if d.fn("cuMemExportToShareableHandle") is None or d.fn("cuMemImportFromShareableHandle") is None:
            return "posix_fd"
        self.use(0, "attribute")
        prop, g = self.alloc_prop(self.devs[0], cu.HANDLE_FABRIC), C.c_size_t()
        h, h2, buf = C.c_ulonglong(), C.c_ulonglong(), (C.c_ubyte * 64)()
        rc = d.call("cuMemGetAllocationGranularity", C.byref(g), C.byref(prop), cu.GRANULARITY_MINIMUM)
        if rc == 0:
            rc = d.call("cuMemCreate", C.byref(h), g.value, C.byref(prop), 0)
            if rc == 0:
                rc = d.call("cuMemExportToShareableHandle", C.cast(buf, C.c_void_p), h, cu.HANDLE_FABRIC, 0)
                if rc == 0:
                    rc = d.call(
                        "cuMemImportFromShareableHandle", C.byref(h2), C.cast(buf, C.c_void_p), cu.HANDLE_FABRIC
                    )
                    if rc == 0:
                        d.call("cuMemRelease", h2)
                d.call("cuMemRelease", h)
        if rc != 0:
            self.notes.append(
                f"fabric handles unavailable ({d.error_name(rc)}): probed with posix_fd, as PyTorch falls back"
            )
            return "posix_fd"
        return "fabric"

    def teardown(self) -> list[str]:
        """Undo in the safe order (multicast VAs, unbind, physical handles, the multicast
        handle, contexts); return what failed. Never raises."""
        d, problems = self.drv, []

        def do(name: str, *args: Any) -> None:
            if d.fn(name) is None:
                return
            rc = d.call(name, *args)
            if rc != 0:
                problems.append(f"{name}: {d.error_name(rc)} ({rc})")

        for i, va, mapped in reversed(self.vas):
            do("cuCtxSetCurrent", self.ctxs[i])
            if mapped:
                do("cuMemUnmap", C.c_ulonglong(va), self.size)
            do("cuMemAddressFree", C.c_ulonglong(va), self.size)
        for i in reversed(self.bound):
            do("cuCtxSetCurrent", self.ctxs[i])
            do("cuMulticastUnbind", self.mc, self.devs[i], 0, self.size)
        for i, h in reversed(self.ucs):
            do("cuCtxSetCurrent", self.ctxs[i])
            do("cuMemRelease", h)
        if self.mc is not None and self.mc.value:
            do("cuMemRelease", self.mc)
        for dev in self.devs[: len(self.ctxs)]:
            do("cuDevicePrimaryCtxRelease_v2", dev)
        return problems


def parse_devices(text: str) -> list[int] | None:
    """'0,1,2' -> [0, 1, 2]; 'all' -> None (every visible device)."""
    if text in ("", "all"):
        return None
    return [int(t) for t in text.split(",") if t.strip()]


def main(argv: list[str]) -> int:
    """``--devices 0,1|all --handle-type auto|posix_fd|fabric``: run the probe, print the result line."""
    args = dict(zip(argv[::2], argv[1::2], strict=False))
    t0 = time.perf_counter()
    drv, path, why = cu.load()
    if drv is None:
        emit({"event": "unavailable", "reason": why})
        return 0
    emit({"event": "stage", "stage": "attribute", "libcuda": path})
    want = parse_devices(args.get("--devices", "all"))
    if drv.fn("cuInit") is None:
        emit({"event": "unavailable", "reason": f"{path} has no cuInit: not a CUDA driver", "libcuda": path})
        return 0
    rc = drv.call("cuInit", 0)
    count = C.c_int()
    if rc in (34, 100):  # the toolkit's stub library, or no device visible: nothing to probe
        emit({"event": "unavailable", "reason": f"cuInit: {drv.error_name(rc)} ({rc})", "libcuda": path})
        return 0
    if rc == 0 and drv.call("cuDeviceGetCount", C.byref(count)) == 0 and want and max(want) >= count.value:
        emit(
            {"event": "unavailable", "reason": f"device {max(want)} requested, {count.value} visible", "libcuda": path}
        )
        return 0
    probe = Probe(drv, want if want is not None else list(range(count.value)), args.get("--handle-type", "auto"))
    emit({"event": "devices", "count": len(probe.ordinals)})
    result: dict[str, Any] = {"event": "result", "libcuda": path}
    try:
        if rc != 0:  # 802 (fabric manager / NVLSM not running), 999, ...: CUDA itself fails
            raise Failed("attribute", "cuInit", rc, None, "cuInit failed")
        probe.run()
        result.update(ok=True, stage=None, cuda_error=None, cuda_error_name=None, device=None)
    except Failed as f:
        result.update(
            ok=False,
            stage=f.stage,
            cuda_error=f.code,
            device=f.device,
            detail=f.detail or f"{f.call} failed",
            cuda_error_name=drv.error_name(f.code) if f.code is not None else None,
        )
        if f.call in ("cuInit", "cuDevicePrimaryCtxRetain"):
            result["last_stage"] = "init"  # CUDA itself cannot start here, multicast or not
    finally:
        problems = probe.teardown()
    notes = probe.notes + ([f"teardown: {'; '.join(problems)}"] if problems else [])
    if notes:
        result["detail"] = "; ".join(filter(None, [result.get("detail"), *notes]))
    result.update(
        devices=len(probe.ordinals),
        handle_type=probe.handle_type,
        multicast_supported=probe.supported or None,
        duration_s=round(time.perf_counter() - t0, 3),
    )
    emit(result)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
