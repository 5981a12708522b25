"""FC501–FC511 on checkpoints written to disk: each check fails on the breakage it names,
with the file as the subject and the fix to run, and passes on a healthy checkpoint.

The checkpoints are the tiny Llama of ``tests/fixtures/models`` (three dense shards and
an index), broken the way downloads and exporters break them
(``support.checkpoints.break_checkpoint``); repo ids resolve through a Hugging Face cache
written under ``tmp_path`` and named in the engine's environment of the facts. How the
reader finds each problem is tested in ``tests/checkpoint``; here, what the checks say.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from flightcheck import Intent, evaluate
from flightcheck._checks.checkpoint.kinds import CODE_OF, KIND_OF
from support.checkpoints import COMMIT, break_checkpoint
from support.ckptgen import load_config, shard_name, write_checkpoint, write_hf_cache
from support.evaluation import counting_bug, evaluated, facts, host_doc, results, statuses
from support.ggufgen import STRING as GGUF_STRING
from support.ggufgen import flint_model, write_gguf

TINY = load_config("tiny-llama")
FC5 = tuple(f"FC5{n:02d}" for n in range(1, 12))
SHARD2 = f"shard:{shard_name(1, 3)}"


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the caches a test writes are searched: not the user's, not the scan cache of
    another test."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "FLIGHTCHECK_NO_CACHE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def healthy(tmp_path: Path, shards: int = 3) -> Path:
    return write_checkpoint(tmp_path / "m", TINY, shards=shards, dense=True)


def broken(tmp_path: Path, how: str) -> Path:
    root = healthy(tmp_path)
    break_checkpoint(root, how)
    return root


def node(hub: Path | None = None):
    """The bundled B300 node; ``hub`` is the HF_HUB_CACHE of the engine's environment."""
    env = host_doc("b300")["env"]
    if hub is not None:
        env["HF_HUB_CACHE"] = str(hub)
    return facts("b300", env=env)


def outcome(code: str, model: Path | str, hub: Path | None = None, **intent: Any) -> list:
    """The results of ``code`` for a launch of ``model``."""
    got = results(node(hub), model=str(model), **intent).get(code, [])
    assert got, f"{code} was not evaluated"
    return got


def failing(code: str, model: Path | str, hub: Path | None = None, **intent: Any) -> list:
    got = outcome(code, model, hub, **intent)
    bad = [r for r in got if r.status.value == "fail"]
    assert bad, f"{code} should fail; got {[(r.status.value, r.message) for r in got]}"
    return bad


def passing(code: str, model: Path | str, hub: Path | None = None, **intent: Any):
    (r,) = outcome(code, model, hub, **intent)
    assert r.status.value == "pass", (r.status.value, r.message)
    return r


def test_healthy_checkpoint_passes_every_fc5_check_but_the_load_estimate(tmp_path: Path) -> None:
    res = results(node(), model=str(healthy(tmp_path)))
    assert {c: {r.status.value for r in res[c]} for c in FC5} == {
        **{c: {"pass"} for c in FC5},
        "FC510": {"fail"},  # info: always says how much is read
    }


def test_no_model_skips_the_family() -> None:
    res = results(node())
    for code in FC5:
        (r,) = res[code]
        assert r.status.value == "skip" and r.message == "no --model given", code


def test_fc501_model_not_found(tmp_path: Path) -> None:
    hub = tmp_path / "hub"
    hub.mkdir()
    (r,) = failing("FC501", "acme/absent", hub)
    assert r.severity.value == "error" and r.subject == "model:acme/absent"
    assert "is not in the local Hugging Face cache" in r.message and str(hub) in r.message
    assert "flightcheck never downloads" in r.message and "hf download acme/absent" in r.fix
    gone = tmp_path / "no" / "such" / "dir"
    (r,) = failing("FC501", gone)
    assert r.message == f"no such directory: {gone}" and r.subject == f"model:{gone}"
    # the rest of the family has nothing to read and says why
    res = results(node(), model=str(gone))
    for code in FC5[1:]:
        assert [(r.status.value, r.message) for r in res[code]] == [("skip", "the model was not found (FC501)")]
    root = healthy(tmp_path)
    assert passing("FC501", root).message == f"{root} -> {root}"


def test_fc501_repo_id_found_through_the_engines_hf_cache(tmp_path: Path) -> None:
    hub = tmp_path / "hub"
    snap = write_hf_cache(hub, "acme/tiny", TINY, shards=2, commit=COMMIT)
    assert passing("FC501", "acme/tiny", hub).message == f"acme/tiny -> {snap}"
    (r,) = failing("FC501", "acme/tiny", tmp_path / "another-hub")  # the engine looks elsewhere
    assert r.subject == "model:acme/tiny" and str(tmp_path / "another-hub") in r.message


