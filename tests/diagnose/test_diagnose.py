"""``flightcheck diagnose``: real failed-launch logs from public issues (each with its source
in tests/fixtures/logs/sources.json) name the right check; failures outside the catalogue
name none; the input may be gzip, piped, long-lined, non-UTF-8; secrets never come out."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from flightcheck._diagnose import SCHEMA, check_host, diagnose
from support.cli import cli_in_process

LOGS = Path(__file__).parent.parent / "fixtures" / "logs"
CASES = json.loads((LOGS / "sources.json").read_text())
KNOWN = [c for c in CASES if c["expect"] not in (None, "ok")]
OUTSIDE = [c for c in CASES if c["expect"] is None]


def test_fixtures_have_sources() -> None:
    assert len(KNOWN) >= 20 and len(OUTSIDE) >= 5
    for case in CASES:
        assert (LOGS / case["file"]).is_file()
        if case["expect"] != "ok":
            assert case["url"].startswith("https://github.com/"), case


@pytest.mark.parametrize("case", KNOWN, ids=[c["file"] for c in KNOWN])
def test_known_cause_names_its_check(case: dict) -> None:
    doc = diagnose(str(LOGS / case["file"]))
    assert doc["schema"] == SCHEMA
    assert doc["failed"] and doc["exit_code"] == 1
    assert doc["causes"][0]["code"] == case["expect"]
    assert doc["root"]["known"] and doc["root"]["code"] == case["expect"]
    assert doc["causes"][0]["fix"], "the fix comes from the check's documentation"


def test_known_causes_at_least_90_percent() -> None:
    right = sum(1 for c in KNOWN if [x["code"] for x in diagnose(str(LOGS / c["file"]))["causes"]][:1] == [c["expect"]])
    assert right / len(KNOWN) >= 0.9


@pytest.mark.parametrize("case", OUTSIDE, ids=[c["file"] for c in OUTSIDE])
def test_failure_outside_the_catalogue_names_no_code(case: dict) -> None:
    doc = diagnose(str(LOGS / case["file"]))
    assert doc["causes"] == []
    assert doc["failed"] and doc["exit_code"] == 3
    assert doc["root"]["known"] is False and doc["root"]["code"] is None
    # the most likely root line is the exception, not a wrapper
    assert "Engine core initialization failed" not in doc["root"]["line"]
    assert "EngineDeadError" not in doc["root"]["line"]


def test_no_failure_is_exit_0() -> None:
    doc = diagnose(str(LOGS / "ok_healthy_serving.log"))
    assert doc["failed"] is False and doc["exit_code"] == 0 and doc["root"] is None
    rc, out, _ = cli_in_process("diagnose", str(LOGS / "ok_healthy_serving.log"))
    assert rc == 0 and "No failure found" in out


def test_root_line_across_ranks_and_phase() -> None:
    doc = diagnose(str(LOGS / "fc101_nvcc_worker_tp.log"))
    cause = doc["causes"][0]
    assert cause["phase"] == "profile"  # the sampler's JIT in the profile run, after the load
    assert set(cause["ranks"]) == {"TP0", "TP1"} and cause["occurrences"] >= 2
    assert cause["elapsed_s"] is not None and cause["elapsed_s"] > 800  # 22:13:01 -> 22:28:17
    assert doc["launch"]["engine"] == "vllm" and doc["launch"]["version"] == "0.11.0"
    assert doc["launch"]["args"]["tensor_parallel_size"] == 2


def test_graph_and_load_phases() -> None:
    assert diagnose(str(LOGS / "fc503_metadata_incomplete.log"))["causes"][0]["phase"] == "load"
    assert diagnose(str(LOGS / "none_cuda_oom_serving.log"))["root"]["phase"] == "serving"


def test_cuda_oom_names_fc401_only_during_the_load(tmp_path: Path) -> None:
    lines = [
        "INFO 01-01 00:00:00 [api_server.py:1] vLLM API server version 0.11.0",
        "INFO 01-01 00:00:05 [gpu_model_runner.py:1] Starting to load model /m...",
        "Traceback (most recent call last):",
        '  File "/v/vllm/model_executor/model_loader/default_loader.py", line 1, in load_weights',
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB.",
    ]
    log = tmp_path / "oom.log"
    log.write_text("\n".join(lines) + "\n")
    assert [c["code"] for c in diagnose(str(log))["causes"]] == ["FC401"]


def test_secrets_echoed_by_the_engine_are_redacted() -> None:
    for name, secret in (
        ("fc101_nvcc_worker_tp.log", "sk-live-0123456789abcdefghijklmnop"),
        ("fc401_sglang_mem_fraction.log", "abc-secret-123"),
        ("fc503_metadata_incomplete.log", "local-demo-key"),
    ):
        assert secret in (LOGS / name).read_text()
        for fmt in ("json", "text"):
            rc, out, err = cli_in_process("diagnose", "--format", fmt, str(LOGS / name))
            assert rc == 1
            assert secret not in out and secret not in err
        doc = diagnose(str(LOGS / name))
        assert doc["launch"]["args"]["api_key"] == "<redacted>"


def test_gzip_and_stdin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = LOGS / "fc304_nvls_bind_401.log"
    gz = tmp_path / "log.gz"
    with open(src, "rb") as f, gzip.open(gz, "wb") as g:
        shutil.copyfileobj(f, g)
    doc = diagnose(str(gz))
    assert doc["input"]["gzip"] and doc["causes"][0]["code"] == "FC304"

    import io
    import sys

    class Stdin:
        buffer = io.BufferedReader(io.BytesIO(gz.read_bytes()))  # type: ignore[arg-type]

        def isatty(self) -> bool:
            return False

    monkeypatch.setattr(sys, "stdin", Stdin())
    rc, out, _ = cli_in_process("diagnose", "--format", "json", "-")
    assert rc == 1 and json.loads(out)["causes"][0]["code"] == "FC304"


def test_cut_gzip_stream_is_a_problem_not_a_traceback(tmp_path: Path) -> None:
    data = gzip.compress((LOGS / "fc101_nvcc_worker_tp.log").read_bytes())
    cut = tmp_path / "cut.gz"
    cut.write_bytes(data[: len(data) // 2])
    rc, out, err = cli_in_process("diagnose", "--format", "json", str(cut))
    assert rc in (0, 1, 3) and "Traceback" not in err
    assert json.loads(out)["input"]["problem"]


def test_long_line_and_bad_bytes(tmp_path: Path) -> None:
    log = tmp_path / "odd.log"
    body = (LOGS / "fc601_bus_error_ray.log").read_bytes()
    log.write_bytes(b"\xff\xfe\x00garbage \x1b[31m" + b"=" * 3_000_000 + b"\n" + b"\xc3\x28 bad utf8\n" + body)
    doc = diagnose(str(log))
    assert doc["input"]["long_lines"] == 1
    assert doc["causes"][0]["code"] == "FC601"


def test_bad_input_is_exit_2(tmp_path: Path) -> None:
    rc, _, err = cli_in_process("diagnose", str(tmp_path))
    assert rc == 2 and err.count("\n") == 1 and "directory" in err
    rc, _, err = cli_in_process("diagnose", str(tmp_path / "missing.log"))
    assert rc == 2 and err.count("\n") == 1


def test_text_output_names_cause_fix_and_phase() -> None:
    rc, out, _ = cli_in_process("diagnose", str(LOGS / "fc101_nvcc_worker_tp.log"))
    assert rc == 1
    assert "FC101 nvcc-missing (root cause)" in out
    assert "in the profile run" in out and "after the start" in out
    assert "fix:" in out and "flightcheck explain FC101" in out


def test_explain_and_rules_show_log_lines() -> None:
    rc, out, _ = cli_in_process("explain", "FC601")
    assert rc == 0 and "Log lines it explains" in out and "Fatal Python error: Bus error" in out
    rc, out, _ = cli_in_process("rules", "--format", "markdown")
    assert rc == 0 and "#### Log lines it explains" in out


def test_check_says_whether_the_cause_is_still_here(tmp_path: Path) -> None:
    from flightcheck._examples import EXAMPLES  # noqa: F401 - the bundled nodes

    examples = Path(__import__("flightcheck._examples", fromlist=["x"]).__file__).parent
    doc = diagnose(str(LOGS / "fc101_nvcc_worker_tp.log"))
    broken = check_host(doc, [str(examples / "b300-no-toolkit.json")])
    assert broken["intent"]["tensor_parallel_size"] == 2
    assert [c["state"] for c in broken["causes"]] == ["still-here"]
    doc = diagnose(str(LOGS / "fc101_nvcc_worker_tp.log"))
    healthy = check_host(doc, [str(examples / "b300.json")])
    assert [c["state"] for c in healthy["causes"]] == ["fixed"]


def test_json_matches_the_schema_in_docs_and_the_package(tmp_path: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    package = Path(__import__("flightcheck._diagnose", fromlist=["x"]).__file__).parent / "schema.json"
    docs = Path(__file__).parent.parent.parent / "docs" / "diagnosis.schema.json"
    assert package.read_text() == docs.read_text()
    schema = json.loads(package.read_text())
    examples = Path(__import__("flightcheck._examples", fromlist=["x"]).__file__).parent
    for case in CASES:
        rc, out, _ = cli_in_process("diagnose", "--format", "json", str(LOGS / case["file"]))
        doc = json.loads(out)
        jsonschema.validate(doc, schema)
        assert rc == doc["exit_code"]
    doc = diagnose(str(LOGS / "fc601_bus_error_ray.log"))
    check_host(doc, [str(examples / "b300.json")])
    jsonschema.validate(doc, schema)


def test_secret_key_words_match_the_engines_table() -> None:
    from flightcheck._knowledge.engines import SECRET_WORDS
    from flightcheck._vocabulary.redaction import _SECRET_KEY_WORDS

    assert set(_SECRET_KEY_WORDS.split("|")) == set(SECRET_WORDS)


def test_every_declared_signature_compiles_and_belongs_to_a_check() -> None:
    from flightcheck._diagnose.signatures import catalogue

    cat = catalogue()
    codes = {s.code for s in cat.signatures}
    # the families the issue's failures come from, the runtime compilers' checks included
    assert {"FC101", "FC102", "FC103", "FC119", "FC122", "FC304", "FC401", "FC402", "FC503", "FC601"} <= codes
    from flightcheck._checks.framework import REGISTRY

    assert all(REGISTRY[s.code].logs for s in cat.signatures)
    assert len({(s.code, s.pattern) for s in cat.signatures}) == len(cat.signatures)  # declared once each


@pytest.mark.parametrize(
    ("line", "code"),
    [
        ("AssertionError: Failed to get checksums.txt from https://edge.urm.nvidia.com/x/checksums.txt", "FC122"),
        ("RuntimeError: Failed to find C compiler. Please specify via CC environment variable or set x.", "FC115"),
        ("ptxas fatal   : Value 'sm_103a' is not defined for option 'gpu-name'", "FC121"),
        ("NCCL WARN Error while creating shared memory segment /dev/shm/nccl-abc (size 9637888)", "FC601"),
        ("torch_symm_mem.rendezvous: CUDA driver error: system not yet initialized (multicast)", "FC304"),
    ],
)
def test_single_lines(tmp_path: Path, line: str, code: str) -> None:
    log = tmp_path / "one.log"
    log.write_text(f"(Worker_TP0 pid=1) ERROR 01-01 00:00:00 [m.py:1] {line}\n")
    assert [c["code"] for c in diagnose(str(log))["causes"]] == [code]


def test_line_numbers_and_restarts_across_blocks(tmp_path: Path) -> None:
    """Serving output is skipped in bulk, a block at a time: the lines that matter keep
    their numbers, and a restart in the middle of a block is read in full."""
    head = (LOGS / "ok_healthy_serving.log").read_text().splitlines()
    serving = '(APIServer pid=1) INFO:     10.0.0.5:5555 - "POST /v1/completions HTTP/1.1" 200 OK'
    lines = head + [serving] * 30_000  # ~2.4 MB: several blocks
    restart = len(lines) + 1
    lines += [
        "(APIServer pid=1) INFO 10-11 11:00:00 [api_server.py:1] vLLM API server version 0.11.0",
        "(EngineCore_DP0 pid=9) INFO 10-11 11:00:05 [gpu_model_runner.py:1] Starting to load model /m...",
        "(EngineCore_DP0 pid=9) INFO 10-11 11:03:05 [gpu_model_runner.py:1] Model loading took 10 GiB",
        "(EngineCore_DP0 pid=9) ERROR 10-11 11:03:09 [core.py:1] ValueError: No available memory for the cache blocks.",
    ]
    lines += [serving] * 10_000
    log = tmp_path / "restart.log"
    log.write_text("\n".join(lines) + "\n")
    doc = diagnose(str(log))
    cause = doc["causes"][0]
    assert cause["code"] == "FC401" and cause["line_number"] == restart + 3
    assert cause["phase"] == "profile" and cause["elapsed_s"] == 189  # from the restart's first line
    assert doc["launch"]["starts"] == 2 and doc["input"]["lines"] == len(lines)


def test_a_wrapper_alone_is_still_a_failure(tmp_path: Path) -> None:
    """The root cause went to another file (a worker's own log): the wrapper is reported."""
    log = tmp_path / "wrapper.log"
    log.write_text(
        "(APIServer pid=1) INFO 10-11 10:00:00 [api_server.py:1] vLLM API server version 0.11.0\n"
        "(APIServer pid=1) Traceback (most recent call last):\n"
        '(APIServer pid=1)   File "/usr/local/bin/vllm", line 10, in <module>\n'
        "(APIServer pid=1)     sys.exit(main())\n"
        "(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above. "
        "Failed core proc(s): {}\n"
    )
    doc = diagnose(str(log))
    assert doc["failed"] and doc["exit_code"] == 3 and doc["causes"] == []
    assert "Engine core initialization failed" in doc["root"]["line"]
