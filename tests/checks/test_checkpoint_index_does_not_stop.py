"""FC502 / FC506 / FC509 on the index as vLLM reads it: only to choose files.

vLLM 0.33.0 (model_loader/default_loader.py ``_prepare_weights``, weight_utils.py
``filter_duplicate_safetensors_files``) globs ``<hf_folder>/*.safetensors``, joins each
index value to ``hf_folder`` and raises ``FileNotFoundError: Weight files referenced in
index but missing`` for a joined path the glob did not return; then it loads every file
the index names, whole. Which tensor the index maps to which file is never used: an
entry for a tensor no file holds, or one mapped to the wrong file, loads fine, so those
are not stops. A value spelled ``./name`` or ``sub/name`` is the stop (the joined path is
not the glob's spelling).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from support.ckptgen import load_config, shard_name, write_checkpoint
from support.evaluation import facts, host_doc, results

TINY = load_config("tiny-llama")
INDEX = "model.safetensors.index.json"


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "FLIGHTCHECK_NO_CACHE"):
        monkeypatch.delenv(var, raising=False)


def model(tmp_path: Path, edit=None, config: dict[str, Any] | None = None) -> Path:
    root = write_checkpoint(tmp_path / "m", {**TINY, **(config or {})}, shards=3, dense=True)
    doc = json.loads((root / INDEX).read_text())
    if edit is not None:
        edit(doc["weight_map"])
    (root / INDEX).write_text(json.dumps(doc))
    return root


def verdicts(root: Path | str, engine: str = "vllm") -> dict[str, set[tuple[str, str]]]:
    """code -> {(status, severity)} of the FC5xx results for a launch of ``root``."""
    node = facts("b300", env=host_doc("b300")["env"])
    got = results(node, model=str(root), engine=engine)
    return {
        code: {(r.status.value, r.severity.value) for r in rs} for code, rs in got.items() if code.startswith("FC5")
    }


def stops(root: Path | str, engine: str = "vllm") -> dict[str, set[tuple[str, str]]]:
    return {c: v for c, v in verdicts(root, engine).items() if ("fail", "error") in v or ("unknown", "error") in v}


def messages(root: Path | str, code: str, engine: str = "vllm") -> list[str]:
    node = facts("b300", env=host_doc("b300")["env"])
    return [r.message for r in results(node, model=str(root), engine=engine).get(code, [])]


def first(wm: dict[str, str], shard: int) -> str:
    return next(k for k, v in sorted(wm.items()) if v == shard_name(shard, 3))


def test_a_tensor_mapped_to_the_wrong_shard_does_not_stop(tmp_path: Path) -> None:
    def edit(wm: dict[str, str]) -> None:
        wm[first(wm, 0)] = shard_name(1, 3)  # the tensor is in shard 1, the index says 2

    root = model(tmp_path, edit)
    assert stops(root) == {}
    assert verdicts(root)["FC506"] == {("fail", "info")}
    assert any("loads every file" in m for m in messages(root, "FC506"))


def test_an_index_entry_no_shard_holds_is_a_warning(tmp_path: Path) -> None:
    root = model(tmp_path, lambda wm: wm.update({"model.layers.0.mlp.ghost.weight": shard_name(1, 3)}))
    assert stops(root) == {}
    assert verdicts(root)["FC506"] == {("fail", "warning")}


@pytest.mark.parametrize(
    "name, config",
    [("model.layers.0.self_attn.rotary_emb.inv_freq", None), ("lm_head.weight", {"tie_word_embeddings": True})],
)
def test_entries_every_loader_skips_are_info(tmp_path: Path, name: str, config: dict | None) -> None:
    """A ``rotary_emb.inv_freq`` buffer, or ``lm_head.weight`` of a model whose head is tied
    to the embeddings, listed by the index but in no shard: vLLM's models skip both."""

    def edit(wm: dict[str, str]) -> None:
        wm[name] = shard_name(2, 3)

    root = model(tmp_path, edit, config)  # (ckptgen writes no lm_head for a tied model)
    assert stops(root) == {}
    assert verdicts(root)["FC506"] == {("fail", "info")}