def test_fc501_a_bug_while_reading_is_unknown_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An exception inside the reader makes FC4xx/FC5xx 'unknown' (exit 3), read once, no traceback."""
    import importlib

    load_mod = importlib.import_module("flightcheck._checkpoint.reader")
    calls: list = []
    monkeypatch.setattr(load_mod, "resolve", counting_bug(calls))
    res = results(facts("b300"), model=str(tmp_path))
    assert len(calls) == 1
    assert {r.status.value for r in res["FC501"]} == {"unknown"} and "synthetic" in res["FC501"][0].message
    assert {r.status.value for r in res["FC401"]} == {"skip"}


def test_fc502_shard_missing(tmp_path: Path) -> None:
    root = broken(tmp_path, "delete")
    (r,) = failing("FC502", root)
    assert r.severity.value == "error" and r.subject == SHARD2
    assert r.message == f"the index names {shard_name(1, 3)} but it is not there"
    assert r.fix.startswith(f"re-copy {shard_name(1, 3)} from the source into {root}")
    assert passing("FC502", healthy(tmp_path / "ok")).message == "all 3 weight files are present"


def test_fc502_many_missing_shards_are_folded_into_one_line(tmp_path: Path) -> None:
    """Five findings one by one, then one line for the rest (a 96-shard download cut short
    would otherwise print 96)."""
    root = write_checkpoint(tmp_path / "m", TINY, shards=8, dense=True)
    for i in range(1, 8):
        (root / shard_name(i, 8)).unlink()
    got = failing("FC502", root)
    assert [r.subject for r in got[:5]] == [f"shard:{shard_name(i, 8)}" for i in range(1, 6)]
    rest = got[5]
    assert len(got) == 6 and rest.subject == f"model:{root}" and rest.severity.value == "error"
    assert rest.message.startswith(f"... and 2 more like these ({shard_name(6, 8)}, {shard_name(7, 8)}")
    assert rest.evidence["more"] == 2


@pytest.mark.parametrize("how, words", [("truncate", "100 bytes missing"), ("pad", "4,096 extra bytes")])
def test_fc503_shard_size_mismatch(tmp_path: Path, how: str, words: str) -> None:
    root = broken(tmp_path, how)
    (r,) = failing("FC503", root)
    assert r.severity.value == "error" and r.subject == SHARD2 and words in r.message
    assert r.fix.startswith(f"re-copy {shard_name(1, 3)}")
    ok = passing("FC503", healthy(tmp_path / "ok"))
    assert ok.message == "every shard's size matches its header (3 shards)"


@pytest.mark.parametrize(
    "how, words",
    [
        ("header-1tb", "over safetensors' 100,000,000-byte limit"),
        ("overlap", "overlap"),
        ("not-json", "the header is not valid JSON"),
    ],
)
def test_fc504_shard_header_invalid(tmp_path: Path, how: str, words: str) -> None:
    (r,) = failing("FC504", broken(tmp_path, how))
    assert r.severity.value == "error" and r.subject == SHARD2 and words in r.message and r.fix
    assert passing("FC504", healthy(tmp_path / "ok")).message == "3 headers valid, 39 tensors"


def test_fc505_download_incomplete(tmp_path: Path) -> None:
    hub = tmp_path / "hub"
    write_hf_cache(hub, "acme/tiny", TINY, shards=2, commit=COMMIT)
    ok = passing("FC505", "acme/tiny", hub)
    assert ok.message == "no interrupted download, sizes match the cache's records"
    repo = hub / "models--acme--tiny"
    name = shard_name(1, 2)
    etag = json.loads((repo / "trees" / f"{COMMIT}.json").read_text())["files"][name]["lfs_sha256"]
    partial = repo / "blobs" / f"{etag}.1a2b3c4d.incomplete"
    partial.write_bytes(b"\0" * 1000)  # a second download, cut short
    (r,) = failing("FC505", "acme/tiny", hub)
    assert r.severity.value == "error" and r.subject == f"shard:{name}"
    assert r.message.startswith(f"an interrupted download: {partial} ({name}, 1,000 of ")
    assert r.fix == f"rm -f {partial}; hf download acme/tiny {name} --revision {COMMIT}"


def test_fc506_index_inconsistent(tmp_path: Path) -> None:
    # an entry no shard holds: vLLM loads the files whole, so only a warning
    (r,) = failing("FC506", broken(tmp_path / "lies", "index-lies"))
    assert r.severity.value == "warning" and r.subject == SHARD2
    assert "that no shard holds: model.layers.9.ghost.weight" in r.message
    (r,) = failing("FC506", broken(tmp_path / "not-json", "index-not-json"))
    assert r.subject == "file:model.safetensors.index.json" and "is not valid JSON" in r.message
    # a total_size that disagrees with the headers is harmless alone: a warning
    root = healthy(tmp_path / "total")
    index = root / "model.safetensors.index.json"
    doc = json.loads(index.read_text())
    doc["metadata"]["total_size"] += 2
    index.write_text(json.dumps(doc))
    (r,) = failing("FC506", root)
    assert r.severity.value == "warning" and "metadata.total_size" in r.message
    assert passing("FC506", healthy(tmp_path / "ok")).message == "the index matches the 3 headers"
    one = write_checkpoint(tmp_path / "one", TINY, shards=1, dense=True)
    (r,) = outcome("FC506", one)
    assert r.status.value == "skip" and r.message == "single-file checkpoint: no index to cross-check"


def test_fc506_a_tensor_in_two_shards(tmp_path: Path) -> None:
    got = failing("FC506", broken(tmp_path, "duplicate"))
    (dup,) = [r for r in got if "are also in another shard" in r.message]
    # vLLM loads both files whole (the one read last wins): a warning, not a stop
    assert dup.subject == f"shard:{shard_name(2, 3)}" and dup.severity.value == "warning"


def test_fc507_config_invalid(tmp_path: Path) -> None:
    root = broken(tmp_path / "gone", "no-config")
    (r,) = failing("FC507", root)
    assert r.severity.value == "error" and r.subject == "file:config.json"
    assert r.message == "config.json is missing: the engine cannot tell the architecture"
    assert r.fix == f"restore {root}/config.json from the model's source"
    (r,) = failing("FC507", broken(tmp_path / "cut", "config-truncated"))
    assert r.message.startswith("config.json is not valid JSON")
    root = healthy(tmp_path / "fieldless")
    config = json.loads((root / "config.json").read_text())
    del config["num_hidden_layers"]
    (root / "config.json").write_text(json.dumps(config))
    (r,) = failing("FC507", root)
    assert r.message.startswith("config.json has no num_hidden_layers: flightcheck cannot size the model")
    assert r.severity.value == "warning"  # LlamaConfig defaults it: the engine builds the model
    ok = passing("FC507", healthy(tmp_path / "ok"))
    assert ok.message == "LlamaForCausalLM, 4 layers, hidden 64" and ok.subject == "file:config.json"


def test_fc507_fix_of_a_repo_id_downloads_the_config(tmp_path: Path) -> None:
    hub = tmp_path / "hub"
    snap = write_hf_cache(hub, "acme/tiny", TINY, shards=2, commit=COMMIT)
    config = snap / "config.json"
    target = Path(os.path.realpath(config))
    config.unlink()
    config.write_text(target.read_text()[:40])  # the snapshot's copy, truncated
    (r,) = failing("FC507", "acme/tiny", hub)
    assert r.fix == "hf download acme/tiny config.json"


def test_fc508_shard_unreadable(tmp_path: Path) -> None:
    root = broken(tmp_path, "loop")
    (r,) = failing("FC508", root)
    assert r.severity.value == "error" and r.subject == SHARD2
    assert r.message == f"{shard_name(1, 3)} is a symlink loop" and r.fix.startswith(f"re-copy {shard_name(1, 3)}")
    assert passing("FC508", healthy(tmp_path / "ok")).message == "every shard is readable"


def test_fc509_index_path_escape(tmp_path: Path) -> None:
    root = broken(tmp_path / "escape", "escape")
    (r,) = failing("FC509", root)
    assert r.severity.value == "error" and r.subject == "shard:../../../../etc/passwd"
    assert "a path outside the model directory: refused, never opened" in r.message
    assert "do not run this checkpoint" in r.fix
    ok = passing("FC509", healthy(tmp_path / "ok"))
    assert ok.message == "every file the index names is inside the model directory"


def test_fc510_load_time_estimate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Info: always one line, never a blocker; --deep adds the measured speed and the time."""
    from flightcheck._collect import throughput

    root = healthy(tmp_path)
    (r,) = failing("FC510", root)
    load_bytes = r.evidence["load_bytes"]
    assert r.severity.value == "info" and r.subject == f"model:{root}" and load_bytes > 0
    assert r.message == f"reads {load_bytes:,} bytes per node (--deep measures the read speed and the load time)"
    report = evaluate(node(), Intent(model=str(root)))
    assert report.verdict == "ready" and report.exit_code == 0
    monkeypatch.setattr(
        throughput, "measure", lambda paths, **kw: {"bytes": 1 << 20, "bytes_per_s": 1000.0, "method": "O_DIRECT"}
    )
    (r,) = failing("FC510", root, deep=True)
    assert r.message.startswith(f"reads {load_bytes:,} bytes per node; measured 0.00 GB/s (O_DIRECT, ")
    assert r.message.endswith(f"-> about {load_bytes / 1000 / 60:.0f} min to load")
    assert r.evidence == {
        "load_bytes": load_bytes,
        "read_bytes_per_s": 1000,
        "load_seconds_estimate": round(load_bytes / 1000, 1),
    }
    monkeypatch.setattr(throughput, "measure", lambda paths, **kw: {"error": "the read took over 30 s"})
    (r,) = failing("FC510", root, deep=True)
    assert r.message.endswith("; read speed not measured: the read took over 30 s")
    assert statuses(node(), "FC510") == {"skip"}


