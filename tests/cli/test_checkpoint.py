"""End to end through the CLI: every broken checkpoint of the contract exits 1 naming its
code, with no traceback; healthy ones pass FC5xx; the JSON memory block and the collect
section have their documented shape."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from support import EXAMPLES
from support.checkpoints import COMMIT, break_checkpoint
from support.ckptgen import load_config, shard_name, write_checkpoint, write_hf_cache
from support.cli import cli

TINY = load_config("tiny-llama")


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {
        "XDG_CACHE_HOME": str(tmp_path / "xdg"),
        "HF_HUB_CACHE": str(tmp_path / "hub"),
        "HOME": str(tmp_path / "home"),
    }


def check_json(model: str, env: dict[str, str], *extra: str) -> tuple[int, dict, str]:
    proc = cli("check", "--example", "b300", "--model", model, "-tp", "1", "--format", "json", *extra, env=env)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, json.loads(proc.stdout), proc.stderr


def failing(doc: dict) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for c in doc["checks"]:
        if c["status"] == "fail":
            out.setdefault(c["code"], []).append(c)
    return out


@pytest.mark.parametrize(
    "breakage, code",
    [
        ("truncate", "FC503"),
        ("pad", "FC503"),
        ("delete", "FC502"),
        ("header-1tb", "FC504"),
        ("overlap", "FC504"),
        ("not-json", "FC504"),
        ("escape", "FC509"),
        ("index-not-json", "FC506"),
        ("no-config", "FC507"),
        ("config-truncated", "FC507"),
    ],
)
def test_broken_directory_exits_1_naming_the_code(
    tmp_path: Path, env: dict[str, str], breakage: str, code: str
) -> None:
    root = write_checkpoint(tmp_path / "m", TINY, shards=3, dense=True)
    break_checkpoint(root, breakage)
    rc, doc, _ = check_json(str(root), env)
    assert rc == 1 and doc["verdict"] == "not-ready"
    bad = failing(doc)
    assert code in bad and all(c["severity"] == "error" and c["fix"] for c in bad[code]), bad
    if code not in ("FC507", "FC506"):  # (an unreadable index is the file, not a shard)
        assert any(c["subject"].startswith("shard:") for c in bad[code])


def test_repo_not_in_cache_and_interrupted_download(tmp_path: Path, env: dict[str, str]) -> None:
    rc, doc, _ = check_json("acme/absent", env)
    assert rc == 1 and failing(doc)["FC501"][0]["subject"] == "model:acme/absent"
    assert doc["memory"]["error"] and doc["memory"]["per_rank"]["weights_bytes"] is None
    write_hf_cache(tmp_path / "hub", "acme/tiny", TINY, shards=2, commit=COMMIT)
    blobs = tmp_path / "hub" / "models--acme--tiny" / "blobs"
    (blobs / ("f" * 64 + ".incomplete")).write_bytes(b"\0" * 10)
    rc, doc, _ = check_json("acme/tiny", env)
    # a blob of no file the engine loads (README, original/*.pth): a warning, not a stop
    assert rc == 0 and failing(doc)["FC505"][0]["severity"] == "warning"
    # the interrupted blob of a shard: the launch would fail
    snap = tmp_path / "hub" / "models--acme--tiny" / "snapshots" / COMMIT
    shard = max(snap.glob("model-*.safetensors"))
    blob = shard.resolve()
    os.replace(blob, blob.with_name(blob.name + ".incomplete"))
    shard.unlink()
    rc, doc, _ = check_json("acme/tiny", env)
    assert rc == 1 and "FC505" in failing(doc) and "FC502" in failing(doc)


def test_healthy_dir_and_cached_repo_pass_fc5xx(tmp_path: Path, env: dict[str, str]) -> None:
    root = write_checkpoint(tmp_path / "m", TINY, shards=3, dense=True)
    write_hf_cache(tmp_path / "hub", "acme/tiny", TINY, shards=2, commit=COMMIT)
    for model in (str(root), "acme/tiny"):
        rc, doc, _ = check_json(model, env)
        fc5 = {c["code"]: c["status"] for c in doc["checks"] if c["code"].startswith("FC5")}
        assert (
            fc5["FC501"] == "pass" and fc5["FC504"] == "pass" and fc5["FC510"] == "fail"
        )  # FC510 is info: always says
        assert not [
            c
            for c in doc["checks"]
            if c["code"].startswith(("FC4", "FC5")) and c["status"] == "fail" and c["severity"] != "info"
        ]
        assert rc == 0, failing(doc)


def test_memory_block_has_the_spec_shape(tmp_path: Path, env: dict[str, str]) -> None:
    root = write_checkpoint(tmp_path / "llama", load_config("llama-3-8b"), shards=4)
    _rc, doc, _ = check_json(str(root), env, "--max-model-len", "8k")
    mem = doc["memory"]
    assert set(mem["per_rank"]) >= {
        "weights_bytes",
        "kv_bytes_per_token",
        "kv_budget_bytes",
        "usable_bytes",
        "reserve_bytes",
    }
    assert {"max_model_len", "max_model_len_fit", "load_bytes", "load_seconds_estimate"} <= set(mem)
    assert mem["per_rank"]["kv_bytes_per_token"] == 131072 and mem["max_model_len"] == 8000
    assert abs(mem["per_rank"]["weights_bytes"] / (1 << 30) - 14.96) < 0.01
    assert mem["max_model_len_fit"] % 16 == 0 and mem["max_model_len_fit"] > 8000
    assert mem["load_bytes"] == 16060522496 and mem["load_seconds_estimate"] is None


def test_text_report_draws_the_bar(tmp_path: Path, env: dict[str, str]) -> None:
    root = write_checkpoint(tmp_path / "llama", load_config("llama-3-8b"), shards=4)
    proc = cli("check", "--example", "b300", "--model", str(root), "-tp", "1", env={**env, "NO_COLOR": "1"})
    assert "Memory per GPU (B300 SXM6 AC, 268.6 GiB x 0.92 = 247.1 GiB usable, TP 1)" in proc.stdout
    assert "█" in proc.stdout and "weights 15.0 GiB" in proc.stdout and "131,072 B/token" in proc.stdout


def test_collect_writes_the_checkpoint_section(tmp_path: Path, env: dict[str, str]) -> None:
    root = write_checkpoint(tmp_path / "m", TINY, shards=3, dense=True)
    proc = cli(
        "collect",
        "--model",
        str(root),
        "--facts",
        str(EXAMPLES / "b300.json"),
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    section = json.loads(proc.stdout)["checkpoint"]
    assert section["model"] == str(root) and section["path"] == str(root)
    name = shard_name(1, 3)
    data = (root / name).read_bytes()
    n = int.from_bytes(data[:8], "little")
    assert section["files"][name] == len(data) and "config.json" in section["files"]
    assert section["header_sha256"][name] == hashlib.sha256(data[: 8 + n]).hexdigest()
    assert section["config_sha256"] == hashlib.sha256((root / "config.json").read_bytes()).hexdigest()


def _record(tmp_path: Path, env: dict[str, str], root: Path) -> Path:
    """``collect --model root`` on the recorded b300 node, written to a facts file."""
    out = tmp_path / "node.json"
    proc = cli("collect", "--model", str(root), "--facts", str(EXAMPLES / "b300.json"), "-o", str(out), env=env)
    assert proc.returncode == 0, proc.stderr
    return out


def check_facts(facts: Path, env: dict[str, str], *extra: str) -> tuple[int, dict]:
    proc = cli("check", "--facts", str(facts), "-tp", "1", "--format", "json", *extra, env=env)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def fc5(doc: dict) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for c in doc["checks"]:
        if c["code"].startswith("FC5"):
            out.setdefault(c["code"], []).append(c)
    return out


def test_check_facts_judges_the_recorded_checkpoint_when_the_model_is_not_here(
    tmp_path: Path, env: dict[str, str]
) -> None:
    import shutil

    root = write_checkpoint(tmp_path / "m", TINY, shards=3, dense=True)
    break_checkpoint(root, "truncate")
    facts = _record(tmp_path, env, root)
    section = json.loads(facts.read_text())["checkpoint"]
    assert [f["kind"] for f in section["findings"]] == ["truncated"] and section["tensors"] > 0
    shutil.rmtree(root)  # judged elsewhere: the model is not on this machine
    for extra in ((), ("--model", str(root))):  # no --model, or the recorded one, absent here
        rc, doc = check_facts(facts, env, *extra)
        got = fc5(doc)
        assert rc == 1, got
        [bad] = [c for c in got["FC503"] if c["status"] == "fail"]
        assert bad["subject"] == f"shard:{shard_name(1, 3)}" and bad["severity"] == "error"
        assert "not read here" in bad["evidence"]["source"]
        assert {c["status"] for c in got["FC501"]} == {"pass"} and "recorded by" in got["FC501"][0]["message"]
        assert {c["status"] for c in got["FC504"]} == {"pass"} and {c["status"] for c in got["FC507"]} == {"pass"}
    # another model named, absent here: that model is judged (not found), not the record
    rc, doc = check_facts(facts, env, "--model", str(tmp_path / "other"))
    assert (
        rc == 1
        and [c["status"] for c in fc5(doc)["FC501"]] == ["fail"]
        and "FC503" not in {c["code"] for c in doc["checks"] if c["status"] == "fail"}
    )


def test_check_facts_reads_a_model_that_is_here_over_the_record(tmp_path: Path, env: dict[str, str]) -> None:
    root = write_checkpoint(tmp_path / "m", TINY, shards=3, dense=True)
    break_checkpoint(root, "truncate")
    facts = _record(tmp_path, env, root)
    import shutil

    shutil.rmtree(root)
    write_checkpoint(root, TINY, shards=3, dense=True)  # repaired since: the live scan wins
    rc, doc = check_facts(facts, env, "--model", str(root))
    got = fc5(doc)
    assert rc == 0 and {c["status"] for c in got["FC503"]} == {"pass"}, got
    assert "recorded" not in got["FC503"][0]["message"]
    text = cli("check", "--facts", str(facts), "-tp", "1", "--model", str(root), env={**env, "NO_COLOR": "1"}).stdout
    assert "(read here; the facts file's recorded checkpoint section is not used)" in text, text
    # a snapshot from before findings were recorded cannot be judged: as before, no --model
    old = json.loads(facts.read_text())
    for key in ("findings", "tensors", "weight_bytes", "config"):
        old["checkpoint"].pop(key)
    facts.write_text(json.dumps(old))
    shutil.rmtree(root)
    rc, doc = check_facts(facts, env)
    assert {c["status"] for c in fc5(doc)["FC503"]} == {"skip"} and fc5(doc)["FC503"][0][
        "message"
    ] == "no --model given"
