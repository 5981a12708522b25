"""``--output`` where another user prepares the ground (/tmp, a textfile-collector directory
a service user owns): a planted symbolic link is not followed, a block device is never
written, an existing file keeps its mode, a new one is 0644; /dev/null and FIFOs still work."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from flightcheck._report import no_surrogates, write_atomic
from flightcheck._vocabulary.errors import UsageError
from support.cli import cli_in_process


def test_a_new_report_is_0644_and_an_existing_file_keeps_its_mode(tmp_path: Path) -> None:
    new = tmp_path / "new.prom"
    write_atomic(new, "x 1\n")
    assert stat.S_IMODE(new.stat().st_mode) == 0o644 and new.read_text() == "x 1\n"
    secret = tmp_path / "root-only"
    secret.write_text("old\n")
    secret.chmod(0o600)
    write_atomic(secret, "new\n")
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600 and secret.read_text() == "new\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.prom", "root-only"]  # no temp file left


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make a link another user owns")
def test_a_symlink_another_user_owns_is_not_followed(tmp_path: Path) -> None:
    victim = tmp_path / "shadow"
    victim.write_text("root:secret\n")
    victim.chmod(0o600)
    link = tmp_path / "flightcheck.prom"
    link.symlink_to(victim)
    os.lchown(link, 65534, 65534)  # planted by nobody
    with pytest.raises(UsageError, match="symbolic link owned by uid 65534, not by you"):
        write_atomic(link, "report\n")
    assert victim.read_text() == "root:secret\n" and stat.S_IMODE(victim.stat().st_mode) == 0o600
    assert link.is_symlink()


def test_a_block_device_is_never_written(tmp_path: Path) -> None:
    devices = [Path("/dev") / n for n in ("loop0", "sda", "vda", "nvme0n1", "ram0")]
    block = next((d for d in devices if d.exists() and stat.S_ISBLK(d.stat().st_mode)), None)
    if block is None:
        pytest.skip("no block device node here")
    link = tmp_path / "report.txt"
    link.symlink_to(block)  # our own link: followed, and still refused at the device
    before = block.stat().st_mtime_ns
    with pytest.raises(UsageError, match="a block device"):
        write_atomic(link, "report\n")
    assert block.stat().st_mtime_ns == before


def test_dev_null_and_a_fifo_without_a_reader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_atomic("/dev/null", "x\n")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    import flightcheck._report as report

    monkeypatch.setattr(report, "FIFO_WAIT_S", 0.2)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(UsageError, match="a FIFO with no reader"):  # an error, not a hang
        write_atomic(fifo, "x\n")


def test_a_directory_as_output_is_one_line_exit_2(tmp_path: Path) -> None:
    rc, _out, err = cli_in_process("check", "--example", "b300", "-o", str(tmp_path))
    assert rc == 2 and err.count("\n") == 1 and "is a directory" in err


def test_an_output_name_that_is_not_utf8(tmp_path: Path) -> None:
    """`-o` to a name with a non-UTF-8 byte was an internal error (exit 3)."""
    import json

    name = os.fsdecode(bytes(tmp_path) + b"/r\xff.json")
    model = os.fsdecode(bytes(tmp_path) + b"/m\xfe")
    rc, _out, err = cli_in_process("check", "--example", "b300", "--model", model, "--format", "json", "-o", name)
    assert rc == 1, err  # FC501: the model is not there
    with open(os.fsencode(name), "rb") as fh:
        doc = json.loads(fh.read().decode("utf-8"))  # valid UTF-8, no lone surrogate
    assert doc["intent"]["model"].endswith("/m\\xfe")


def test_stdout_on_dev_full_is_exit_2() -> None:
    with open("/dev/full", "w") as full:
        import subprocess
        import sys

        proc = subprocess.run(
            [sys.executable, "-m", "flightcheck", "check", "--example", "b300"],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            check=False,
        )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "cannot write to stdout: No space left on device" in proc.stderr


def test_reports_never_hold_lone_surrogates() -> None:
    import json

    text = no_surrogates(json.dumps({"model": "/m/r\udcff"}, ensure_ascii=False), json=True)
    assert json.loads(text) == {"model": "/m/r\\xff"}
    text.encode("utf-8")  # valid UTF-8: would raise on a surrogate
    assert no_surrogates("a\ud800b") == "a\\ud800b"


def test_a_snapshot_of_a_model_with_an_undecodable_name(tmp_path: Path) -> None:
    """`collect --model` of a directory whose name is not UTF-8 was an internal error."""
    import json

    model = os.fsdecode(bytes(tmp_path) + b"/m\xff")
    os.mkdir(model)
    rc, out, err = cli_in_process("collect", "--model", model)
    assert rc == 0, err
    doc = json.loads(out.encode("utf-8"))
    assert doc["checkpoint"]["path"].endswith("/m\\xff")


@pytest.mark.parametrize("args", [("rules",), ("rules", "--format", "markdown"), ("explain", "FC101")])
def test_every_command_on_a_full_stdout_is_exit_2(args: tuple[str, ...]) -> None:
    import subprocess
    import sys

    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            [sys.executable, "-m", "flightcheck", *args],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            check=False,
        )
    assert (
        proc.returncode == 2 and proc.stderr == "flightcheck: error: cannot write to stdout: No space left on device\n"
    )


@pytest.mark.parametrize(
    "args",
    [
        ("check", "--example", "b300"),
        ("check", "--example", "b300", "--format", "json"),
        ("rules",),
        ("explain", "FC101"),
        ("probe", "multicast", "--timeout", "5"),
        ("run", "--example", "b300", "--dry-run", "--", "vllm", "serve", "--load-format", "dummy"),
    ],
)
def test_a_closed_stdout_is_exit_2(args: tuple[str, ...]) -> None:
    """``flightcheck ... >&-``: Python's sys.stdout is None; one line and exit 2, as for a full one."""
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "flightcheck", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=60,
        check=False,
        preexec_fn=lambda: os.close(1),  # the child's stdout closed, as `>&-` does
    )
    last = proc.stderr.splitlines()[-1] if proc.stderr else ""
    assert proc.returncode == 2, proc.stderr
    assert last == "flightcheck: error: cannot write to stdout: it is closed", proc.stderr
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr


