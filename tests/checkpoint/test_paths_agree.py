"""The fast checkpoint paths give exactly what the plain ones give.

The header check runs as C-level passes in the header's own order, the scan is spread
over worker processes, a warm run reads the cache: each must give the same findings, the
same memory groups and digests, and in the end the same full JSON report as reading
every tensor one by one in one process. Two oracles: a plain per-tensor reading of a
header (below, written from the rules in ``validate``'s docstring, not from its code), and
the report of a cold read in this process without workers.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flightcheck._checkpoint import load
from flightcheck._checkpoint.problems import Kind
from flightcheck._checkpoint.validate import (
    DTYPE_BITS,
    Group,
    ShardScan,
    _explain_offsets,
    names_digest,
    parse_header,
)
from flightcheck._pipeline import evaluate_launch
from flightcheck._report import render
from flightcheck._vocabulary.facts import from_dict
from flightcheck._vocabulary.intent import Intent
from support import EXAMPLES
from support.checkpoints import BREAKAGES, break_checkpoint
from support.ckptgen import load_config, shard_name, write_checkpoint


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "FLIGHTCHECK_NO_CACHE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


# --------------------------------------------------------------------------- one header


def plain_check(raw: bytes, file_size: int) -> tuple[ShardScan, list[tuple[str, str]]]:
    """A header judged tensor by tensor, in name order (the oracle): what ``parse_header``
    must find for a header that decodes, and its problems as (kind, message); a size
    problem's message is "size"."""
    n = len(raw)
    scan = ShardScan(size=file_size, header_len=n)
    doc = json.loads(raw)
    doc.pop("__metadata__", None)
    names = sorted(doc)
    scan.n_tensors = len(names)
    for name in names:
        missing = [f for f in ("dtype", "shape", "data_offsets") if f not in doc[name]]
        if missing:
            return scan, [(Kind.BAD_HEADER, f"tensor {name!r} has no {', '.join(missing)}")]
    for name in names:
        e = doc[name]
        start, end = e["data_offsets"]
        numel_bits = math.prod(e["shape"]) * DTYPE_BITS[e["dtype"]]
        if numel_bits != (end - start) * 8:
            said = (
                f"tensor {name!r} is {e['dtype']} {e['shape']} = {numel_bits / 8:,g} "
                f"bytes but its data_offsets {[start, end]} span {end - start:,}"
            )
            return scan, [(Kind.BAD_HEADER, said)]
    at = 0
    for (start, end), _k in sorted((tuple(doc[k]["data_offsets"]), k) for k in names):
        if start != at:
            offsets = [tuple(doc[k]["data_offsets"]) for k in names]
            return scan, [(Kind.BAD_HEADER, _explain_offsets(names, offsets))]
        at = end
    scan.data_end = at
    problems = [(Kind.TRUNCATED, "size")] if file_size != 8 + n + at else []
    scan.names_digest = names_digest(names)
    scan.groups = plain_groups(names, doc)
    return scan, problems


def plain_groups(names: list[str], doc: dict[str, Any]) -> list[Group]:
    """The memory model's groups, one tensor at a time: a layer's routed experts as one
    block (its tensors per expert from the first expert), the rest by name pattern."""

    def pattern(s: str) -> str:
        return re.sub(r"\d+", "#", s)

    def first_int(s: str) -> int:
        m = re.search(r"\d+", s)
        return int(m.group()) if m else -1

    blocks: dict[tuple[str, int], list[int]] = {}
    others: dict[tuple[str, int, str, tuple[int, ...]], list[int]] = {}
    for name in names:
        e = doc[name]
        span = e["data_offsets"][1] - e["data_offsets"][0]
        k = name.find(".experts.")
        if k >= 0 and name[k + 9 : k + 10].isdigit():
            prefix = name[: k + 9]
            e_end = name.find(".", k + 9)
            one = name[: e_end + 1] if e_end > 0 else None
            block = [x for x in names if x.startswith(prefix)]
            first = block[0]
            f_end = first.find(".", k + 9)
            per = len([x for x in block if x.startswith(first[: f_end + 1])]) if f_end > 0 and one else 1
            key = (pattern(prefix) + "#.*", first_int(prefix))
            acc = blocks.setdefault(key, [0, 0, 1])
            acc[0] += span
            acc[1] += 1
            acc[2] = max(acc[2], per)
        else:
            key2 = (pattern(name), first_int(name), e["dtype"], tuple(e["shape"]))
            acc = others.setdefault(key2, [0, 0])
            acc[0] += span
            acc[1] += 1
    groups = [Group(p, i, d, s, nb, c) for (p, i, d, s), (nb, c) in others.items()]
    groups += [Group(p, i, "", (), nb, c, per) for (p, i), (nb, c, per) in blocks.items()]
    return sorted(groups, key=lambda g: (g.pattern, g.index, g.dtype))


