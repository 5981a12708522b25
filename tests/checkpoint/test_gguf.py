"""The GGUF header reader (flightcheck._checkpoint.gguf): valid files give their tensors and
sizes, malformed ones the problem kinds safetensors' would, hostile ones neither crash nor
allocate without bound; and, where the ``gguf`` package is installed, it agrees with
``gguf.GGUFReader`` (the reader vLLM's Flint model loads GGUF with) file for file."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flightcheck._checkpoint import gguf as gg
from flightcheck._checkpoint.problems import Kind
from support.ckptgen import load_config
from support.evaluation import evaluated, facts, host_doc, results
from support.ggufgen import (
    ARRAY,
    F32,
    FLINT_TENSORS,
    I32,
    Q4_K_T,
    Q8_0_T,
    STRING,
    U8,
    U32,
    U64,
    flint_model,
    gguf_bytes,
    nbytes,
    write_gguf,
)

TOKENS = [f"tok{i}" for i in range(300)]
KV: list[tuple[str, int, Any]] = [
    ("general.architecture", STRING, "flint"),
    ("flint.block_count", U32, 1),
    ("tokenizer.ggml.tokens", ARRAY, (STRING, TOKENS)),
    ("tokenizer.ggml.scores", ARRAY, (F32, [0.5] * 300)),
    ("x.nested", ARRAY, (ARRAY, [(U8, [1, 2, 3]), (I32, [-1])])),
    ("x.empty", ARRAY, (77, [])),  # an unknown element type, never looked at: no elements
]
TENSORS = FLINT_TENSORS + [("blk.0.ffn_up.weight", (256, 2), Q4_K_T), ("blk.0.ffn_down.weight", (64, 3), Q8_0_T)]


def kinds(scan: gg.GGUFScan) -> list[str]:
    return [k for k, _ in scan.problems]


def test_a_valid_header_gives_every_tensor_and_its_size() -> None:
    raw = gguf_bytes(kv=KV, tensors=TENSORS)
    scan = gg.parse_bytes(raw)
    assert scan.ok, scan.problems
    assert (scan.version, scan.n_tensors, scan.n_kv, scan.alignment) == (3, len(TENSORS), len(KV), 32)
    assert [(t.name, t.dims, t.ggml_type) for t in scan.tensors] == [(n, d, t) for n, d, t in TENSORS]
    # sizes from the ggml type table: BF16 2 bytes a value, NVFP4 36 bytes a 64-value block,
    # Q4_K 144 bytes a 256-value block, Q8_0 34 bytes a 32-value block
    assert [t.nbytes for t in scan.tensors] == [128 * 32 * 2, 128 * 128 // 64 * 36, 4, 128 * 4, 2 * 144, 6 * 34]
    assert scan.weight_bytes == sum(nbytes(d, t) for _, d, t in TENSORS)
    assert scan.metadata["general.architecture"] == "flint" and scan.architecture == "flint"
    assert scan.metadata["flint.block_count"] == 1
    assert scan.metadata["tokenizer.ggml.tokens"] == ("array", STRING, 300)
    assert scan.data_offset % 32 == 0 and scan.data_end <= len(raw)
    assert scan.tensors[1].type_name == "NVFP4"


def test_version_2_big_endian_and_a_custom_alignment() -> None:
    for kw in ({"version": 2}, {"order": ">"}, {"alignment": 256}):
        kv = KV + ([("general.alignment", U32, kw["alignment"])] if "alignment" in kw else [])
        raw = gguf_bytes(kv=kv, tensors=TENSORS, **kw)
        scan = gg.parse_bytes(raw)
        assert scan.ok, (kw, scan.problems)
        assert scan.weight_bytes == sum(nbytes(d, t) for _, d, t in TENSORS), kw
        assert scan.big_endian == (kw.get("order") == ">")
        assert scan.data_offset % kw.get("alignment", 32) == 0


def patch(raw: bytes, old: bytes, new: bytes) -> bytes:
    assert raw.count(old) >= 1, old
    return raw.replace(old, new, 1)


def malformed() -> dict[str, tuple[bytes, str]]:
    """name -> (file, the problem kind it must give)."""
    good = gguf_bytes(kv=KV, tensors=TENSORS)
    header = gguf_bytes(kv=KV, tensors=TENSORS, data=False)
    s = lambda b: struct.pack("<Q", len(b)) + b
    return {
        "not gguf": (b"PK\x03\x04" + good[4:], Kind.BAD_HEADER),
        "version 1": (good[:4] + struct.pack("<I", 1) + good[8:], Kind.BAD_HEADER),
        "version 4": (good[:4] + struct.pack("<I", 4) + good[8:], Kind.BAD_HEADER),
        "three bytes": (b"GGU", Kind.TRUNCATED),
        "cut in the header": (good[: len(header) // 2], Kind.TRUNCATED),
        "cut in the data": (good[:-10], Kind.TRUNCATED),
        "data section absent": (header, Kind.TRUNCATED),
        "duplicate key": (
            gguf_bytes(kv=KV + [("general.architecture", STRING, "llama")], tensors=TENSORS),
            Kind.BAD_HEADER,
        ),
        "a key named like the reader's own field": (
            gguf_bytes(kv=[("GGUF.version", U32, 3)], tensors=TENSORS),
            Kind.BAD_HEADER,
        ),
        "duplicate tensor": (gguf_bytes(kv=KV, tensors=TENSORS + [TENSORS[0]]), Kind.BAD_HEADER),
        "unknown ggml type": (gguf_bytes(kv=KV, tensors=[("t", (4,), 5)]), Kind.BAD_HEADER),
        "unknown value type": (
            patch(
                good, s(b"flint.block_count") + struct.pack("<I", U32), s(b"flint.block_count") + struct.pack("<I", 13)
            ),
            Kind.BAD_HEADER,
        ),
        "array of an unknown type": (
            patch(
                good,
                s(b"x.empty") + struct.pack("<IIQ", ARRAY, 77, 0),
                s(b"x.empty") + struct.pack("<IIQ", ARRAY, 77, 1),
            ),
            Kind.BAD_HEADER,
        ),
        "key not UTF-8": (patch(good, s(b"flint.block_count"), s(b"flint.block\xffount")), Kind.BAD_HEADER),
        "tensor name not UTF-8": (patch(good, s(b"output_norm.weight"), s(b"output_norm.weigh\xff")), Kind.BAD_HEADER),
        "a quantized row that is not whole blocks": (
            gguf_bytes(kv=KV, tensors=[("t", (100, 2), Q8_0_T)]),
            Kind.BAD_HEADER,
        ),
        "alignment not a power of two": (
            gguf_bytes(kv=KV + [("general.alignment", U32, 48)], tensors=TENSORS, alignment=48),
            Kind.BAD_HEADER,
        ),
        "alignment not a uint32": (
            gguf_bytes(kv=KV + [("general.alignment", U64, 32)], tensors=TENSORS),
            Kind.BAD_HEADER,
        ),
        "a count of 2^62 key/value pairs": (good[:16] + struct.pack("<Q", 1 << 62) + good[24:], Kind.BAD_HEADER),
        "a count of 2^62 tensors": (good[:8] + struct.pack("<Q", 1 << 62) + good[16:], Kind.BAD_HEADER),
        "a string of 2^63 bytes": (patch(good, s(b"flint"), struct.pack("<Q", 1 << 63) + b"flint"), Kind.BAD_HEADER),
        "an array of 2^60 strings": (
            patch(good, struct.pack("<IQ", STRING, 300), struct.pack("<IQ", STRING, 1 << 60)),
            Kind.BAD_HEADER,
        ),
        "a tensor offset past the end": (_offset_past_end(), Kind.TRUNCATED),
    }


def _offset_past_end() -> bytes:
    raw = bytearray(gguf_bytes(kv=KV, tensors=TENSORS))
    name = struct.pack("<Q", len(b"output_norm.weight")) + b"output_norm.weight"
    at = raw.index(name) + len(name) + 4 + 8 + 4  # n_dims (1), one dim, type: then the offset
    raw[at : at + 8] = struct.pack("<Q", 1 << 40)
    return bytes(raw)


@pytest.mark.parametrize("case", sorted(malformed()))
def test_malformed_headers_give_the_kinds_of_malformed_safetensors(case: str) -> None:
    raw, kind = malformed()[case]
    scan = gg.parse_bytes(raw)
    assert kinds(scan) == [kind], (case, scan.problems)
    if kind == Kind.TRUNCATED:
        assert "truncated" in scan.problems[0][1]


def test_a_hostile_count_is_refused_before_anything_is_read_for_it() -> None:
    """2^62 key/value pairs in a 100-byte file: refused from the count alone, having asked
    for no more bytes than the file holds."""
    raw = gguf_bytes(kv=KV, tensors=TENSORS)
    raw = raw[:16] + struct.pack("<Q", 1 << 62) + raw[24:100]
    asked: list[int] = []

    def fetch(off: int, n: int) -> bytes:
        asked.append(n)
        return raw[off : off + n]

    scan = gg.parse(fetch, len(raw))
    assert kinds(scan) == [Kind.BAD_HEADER] and "4,611,686,018,427,387,904 key/value pairs" in scan.problems[0][1]
    assert sum(asked) <= len(raw)
    # a header that claims to run past MAX_HEADER in a file that long is not read to its end
    big = 10 * gg.MAX_HEADER
    head = gguf_bytes(kv=[("a", STRING, "x")], tensors=[], data=False)
    head = patch(head, struct.pack("<Q", 1) + b"x", struct.pack("<Q", gg.MAX_HEADER) + b"x")
    asked.clear()
    scan = gg.parse(lambda off, n: (asked.append(n), (head + b"\0" * n)[off : off + n])[1], big)
    assert kinds(scan) == [Kind.BAD_HEADER] and sum(asked) <= gg.MAX_HEADER


def test_reading_a_file(tmp_path: Path) -> None:
    p = write_gguf(tmp_path / "m.gguf", kv=KV, tensors=TENSORS)
    scan = gg.read(p)
    assert scan.ok and scan.size == p.stat().st_size and len(scan.tensors) == len(TENSORS)
    fifo = tmp_path / "fifo.gguf"
    import os

    os.mkfifo(fifo)
    assert kinds(gg.read(fifo)) == [Kind.UNREADABLE]  # never opened: it would block
    assert kinds(gg.read(tmp_path / "absent.gguf")) == [Kind.UNREADABLE]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cut=st.integers(min_value=0, max_value=4000),
    edits=st.lists(st.tuples(st.integers(min_value=0, max_value=3999), st.integers(0, 255)), max_size=6),
)
def test_fuzz_truncated_and_mutated_headers_never_crash(cut: int, edits: list[tuple[int, int]]) -> None:
    """Any prefix of a valid file, with any bytes changed: a scan comes back (no exception),
    its problems are of the reader's kinds, and no more bytes are asked for than the file has."""
    raw = bytearray(gguf_bytes(kv=KV, tensors=TENSORS))
    for at, byte in edits:
        if at < len(raw):
            raw[at] = byte
    data = bytes(raw[: min(cut, len(raw))] if cut < len(raw) else raw)
    asked = [0]

    def fetch(off: int, n: int) -> bytes:
        asked[0] += n
        return data[off : off + n]

    scan = gg.parse(fetch, len(data))
    assert asked[0] <= max(len(data), 1 << 20)
    assert set(kinds(scan)) <= {Kind.TRUNCATED, Kind.BAD_HEADER}
    if scan.ok:
        assert scan.data_end <= len(data) and all(t.nbytes >= 0 for t in scan.tensors)


