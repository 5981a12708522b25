"""Reading a checkpoint from disk: resolution (directory, HF cache), the scan in parallel
workers, the index cross-check, and every way a download goes wrong named by its code."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from flightcheck._checkpoint import load
from flightcheck._checkpoint.resolve import hub_dirs, resolve
from flightcheck._checkpoint.scan import scan_paths
from flightcheck._checks.checkpoint.kinds import CODE_OF, KIND_OF
from support.checkpoints import COMMIT, break_checkpoint
from support.ckptgen import load_config, shard_name, write_checkpoint, write_hf_cache

TINY = load_config("tiny-llama")


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "FLIGHTCHECK_NO_CACHE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def codes(ck) -> set[str]:
    return {CODE_OF[f.kind] for f in ck.findings}


def healthy(tmp_path: Path, shards: int = 3) -> Path:
    return write_checkpoint(tmp_path / "m", TINY, shards=shards, dense=True)


def test_healthy_directory_has_no_findings(tmp_path: Path) -> None:
    root = healthy(tmp_path)
    ck = load(str(root))
    assert ck.found and ck.findings == []
    assert [s.name for s in ck.shards] == [shard_name(i, 3) for i in range(3)]
    assert ck.tensor_count == 4 * 9 + 3 and ck.config["model_type"] == "llama"


def test_single_file_model(tmp_path: Path) -> None:
    root = write_checkpoint(tmp_path / "one", TINY, shards=1, dense=True)
    assert (root / "model.safetensors").exists() and not (root / "model.safetensors.index.json").exists()
    ck = load(str(root))
    assert ck.findings == [] and ck.index_name is None and [s.name for s in ck.shards] == ["model.safetensors"]


@pytest.mark.parametrize(
    "breakage, code, where",
    [
        ("truncate", "FC503", "shard:model-00002-of-00003.safetensors"),
        ("pad", "FC503", "shard:model-00002-of-00003.safetensors"),
        ("delete", "FC502", "shard:model-00002-of-00003.safetensors"),
        ("header-1tb", "FC504", "shard:model-00002-of-00003.safetensors"),
        ("overlap", "FC504", "shard:model-00002-of-00003.safetensors"),
        ("not-json", "FC504", "shard:model-00002-of-00003.safetensors"),
        ("escape", "FC509", "shard:../../../../etc/passwd"),
        ("index-lies", "FC506", "shard:model-00002-of-00003.safetensors"),
        ("duplicate", "FC506", "shard:model-00003-of-00003.safetensors"),
        ("no-config", "FC507", None),
        ("config-truncated", "FC507", None),
        ("loop", "FC508", "shard:model-00002-of-00003.safetensors"),
        ("index-not-json", "FC506", "file:model.safetensors.index.json"),
        ("sparse", "FC511", "shard:model-00002-of-00003.safetensors"),
    ],
)
def test_each_breakage_is_named_by_its_code(tmp_path: Path, breakage: str, code: str, where: str | None) -> None:
    root = healthy(tmp_path)
    break_checkpoint(root, breakage)
    ck = load(str(root))
    if code == "FC507":
        assert ck.config is None and ck.config_error and "config.json" in ck.config_error
        return
    hits = ck.of(KIND_OF[code])
    assert hits, (breakage, ck.findings)
    assert where in {f.subject for f in hits}, [f.subject for f in hits]
    assert all(f.fix for f in hits)


def test_absurdly_nested_config_and_index(tmp_path: Path) -> None:
    root = healthy(tmp_path)
    deep = '{"weight_map": {}, "metadata": ' + "[" * 100_000 + "]" * 100_000 + "}"
    (root / "model.safetensors.index.json").write_text(deep)
    (root / "config.json").write_text("[" * 100_000 + "]" * 100_000)
    ck = load(str(root))
    assert ck.config is None and "not valid JSON" in (ck.config_error or "")
    assert any("not valid JSON" in f.message for f in ck.of(KIND_OF["FC506"]))


def test_hostile_index_path_is_never_opened(tmp_path: Path) -> None:
    root = healthy(tmp_path)
    break_checkpoint(root, "escape")
    ck = load(str(root))
    bad = next(s for s in ck.shards if s.name.startswith(".."))
    assert bad.scan is None and bad.size == 0  # refused before any stat or open


@pytest.fixture
def no_hang():
    """Fail (SIGALRM) instead of hanging the suite when a read blocks."""
    import signal

    class Blocked(BaseException):  # not an OSError: no `except OSError` may swallow it
        pass

    def boom(*_):
        raise Blocked("blocked: something opened a FIFO")

    old = signal.signal(signal.SIGALRM, boom)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


@pytest.mark.parametrize(
    "name", ["extra.safetensors", "config.json", "hf_quant_config.json", "model.safetensors.index.json"]
)
def test_a_fifo_anywhere_never_blocks(tmp_path: Path, name: str, no_hang) -> None:
    """Opening a FIFO for reading blocks until a writer comes: every file of the model
    directory is refused unless regular (the scan, config.json, the index, hf_quant, the
    facts section's hashes)."""
    from flightcheck._checkpoint.section import _file_sha256, _header_sha256
    from flightcheck._memory import build
    from flightcheck._vocabulary.intent import Intent

    root = healthy(tmp_path)
    fifo = root / name
    fifo.unlink(missing_ok=True)
    os.mkfifo(fifo)
    ck = load(str(root))
    if name == "extra.safetensors":  # not in the index: scanned (never opened), not judged
        assert ck.findings == []
    elif name == "config.json":
        assert ck.config is None and "not a regular file" in (ck.config_error or "")
    elif name == "hf_quant_config.json":
        assert ck.findings == [] and ck.hf_quant is None
        assert build(ck, Intent(model=str(root)), total=80 << 30).error is None
    else:
        (f,) = ck.of(KIND_OF["FC506"])
        assert "is not a regular file" in f.message
    assert _header_sha256(str(fifo)) is None and _file_sha256(fifo) is None


def test_a_symlink_farm_is_read_like_the_files_it_points_at(tmp_path: Path) -> None:
    """Shards that are symlinks onto shared storage are followed as the OS follows them for
    the engine: read, sized and checked like the files they point at, and no FC509 (that
    is kept for names in the index that leave the directory). The reader only: the check's
    own must-not-stop test is tests/checks/test_checkpoint.py's FC508/FC509 symlink farm."""
    root = healthy(tmp_path)
    shared = tmp_path / "shared"
    shared.mkdir()
    for i in range(3):
        s = root / shard_name(i, 3)
        os.replace(s, shared / s.name)
        s.symlink_to(shared / s.name)
    ck = load(str(root))
    assert ck.findings == []
    assert len(ck.scanned) == 3 and ck.total_bytes == sum(p.stat().st_size for p in shared.iterdir())


def test_index_total_size_mismatch_is_a_warning(tmp_path: Path) -> None:
    root = healthy(tmp_path)
    index = root / "model.safetensors.index.json"
    doc = json.loads(index.read_text())
    doc["metadata"]["total_size"] += 2
    index.write_text(json.dumps(doc))
    (f,) = load(str(root)).of(KIND_OF["FC506"])
    assert f.severity == "warning" and "total_size" in f.message


def test_index_names_the_missing_tensor(tmp_path: Path) -> None:
    root = healthy(tmp_path)
    break_checkpoint(root, "index-lies")
    (f,) = load(str(root)).of(KIND_OF["FC506"])
    # vLLM loads the files whole: an entry no file holds fails only if the model has it
    assert "model.layers.9.ghost.weight" in f.message and f.severity == "warning"


# --------------------------------------------------------------------------- HF cache


def test_repo_id_resolves_through_refs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hub = tmp_path / "hub"
    snap = write_hf_cache(hub, "acme/tiny", TINY, shards=2, commit=COMMIT)
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    ck = load("acme/tiny")
    assert ck.found and ck.path == snap and ck.resolved.commit == COMMIT and ck.findings == []
    assert all(os.path.islink(s.path) for s in ck.shards)  # symlinks into blobs are fine


def test_repo_id_env_order_and_revision(tmp_path: Path) -> None:
    hub = tmp_path / "hf-home" / "hub"
    write_hf_cache(hub, "acme/tiny", TINY, shards=1, commit=COMMIT, branch="v2")
    env = {"HF_HOME": str(tmp_path / "hf-home")}
    assert hub_dirs([env]) == [hub]
    assert hub_dirs([{"HF_HUB_CACHE": "/a", "HF_HOME": "/b"}]) == [Path("/a")]
    assert hub_dirs([{"XDG_CACHE_HOME": "/x"}]) == [Path("/x/huggingface/hub")]
    assert resolve("acme/tiny", revision="v2", envs=[env]).commit == COMMIT
    assert resolve("acme/tiny", revision=COMMIT, envs=[env]).commit == COMMIT
    missing = resolve("acme/tiny", revision="main", envs=[env])
    assert missing.path is None and "revision 'main' is not there" in (missing.problem or "")
    only = resolve("acme/tiny", envs=[env])  # no refs/main but one snapshot: use it, say so
    assert only.commit == COMMIT and "only snapshot" in (only.note or "")


def test_fc501_an_unreadable_cache_is_a_finding_not_a_crash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Path.is_dir raises on EACCES: a shared cache of another user is a finding, not a bug."""
    hub = tmp_path / "hub"
    write_hf_cache(hub, "acme/tiny", TINY, shards=2, commit=COMMIT)
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    real = Path.is_file

    def denied(self: Path) -> bool:
        if self.name == "main":
            raise PermissionError(13, "Permission denied")
        return real(self)

    monkeypatch.setattr(Path, "is_file", denied)
    ck = load("acme/tiny")
    (f,) = ck.of(KIND_OF["FC501"])
    assert not ck.found and ck.crash is None and "cannot be read: Permission denied" in f.message


def test_download_dir_is_searched_first(tmp_path: Path) -> None:
    write_hf_cache(tmp_path / "dl", "acme/tiny", TINY, shards=1, commit=COMMIT)
    assert load("acme/tiny", download_dir=str(tmp_path / "dl")).found


def test_fc501_repo_not_in_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty"))
    ck = load("acme/absent")
    (f,) = ck.findings
    assert CODE_OF[f.kind] == "FC501" and f.subject == "model:acme/absent" and "never downloads" in f.message
    assert f.fix.startswith("hf download acme/absent")
    assert load(str(tmp_path / "no" / "such" / "dir")).of(KIND_OF["FC501"])


def test_interrupted_download_and_size_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hub = tmp_path / "hub"
    snap = write_hf_cache(hub, "acme/tiny", TINY, shards=2, commit=COMMIT)
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    repo = hub / "models--acme--tiny"
    tree = json.loads((repo / "trees" / f"{COMMIT}.json").read_text())
    name = shard_name(1, 2)
    etag = tree["files"][name]["lfs_sha256"]
    (repo / "blobs" / f"{etag}.1a2b3c4d.incomplete").write_bytes(b"\0" * 1000)  # a second download, cut short
    ck = load("acme/tiny")
    (f,) = ck.of(KIND_OF["FC505"])
    assert (
        f.subject == f"shard:{name}"
        and "interrupted download" in f.message
        and f"hf download acme/tiny {name}" in f.fix
    )
    # the snapshot file shrank (a bad copy into the cache): the tree's size disagrees
    blob = Path(os.path.realpath(snap / name))
    blob.write_bytes(blob.read_bytes()[:-10])
    sizes = [x for x in load("acme/tiny").of(KIND_OF["FC505"]) if "cache's record" in x.message]
    assert sizes and sizes[0].subject == f"shard:{name}"


def test_local_dir_download_cut_short(tmp_path: Path) -> None:
    """`hf download --local-dir` keeps its partial files under .cache/huggingface/download."""
    root = healthy(tmp_path)
    partial = root / ".cache" / "huggingface" / "download" / "Zm9v.abc123.incomplete"
    partial.parent.mkdir(parents=True)
    partial.write_bytes(b"\0" * 4096)
    (f,) = load(str(root)).of(KIND_OF["FC505"])
    assert str(partial) in f.message and "4,096 bytes so far" in f.message and f.fix.startswith(f"rm -f {partial}")


def test_dangling_blob_link_is_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hub = tmp_path / "hub"
    snap = write_hf_cache(hub, "acme/tiny", TINY, shards=2, commit=COMMIT)
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    os.unlink(os.path.realpath(snap / shard_name(0, 2)))
    (f,) = load("acme/tiny").of(KIND_OF["FC502"])
    assert "blob that is gone" in f.message and "rm -f" in f.fix


# --------------------------------------------------------------------------- parallel scan


def test_workers_give_the_same_answer_as_one_process(tmp_path: Path) -> None:
    root = write_checkpoint(tmp_path / "m", load_config("qwen3-30b-a3b"), shards=8)
    paths = sorted(str(p) for p in root.glob("*.safetensors"))
    alone, s0 = scan_paths(paths, workers=0)
    spread, s2 = scan_paths(paths, workers=2)
    assert s0.workers == 0 and s2.workers == 2 and s2.fallbacks == 0
    assert alone == spread


def test_a_dead_worker_costs_nothing_but_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from flightcheck._checkpoint import scan as scan_mod

    root = healthy(tmp_path, shards=3)
    paths = sorted(str(p) for p in root.glob("*.safetensors"))
    monkeypatch.setattr(scan_mod, "_BOOT", "import sys; sys.exit(3)  # {msgspec_dir}{here}")
    scans, stats = scan_paths(paths, workers=1)
    assert stats.fallbacks > 0 and all(s.ok for s in scans)


def _recording_spawn(monkeypatch: pytest.MonkeyPatch) -> list:
    from flightcheck._checkpoint import scan as scan_mod

    spawned: list = []
    real = scan_mod._spawn

    def spawn(paths, sha, seconds):
        proc = real(paths, sha, seconds)
        spawned.append(proc)
        return proc

    monkeypatch.setattr(scan_mod, "_spawn", spawn)
    return spawned


def test_a_hung_worker_is_killed_and_reaped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from flightcheck._checkpoint import scan as scan_mod

    paths = sorted(str(p) for p in healthy(tmp_path, shards=3).glob("*.safetensors"))
    spawned = _recording_spawn(monkeypatch)
    monkeypatch.setattr(scan_mod, "_BOOT", "import time; time.sleep(600)  # {msgspec_dir}{here}")
    scans, stats = scan_paths(paths, workers=1, timeout=1.0)
    assert stats.workers == 1 and any("did not answer within 1 s" in p.message for s in scans for p in s.problems)
    assert spawned and all(p.returncode is not None for p in spawned)  # waited for, not a zombie


def test_an_interrupted_scan_leaves_no_worker_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from flightcheck._checkpoint import scan as scan_mod

    paths = sorted(str(p) for p in healthy(tmp_path, shards=3).glob("*.safetensors"))
    spawned = _recording_spawn(monkeypatch)
    monkeypatch.setattr(scan_mod, "_BOOT", "import time; time.sleep(600)  # {msgspec_dir}{here}")

    def interrupted() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        scan_paths(paths, workers=2, parent_work=interrupted)
    assert len(spawned) == 2 and all(p.returncode is not None for p in spawned)


def test_a_foreign_validate_module_beside_msgspec_is_not_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """configobj installs a top-level ``validate`` into site-packages: the workers must
    import ours (else each dies and its shards are redone here, slowly)."""
    import msgspec

    site = tmp_path / "site"
    site.mkdir()
    (site / "msgspec").symlink_to(Path(msgspec.__file__).parent)
    (site / "validate.py").write_text("import sys; sys.exit(3)\n")
    monkeypatch.setattr(msgspec, "__file__", str(site / "msgspec" / "__init__.py"))
    paths = sorted(str(p) for p in healthy(tmp_path, shards=3).glob("*.safetensors"))
    scans, stats = scan_paths(paths, workers=1)
    assert stats.workers == 1 and stats.fallbacks == 0 and all(s.ok for s in scans)


def test_workers_start_early_only_for_a_directory_read_cold(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``check`` starts a cold read's workers before importing the reader: they do the
    scan (the same scans), and once the directory has a cache file none is started."""
    from flightcheck._checkpoint import workers

    monkeypatch.setattr(workers, "cpus", lambda: 2)
    monkeypatch.setattr(workers, "PARALLEL_MIN_BYTES", 1)  # this tiny index counts as big
    monkeypatch.setattr(workers, "WORKER_START_BYTES", 1)
    root = healthy(tmp_path, shards=3)
    alone = load(str(root), workers=0)
    shutil.rmtree(tmp_path / "xdg")  # cold again
    ready = workers.start_early(str(root))
    assert len(ready) == 1 and ready[0].returncode is None
    taken = ready[0]
    ck = load(str(root), ready=ready)
    assert ready == [] and ck.stats.workers == 1 and ck.cache == "cold"
    assert taken.returncode is not None  # used, then killed and reaped by the scan
    assert [s.scan for s in ck.shards] == [s.scan for s in alone.shards]
    assert workers.start_early(str(root)) == []  # the cache file is there now: a warm read


def test_workers_started_for_nothing_are_killed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from flightcheck._checkpoint import workers

    monkeypatch.setattr(workers, "cpus", lambda: 3)
    monkeypatch.setattr(workers, "PARALLEL_MIN_BYTES", 1)
    monkeypatch.setattr(workers, "WORKER_START_BYTES", 1)
    ready = workers.start_early(str(healthy(tmp_path, shards=3)))
    assert len(ready) == 2
    for proc in ready:
        workers.kill(proc)
    assert all(p.returncode is not None for p in ready)
    assert workers.start_early(str(tmp_path / "nowhere")) == []


def test_a_vision_models_processor_configs_are_read_and_optional(tmp_path: Path, no_hang) -> None:
    """A vision model's preprocessor_config.json / video_preprocessor_config.json (Qwen-VL's
    pixel limits: vllm.qwen_vl_item) are read when present; missing, not JSON, or a FIFO
    (never opened for reading: it would block) leaves them None without a finding."""
    root = healthy(tmp_path)
    doc = json.loads((root / "config.json").read_text())
    image = {"size": {"shortest_edge": 65536, "longest_edge": 16777216}, "patch_size": 16}
    (root / "config.json").write_text(json.dumps({**doc, "vision_config": {"depth": 2, "hidden_size": 64}}))
    (root / "preprocessor_config.json").write_text(json.dumps(image))
    ck = load(str(root))
    assert ck.findings == [] and ck.processor == image and ck.video_processor is None
    (root / "preprocessor_config.json").write_text("{not json")
    os.mkfifo(root / "video_preprocessor_config.json")
    ck = load(str(root))
    assert ck.findings == [] and ck.processor is None and ck.video_processor is None
    # a text model's directory: not read at all
    (root / "preprocessor_config.json").write_text(json.dumps(image))
    (root / "config.json").write_text(json.dumps(doc))
    assert load(str(root)).processor is None


def test_a_path_that_is_not_utf8_is_read_not_crashed(tmp_path: Path) -> None:
    """Linux paths are bytes: a byte that is not UTF-8 (0xff) anywhere in the model's path
    reaches Python as a lone surrogate, which the cache file (msgpack: UTF-8 strings) and
    the workers' msgpack cannot hold. The read is the same as for any other name; only the
    cache is skipped, and says so."""
    root = Path(os.fsdecode(os.fsencode(str(tmp_path)) + b"/odd\xffdir"))
    write_checkpoint(root, TINY, shards=3, dense=True)
    ck = load(str(root))
    assert ck.crash is None and codes(ck) == set(), (ck.crash, ck.findings)
    assert len(ck.shards) == 3 and "not UTF-8" in ck.cache
    break_checkpoint(root, "truncate")
    assert "FC503" in codes(load(str(root)))


def test_workers_read_paths_that_are_not_utf8(tmp_path: Path) -> None:
    root = Path(os.fsdecode(os.fsencode(str(tmp_path)) + b"/odd\xffdir"))
    write_checkpoint(root, load_config("qwen3-30b-a3b"), shards=4)
    paths = sorted(str(p) for p in root.glob("*.safetensors"))
    alone, _ = scan_paths(paths, workers=0)
    spread, s2 = scan_paths(paths, workers=2)
    assert s2.workers == 2 and s2.fallbacks == 0 and alone == spread
    assert len(spread) == 4 and all(s.ok for s in spread)