def _header(tensors: list[tuple[str, str, list[int]]], order: list[int], breakage: int | None) -> tuple[bytes, int]:
    """A header of ``tensors`` laid out in data order, listed in ``order``, with one
    tensor's offsets moved by ``breakage`` bytes (a hole, an overlap, a wrong span)."""
    entries: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    at = 0
    laid = []
    for name, dtype, shape in tensors:
        size = math.prod(shape) * DTYPE_BITS[dtype] // 8
        laid.append((name, {"dtype": dtype, "shape": shape, "data_offsets": [at, at + size]}))
        at += size
    if breakage is not None and laid:
        off = laid[len(laid) // 2][1]["data_offsets"]
        if breakage % 2:  # the whole tensor moved: a hole or an overlap, its span still right
            off[:] = [max(0, off[0] + breakage), max(0, off[0] + breakage) + off[1] - off[0]]
        else:  # its end moved: the span disagrees with dtype x shape
            off[1] = max(off[0], off[1] + breakage)
    for i in order:
        entries.update([laid[i % len(laid)]] if laid else [])
    raw = json.dumps(entries).encode()
    return raw, 8 + len(raw) + at


_names = st.sampled_from(
    [
        "model.embed_tokens.weight",
        "lm_head.weight",
        "model.norm.weight",
        "model.layers.{l}.self_attn.q_proj.weight",
        "model.layers.{l}.input_layernorm.weight",
        "model.layers.{l}.mlp.experts.{e}.gate_proj.weight",
        "model.layers.{l}.mlp.experts.{e}.down_proj.weight",
        "model.layers.{l}.mlp.experts.{e}.down_proj.weight_scale",
        "model.layers.{l}.block_sparse_moe.experts.{e}.w1.weight",
    ]
)
_tensor = st.tuples(
    _names,
    st.integers(0, 3),
    st.integers(0, 12),
    st.sampled_from(["BF16", "F32", "U8", "F8_E4M3", "I64"]),
    st.lists(st.integers(0, 6), max_size=3),
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(_tensor, max_size=40),
    st.randoms(use_true_random=False),
    st.one_of(st.none(), st.integers(-3, 3)),
)
def test_the_header_check_finds_what_a_tensor_by_tensor_reading_finds(
    spec: list[tuple[str, int, int, str, list[int]]], rnd: Any, breakage: int | None
) -> None:
    tensors = {t.format(l=layer, e=expert): (dtype, shape) for t, layer, expert, dtype, shape in spec}
    items = [(n, d, s) for n, (d, s) in tensors.items()]
    order = list(range(len(items)))
    rnd.shuffle(order)  # any listing order: writers keep data order, hand-made headers may not
    raw, size = _header(items, order, breakage)
    got = parse_header(len(raw).to_bytes(8, "little") + raw, size)
    want, problems = plain_check(raw, size)
    assert [(p.kind, p.message if p.kind == Kind.BAD_HEADER else "size") for p in got.problems] == problems
    if not any(p.kind == Kind.BAD_HEADER for p in got.problems):
        assert (got.n_tensors, got.data_end, got.names_digest) == (want.n_tensors, want.data_end, want.names_digest)
        assert got.groups == want.groups


# --------------------------------------------------------------------------- whole reports


def _report(root: Path, **load_args: Any) -> tuple[dict[str, Any], str]:
    """The full JSON report of ``check --example b300 --model root`` (timings out), and
    how the cache was used."""
    ck = load(str(root), **load_args)
    facts = from_dict(json.loads((EXAMPLES / "b300.json").read_text()))
    intent = Intent(engine="vllm", tensor_parallel_size=8, model=str(root))
    doc = json.loads(render(evaluate_launch(facts, intent, ck), "json"))
    doc.pop("timings", None)
    text = re.sub(r"headers read in [0-9.]+ s, cache \w+", "headers read in _ s, cache _", json.dumps(doc))
    return json.loads(text), ck.cache


def _rewrite_shard(root: Path, edit: Any) -> None:
    p = root / shard_name(1, 3)
    data = p.read_bytes()
    n = int.from_bytes(data[:8], "little")
    raw = json.dumps(edit(json.loads(data[8 : 8 + n]))).encode()
    raw = raw.ljust(n) if len(raw) <= n else raw
    p.write_bytes(len(raw).to_bytes(8, "little") + raw + data[8 + n :])


def _first(h: dict[str, Any]) -> str:
    return next(k for k in h if k != "__metadata__")


HEADER_EDITS = {
    "wrong-span": lambda h: {**h, _first(h): {**h[_first(h)], "shape": [3, 5]}},
    "no-dtype": lambda h: {**h, _first(h): {k: v for k, v in h[_first(h)].items() if k != "dtype"}},
    "unknown-dtype": lambda h: {**h, _first(h): {**h[_first(h)], "dtype": "F99"}},
    "bad-metadata": lambda h: {**h, "__metadata__": {"a": 1}},
    "listed-backwards": lambda h: dict(reversed(list(h.items()))),
    "empty": lambda h: {"__metadata__": {"format": "pt"}},
    "unlisted-empty-tensor": lambda h: {**h, "zz.empty": {"dtype": "F32", "shape": [0, 4], "data_offsets": [0, 0]}},
}


def _tiny(tmp_path: Path, name: str) -> Path:
    return write_checkpoint(tmp_path / name, load_config("tiny-llama"), shards=3, dense=True)


@pytest.mark.parametrize("case", ["healthy", *BREAKAGES, *HEADER_EDITS])
def test_cold_in_one_process_with_workers_and_warm_give_the_same_report(tmp_path: Path, case: str) -> None:
    root = _tiny(tmp_path, "m")
    if case in HEADER_EDITS:
        _rewrite_shard(root, HEADER_EDITS[case])
    elif case != "healthy":
        break_checkpoint(root, case)
    plain, how = _report(root, workers=0)
    assert how == "cold"
    spread, _ = _report(root, workers=2)  # nothing cached: an unreadable or broken shard is rescanned
    warm, how = _report(root, workers=0)
    assert plain == spread
    assert plain == warm, case
    if case != "healthy":  # the report says what is wrong: the comparison is not of empty reports
        assert plain["verdict"] != "ready" or any(
            c["code"].startswith("FC5") and c["status"] != "pass" for c in plain["checks"]
        )


def test_a_moe_spread_over_workers_reports_as_one_process_does(tmp_path: Path) -> None:
    """A 24-shard MoE (tens of thousands of tensors, the index's runs, expert blocks), with
    a truncated shard and an index that names a tensor no shard holds."""
    cfg = load_config("deepseek-v3")
    cfg.update(n_routed_experts=32, num_nextn_predict_layers=0, num_hidden_layers=8)
    root = write_checkpoint(tmp_path / "moe", cfg, shards=24)
    shards = sorted(p.name for p in root.glob("*.safetensors"))
    assert len(shards) >= 10
    shard = root / shards[5]
    with open(shard, "r+b") as fh:
        fh.truncate(shard.stat().st_size - 10)
    index = root / "model.safetensors.index.json"
    doc = json.loads(index.read_text())
    doc["weight_map"]["model.layers.3.mlp.experts.7.ghost"] = shards[9]
    index.write_text(json.dumps(doc, indent=2, sort_keys=True))
    plain, _ = _report(root, workers=0)
    spread, _ = _report(root, workers=3)
    warm, how = _report(root)
    assert how == "warm"
    assert plain == spread == warm
    fc5 = {(c["code"], c.get("subject")) for c in plain["checks"] if c["status"] == "fail"}
    assert ("FC503", f"shard:{shard.name}") in fc5
    assert ("FC506", f"shard:{shards[9]}") in fc5
    assert plain["memory"]["per_rank"]["weights_bytes"] > 0


def test_the_index_read_in_runs_gives_each_shard_its_names(tmp_path: Path) -> None:
    """An index listed out of name order (and with one name's shard far from its
    neighbours'): the per-shard counts and digests are those of the sorted names."""
    from flightcheck._checkpoint.index import parse

    weight_map = {f"t.{i:03d}": shard_name(i % 3, 3) for i in range(60)}
    weight_map = dict(reversed(list(weight_map.items())))
    got = parse(msgspec.json.encode({"weight_map": weight_map}), [shard_name(i, 3) for i in range(3)])
    for f in {shard_name(i, 3) for i in range(3)}:
        names = sorted(n for n, g in weight_map.items() if g == f)
        assert got.files[f] == (len(names), names_digest(names))
