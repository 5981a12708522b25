"""The safetensors header validator: the rules safetensors enforces, cross-checked against
the safetensors library itself, and fuzzed (it must never raise)."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flightcheck._checkpoint import validate as v
from flightcheck._checks.checkpoint.kinds import CODE_OF
from support.ckptgen import header_bytes, write_shard

T = [("a.weight", "BF16", [4, 8]), ("b.weight", "F32", [3]), ("c.bias", "U8", [5])]


def raw_shard(entries: dict, data_len: int, *, pad: int = 8) -> bytes:
    """An 8-byte length + a JSON header written by hand + ``data_len`` zero bytes."""
    head = json.dumps(entries, separators=(",", ":")).encode()
    head += b" " * (-len(head) % pad)
    return len(head).to_bytes(8, "little") + head + bytes(data_len)


def codes(scan: v.ShardScan) -> set[str]:
    return {CODE_OF[p.kind] for p in scan.problems}


def test_healthy_shard_is_summarised(tmp_path: Path) -> None:
    p = tmp_path / "s.safetensors"
    size = write_shard(p, T, dense=True)
    scan = v.scan_file(str(p))
    assert scan.ok and scan.size == size and scan.n_tensors == 3
    assert scan.data_end == 64 + 12 + 5
    assert scan.names_digest == v.names_digest(["a.weight", "b.weight", "c.bias"])
    assert sum(g.nbytes for g in scan.groups) == 81 and sum(g.count for g in scan.groups) == 3


def test_header_sha256_only_on_request(tmp_path: Path) -> None:
    import hashlib

    p = tmp_path / "s.safetensors"
    write_shard(p, T, dense=True)
    head, _ = header_bytes(T)
    assert v.scan_file(str(p)).header_sha256 is None
    assert v.scan_file(str(p), sha=True).header_sha256 == hashlib.sha256(head).hexdigest()


@pytest.mark.parametrize(
    "mutate, code, words",
    [
        (lambda b: b[:-3], "FC503", "bytes missing"),
        (lambda b: b + b"\0" * 7, "FC503", "extra bytes"),
        (lambda b: b[:5], "FC503", "too short"),
        (lambda b: (10**12).to_bytes(8, "little") + b[8:], "FC504", "limit"),
        (lambda b: (len(b)).to_bytes(8, "little") + b[8:], "FC504", "only"),
        (lambda b: b[:8] + b"[" + b[9:], "FC504", "not valid JSON"),
        (lambda b: b[:8] + b[8:].replace(b'"F32"', b'"F31"'), "FC504", "unknown dtype 'F31'"),
    ],
    ids=["truncated", "padded", "stub", "header-1TB", "header-past-end", "not-json", "unknown-dtype"],
)
def test_broken_shards_are_named(tmp_path: Path, mutate, code: str, words: str) -> None:
    p = tmp_path / "s.safetensors"
    write_shard(p, T, dense=True)
    p.write_bytes(mutate(p.read_bytes()))
    scan = v.scan_file(str(p))
    assert code in codes(scan), scan.problems
    assert any(words in x.message for x in scan.problems), scan.problems


def test_offsets_overlap_hole_and_span() -> None:
    overlap = {
        "a": {"dtype": "U8", "shape": [8], "data_offsets": [0, 8]},
        "b": {"dtype": "U8", "shape": [8], "data_offsets": [4, 12]},
    }
    hole = {
        "a": {"dtype": "U8", "shape": [8], "data_offsets": [0, 8]},
        "b": {"dtype": "U8", "shape": [8], "data_offsets": [16, 24]},
    }
    late = {"a": {"dtype": "U8", "shape": [8], "data_offsets": [4, 12]}}
    span = {"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}
    for entries, data, words in (
        (overlap, 12, "overlap"),
        (hole, 24, "hole of 8 bytes"),
        (late, 12, "starts at 4"),
        (span, 8, "= 12 bytes"),
    ):
        buf = raw_shard(entries, data)
        scan = v.parse_header(buf, len(buf))
        assert codes(scan) == {"FC504"} and words in scan.problems[0].message, (words, scan.problems)


def test_rules_safetensors_relaxed_or_added() -> None:
    # leading spaces are allowed since safetensors 0.8 (#686); metadata must be str -> str
    ok = (
        b"  "
        + json.dumps(
            {"__metadata__": {"format": "pt"}, "x": {"dtype": "F4", "shape": [3, 4], "data_offsets": [0, 6]}}
        ).encode()
    )
    buf = len(ok).to_bytes(8, "little") + ok + bytes(6)
    assert v.parse_header(buf, len(buf)).ok
    bad_meta = raw_shard({"__metadata__": {"n": 1}, "x": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}}, 1)
    assert "__metadata__" in v.parse_header(bad_meta, len(bad_meta)).problems[0].message
    odd_bits = raw_shard({"x": {"dtype": "F4", "shape": [3], "data_offsets": [0, 2]}}, 2)  # 12 bits: not whole bytes
    assert codes(v.parse_header(odd_bits, len(odd_bits))) == {"FC504"}
    negative = raw_shard({"x": {"dtype": "U8", "shape": [-1], "data_offsets": [0, 1]}}, 1)
    assert "invalid shape" in v.parse_header(negative, len(negative)).problems[0].message
    no_offsets = raw_shard({"x": {"dtype": "U8", "shape": [1]}}, 1)
    assert "has no data_offsets" in v.parse_header(no_offsets, len(no_offsets)).problems[0].message
    empty = raw_shard({"__metadata__": {"format": "pt"}}, 0)
    assert v.parse_header(empty, len(empty)).ok


def test_metadata_after_the_header_is_data_not_metadata() -> None:
    """The header is parsed as a view of the buffer: bytes past its length (tensor data
    that happens to spell a bad ``__metadata__``) are never read as header."""
    good = raw_shard({"x": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]}}, 0)
    buf = good + b'"__metadata__":{"n":1}'
    assert v.parse_header(buf).ok
    bad = raw_shard({"__metadata__": {"n": 1}, "x": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]}}, 0)
    assert "__metadata__" in v.parse_header(bad + b'"__metadata__":{"format":"pt"}').problems[0].message


def test_a_header_rewritten_between_its_two_reads_is_read_as_two_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """read_header reads the length, then length + header in one buffer; when the length
    it read first is no longer the file's, it reads the header after that length instead,
    as two separate reads would."""
    from flightcheck._checkpoint import shardio

    buf = raw_shard({"x": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]}}, 2)
    path = tmp_path / "m.safetensors"
    path.write_bytes(buf)
    n = int.from_bytes(buf[:8], "little")
    assert shardio.read_header(str(path)) == (len(buf), buf[: 8 + n])
    real = shardio.pread_all

    def rewritten(fd: int, size: int, offset: int, expect: int | None = None) -> bytes:
        got = real(fd, size, offset, expect)
        return b"\xff" * 8 + got[8:] if (size, offset) == (8 + n, 0) else got

    monkeypatch.setattr(shardio, "pread_all", rewritten)
    assert shardio.read_header(str(path)) == (len(buf), buf[: 8 + n])


@pytest.mark.parametrize("where", ["tensor", "metadata"])
def test_absurd_nesting_is_invalid_not_a_crash(where: str) -> None:
    deep = b"[" * 200_000 + b"]" * 200_000 if where == "tensor" else b'{"a":' * 200_000 + b"1" + b"}" * 200_000
    raw = b'{"' + (b"x" if where == "tensor" else b"__metadata__") + b'":' + deep + b"}"
    buf = len(raw).to_bytes(8, "little") + raw
    scan = v.parse_header(buf, len(buf))
    assert codes(scan) == {"FC504"}, scan.problems


def test_not_a_regular_file_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "f.safetensors"
    os.mkfifo(fifo)  # opening a FIFO for reading would block forever
    assert "not a regular file" in v.scan_file(str(fifo)).problems[0].message
    loop = tmp_path / "loop.safetensors"
    loop.symlink_to(loop)
    assert codes(v.scan_file(str(loop))) == {"FC508"}
    assert codes(v.scan_file(str(tmp_path / "absent.safetensors"))) == {"FC508"}


def test_groups_fold_expert_blocks_and_count_per_expert() -> None:
    names = []
    for layer in (3, 4):
        for e in range(12):
            for proj in ("down_proj", "gate_proj", "up_proj"):
                names.append((f"model.layers.{layer}.mlp.experts.{e}.{proj}.weight", "BF16", [8, 4]))
        names.append((f"model.layers.{layer}.input_layernorm.weight", "BF16", [4]))
    head, end = header_bytes(names)
    scan = v.parse_header(head + bytes(end), len(head) + end)
    assert scan.ok
    blocks = [g for g in scan.groups if g.pattern.endswith("experts.#.*")]
    assert [(g.index, g.count, g.per_item, g.nbytes) for g in blocks] == [(3, 36, 3, 36 * 64), (4, 36, 3, 36 * 64)]
    norms = [g for g in scan.groups if "layernorm" in g.pattern]
    assert {(g.pattern, g.index) for g in norms} == {
        ("model.layers.#.input_layernorm.weight", 3),
        ("model.layers.#.input_layernorm.weight", 4),
    }


@pytest.mark.parametrize("case", ["ok", "truncated", "padded", "overlap", "hole", "span", "dtype", "json", "length"])
def test_agrees_with_the_safetensors_library(tmp_path: Path, case: str) -> None:
    """Whatever safetensors' own reader accepts we accept, and the reverse."""
    safetensors = pytest.importorskip("safetensors")
    good = {
        "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
        "b": {"dtype": "U8", "shape": [4], "data_offsets": [8, 12]},
    }
    entries, data = json.loads(json.dumps(good)), 12
    if case == "overlap":
        entries["b"]["data_offsets"] = [4, 8]
        entries["b"]["shape"] = [4]
        data = 8
    elif case == "hole":
        entries["b"]["data_offsets"] = [10, 14]
        data = 14
    elif case == "span":
        entries["a"]["shape"] = [3]
    elif case == "dtype":
        entries["a"]["dtype"] = "F7"
    buf = raw_shard(entries, data)
    if case == "truncated":
        buf = buf[:-1]
    elif case == "padded":
        buf = buf + b"\0"
    elif case == "json":
        buf = buf[:8] + b"{" + buf[9:]
    elif case == "length":
        buf = (len(buf)).to_bytes(8, "little") + buf[8:]
    p = tmp_path / "x.safetensors"
    p.write_bytes(buf)
    try:
        with safetensors.safe_open(str(p), framework="numpy") as f:
            f.keys()
        theirs = True
    except Exception:  # noqa: BLE001 - any error means safetensors refuses the file
        theirs = False
    assert v.scan_file(str(p)).ok is theirs, (case, v.scan_file(str(p)).problems)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300), st.integers(min_value=0, max_value=1 << 40))