def test_an_absolute_index_path_inside_the_directory_is_not_outside(tmp_path: Path) -> None:
    """``/abs/m/model-….safetensors`` joined to ``/abs/m`` is itself: the glob's spelling."""
    root = model(tmp_path)
    doc = json.loads((root / INDEX).read_text())
    doc["weight_map"] = {k: str(root / v) for k, v in doc["weight_map"].items()}
    (root / INDEX).write_text(json.dumps(doc))
    assert stops(root) == {}, verdicts(root)
    assert "FC509" not in stops(root)


def test_an_absolute_index_path_spelled_otherwise_is_vllms_file_not_found(tmp_path: Path) -> None:
    root = model(tmp_path)
    link = tmp_path / "link"
    os.symlink(root, link)
    doc = json.loads((root / INDEX).read_text())
    doc["weight_map"] = {k: str(root / v) for k, v in doc["weight_map"].items()}
    (root / INDEX).write_text(json.dumps(doc))
    got = stops(link)
    assert set(got) == {"FC502"}, got
    assert any("Weight files referenced in index but missing" in m for m in messages(link, "FC502"))


@pytest.mark.parametrize("prefix", ["./", "sub/"])
def test_an_index_value_not_spelled_as_the_glob_is_vllms_file_not_found(tmp_path: Path, prefix: str) -> None:
    root = model(tmp_path)
    if prefix == "sub/":
        (root / "sub").mkdir()
        for i in range(3):
            os.link(root / shard_name(i, 3), root / "sub" / shard_name(i, 3))
    doc = json.loads((root / INDEX).read_text())
    doc["weight_map"] = {k: prefix + v for k, v in doc["weight_map"].items()}
    (root / INDEX).write_text(json.dumps(doc))
    got = stops(root)
    assert set(got) == {"FC502"}, verdicts(root)
    assert any("FileNotFoundError" in m for m in messages(root, "FC502"))
    # SGLang 0.5.23 checks os.path.isfile, then drops the file from its glob: not a stop
    assert "FC502" not in stops(root, "sglang")


def interrupted(tmp_path: Path) -> Path:
    """acme/tiny in a hub cache with its second shard cut short: only
    ``blobs/<sha>.incomplete`` (a tenth of it), no snapshot link."""
    from support.checkpoints import COMMIT
    from support.ckptgen import write_hf_cache

    hub = tmp_path / "hub"
    snap = write_hf_cache(hub, "acme/tiny", TINY, shards=2, commit=COMMIT)
    link = snap / shard_name(1, 2)
    blob = Path(os.path.realpath(link))
    data = blob.read_bytes()
    link.unlink()
    blob.unlink()
    (blob.parent / f"{blob.name}.incomplete").write_bytes(data[: len(data) // 10])
    return hub


def hub_verdicts(hub: Path, **env: str) -> tuple[dict[str, set[tuple[str, str]]], dict[str, list[str]]]:
    doc_env = {**host_doc("b300")["env"], "HF_HUB_CACHE": str(hub), **env}
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        if var not in env:
            doc_env.pop(var, None)
    got = results(facts("b300", env=doc_env), model="acme/tiny")
    fc5 = {c: rs for c, rs in got.items() if c.startswith("FC5")}
    return (
        {c: {(r.status.value, r.severity.value) for r in rs} for c, rs in fc5.items()},
        {c: [r.message for r in rs] for c, rs in fc5.items()},
    )


def test_an_interrupted_download_while_online_is_fetched_not_a_stop(tmp_path: Path) -> None:
    """Without HF_HUB_OFFLINE the engine's snapshot_download fetches the missing shard at
    launch (vLLM 0.33.0 weight_utils.py ``download_weights_from_hf``, local_files_only =
    HF_HUB_OFFLINE): a warning that says how much it downloads; offline, the stop."""
    hub = interrupted(tmp_path)
    online, said = hub_verdicts(hub)
    assert not any(("fail", "error") in v for v in online.values()), online
    assert online["FC502"] == {("fail", "warning")} and online["FC505"] == {("fail", "warning")}
    assert any("downloads" in m and "bytes" in m for m in said["FC502"]), said["FC502"]
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        offline, _ = hub_verdicts(hub, **{var: "1"})
        assert ("fail", "error") in offline["FC502"], (var, offline)
