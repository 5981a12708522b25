"""The multicast probe: the real child (ctypes on libcuda.so.1) against a fake driver.

tests/fakes/fake_libcuda.c is compiled here into a libcuda.so.1 and found through
LD_LIBRARY_PATH, as the real one would be; it fails or hangs at the step the test names
and logs every call, so the sequence and the teardown order are checked too.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from flightcheck import Intent, probe_multicast
from flightcheck._collect import CollectContext, multicast
from flightcheck._vocabulary.facts import from_dict
from support import FAKES
from support.cli import cli

SRC = FAKES / "fake_libcuda.c"
pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler to build the fake libcuda")


def _build(out: Path, *flags: str) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", *flags, "-o", str(out / "libcuda.so.1"), str(SRC)], check=True)
    return out


@pytest.fixture(scope="session")
def fake_driver(tmp_path_factory) -> Path:
    return _build(tmp_path_factory.mktemp("libcuda"))


@pytest.fixture(scope="session")
def old_driver(tmp_path_factory) -> Path:
    return _build(tmp_path_factory.mktemp("libcuda_old"), "-DNO_MULTICAST")


def env_for(libdir: Path, tmp_path: Path, **fake: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_CUDA")}
    env.update(
        LD_LIBRARY_PATH=str(libdir),
        FAKE_CUDA_LOG=str(tmp_path / "calls.log"),
        FAKE_CUDA_PIDFILE=str(tmp_path / "pids"),
        XDG_CACHE_HOME=str(tmp_path / "cache"),  # this test's own multicast verdicts
    )
    env.update({f"FAKE_CUDA_{k.upper()}": v for k, v in fake.items()})
    return env


def calls(tmp_path: Path) -> list[str]:
    return [line.split()[0] + " " + line.split()[1] for line in (tmp_path / "calls.log").read_text().splitlines()]


def test_healthy_driver_binds_all_devices_and_tears_down_in_order(fake_driver, tmp_path):
    r = probe_multicast(timeout=20, env=env_for(fake_driver, tmp_path))
    assert r["ok"] is True and r["stage"] is None and r["devices"] == 8 and r["handle_type"] == "posix_fd"
    assert r["multicast_supported"] == [True] * 8 and r["libcuda"].endswith("libcuda.so.1")
    log = [c.split()[0] for c in calls(tmp_path)]
    # every device joins the team before any memory is bound (a bind blocks until then)
    assert max(i for i, c in enumerate(log) if c == "cuMulticastAddDevice") < log.index("cuMulticastBindMem")
    assert log.count("cuMulticastBindMem") == 8 and log.count("cuMemMap") == 8
    # safe teardown: VAs first, then unbind, then the physical handles, then the multicast handle
    assert log.index("cuMemUnmap") < log.index("cuMulticastUnbind") < log.index("cuMemRelease")
    assert log.count("cuMulticastUnbind") == 8 and log.count("cuMemRelease") == 9 and log.count("cuMemAddressFree") == 8
    assert log[-1] == "cuDevicePrimaryCtxRelease"


def test_401_at_bind_reports_stage_error_and_device(fake_driver, tmp_path):
    r = probe_multicast(
        devices=[0, 1, 2, 3], timeout=20, env=env_for(fake_driver, tmp_path, fail="cuMulticastBindMem:401:#2")
    )
    assert (r["ok"], r["stage"], r["cuda_error"], r["cuda_error_name"]) == (
        False,
        "bind",
        401,
        "CUDA_ERROR_ILLEGAL_STATE",
    )
    assert r["device"] == 1 and r["devices"] == 4
    log = calls(tmp_path)
    assert "cuMulticastUnbind 0" in log and "cuMulticastUnbind 1" not in log  # only what was bound is unbound
    assert sum(c.startswith("cuMemRelease") for c in log) == 5  # 4 physical + the multicast handle


@pytest.mark.parametrize(
    "spec,stage,code,name",
    [
        ("cuInit:802", "attribute", 802, "CUDA_ERROR_SYSTEM_NOT_READY"),
        ("cuMulticastCreate:801", "create", 801, "CUDA_ERROR_NOT_SUPPORTED"),
        ("cuMulticastAddDevice:101:#3", "add_device", 101, "CUDA_ERROR_INVALID_DEVICE"),
        ("cuMemCreate:800", "mem_create", 800, "CUDA_ERROR_NOT_PERMITTED"),
        ("cuMulticastBindMem:802", "bind", 802, "CUDA_ERROR_SYSTEM_NOT_READY"),
        ("cuMemMap:999", "map", 999, "CUDA_ERROR_UNKNOWN"),
    ],
)
def test_each_stage_fails_with_its_error(fake_driver, tmp_path, spec, stage, code, name):
    r = probe_multicast(timeout=20, env=env_for(fake_driver, tmp_path, fail=spec))
    assert (r["ok"], r["stage"], r["cuda_error"], r["cuda_error_name"]) == (False, stage, code, name)
    log = calls(tmp_path)
    # nothing leaks: every retained context is released
    assert sum(c.startswith("cuDevicePrimaryCtxRetain") for c in log) == sum(
        c.startswith("cuDevicePrimaryCtxRelease") for c in log
    )


def test_cuda_that_cannot_initialise_is_marked_init(fake_driver, tmp_path):
    r = probe_multicast(timeout=20, env=env_for(fake_driver, tmp_path, fail="cuInit:802"))
    assert r["stage"] == "attribute" and r["last_stage"] == "init" and r["detail"] == "cuInit failed"
    r = probe_multicast(timeout=20, env=env_for(fake_driver, tmp_path, fail="cuDevicePrimaryCtxRetain:999:#4"))
    assert r["last_stage"] == "init" and r["device"] == 3 and r["cuda_error"] == 999


def test_safe_path_mode_still_finds_the_bindings(fake_driver, tmp_path):
    r = probe_multicast(timeout=20, env={**env_for(fake_driver, tmp_path), "PYTHONSAFEPATH": "1"})
    assert r["ok"] is True


def test_attribute_zero_is_unsupported_not_an_error(fake_driver, tmp_path):
    r = probe_multicast(timeout=20, env=env_for(fake_driver, tmp_path, no_mc="3"))
    assert r["ok"] is False and r["stage"] == "attribute" and r["cuda_error"] is None
    assert r["multicast_supported"] == [True, True, True, False, True, True, True, True]
    assert "device(s) 3" in r["detail"]
    assert not any(c.startswith("cuMulticastCreate") for c in calls(tmp_path))


def test_driver_without_multicast_symbols(old_driver, tmp_path):
    r = probe_multicast(timeout=20, env=env_for(old_driver, tmp_path))
    assert r["ok"] is False and r["stage"] == "attribute" and "R535" in r["detail"]
    assert r["multicast_supported"] == [False] * 8


def test_fabric_handles_when_imex_works_and_fallback_when_not(fake_driver, tmp_path):
    r = probe_multicast(timeout=20, env=env_for(fake_driver, tmp_path, fabric="1"))
    assert r["ok"] is True and r["handle_type"] == "fabric"
    r = probe_multicast(
        timeout=20, env=env_for(fake_driver, tmp_path, fabric="1", fail="cuMemExportToShareableHandle:800")
    )
    assert r["ok"] is True and r["handle_type"] == "posix_fd" and "NOT_PERMITTED" in r["detail"]


def _gone(pid: int, within: float = 5.0) -> bool:
    """Whether ``pid`` is dead (gone, or a zombie: an orphaned grandchild waits for init to reap
    it) within ``within`` seconds. SIGKILL to a process group is delivered asynchronously: on a
    loaded machine a member can still be running for a moment after ``killpg`` returned."""
    deadline = time.monotonic() + within
    while True:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
        except OSError:
            return True
        if state == "Z":
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def test_hang_at_bind_is_killed_with_its_group_and_reported(fake_driver, tmp_path):
    r = probe_multicast(timeout=3, env=env_for(fake_driver, tmp_path, hang="cuMulticastBindMem", hang_fork="1"))
    assert r["ok"] is False and r["stage"] == "timeout" and r["last_stage"] == "bind" and r["device"] == 0
    assert 3 <= r["duration_s"] < 10 and "no answer within 3s" in r["detail"]
    child, grandchild = (int(p) for p in (tmp_path / "pids").read_text().split())
    assert not Path(f"/proc/{child}").exists(), "the probe child must be reaped"
    assert _gone(grandchild), "the child's process group must be killed"


def test_no_driver_on_this_machine_means_did_not_run(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    section, why = multicast.run_probe(timeout=20, env=env)
    if section is not None:
        pytest.skip("this machine has a CUDA driver")
    assert "libcuda.so.1" in why
    assert probe_multicast(env=env)["ok"] is None


def test_cli_probe_json_and_exit_codes(fake_driver, tmp_path):
    r = cli(
        "probe",
        "multicast",
        "--format",
        "json",
        "--devices",
        "0,1",
        env=env_for(fake_driver, tmp_path, fail="cuMulticastBindMem:401"),
    )
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    assert doc["stage"] == "bind" and doc["cuda_error"] == 401 and doc["devices"] == 2
    r = cli("probe", "multicast", env=env_for(fake_driver, tmp_path))
    assert r.returncode == 0 and "multicast probe: ok" in r.stdout
    r = cli("probe", "multicast", env=env_for(fake_driver, tmp_path, fail="cuMulticastBindMem:401"))
    assert r.returncode == 1 and "FAILED at bind" in r.stdout and "nvidia-smi -r" in r.stdout
    r = cli("probe", "multicast", "--devices", "0,x")
    assert r.returncode == 2 and "Traceback" not in r.stderr and "--devices" in r.stderr


def test_registered_probe_uses_the_gpus_of_the_launch(fake_driver, tmp_path):
    from support.evaluation import host_doc

    facts = from_dict(host_doc("b300"))
    cctx = CollectContext(Intent(tensor_parallel_size=4), env_for(fake_driver, tmp_path), "python")
    out = multicast.collect_probe(cctx, facts)
    assert out["multicast_probe"]["ok"] is True and out["multicast_probe"]["devices"] == 4
    skipped = multicast.collect_probe(CollectContext(Intent(), {}, "python"), facts)
    assert skipped["multicast_probe"] is None and "one GPU" in skipped["unavailable"]["multicast_probe"]
    assert multicast._wanted(CollectContext(Intent(deep=True), {}, "python"))
    assert multicast._wanted(CollectContext(Intent(), {}, "python", probes={"multicast"}))
    assert not multicast._wanted(CollectContext(Intent(), {}, "python"))
