"""The command line: usage errors, rules / explain, examples, JSON output."""

from __future__ import annotations

import json

from support import FIXTURES, REPO
from support.cli import cli


def test_bad_flag_is_one_line_exit_2():
    proc = cli("check", "--tensor-parallel-size", "eight")
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "invalid int value" in proc.stderr


def test_bad_max_model_len_and_engine():
    for args, needle in ((["--max-model-len", "lots"], "--max-model-len"), (["--engine", "trt"], "invalid choice")):
        proc = cli("check", "--example", "b300", *args)
        assert proc.returncode == 2 and needle in proc.stderr and "Traceback" not in proc.stderr


def test_rules_lists_the_catalogue_and_explain_prints_the_docs():
    proc = cli("rules", "--format", "json")
    rows = json.loads(proc.stdout)
    assert proc.returncode == 0 and any(r["code"] == "FC601" for r in rows)
    proc = cli("explain", "FC601")
    assert proc.returncode == 0
    for section in ("## What it checks", "## Why the launch dies", "## How to fix"):
        assert section in proc.stdout
    assert cli("explain", "shm-too-small").stdout == proc.stdout
    bad = cli("explain", "FC000")
    assert bad.returncode == 2 and "no check" in bad.stderr


def test_example_b300_is_ready_and_json_is_pure():
    proc = cli("check", "--example", "b300", "--format", "json")
    report = json.loads(proc.stdout)
    assert report["schema"] == "flightcheck.report/v1"
    assert report["host"] == "example-b300-node"
    assert report["intent"]["tensor_parallel_size"] == 8
    assert proc.returncode == report["exit_code"] == 0
    assert report["verdict"] == "ready"


def test_example_flags_can_be_overridden():
    report = json.loads(cli("check", "--example", "b300", "-tp", "4", "--format", "json").stdout)
    assert report["intent"]["tensor_parallel_size"] == 4


def test_underscore_spelling_of_flags_is_accepted():
    report = json.loads(cli("check", "--example", "b300", "--tensor_parallel_size=2", "--format", "json").stdout)
    assert report["intent"]["tensor_parallel_size"] == 2


def test_the_engine_command_is_never_respelled():
    """Our flags in either spelling; the engine's arguments exactly as written, with or
    without `--` (they were once rewritten to dashes when no `--` preceded them)."""
    from flightcheck._cli.main import parse_args

    engine = ["vllm", "serve", "m", "--max_model_len", "4k", "--some_future_flag=x_y"]
    for sub in ("run", "check"):
        args = parse_args([sub, "--tensor_parallel_size", "2", "--max_model_len=8k", *engine])
        assert args.engine_command == engine and args.tensor_parallel_size == 2 and args.max_model_len == "8k"
        args = parse_args([sub, "--tensor_parallel_size=2", "--", *engine])
        assert [t for t in args.engine_command if t != "--"] == engine and args.tensor_parallel_size == 2


def test_output_file_is_written_atomically(tmp_path):
    out = tmp_path / "report.json"
    proc = cli("check", "--example", "b300", "--format", "json", "--output", str(out))
    assert proc.stdout == ""
    assert json.loads(out.read_text())["verdict"] == "ready"
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]


def test_output_to_a_fifo_or_through_a_symlink_replaces_neither(tmp_path):
    """--output /dev/null (or /dev/stdout, a FIFO) is written into: a rename over it, as root,
    once swapped the machine's /dev/null for a regular file. A symlink stays a link."""
    import os
    import stat
    import threading

    from flightcheck._report import write_atomic

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()), daemon=True)
    reader.start()
    write_atomic(fifo, "report\n")
    reader.join(timeout=10)
    assert got == ["report\n"] and stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]  # no temp file left beside it

    real = tmp_path / "reports" / "flightcheck.prom"
    real.parent.mkdir()
    real.write_text("old\n")
    link = tmp_path / "flightcheck.prom"
    link.symlink_to(real)
    write_atomic(link, "new\n")
    assert link.is_symlink() and real.read_text() == "new\n"
    assert sorted(p.name for p in real.parent.iterdir()) == ["flightcheck.prom"]


def test_a_report_file_never_gets_terminal_colours(tmp_path, monkeypatch):
    """From a terminal, `-o report.txt` once wrote ANSI escapes into the file (colour
    followed stdout, which the text does not go to)."""
    import sys

    from flightcheck._cli.main import main

    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    monkeypatch.delenv("NO_COLOR", raising=False)
    node, cluster = tmp_path / "node.txt", tmp_path / "cluster.txt"
    assert main(["check", "--example", "b300", "-o", str(node)]) == 0
    fixtures = FIXTURES / "cluster"
    assert main(["cluster", "--facts-dir", str(fixtures), "-tp", "8", "-o", str(cluster)]) == 1  # the mixed fixture set
    for path in (node, cluster):
        text = path.read_text()
        assert "Verdict:" in text and "\x1b[" not in text, path.name


def test_docs_rules_md_is_the_generated_catalogue():
    """docs/rules.md is what `flightcheck rules --format markdown` prints: regenerate it when a check changes."""
    proc = cli("rules", "--format", "markdown")
    assert proc.returncode == 0
    committed = (REPO / "docs" / "rules.md").read_text()
    assert proc.stdout == committed, "docs/rules.md is stale: flightcheck rules --format markdown > docs/rules.md"
    assert "### FC304" in committed and "#### How to fix" in committed


def test_an_example_with_deep_says_there_is_nothing_to_probe() -> None:
    """``--example b300 --deep``: no live host to probe; one line, the example's verdict."""
    import json

    from support.cli import cli_in_process

    rc, out, err = cli_in_process("check", "--example", "b300", "--deep", "--format", "json")
    assert rc == 0, err
    assert err.count("\n") == 1 and "has no live host to probe" in err
    assert json.loads(out)["verdict"] == "ready"