def test_fc510_a_node_reads_what_one_replica_holds_on_it(tmp_path: Path) -> None:
    """Each rank reads the tensors it holds: with data parallel across 2 nodes (a replica of
    TP 8 on each) every node reads the whole model; with TP 8 x PP 2 across 2 nodes of 8 each
    reads half."""
    root = healthy(tmp_path)
    (one,) = failing("FC510", root, tensor_parallel_size=8)
    whole = one.evidence["load_bytes"]
    (dp,) = failing("FC510", root, tensor_parallel_size=8, data_parallel_size=2, nnodes=2)
    assert dp.evidence["load_bytes"] == whole
    (pp,) = failing("FC510", root, tensor_parallel_size=8, pipeline_parallel_size=2, nnodes=2)
    assert pp.evidence["load_bytes"] == -(-whole // 2)


def test_fc511_shard_sparse(tmp_path: Path) -> None:
    root = broken(tmp_path, "sparse")
    (r,) = failing("FC511", root)
    assert r.severity.value == "warning" and r.subject == SHARD2
    assert "sparse or preallocated, its data may never have been written" in r.message
    assert r.fix.startswith(f"re-copy {shard_name(1, 3)}")
    report = evaluate(node(), Intent(model=str(root)))
    assert report.exit_code == 0  # a warning: not blocking unless --strict
    assert passing("FC511", healthy(tmp_path / "ok")).message == "every shard is fully allocated on disk"


def test_family_headline(tmp_path: Path) -> None:
    report = evaluate(node(), Intent(model=str(healthy(tmp_path))))
    assert report.summaries["FC5"].startswith("3 shards, ") and "39 tensors (headers read in" in report.summaries["FC5"]
    assert evaluate(node(), Intent()).summaries["FC5"] == "no --model given"


def test_fc501_lists_whole_snapshot_ids_that_revision_accepts(tmp_path: Path) -> None:
    """The ids were cut to 12 characters, which --revision then rejected."""
    hub = tmp_path / "hub"
    for commit in ("1" * 40, "2" * 40):
        write_hf_cache(hub, "acme/two", TINY, shards=2, commit=commit, branch=f"b{commit[0]}")
    (r,) = failing("FC501", "acme/two", hub)
    listed = r.message.split("(snapshots: ", 1)[1].split(")", 1)[0].split(", ")
    assert listed == ["1" * 40, "2" * 40]
    assert passing("FC501", "acme/two", hub, revision=listed[1]).message.endswith(listed[1])


@pytest.fixture
def public(tmp_path: Path):
    """A directory every user can traverse (pytest's base directory is root's, mode 0700):
    where another user's model directory and shared storage can live."""
    import shutil
    import tempfile

    d = Path(tempfile.mkdtemp(prefix="fc-public-"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


# ------------------------------------------------------------------ launches that must not stop
# (docs/what-stops-a-launch.md): each error check of the family, on a checkpoint the engine
# loads and serves; what flightcheck cannot read it skips or warns about, never stops.


def stops(code: str, model: Path | str, hub: Path | None = None, env: dict | None = None, **intent: Any) -> list:
    """The error-severity failures ``code`` gives for a launch of ``model``."""
    f = node(hub) if env is None else facts("b300", env=env)
    got = evaluated(code, results(f, model=str(model), **intent).get(code, []))
    return [(r.status.value, r.message) for r in got if r.status.value == "fail" and r.severity.value == "error"]


def online_env(hub: Path) -> dict:
    """The B300 engine environment without HF_HUB_OFFLINE: the engine downloads what is missing."""
    env = host_doc("b300")["env"]
    env["HF_HUB_CACHE"] = str(hub)
    env.pop("HF_HUB_OFFLINE", None)
    env.pop("TRANSFORMERS_OFFLINE", None)
    return env


def bin_checkpoint(tmp_path: Path) -> Path:
    """A model directory with config.json and pytorch_model.bin only (vLLM's default loader
    globs *.safetensors, then *.bin: default_loader.py _prepare_weights)."""
    root = tmp_path / "bin"
    root.mkdir()
    (root / "config.json").write_text(json.dumps(TINY))
    (root / "pytorch_model.bin").write_bytes(b"PK\x03\x04" + b"\0" * 4096)
    (root / "training_args.bin").write_bytes(b"\0" * 16)  # dropped by the loader
    return root


def test_fc501_does_not_stop_an_uncached_repo_id_the_engine_downloads(tmp_path: Path) -> None:
    """vLLM's quick start (`vllm serve Qwen/Qwen3-0.6B`): without HF_HUB_OFFLINE the engine
    downloads the repo, so FC501 warns; offline it fails at once, so FC501 stops it."""
    hub = tmp_path / "hub"
    hub.mkdir()
    assert stops("FC501", "Qwen/Qwen3-0.6B", env=online_env(hub)) == []
    res = results(facts("b300", env=online_env(hub)), model="Qwen/Qwen3-0.6B")
    (r,) = res["FC501"]
    assert r.severity.value == "warning" and "the engine downloads it at launch" in r.message
    (m,) = res["FC401"]
    assert m.status.value == "skip" and "not downloaded yet" in m.message
    # TRANSFORMERS_OFFLINE counts as HF_HUB_OFFLINE (huggingface_hub/constants.py)
    env = online_env(hub) | {"TRANSFORMERS_OFFLINE": "1"}
    assert stops("FC501", "Qwen/Qwen3-0.6B", env=env)
    assert stops("FC501", "Qwen/Qwen3-0.6B", hub)  # the B300 example runs with HF_HUB_OFFLINE=1


def test_fc501_does_not_stop_a_gguf_file(tmp_path: Path) -> None:
    gguf = tmp_path / "qwen3-0.6b-q8_0.gguf"
    gguf.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\0" * 64)
    assert stops("FC501", gguf) == []
    res = results(node(), model=str(gguf))
    (r,) = res["FC501"]
    assert r.severity.value == "warning" and "GGUF" in r.message and "0 tensors" in r.message
    for code in FC5[1:]:
        assert {x.status.value for x in res[code]} == {"skip"}, code
    # a file that is no model at all still stops
    cfg = tmp_path / "config.json"
    cfg.write_text("{}")
    assert stops("FC501", cfg)


def test_fc502_does_not_stop_a_pytorch_bin_checkpoint(tmp_path: Path) -> None:
    root = bin_checkpoint(tmp_path)
    res = results(node(), model=str(root))
    for code in FC5:
        assert [r for r in res[code] if r.status.value == "fail" and r.severity.value == "error"] == [], code
    (r,) = res["FC502"]
    assert r.status.value == "skip" and "1 *.bin file" in r.message and "presence and sizes" in r.message
    assert {x.status.value for x in res["FC501"]} == {"pass"}  # found, only not read
    (r,) = res["FC510"]
    assert r.evidence["load_bytes"] == 4100  # what can still be told: the files and their sizes
    (r,) = res["FC401"]
    assert r.status.value == "skip" and "weights not counted" in r.message
    # --load-format safetensors on the same directory fails in vLLM ("Cannot find any model
    # weights"): that still stops
    assert stops("FC502", root, load_format="safetensors")


def test_fc502_does_not_stop_pt_weights_or_another_load_format(tmp_path: Path) -> None:
    root = tmp_path / "pt"
    root.mkdir()
    (root / "config.json").write_text(json.dumps(TINY))
    (root / "model.pt").write_bytes(b"\0" * 100)
    assert stops("FC502", root) == []  # auto falls back to *.pt
    assert stops("FC502", root, load_format="pt") == []
    for fmt in ("sharded_state", "tensorizer", "runai_streamer"):
        (r,) = results(node(), model=str(root), load_format=fmt)["FC502"]
        assert r.status.value == "skip" and fmt in r.message and "not checked" in r.message


def test_fc502_does_not_stop_load_format_dummy(tmp_path: Path) -> None:
    """--load-format dummy needs config.json and no weight file at all."""
    root = tmp_path / "dummy"
    root.mkdir()
    (root / "config.json").write_text(json.dumps(TINY))
    res = results(node(), model=str(root), load_format="dummy")
    for code in FC5:
        assert [r for r in res[code] if r.status.value == "fail" and r.severity.value == "error"] == [], code
    (r,) = res["FC502"]
    assert r.status.value == "skip" and "dummy" in r.message and "reads no weight file" in r.message
    assert {r.status.value for r in res["FC507"]} == {"pass"}  # the config is still read
    # the same directory without --load-format dummy has no weights: vLLM fails, so it stops
    assert stops("FC502", root)


def test_fc502_does_not_stop_gguf_weights_in_a_model_directory(tmp_path: Path) -> None:
    root = tmp_path / "flint"
    root.mkdir()
    (root / "config.json").write_text(json.dumps(TINY))
    (root / "model-nvfp4.gguf").write_bytes(b"GGUF" + b"\0" * 60)
    (r,) = results(node(), model=str(root))["FC502"]
    assert r.status.value == "skip" and "GGUF" in r.message


def stray_file_stops(tmp_path: Path, code: str, how: str) -> list:
    """vLLM loads only the files the index names (filter_duplicate_safetensors_files): a
    stray *.safetensors next to them (a leftover single-file export), broken or not, is
    never opened. (Not consolidated*.safetensors: with those, "auto" loads the Mistral
    format, default_loader.py.)"""
    root = healthy(tmp_path)
    stray = root / "model.safetensors"
    if how == "truncate":
        stray.write_bytes((root / shard_name(0, 3)).read_bytes()[:-10])
    elif how == "not-json":
        stray.write_bytes(b"\x10\0\0\0\0\0\0\0not json at all!")
    else:
        stray.write_bytes(b"\0" * 64)
        stray.chmod(0)
    return stops(code, root)


def test_fc503_does_not_stop_a_truncated_stray_file_the_index_does_not_name(tmp_path: Path) -> None:
    assert stray_file_stops(tmp_path, "FC503", "truncate") == []


def test_fc504_does_not_stop_a_stray_file_that_is_no_safetensors(tmp_path: Path) -> None:
    assert stray_file_stops(tmp_path, "FC504", "not-json") == []


def test_fc508_does_not_stop_an_unreadable_stray_file_the_index_does_not_name(tmp_path: Path) -> None:
    assert stray_file_stops(tmp_path, "FC508", "unreadable") == []


def test_fc505_does_not_stop_an_interrupted_download_of_a_file_the_engine_does_not_load(tmp_path: Path) -> None:
    hub = tmp_path / "hub"
    snap = write_hf_cache(hub, "acme/tiny", TINY, shards=2)
    blobs = snap.parents[1] / "blobs"
    (blobs / ("f" * 64 + ".incomplete")).write_bytes(b"\0" * 10)  # original/consolidated.pth, say
    assert stops("FC505", "acme/tiny", hub) == []
    (r,) = results(node(hub), model="acme/tiny")["FC505"]
    assert r.severity.value == "warning" and "which file is unknown" in r.message


def test_fc506_does_not_stop_an_index_whose_total_size_is_off(tmp_path: Path) -> None:
    """vLLM never reads metadata.total_size: a wrong one (a hand-edited index) is a warning."""
    root = healthy(tmp_path)
    index = root / "model.safetensors.index.json"
    doc = json.loads(index.read_text())
    doc["metadata"]["total_size"] += 4096
    index.write_text(json.dumps(doc))
    assert stops("FC506", root) == []
    (r,) = results(node(), model=str(root))["FC506"]
    assert r.severity.value == "warning"


def test_fc507_does_not_stop_a_config_with_other_field_names(tmp_path: Path) -> None:
    """GPT-2 spells the layer count n_layer (transformers' attribute_map): vLLM builds it,
    flightcheck cannot size it, so FC507 warns."""
    root = healthy(tmp_path)
    config = json.loads((root / "config.json").read_text())
    config["n_layer"] = config.pop("num_hidden_layers")
    (root / "config.json").write_text(json.dumps(config))
    assert stops("FC507", root) == []


def test_fc508_does_not_stop_a_symlink_farm_of_another_user(public: Path) -> None:
    """Root checking a directory that another user prepared, whose shards link to files on
    shared storage that user can read: read as the OS reads them, no finding."""
    root = healthy(public)
    shared = public / "shared"
    shared.mkdir()
    for i in range(3):
        s = root / shard_name(i, 3)
        os.replace(s, shared / s.name)
        s.symlink_to(shared / s.name)
    if os.geteuid() == 0:
        os.chown(root, 65534, 65534)
    for code in ("FC508", "FC509"):
        assert stops(code, root) == []
    assert {r.status.value for r in results(node(), model=str(root))["FC504"]} == {"pass"}


def test_fc509_does_not_stop_shards_linked_onto_shared_storage(tmp_path: Path) -> None:
    root = healthy(tmp_path)
    shared = tmp_path / "nfs" / "weights"
    shared.mkdir(parents=True)
    for i in range(3):
        s = root / shard_name(i, 3)
        os.replace(s, shared / s.name)
        s.symlink_to(shared / s.name)
    assert stops("FC509", root) == []
    assert passing("FC509", root).message == "every file the index names is inside the model directory"


# ------------------------------------------------------------------ bad input


def test_fc508_an_unreadable_model_directory_is_one_line(tmp_path: Path) -> None:
    """A directory the user cannot list: one FC508 line, the rest of the family skips (not
    eleven "check crashed" lines and exit 3)."""
    from flightcheck._checkpoint import load

    root = healthy(tmp_path)
    real_scandir = os.scandir

    def denied(path: Any = ".") -> Any:
        if os.fspath(path) == str(root):
            raise PermissionError(13, "Permission denied")
        return real_scandir(path)

    mp = pytest.MonkeyPatch()
    mp.setattr(os, "scandir", denied)
    try:
        ck = load(str(root))
        res = results(node(), model=str(root))
    finally:
        mp.undo()
    assert ck.blocked and "Permission denied" in ck.blocked
    (r,) = res["FC508"]
    assert r.status.value == "fail" and r.severity.value == "error" and "cannot be read" in r.message
    for code in FC5:
        if code != "FC508":
            assert all(x.status.value in ("skip", "pass") for x in res[code]), (code, res[code])
    assert "crashed" not in json.dumps([x.message for v in res.values() for x in v])


def test_a_non_utf8_file_name_is_escaped_not_a_crash(tmp_path: Path) -> None:
    from flightcheck._checkpoint import load

    root = healthy(tmp_path)
    (root / "model.safetensors.index.json").rename(root / "index.bak")  # no index: every file loads
    bad = os.fsencode(root) + b"/stray\xff.safetensors"
    with open(bad, "wb") as fh:
        fh.write(b"\x10\0\0\0")
    ck = load(str(root))
    (f,) = ck.of(KIND_OF["FC503"]) or ck.of(KIND_OF["FC504"])
    assert "stray\\xff.safetensors" in f.subject
    json.dumps([(x.subject, x.message, x.fix) for x in ck.findings], ensure_ascii=False).encode("utf-8")
    res = results(node(), model=str(root))
    assert not any("crashed" in x.message for v in res.values() for x in v)
    # with the index, the stray file is not loaded and changes nothing
    (root / "index.bak").rename(root / "model.safetensors.index.json")
    assert load(str(root)).findings == []


# ------------------------------------------------------------------ reading as root for another user


def test_fc508_root_does_not_read_for_a_directory_owner_what_they_cannot(public: Path) -> None:
    """A hostile directory (made by uid 65534) whose shard links to a root-only file: root
    reports it unreadable for that owner, with neither its bytes nor its size."""
    import shutil
    import subprocess

    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv")
    from flightcheck._checkpoint import load

    secret = public / "secret"
    secret.write_bytes(b"\x41\x42\x43\x44\x45\x46\x47\x48" + b"s3cr3t" * 1000)
    secret.chmod(0o600)
    hostile = public / "hostile"
    hostile.mkdir()
    os.chown(hostile, 65534, 65534)
    subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c",
         f"cd {hostile} && ln -s {secret} model.safetensors && echo '{json.dumps(TINY)}' > config.json"],
        check=True,
    )  # fmt: skip
    ck = load(str(hostile))
    (f,) = ck.findings
    assert CODE_OF[f.kind] == "FC508" and "cannot read" in f.message and "uid 65534" in f.message
    text = json.dumps([(x.subject, x.message, x.fix, x.evidence) for x in ck.findings])
    for leak in (str(0x4847464544434241), f"{secret.stat().st_size:,}", str(secret.stat().st_size)):
        assert leak not in text
    assert ck.total_bytes == 0
    res = results(node(), model=str(hostile))
    assert not [r for r in evaluated("FC504", res["FC504"]) if r.status.value == "fail"]
    assert str(secret.stat().st_size) not in json.dumps([r.message for r in res["FC510"]])
    # the owner may read it: followed as the OS follows it
    secret.chmod(0o644)
    assert not load(str(hostile)).of(KIND_OF["FC508"])


def test_a_partial_checkpoints_memory_fit_counts_the_index_total_size(tmp_path: Path) -> None:
    """Two of three shards present: FC502 stops the launch, and the memory fit counts the
    index's total_size (and says so) rather than the shards present."""
    root = healthy(tmp_path)
    full = results(node(), model=str(root))["FC401"][0].evidence["weights_bytes"]
    (root / shard_name(2, 3)).unlink()
    res = results(node(), model=str(root))
    assert {r.status.value for r in res["FC502"]} == {"fail"}
    (r,) = res["FC401"]
    assert "the index's total_size" in r.message
    assert abs(r.evidence["weights_bytes"] - full) <= full * 0.01


def test_fc502_does_not_stop_a_mistral_download_of_the_consolidated_files_only(tmp_path: Path) -> None:
    """`hf download mistralai/... --include "consolidated*" "*.json"`: model.safetensors.index.json
    without its shards. vLLM's "auto" sees consolidated*.safetensors and loads the Mistral
    format (only those files, default_loader.py), so the launch is served; SGLang's "auto"
    reads the index's shards and fails, so it stops."""
    src = write_checkpoint(
        tmp_path / "src", TINY, shards=2, dense=True, namer=lambda i, n: f"consolidated-{i:02d}.safetensors"
    )
    index = json.loads((src / "model.safetensors.index.json").read_text())
    root = healthy(tmp_path)
    for i in range(3):
        (root / shard_name(i, 3)).unlink()
    for i in range(2):
        os.replace(src / f"consolidated-{i:02d}.safetensors", root / f"consolidated-{i:02d}.safetensors")
    (root / "consolidated.safetensors.index.json").write_text(json.dumps(index))
    res = results(node(), model=str(root))
    for code in FC5:
        assert [r for r in res[code] if r.status.value == "fail" and r.severity.value == "error"] == [], code
    assert "2 headers valid" in res["FC504"][0].message
    assert stops("FC502", root, engine="sglang")
    # a broken consolidated file is what vLLM reads: that stops
    with open(root / "consolidated-01.safetensors", "r+b") as fh:
        fh.truncate(100)
    assert stops("FC503", root) or stops("FC504", root)


# ---- FC512: several *.gguf files where vLLM's Flint takes one -------------------------------

GGUF_KV = [("general.architecture", GGUF_STRING, "flint")]


def flint_dir(tmp_path: Path) -> Path:
    """A small Flint model directory with its one GGUF (support.ggufgen.flint_model)."""
    root = tmp_path / "flint"
    root.mkdir(exist_ok=True)
    config, tensors = flint_model()
    (root / "config.json").write_text(json.dumps(config))
    write_gguf(root / "flint-nvfp4.gguf", kv=GGUF_KV, tensors=tensors)
    return root


def gguf_errors(res: dict[str, list]) -> list[tuple[str, str]]:
    return [
        (c, r.message)
        for c, rs in res.items()
        if c.startswith("FC5")
        for r in rs
        if r.status.value == "fail" and r.severity.value == "error"
    ]


def test_fc512_stops_flint_with_two_gguf_files(tmp_path: Path) -> None:
    root = flint_dir(tmp_path)
    tensors = flint_model()[1]
    write_gguf(root / "flint-q8.gguf", kv=GGUF_KV, tensors=tensors)
    for fmt in (None, "dummy", "safetensors"):
        got = gguf_errors(results(node(), model=str(root), load_format=fmt))
        assert [c for c, _ in got] == ["FC512"], (fmt, got)
        assert "Expected one GGUF file" in got[0][1] and "flint-q8.gguf" in got[0][1]
    (r,) = results(node(), model=str(root))["FC512"]
    assert r.fix.endswith(f"mv {root}/flint-q8.gguf {root}-other-gguf/")
    assert r.evidence["files"] == ["flint-nvfp4.gguf", "flint-q8.gguf"]
    # a split GGUF is several files too
    (root / "flint-q8.gguf").unlink()
    (root / "flint-nvfp4.gguf").rename(root / "flint-00001-of-00002.gguf")
    write_gguf(root / "flint-00002-of-00002.gguf", kv=GGUF_KV, tensors=tensors[:1])
    assert [c for c, _ in gguf_errors(results(node(), model=str(root)))] == ["FC512"]


def test_fc512_does_not_stop_one_gguf_beside_other_files(tmp_path: Path) -> None:
    root = flint_dir(tmp_path)
    for name in ("README.md", "tokenizer.json", "flint.gguf.sha256", "flint.gguf.bak", "notes.txt"):
        (root / name).write_text("x")
    (root / "old").mkdir()
    write_gguf(root / "old" / "flint-q8.gguf", kv=GGUF_KV)  # not in the directory vLLM globs
    res = results(node(), model=str(root))
    assert gguf_errors(res) == []
    (r,) = res["FC512"]
    assert r.status.value == "pass" and "flint-nvfp4.gguf" in r.message


def test_fc512_does_not_stop_several_gguf_files_of_a_model_that_never_reads_them(tmp_path: Path) -> None:
    root = write_checkpoint(tmp_path / "llama", load_config("tiny-llama"), shards=3, dense=True)
    for name in ("a.gguf", "b.gguf"):
        write_gguf(root / name, kv=GGUF_KV)
    res = results(node(), model=str(root))
    assert gguf_errors(res) == []
    assert {r.status.value for r in res["FC512"]} == {"skip"}
    # SGLang reads GGUF only with its own load format: Flint's directory is not stopped there
    flint = flint_dir(tmp_path)
    write_gguf(flint / "flint-q8.gguf", kv=GGUF_KV)
    assert stops("FC512", flint, engine="sglang") == []


def test_fc512_counts_the_directory_as_vllms_glob_does(tmp_path: Path) -> None:
    """find_gguf_file globs ``*.gguf``: hidden files are not matched (a ``.partial.gguf``
    left by a copy tool never stops the launch), a directory or a dangling link is."""
    root = flint_dir(tmp_path)
    write_gguf(root / ".flint-nvfp4.gguf.partial.gguf", kv=GGUF_KV)
    assert stops("FC512", root) == []
    (root / "old.gguf").mkdir()
    assert [s for s, _ in stops("FC512", root)] == ["fail"]
    (root / "old.gguf").rmdir()
    (root / "gone.gguf").symlink_to(tmp_path / "nowhere.gguf")
    assert [s for s, _ in stops("FC512", root)] == ["fail"]
