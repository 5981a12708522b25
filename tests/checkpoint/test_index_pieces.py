"""The index decoded in pieces (``index._pieces``) gives exactly what decoding it whole
gives, for every layout and every way an index can be wrong, or it steps aside."""

from __future__ import annotations

import json

import pytest

from flightcheck._checkpoint import index

FILES = [f"model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)]


def _entries(n: int = 300) -> list[tuple[str, str]]:
    return [(f"model.layers.{i:03d}.mlp.w{j}", FILES[(i * 3 + j) * 3 // (3 * n)]) for i in range(n) for j in range(3)]


def _pretty(pairs: list[tuple[str, str]], total: object = 12345, **extra: object) -> bytes:
    """As ``save_pretrained`` writes an index: indent 2, one entry a line (pairs as given:
    a repeated key is written twice)."""
    lines = ",\n".join(f"    {json.dumps(k)}: {json.dumps(v)}" for k, v in pairs)
    meta = json.dumps({"total_size": total, **extra})
    return f'{{\n  "metadata": {meta},\n  "weight_map": {{\n{lines}\n  }}\n}}\n'.encode()


def _whole(raw: bytes, on_disk: list[str], monkeypatch: pytest.MonkeyPatch) -> index.IndexScan:
    with monkeypatch.context() as m:
        m.setattr(index, "_pieces", lambda raw, on_disk: None)
        return index.parse(raw, on_disk)


@pytest.fixture(autouse=True)
def small_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index, "PIECE", 200)  # a few entries a piece: many boundaries


def test_a_sorted_pretty_index_is_read_in_pieces_to_the_same_result(monkeypatch: pytest.MonkeyPatch) -> None:
    raw = _pretty(_entries())
    pieces = index._pieces(raw, FILES)
    assert pieces is not None and len(pieces[0]) > 50  # the fast path, many pieces
    got = index.parse(raw, FILES)
    assert got == _whole(raw, FILES, monkeypatch)
    assert got.total_size == 12345 and sum(c for c, _ in got.files.values()) == 900 and set(got.files) == set(FILES)


@pytest.mark.parametrize(
    "case",
    [
        "unsorted",
        "repeated-far",  # a key in two pieces: the whole dict keeps its last value
        "repeated-near",  # a key twice in a row (one piece)
        "compact",
        "not-on-disk",
        "nested-value",
        "comma-first",
        "weight-map-null",
        "weight-map-list",
        "no-weight-map",
        "truncated",
        "total-bool",
        "no-metadata",
        "odd-names",
        "empty",
    ],
)
def test_every_other_index_reads_as_decoded_whole(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    pairs = _entries()
    if case == "unsorted":
        raw = _pretty(pairs[::-1])
    elif case == "repeated-far":
        raw = _pretty([*pairs, (pairs[5][0], FILES[2])])
    elif case == "repeated-near":
        raw = _pretty([*pairs[:10], (pairs[9][0], FILES[2]), *pairs[10:]])
    elif case == "compact":
        raw = json.dumps({"metadata": {"total_size": 1}, "weight_map": dict(pairs)}).encode()
    elif case == "not-on-disk":
        raw = _pretty([*pairs, ("zz.weight", "model-00009-of-00009.safetensors")])
    elif case == "nested-value":
        raw = _pretty(pairs).replace(b'"model.layers.100.mlp.w0": ', b'"model.layers.100.mlp.w0": {\n"a": 1\n}, "x": ')
    elif case == "comma-first":
        raw = _pretty(pairs).replace(b",\n    ", b"\n    , ")
    elif case == "weight-map-null":
        raw = _pretty([]).replace(b'"weight_map": {\n\n  }', b'"weight_map": null' + b"\n" * 70)
    elif case == "weight-map-list":
        raw = _pretty(pairs).replace(b'"weight_map": {', b'"weight_map": [').replace(b"\n  }\n}", b"\n  ]\n}")
    elif case == "no-weight-map":
        raw = _pretty(pairs).replace(b'"weight_map"', b'"weights"')
    elif case == "truncated":
        raw = _pretty(pairs)[:-200]
    elif case == "total-bool":
        raw = _pretty(pairs, total=True)
    elif case == "no-metadata":
        raw = _pretty(pairs).replace(b'"metadata": {"total_size": 12345},', b"")
    elif case == "odd-names":  # escapes, colons, braces, a (escaped) newline in names
        odd = [(f'odd:{i}"{{x}}\\n\u00e9\nend', FILES[i % 3]) for i in range(40)]
        raw = _pretty(sorted([*pairs, *odd]))
    else:
        raw = _pretty([])
    got = index.parse(raw, FILES)
    assert got == _whole(raw, FILES, monkeypatch)
    if case in ("unsorted", "repeated-far", "compact", "nested-value", "comma-first", "no-weight-map", "truncated"):
        assert index._pieces(raw, FILES) is None  # stepped aside
    if case == "repeated-far":  # as a dict reads it: the last value wins, counted once
        assert sum(c for c, _ in got.files.values()) == 900


def test_a_large_piece_still_splits_at_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index, "PIECE", 1 << 30)  # one piece: the whole weight_map
    raw = _pretty(_entries())
    pieces = index._pieces(raw, FILES)
    assert pieces is not None and len(pieces[0]) == 1
    assert index.parse(raw, FILES) == _whole(raw, FILES, monkeypatch)