# ---- against the gguf package (the reader vLLM loads GGUF with), when installed ----------


def _reader_accepts(path: Path) -> bool | None:
    gguf = pytest.importorskip("gguf")
    try:
        reader = gguf.GGUFReader(str(path))
    except Exception:  # noqa: BLE001 - any refusal: ValueError, KeyError, IndexError, ...
        return False
    return reader is not None


def test_the_gguf_package_reads_our_files_as_we_do(tmp_path: Path) -> None:
    gguf = pytest.importorskip("gguf")
    for i, kw in enumerate(({}, {"version": 2}, {"order": ">"})):
        p = write_gguf(tmp_path / f"ok{i}.gguf", kv=KV, tensors=TENSORS, **kw)
        reader = gguf.GGUFReader(str(p))
        scan = gg.read(p)
        assert scan.ok
        assert [(t.name, int(t.n_bytes), int(t.data_offset), int(t.tensor_type)) for t in reader.tensors] == [
            (t.name, t.nbytes, scan.data_offset + t.offset, t.ggml_type) for t in scan.tensors
        ]
        assert reader.data_offset == scan.data_offset


@pytest.mark.parametrize("case", sorted(malformed()))
def test_the_gguf_package_refuses_what_we_call_malformed(tmp_path: Path, case: str) -> None:
    raw, _kind = malformed()[case]
    p = tmp_path / "bad.gguf"
    p.write_bytes(raw)
    assert _reader_accepts(p) is False, case


