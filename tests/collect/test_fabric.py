"""Fabric manager / IMEX / NVSwitch detection from the host side, against a fake root tree
and fake ``systemctl`` / ``nv-fabricmanager`` / ``dpkg-query`` executables on PATH."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from flightcheck._collect import fabric
from flightcheck._collect.nvml import decide_nvswitch


def tool(bindir: Path, name: str, script: str) -> None:
    p = bindir / name
    p.write_text("#!/bin/sh\n" + script + "\n")
    p.chmod(p.stat().st_mode | stat.S_IEXEC)


@pytest.fixture
def bindir(tmp_path, monkeypatch):
    d = tmp_path / "bin"
    d.mkdir()
    monkeypatch.setenv("PATH", str(d))  # only our fakes: no real systemctl, dpkg, rpm
    return d


def test_systemd_active_and_version_from_the_binary(tmp_path, bindir):
    tool(bindir, "systemctl", "echo LoadState=loaded; echo ActiveState=active")
    tool(bindir, "nv-fabricmanager", 'echo "Fabric Manager version is : 590.44.01"')
    out = fabric.collect_host_side(tmp_path, in_container=False)
    assert out["fabric_manager"] == {
        "service": "active",
        "service_how": "systemctl",
        "version": "590.44.01",
        "started_s": None,  # this systemctl printed no ActiveEnterTimestampMonotonic
    }


def test_systemd_unit_not_found_is_not_installed(tmp_path, bindir):
    tool(bindir, "systemctl", "echo LoadState=not-found; echo ActiveState=inactive")
    state, how = fabric.service_state(tmp_path, fabric.FM_UNIT, fabric.FM_BINARY, fabric.FM_PIDFILE, False)
    assert (state, how) == ("not-installed", "systemctl")


def test_failed_unit_and_version_from_dpkg(tmp_path, bindir):
    tool(bindir, "systemctl", "echo LoadState=loaded; echo ActiveState=failed")
    tool(
        bindir,
        "dpkg-query",
        'echo "nvidia-fabricmanager-dev-590 590.44.01-1"; echo "nvidia-fabricmanager-590 590.44.01-1"',
    )
    out = fabric.collect_host_side(tmp_path, in_container=False)
    assert out["fabric_manager"]["service"] == "failed" and out["fabric_manager"]["version"] == "590.44.01"


def test_no_systemd_falls_back_to_process_list_then_pidfile(tmp_path, bindir):
    tool(bindir, "systemctl", 'echo "System has not been booted with systemd" >&2; exit 1')
    (tmp_path / "proc" / "4242").mkdir(parents=True)
    (tmp_path / "proc" / "4242" / "comm").write_text("nv-fabricmanager\n")
    assert fabric.service_state(tmp_path, fabric.FM_UNIT, fabric.FM_BINARY, fabric.FM_PIDFILE, True) == (
        "active",
        "process list",
    )
    (tmp_path / "proc" / "4242" / "comm").write_text("bash\n")
    pidfile = tmp_path / fabric.FM_PIDFILE
    pidfile.parent.mkdir(parents=True)
    pidfile.write_text("4242")
    assert fabric.service_state(tmp_path, fabric.FM_UNIT, fabric.FM_BINARY, fabric.FM_PIDFILE, True)[0] == "active"
    pidfile.write_text("999999")  # stale pid file: installed, not running
    assert fabric.service_state(tmp_path, fabric.FM_UNIT, fabric.FM_BINARY, fabric.FM_PIDFILE, True)[0] == "inactive"


def test_container_without_any_trace_is_unknown_host_is_not_installed(tmp_path, bindir):
    assert fabric.service_state(tmp_path, fabric.FM_UNIT, fabric.FM_BINARY, fabric.FM_PIDFILE, True)[0] == "unknown"
    assert (
        fabric.service_state(tmp_path, fabric.FM_UNIT, fabric.FM_BINARY, fabric.FM_PIDFILE, False)[0] == "not-installed"
    )
    version, why = fabric.fabric_manager_version(tmp_path)
    assert version is None and "no nv-fabricmanager" in why


def test_imex_channels(tmp_path):
    assert fabric.imex_channels(tmp_path) == []
    d = tmp_path / fabric.IMEX_CHANNELS
    d.mkdir(parents=True)
    (d / "channel0").touch()
    (d / "channel1").touch()
    assert fabric.imex_channels(tmp_path) == ["channel0", "channel1"]


def test_host_nvswitch_evidence_proc_devices_and_cx7_bridge(tmp_path):
    assert fabric.host_nvswitch_evidence(tmp_path) == []
    devs = tmp_path / fabric.NVSWITCH_PROC
    devs.mkdir(parents=True)
    for n in range(4):
        (devs / f"0000:0{n}:00.0").mkdir()
    assert "4 NVSwitch device(s)" in fabric.host_nvswitch_evidence(tmp_path)[0]
    # HGX B300: the switches are behind a ConnectX-7 bridge whose VPD says SW_MNG
    root2 = tmp_path / "b300"
    for dev, vpd in (("0000:a1:00.0", b"\x82\x10ConnectX-7 NIC"), ("0000:a2:00.0", b"\x82\x10xx SW_MNG yy")):
        d = root2 / "sys/bus/pci/devices" / dev
        d.mkdir(parents=True)
        (d / "vendor").write_text("0x15b3\n")
        (d / "vpd").write_bytes(vpd)
    ev = fabric.host_nvswitch_evidence(root2)
    assert len(ev) == 1 and "0000:a2:00.0" in ev[0]


def test_decide_nvswitch():
    pcie = [{"index": 0, "nvlink": {"total": 0, "active": 0, "to_switch": False}, "fabric": {"state": "not_supported"}}]
    assert decide_nvswitch(pcie, [])[0] is False
    fm_down = [
        {"index": 0, "nvlink": {"total": 18, "active": 0, "to_switch": False}, "fabric": {"state": "in_progress"}}
    ]
    yes, ev, _ = decide_nvswitch(fm_down, [])
    assert yes is True and "in_progress" in ev[0]
    assert decide_nvswitch([], ["4 NVSwitch device(s)"])[0] is True
    unknown, _, why = decide_nvswitch(None, [])
    assert unknown is None and "NVML" in why
    partial = [{"index": 0, "nvlink": None, "fabric": None}]
    assert decide_nvswitch(partial, [])[0] is None


def test_fake_root_never_touches_the_real_host(tmp_path, bindir):
    out = fabric.collect_host_side(tmp_path, in_container=False)
    assert out["imex"] == {"channels": [], "service": "not-installed"}
    assert out["evidence"] == [] and os.environ["PATH"] == str(bindir)


def test_fabric_manager_start_time_from_systemd(tmp_path, bindir):
    """systemd's ActiveEnterTimestampMonotonic (us after boot) is the restart marker: the
    same call as the state, so the collector asks systemctl once."""
    log = tmp_path / "calls"
    tool(
        bindir,
        "systemctl",
        f'echo "$@" >> {log}; echo LoadState=loaded; echo ActiveState=active; '
        "echo ActiveEnterTimestampMonotonic=81234567",
    )
    assert fabric.fabric_manager_started(tmp_path, False) == ("systemd:81234567", 81.234567)
    out = fabric.collect_host_side(tmp_path, in_container=False)
    assert out["fabric_manager"]["started_s"] == 81.234567
    fm_calls = [c for c in log.read_text().splitlines() if fabric.FM_UNIT in c]
    assert len(fm_calls) == 2  # one above, one for the whole collection (state + start time)


def test_fabric_manager_start_time_from_the_process_without_systemd(tmp_path, bindir):
    tool(bindir, "systemctl", 'echo "System has not been booted with systemd" >&2; exit 1')
    proc = tmp_path / "proc" / "4242"
    proc.mkdir(parents=True)
    (proc / "comm").write_text("nv-fabricmanager\n")
    # a command name with spaces and a parenthesis: fields are counted after the last ")"
    fields = ["S"] + ["0"] * 18 + ["987654"] + ["0"] * 10
    (proc / "stat").write_text("4242 (nv-fab ric) x) " + " ".join(fields) + "\n")
    key, secs = fabric.fabric_manager_started(tmp_path, True)
    assert key == "proc:987654" and secs == pytest.approx(987654 / os.sysconf("SC_CLK_TCK"))


def test_fabric_manager_start_unknown_in_a_container_none_on_a_host_without_one(tmp_path, bindir):
    assert fabric.fabric_manager_started(tmp_path, True) == (None, None)  # the host's is out of sight
    assert fabric.fabric_manager_started(tmp_path, False) == ("none", None)
    tool(bindir, "systemctl", "echo LoadState=not-found; echo ActiveState=inactive")
    assert fabric.fabric_manager_started(tmp_path, True) == ("none", None)
    tool(bindir, "systemctl", "echo LoadState=loaded; echo ActiveState=active")  # no timestamp printed
    assert fabric.fabric_manager_started(tmp_path, False) == (None, None)
