"""The facts model: JSON in/out, section merging, and bad input refused in one line."""

from __future__ import annotations

import json

import pytest

from flightcheck import UsageError
from flightcheck._vocabulary.facts import SCHEMA, Facts, from_dict, load_file, loads, merge
from support.cli import cli
from support.evaluation import host_doc


def test_round_trip_of_a_complete_snapshot():
    doc = host_doc("b300")
    f = from_dict(doc)
    assert f.gpus[3].compute_capability == "10.3"
    assert f.toolchain.nvcc.version == "13.1"
    again = loads(f.to_json())
    assert again == f
    assert json.loads(f.to_json())["schema"] == SCHEMA


def test_unknown_keys_are_ignored():
    doc = host_doc("b300")
    doc["host"]["brand_new_field"] = 42
    doc["a_future_section"] = {"x": 1}
    assert from_dict(doc).host.cpu_count == doc["host"]["cpu_count"]


def test_merge_replaces_whole_sections_and_prunes_stale_reasons():
    live = {
        "host": {"hostname": "live", "shm_bytes": None},
        "gpus": [],
        "unavailable": {"host.shm_bytes": "no /dev/shm", "gpus": "no driver"},
    }
    over = {"host": {"hostname": "recorded"}, "multicast_probe": None}
    out = merge(live, over)
    assert out["host"] == {"hostname": "recorded"}
    assert out["multicast_probe"] is None
    assert out["unavailable"] == {"gpus": "no driver"}


def test_memlock_accepts_int_or_unlimited_only():
    doc = host_doc("b300")
    doc["host"]["ulimit_memlock"] = 65536
    assert from_dict(doc).host.ulimit_memlock == 65536
    doc["host"]["ulimit_memlock"] = "lots"
    with pytest.raises(UsageError, match="host.ulimit_memlock"):
        from_dict(doc)


@pytest.mark.parametrize(
    "content, needle",
    [
        ('{"host": {"cpu_count": "many"}}', "key host.cpu_count: expected int"),
        ('{"gpus": [{"index": 0, "fabric": {"state": 3}}]}', "key gpus[0].fabric.state"),
        ('{"host": ', "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('{"schema": "flightcheck.facts/v9"}', "is not 'flightcheck.facts/v1'"),
        ('{"toolchain": {"nvcc": "13.0"}}', "key toolchain.nvcc"),
    ],
)
def test_bad_facts_file_is_one_line_naming_file_and_key(tmp_path, content, needle):
    bad = tmp_path / "node.json"
    bad.write_text(content)
    with pytest.raises(UsageError) as exc:
        load_file(bad)
    assert needle in str(exc.value) and str(bad) in str(exc.value)
    proc = cli("check", "--facts", str(bad))
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert needle in proc.stderr and "node.json" in proc.stderr


def test_unreadable_and_missing_facts_files_exit_2(tmp_path):
    missing = tmp_path / "nope.json"
    proc = cli("check", "--facts", str(missing))
    assert proc.returncode == 2 and "cannot read" in proc.stderr and "Traceback" not in proc.stderr
    unreadable = tmp_path / "dir.json"
    unreadable.mkdir()
    proc = cli("check", "--facts", str(unreadable))
    assert proc.returncode == 2 and "dir.json" in proc.stderr


def test_facts_defaults_are_empty_sections():
    f = Facts()
    assert f.host is None and f.unavailable == {} and f.schema == SCHEMA


def test_collectors_that_crash_or_hang_leave_their_sections_null_with_the_reason():
    import threading
    import time

    from flightcheck._collect import _run_bounded

    gate = threading.Event()
    t0 = time.monotonic()
    doc = _run_bounded(
        [
            ("good", ("host",), 5.0, lambda: {"host": {"os": "x"}, "unavailable": {"host.kernel": "why"}}),
            ("crash", ("env",), 5.0, lambda: {"env": 1 / 0}),
            ("hang", ("gpus", "driver"), 0.3, lambda: {"gpus": gate.wait(10)}),
            ("hang2", ("imex",), 0.3, lambda: {"imex": gate.wait(10)}),
        ]
    )
    took = time.monotonic() - t0
    gate.set()
    assert took < 2.0  # the deadlines run side by side, not one after the other
    assert doc["host"] == {"os": "x"} and doc["unavailable"]["host.kernel"] == "why"
    assert (
        doc["env"] is None
        and doc["unavailable"]["env"] == "collector crash crashed: ZeroDivisionError: division by zero"
    )
    assert doc["gpus"] is None and doc["driver"] is None and doc["imex"] is None
    assert doc["unavailable"]["driver"] == "collector hang timed out after 0.3s"