def test_fuzz_random_bytes_never_raise(buf: bytes, size: int) -> None:
    scan = v.parse_header(buf, size)
    assert isinstance(scan, v.ShardScan)
    assert scan.ok or CODE_OF[scan.problems[0].kind] in ("FC503", "FC504")


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.text(max_size=8),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=6), c, max_size=4),
    max_leaves=12,
)
_entry = st.fixed_dictionaries(
    {
        "dtype": st.sampled_from(["F32", "BF16", "U8", "F4", "I64", "X"]),
        "shape": st.lists(st.integers(-2, 6), max_size=3),
        "data_offsets": st.lists(st.integers(-2, 64), min_size=0, max_size=3),
    }
)


@settings(max_examples=400, deadline=None)
@given(
    st.dictionaries(st.text(min_size=1, max_size=12), _entry | _json, max_size=6), st.integers(0, 128), st.booleans()
)
def test_fuzz_structured_headers_never_raise(entries: dict, data: int, exact: bool) -> None:
    """Near-valid headers: every answer is a verdict, and 'ok' means the rules hold."""
    head = json.dumps(entries).encode()
    buf = len(head).to_bytes(8, "little") + head + bytes(data)
    scan = v.parse_header(buf, len(buf) if exact else None)
    if scan.ok:
        tensors = {k: e for k, e in entries.items() if k != "__metadata__"}
        spans = sorted(tuple(e["data_offsets"]) for e in tensors.values())
        assert all(a[1] == b[0] for a, b in itertools.pairwise(spans)) and (not spans or spans[0][0] == 0)
        if exact:
            assert len(buf) == 8 + len(head) + (spans[-1][1] if spans else 0)


