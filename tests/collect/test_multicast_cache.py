"""This boot's multicast verdict: the key, what is stored, what is reused, and the cache rules.

The probe child runs for real against the fake libcuda (tests/fakes/fake_libcuda.c); the
boot id and the fabric manager's start are what this host says unless a test changes them
(``boot_id`` patched, a fake ``systemctl`` on PATH).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from flightcheck._collect import host, multicast
from flightcheck._collect import multicast_cache as mc
from flightcheck._vocabulary.facts import from_dict
from support import FAKES
from support.cli import cli
from support.evaluation import host_doc

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler to build the fake libcuda")


@pytest.fixture(scope="session")
def libcuda(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("libcuda-cache")
    subprocess.run(
        ["cc", "-shared", "-fPIC", "-O1", "-o", str(out / "libcuda.so.1"), str(FAKES / "fake_libcuda.c")], check=True
    )
    return out


@pytest.fixture
def env(tmp_path, libcuda, monkeypatch) -> dict[str, str]:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    systemctl(bindir, "5000000")
    monkeypatch.setenv("PATH", os.pathsep.join([str(bindir), os.environ.get("PATH", "")]))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    e = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_CUDA")}
    e.update(LD_LIBRARY_PATH=str(libcuda), FAKE_CUDA_LOG=str(tmp_path / "calls.log"))
    return e


def systemctl(bindir: Path, us: str) -> None:
    p = bindir / "systemctl"
    p.write_text(
        f"#!/bin/sh\necho LoadState=loaded\necho ActiveState=active\necho ActiveEnterTimestampMonotonic={us}\n"
    )
    p.chmod(p.stat().st_mode | stat.S_IEXEC)


FACTS = from_dict(host_doc("b300"))
DEVICES = list(range(8))


def probed(tmp_path: Path) -> bool:
    log = tmp_path / "calls.log"
    hit = log.exists() and "cuInit" in log.read_text()
    log.unlink(missing_ok=True)
    return hit


def test_second_call_is_served_from_the_cache_and_says_so(env, tmp_path):
    first, _ = multicast.probe_cached(FACTS, DEVICES, env)
    assert first is not None and first["ok"] is True and first["cached"] is False and first["probed_at"]
    assert probed(tmp_path)
    second, _ = multicast.probe_cached(FACTS, DEVICES, env)
    assert second is not None and second["cached"] is True and second["probed_at"] == first["probed_at"]
    assert not probed(tmp_path)
    fresh, _ = multicast.probe_cached(FACTS, DEVICES, env, fresh=True)
    assert fresh is not None and fresh["cached"] is False and probed(tmp_path)


def test_every_key_part_invalidates(env, tmp_path, monkeypatch):
    multicast.probe_cached(FACTS, DEVICES, env)
    assert probed(tmp_path)
    multicast.probe_cached(FACTS, DEVICES[:4], env)  # another GPU set
    assert probed(tmp_path)
    systemctl(tmp_path / "bin", "6000000")  # the fabric manager restarted
    multicast.probe_cached(FACTS, DEVICES, env)
    assert probed(tmp_path)
    monkeypatch.setattr(host, "boot_id", lambda path=host.BOOT_ID: "0e0e0e0e-1111-2222-3333-444444444444")  # a reboot
    multicast.probe_cached(FACTS, DEVICES, env)
    assert probed(tmp_path)
    multicast.probe_cached(FACTS, DEVICES, env, handle_type="fabric")
    assert probed(tmp_path)
    multicast.probe_cached(FACTS, DEVICES, env)  # nothing changed since the reboot's probe
    assert not probed(tmp_path)
    doc = json.loads((tmp_path / "cache" / "flightcheck" / mc.FILE).read_text())
    assert {e["key"]["boot_id"] for e in doc["entries"]} == {"0e0e0e0e-1111-2222-3333-444444444444"}  # old boot dropped


def test_a_failure_is_reused_only_while_the_fabric_manager_start_is_known(env, tmp_path):
    bad = {**env, "FAKE_CUDA_FAIL": "cuMulticastBindMem:401"}
    r, _ = multicast.probe_cached(FACTS, DEVICES, bad)
    assert r is not None and r["stage"] == "bind" and probed(tmp_path)
    r, _ = multicast.probe_cached(FACTS, DEVICES, env)  # the node is fine now, but nothing changed: cached
    assert r is not None and r["cached"] and r["cuda_error"] == 401 and not probed(tmp_path)
    # a container that sees neither the host's systemd nor its processes
    (tmp_path / "bin" / "systemctl").write_text("#!/bin/sh\nexit 1\n")
    in_pod = {**env, "KUBERNETES_SERVICE_HOST": "10.0.0.1"}
    key, _ = mc.make_key(FACTS, in_pod, DEVICES, None, root=tmp_path, boot=host.boot_id())
    assert key is not None and key["fabric_manager"] is None
    mc.store(tmp_path / "cache" / "flightcheck" / mc.FILE, key, dict(r, cached=False))
    hit, why = mc.lookup(tmp_path / "cache" / "flightcheck" / mc.FILE, key)
    assert hit is None and "not reused" in (why or "")


@pytest.mark.parametrize(
    "fake,stored",
    [
        ({}, True),
        ({"FAKE_CUDA_FAIL": "cuMulticastBindMem:401"}, True),
        ({"FAKE_CUDA_NO_MC": "3"}, True),  # unsupported lasts as long as the driver
        ({"FAKE_CUDA_FAIL": "cuInit:802"}, False),  # the fabric manager may still be starting
        ({"FAKE_CUDA_FAIL": "cuMemCreate:2"}, False),  # full GPUs: FC206's, not the fabric's
    ],
)
def test_only_durable_verdicts_are_stored(env, tmp_path, fake, stored):
    multicast.probe_cached(FACTS, DEVICES, {**env, **fake})
    assert probed(tmp_path)
    multicast.probe_cached(FACTS, DEVICES, {**env, **fake})
    assert probed(tmp_path) is not stored


def test_a_timeout_is_never_stored(env, tmp_path):
    r, _ = multicast.probe_cached(FACTS, DEVICES, {**env, "FAKE_CUDA_HANG": "cuMulticastBindMem"}, budget=2)
    assert r is not None and r["stage"] == "timeout" and r["budget_s"] == 2
    assert not (tmp_path / "cache" / "flightcheck" / mc.FILE).exists()


def test_cache_rules_another_users_or_a_planted_file_is_never_trusted(env, tmp_path):
    multicast.probe_cached(FACTS, DEVICES, {**env, "FAKE_CUDA_FAIL": "cuMulticastBindMem:401"})
    path = tmp_path / "cache" / "flightcheck" / mc.FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    real = tmp_path / "elsewhere.json"
    path.rename(real)
    path.symlink_to(real)  # a link planted in its place: never followed
    r, _ = multicast.probe_cached(FACTS, DEVICES, env)
    assert r is not None and r["ok"] is True and r["cached"] is False
    path.unlink()
    path.parent.chmod(0o777)  # a directory others can write: not used at all
    r, _ = multicast.probe_cached(FACTS, DEVICES, env)
    assert r is not None and r["cached"] is False and "writable by group or others" in (r["cache"] or "")
    path.parent.chmod(0o700)


def test_caching_off(env, tmp_path):
    off = {**env, "FLIGHTCHECK_NO_CACHE": "1"}
    multicast.probe_cached(FACTS, DEVICES, off)
    multicast.probe_cached(FACTS, DEVICES, off)
    assert probed(tmp_path)
    assert not (tmp_path / "cache" / "flightcheck" / mc.FILE).exists()


def test_check_deep_and_run_share_the_verdict(env, tmp_path):
    """The registered probe (``run``, ``check --deep``, ``collect --deep``) goes through the
    same cache: a verdict the plugin stored serves it, and the other way round."""
    from flightcheck import Intent
    from flightcheck._collect import CollectContext

    out = multicast.collect_probe(CollectContext(Intent(tensor_parallel_size=8), env, "python"), FACTS)
    assert out["multicast_probe"]["cached"] is False and probed(tmp_path)
    out = multicast.collect_probe(CollectContext(Intent(tensor_parallel_size=8), env, "python"), FACTS)
    assert out["multicast_probe"]["cached"] is True and not probed(tmp_path)
    r, _ = multicast.probe_cached(FACTS, DEVICES, env, budget=20.0)  # as the plugin asks
    assert r is not None and r["cached"] is True


def test_probe_multicast_cli_without_nvml_probes_directly(env, tmp_path):
    """No NVML on this machine: no key, so ``probe multicast`` probes as before."""
    r = cli("probe", "multicast", "--format", "json", env=env)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["ok"] is True and probed(tmp_path)


def _nvml_scenario(tmp_path: Path, n: int = 4) -> dict[str, str]:
    """A fake pynvml (tests/fakes/nvml) of an n-GPU B300 node, for the NVML child."""
    healthy = 2 | 2 << 2 | 2 << 4 | 2 << 6 | 1 << 8
    gpus = [
        {
            "name": "NVIDIA B300 SXM6 AC",
            "uuid": f"GPU-00000000-0000-0000-0000-00000000000{i}",
            "bus": f"00000000:{0x17 + 16 * i:02X}:00.0",
            "cc": [10, 3],
            "mem": [288 << 30, 1 << 29],
            "mig": 0,
            "persistence": 1,
            "virt": 0,
            "fabric": {"state": 3, "status": 0, "clique": 32766, "uuid": "9e" * 16, "mask": healthy},
            "links": {"count": 18, "active": 18, "remote": 2},
            "remap": [0, 0, 0, 0],
        }
        for i in range(n)
    ]
    path = tmp_path / "nvml.json"
    path.write_text(json.dumps({"driver": "590.44.01", "cuda": 13010, "gpus": gpus}))
    return {"FAKE_NVML": str(path), "FAKE_CUDA_DEVICES": str(n)}


def test_probe_multicast_cli_reads_and_fills_this_boots_cache(env, tmp_path):
    """With NVML (the fake pynvml) the key is known: the second ``probe multicast`` is this
    boot's verdict, ``--fresh`` probes again, and a verdict it stored serves the launch."""
    src = os.environ.get("PYTHONPATH", "")
    nvml = {**env, **_nvml_scenario(tmp_path), "PYTHONPATH": os.pathsep.join([str(FAKES / "nvml"), src])}
    bad = {**nvml, "FAKE_CUDA_FAIL": "cuMulticastBindMem:401"}
    r = cli("probe", "multicast", "--format", "json", env=bad)
    assert r.returncode == 1, r.stderr
    first = json.loads(r.stdout)
    assert first["cached"] is False and first["cuda_error"] == 401 and first["devices"] == 4 and probed(tmp_path)
    r = cli("probe", "multicast", env=nvml)  # nothing changed on this node: the boot's verdict
    assert r.returncode == 1 and "this boot's verdict" in r.stdout and not probed(tmp_path)
    r = cli("probe", "multicast", "--fresh", env=nvml)  # repaired without a visible restart
    assert r.returncode == 0 and "multicast probe: ok" in r.stdout and probed(tmp_path)
    from flightcheck._collect.fabric import imex_channels

    doc = host_doc("b300")
    doc["gpus"] = [{**g, "uuid": f"GPU-00000000-0000-0000-0000-00000000000{i}"} for i, g in enumerate(doc["gpus"][:4])]
    doc["driver"] = {"loaded": True, "version": "590.44.01"}
    doc["imex"] = {"channels": imex_channels(Path("/")), "service": None}  # as this host's NVML collector saw it
    facts = from_dict(doc)
    hit, _ = multicast.probe_cached(facts, [0, 1, 2, 3], env)  # the plugin asking for the same GPUs
    assert hit is not None and hit["cached"] is True and hit["ok"] is True