def test_probe_on_a_full_stdout_is_exit_2() -> None:
    import subprocess
    import sys

    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            [sys.executable, "-m", "flightcheck", "probe", "multicast", "--timeout", "5"],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            check=False,
        )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines()[-1] == "flightcheck: error: cannot write to stdout: No space left on device"


def test_a_closed_stdout_is_fine_when_the_report_goes_to_a_file(tmp_path: Path) -> None:
    import subprocess
    import sys

    out = tmp_path / "r.json"
    proc = subprocess.run(
        [sys.executable, "-m", "flightcheck", "check", "--example", "b300", "--format", "json", "-o", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=60,
        check=False,
        preexec_fn=lambda: os.close(1),
    )
    assert proc.returncode == 0, proc.stderr
    assert '"verdict"' in out.read_text()


@pytest.mark.skipif(os.geteuid() != 0, reason="plays another user's symbolic link: needs root to chown it")
def test_a_directory_swapped_for_another_users_link_during_the_write(tmp_path: Path) -> None:
    """The race of a shared directory: another user swaps the directory holding --output
    for a link to a directory they cannot write, between flightcheck's link check and its
    write. Nothing may land there, and no temp file may be left anywhere."""
    import threading

    protected = tmp_path / "protected"
    protected.mkdir()
    d = tmp_path / "d"
    d.mkdir()
    link = tmp_path / "d.link"
    link.symlink_to(protected)
    os.lchown(link, 65534, 65534)
    stop = threading.Event()

    def swap() -> None:
        for _ in range(100000):
            if stop.is_set():
                return
            os.rename(d, tmp_path / "d.dir")
            os.rename(link, d)
            os.rename(d, link)
            os.rename(tmp_path / "d.dir", d)

    thread = threading.Thread(target=swap, daemon=True)
    thread.start()
    try:
        for i in range(2000):
            try:
                write_atomic(str(d / "out.json"), f"{i}\n")
            except UsageError:
                pass
    finally:
        stop.set()
        thread.join(10)
    assert not thread.is_alive()
    assert list(protected.iterdir()) == []
    left = [p.name for p in (tmp_path / "d").iterdir() if p.name != "out.json"]
    assert left == [], left