def test_files_the_gguf_package_writes_read_as_it_reads_them(tmp_path: Path) -> None:
    gguf = pytest.importorskip("gguf")
    np = pytest.importorskip("numpy")
    p = tmp_path / "w.gguf"
    w = gguf.GGUFWriter(str(p), "llama")
    w.add_block_count(2)
    w.add_token_list(["a", "bb", "ccc"])
    w.add_custom_alignment(64)
    w.add_tensor("f32", np.zeros((4, 64), dtype=np.float32))
    w.add_tensor("q8", np.zeros((8, 68), dtype=np.uint8), raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    w.add_tensor("bf16", np.zeros((3, 16), dtype=np.uint16), raw_dtype=gguf.GGMLQuantizationType.BF16)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    reader = gguf.GGUFReader(str(p))
    scan = gg.read(p)
    assert scan.ok and scan.alignment == 64 and scan.architecture == "llama"
    assert [(t.name, int(t.n_bytes), int(t.data_offset)) for t in reader.tensors] == [
        (t.name, t.nbytes, scan.data_offset + t.offset) for t in scan.tensors
    ]
    assert [t.nbytes for t in scan.tensors] == [4 * 64 * 4, 8 * 68, 3 * 16 * 2]


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(
    cut=st.integers(min_value=0, max_value=4000),
    edits=st.lists(st.tuples(st.integers(min_value=0, max_value=3999), st.integers(0, 255)), max_size=3),
)
def test_fuzz_we_refuse_only_what_the_gguf_package_refuses(
    tmp_path: Path, cut: int, edits: list[tuple[int, int]]
) -> None:
    """A header we accept, the gguf reader accepts: flightcheck never stops a GGUF that
    vLLM reads (the other way, gguf may accept what we refuse only where it reads a slice
    past the end of the file as shorter, which we call truncated)."""
    pytest.importorskip("gguf")
    raw = bytearray(gguf_bytes(kv=KV, tensors=TENSORS))
    for at, byte in edits:
        if at < len(raw):
            raw[at] = byte
    data = bytes(raw[:cut] if cut < len(raw) else raw)
    p = tmp_path / "f.gguf"
    p.write_bytes(data)
    scan = gg.read(p)
    accepted = _reader_accepts(p) if data else False
    if accepted is False:
        assert not scan.ok, scan
    if scan.ok:
        assert accepted


# ---- through the checks ----------------------------------------------------------------

FLINT = {**load_config("tiny-llama"), "architectures": ["FlintForCausalLM"], "model_type": "flint"}
#: a GGUF vLLM's Flint loads (TENSORS has Q4_K / Q8_0 tensors, which its loader refuses)
LOADABLE = flint_model()[1]


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def flint_dir(tmp_path: Path, config: dict[str, Any] = FLINT, **kw: Any) -> Path:
    root = tmp_path / "flint"
    root.mkdir(exist_ok=True)
    (root / "config.json").write_text(json.dumps(config))
    write_gguf(root / "flint-nvfp4.gguf", kv=KV, tensors=LOADABLE, **kw)
    return root


def run(model: Path) -> dict[str, list]:
    return results(facts("b300", env=host_doc("b300")["env"]), model=str(model))


def errors(res: dict[str, list]) -> list[tuple[str, str]]:
    """The FC5xx error failures; a crashed FC5xx check fails the test."""
    for code, got in res.items():
        if code.startswith("FC5"):
            evaluated(code, got)
    return [
        (c, r.message)
        for c, rs in res.items()
        if c.startswith("FC5")
        for r in rs
        if r.status.value == "fail" and r.severity.value == "error"
    ]


def test_fc503_does_not_stop_a_valid_gguf_model_and_counts_its_tensors(tmp_path: Path) -> None:
    root = flint_dir(tmp_path)
    res = run(root)
    assert errors(res) == []
    (r,) = res["FC502"]
    weights = sum(nbytes(d, t) for _, d, t in LOADABLE)
    assert r.status.value == "skip" and f"{len(LOADABLE)} tensors" in r.message, r.message
    (r,) = res["FC510"]
    assert r.evidence["load_bytes"] == (root / "flint-nvfp4.gguf").stat().st_size
    from flightcheck._checkpoint import load

    ck = load(str(root))
    assert ck.gguf_weight_bytes == weights and ck.tensor_count == len(LOADABLE)


def test_a_broken_gguf_stops_flint_which_loads_it_and_nothing_else(tmp_path: Path) -> None:
    root = flint_dir(tmp_path)
    p = root / "flint-nvfp4.gguf"
    p.write_bytes(p.read_bytes()[:-100])
    res = run(root)
    assert [c for c, _ in errors(res)] == ["FC503"]
    assert "flint-nvfp4.gguf" in errors(res)[0][1] and "truncated" in errors(res)[0][1]
    # the same file beside a model vLLM does not read GGUF for: never opened, so a warning
    (root / "config.json").write_text(json.dumps(load_config("tiny-llama")))
    res = run(root)
    assert errors(res) == []
    (r,) = [r for r in res["FC503"] if r.status.value == "fail"]
    assert r.severity.value == "warning"
    # a bad header: FC504, as for safetensors
    (root / "config.json").write_text(json.dumps(FLINT))
    p.write_bytes(b"GGUF\x09\0\0\0" + b"\0" * 64)
    assert [c for c, _ in errors(run(root))] == ["FC504"]


def test_a_single_gguf_file_is_read_and_summed_up(tmp_path: Path) -> None:
    p = write_gguf(tmp_path / "m.gguf", kv=KV, tensors=TENSORS)
    res = run(p)
    (r,) = res["FC501"]
    assert r.severity.value == "warning" and f"{len(TENSORS)} tensors" in r.message and "flint" in r.message
    p.write_bytes(p.read_bytes()[:50])
    res = run(p)
    assert errors(res) == []
    (r,) = res["FC501"]
    assert "truncated" in r.message