@pytest.mark.parametrize("dtype", [[], {}, ["F16"], None, 3])
def test_a_dtype_that_is_not_a_string_is_a_bad_header_not_a_crash(dtype: object) -> None:
    """Hypothesis found ``{"0": {"dtype": []}}`` raising TypeError (unhashable) out of the
    slow-path explanation; the library refuses the file, and so must we, in one finding."""
    h = json.dumps({"0": {"dtype": dtype, "shape": [1], "data_offsets": [0, 2]}}).encode()
    buf = len(h).to_bytes(8, "little") + h
    scan = v.parse_header(buf, len(buf) + 2)
    assert codes(scan) == {"FC504"} and "dtype" in scan.problems[0].message


#: Headers written byte by byte (``json.dumps`` cannot repeat a key or spell ``-0``), each
#: with whether safetensors 0.8.0's ``safe_open`` opens it (measured; serde_json refuses a
#: repeated struct field and reads ``-0`` as the float -0.0, never a usize).
_RAW_HEADERS: list[tuple[str, bytes, int, bool]] = [
    ("metadata-null", b'{"__metadata__":null,"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}', 8, True),
    ("metadata-empty", b'{"__metadata__":{},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}', 8, True),
    (
        "metadata-twice",
        (
            b'{"__metadata__":{"format":"pt"},"__metadata__":{"format":"pt"},'
            b'"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'
        ),
        8,
        False,
    ),
    (
        "metadata-twice-escaped",
        (
            b'{"\\u005f_metadata__":{"x":"1"},"__metadata__":{"format":"pt"},'
            b'"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'
        ),
        8,
        False,
    ),
    (
        "metadata-null-twice",
        b'{"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"__metadata__":null}',
        8,
        False,
    ),
    (
        "metadata-key-twice",
        b'{"__metadata__":{"x":"1","x":"2"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}',
        8,
        True,
    ),
    (
        "metadata-escaped-int",
        b'{"\\u005f_metadata__":{"x":1},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}',
        8,
        False,
    ),
    ("dtype-twice", b'{"a":{"dtype":"F32","dtype":"F32","shape":[2],"data_offsets":[0,8]}}', 8, False),
    ("dtype-twice-escaped", b'{"a":{"dtype":"F32","dt\\u0079pe":"F32","shape":[2],"data_offsets":[0,8]}}', 8, False),
    ("dtype-escaped", b'{"a":{"dt\\u0079pe":"F32","shape":[2],"data_offsets":[0,8]}}', 8, True),
    ("shape-twice", b'{"a":{"dtype":"F32","shape":[2],"shape":[2],"data_offsets":[0,8]}}', 8, False),
    ("offsets-twice", b'{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"data_offsets":[0,8]}}', 8, False),
    ("unknown-field-twice", b'{"a":{"dtype":"F32","x":1,"x":2,"shape":[2],"data_offsets":[0,8]}}', 8, True),
    (
        "tensor-twice",
        b'{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}',
        8,
        True,
    ),
    (
        "shape-minus-zero",
        (
            b'{"a":{"dtype":"F32","shape":[-0,2],"data_offsets":[0,0]},'
            b'"b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'
        ),
        8,
        False,
    ),
    ("offset-minus-zero", b'{"a":{"dtype":"F32","shape":[2],"data_offsets":[-0,8]}}', 8, False),
    ("minus-zero-in-a-name", b'{"a-0":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}', 8, True),
    ("minus-zero-unknown-field", b'{"a":{"dtype":"F32","x":-0,"shape":[2],"data_offsets":[0,8]}}', 8, True),
    ("tensor-null", b'{"a":null}', 0, False),
]


@pytest.mark.parametrize("case, head, data, opens", _RAW_HEADERS, ids=[c[0] for c in _RAW_HEADERS])
def test_what_safe_open_refuses_in_the_json_we_refuse(
    tmp_path: Path, case: str, head: bytes, data: int, opens: bool
) -> None:
    """A header ``safe_open`` opens is never FC504 (``"__metadata__": null`` was), and one
    it refuses (a repeated ``__metadata__`` or field, ``-0``) never passes; checked against
    the real library where it is installed, else against what it was measured to do."""
    buf = len(head).to_bytes(8, "little") + head + bytes(data)
    scan = v.parse_header(buf, len(buf))
    assert scan.ok is opens, (case, scan.problems)
    if not opens:
        assert codes(scan) == {"FC504"}
    try:
        import safetensors
    except ImportError:
        return
    p = tmp_path / "x.safetensors"
    p.write_bytes(buf)
    try:
        with safetensors.safe_open(str(p), framework="numpy") as f:
            f.keys()
        theirs = True
    except Exception:  # noqa: BLE001 - any error means safetensors refuses the file
        theirs = False
    assert theirs is opens, (case, "safetensors changed: re-measure")
