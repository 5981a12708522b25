"""FC6xx host checks fire and stay silent on recorded facts."""

from __future__ import annotations

from support.evaluation import assert_fires, assert_silent, facts, host_doc, statuses


def _host(**over):
    h = host_doc("b300")["host"]
    h.update(over)
    return facts(host=h)


def test_fc601_fires_on_docker_default_shm():
    f = _host(shm_bytes=64 << 20, container="docker")
    [r] = assert_fires("FC601", f, tensor_parallel_size=8)
    assert "64 MiB" in r.message and "8 ranks" in r.message
    assert "--shm-size" in r.fix
    [r] = assert_fires("FC601", f, data_parallel_size=2)  # two engines' ranks on one node
    assert "2 ranks" in r.message


def test_fc601_kubernetes_fix_is_an_emptydir():
    [r] = assert_fires("FC601", _host(shm_bytes=64 << 20, container="kubernetes"), tensor_parallel_size=2)
    assert "emptyDir" in r.fix


def test_fc601_silent_on_large_shm_and_skipped_for_one_rank():
    assert_silent("FC601", _host(), tensor_parallel_size=8)
    assert statuses(_host(shm_bytes=64 << 20), "FC601") == {"skip"}


def test_fc601_unknown_when_shm_unreadable():
    f = facts(host={**host_doc()["host"], "shm_bytes": None}, unavailable={"host.shm_bytes": "/dev/shm: No such file"})
    report = statuses(f, "FC601", tensor_parallel_size=8)
    assert report == {"unknown"}


def test_fc602_memlock():
    [r] = assert_fires("FC602", _host(ulimit_memlock=8 << 20))
    assert "8192 KiB" in r.message
    assert_silent("FC602", _host(ulimit_memlock="unlimited"))


def test_fc603_nofile():
    assert_fires("FC603", _host(ulimit_nofile=1024))
    assert_silent("FC603", _host(ulimit_nofile=65536))


def test_fc604_vm():
    [r] = assert_fires("FC604", _host(virtualization="kvm"))
    assert r.severity.value == "info"
    assert_silent("FC604", _host(virtualization="none"))
