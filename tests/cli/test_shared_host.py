"""Root running flightcheck in a directory another user controls: whatever that user
planted (run here as ``nobody`` through ``setpriv``) cannot make root overwrite a file,
disclose a secret, or believe a planted cache. Skips when not root or without setpriv."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from flightcheck._checkpoint.cache import CacheFile, ScanCache, file_key
from support.ckptgen import load_config, write_checkpoint
from support.cli import cli

NOBODY = 65534
SETPRIV = shutil.which("setpriv")
pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or SETPRIV is None, reason="needs root and setpriv to act as another user"
)


def as_nobody(*argv: str, stdin: bytes | None = None) -> None:
    """Run ``argv`` as nobody (no groups): the other local user."""
    assert SETPRIV is not None
    subprocess.run(
        [SETPRIV, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *argv],
        input=stdin,
        check=True,
        timeout=30,
        capture_output=True,
    )


@pytest.fixture
def hostile_dir() -> Iterator[Path]:
    """A directory nobody owns (pytest's own temp tree is root's 0700: nobody could not reach it)."""
    d = Path(tempfile.mkdtemp(prefix="flightcheck-shared-", dir="/tmp"))
    try:
        os.chmod(d, 0o755)
        os.chown(d, NOBODY, NOBODY)
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_a_planted_link_to_a_root_only_file_is_not_followed(hostile_dir: Path, tmp_path: Path) -> None:
    victim = tmp_path / "root-only"
    victim.write_text("root secret\n")
    victim.chmod(0o600)
    report = hostile_dir / "flightcheck.prom"
    as_nobody("ln", "-s", str(victim), str(report))
    proc = cli("check", "--example", "b300", "--format", "prometheus", "-o", str(report))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "not following it" in proc.stderr
    assert victim.read_text() == "root secret\n" and stat.S_IMODE(victim.stat().st_mode) == 0o600


def test_a_report_written_there_discloses_no_secret(hostile_dir: Path) -> None:
    report = hostile_dir / "report.json"
    proc = cli(
        "check", "--example", "b300", "--format", "json", "-o", str(report),
        "--", "vllm", "serve", "m", "--api-key", "sk-root-only",
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr
    assert "sk-root-only" not in report.read_text() and stat.S_IMODE(report.stat().st_mode) == 0o644


def test_a_cache_planted_by_another_user_does_not_make_a_truncated_shard_ready(
    hostile_dir: Path, tmp_path: Path
) -> None:
    model = write_checkpoint(tmp_path / "m", load_config("tiny-llama"), shards=3, dense=True)
    own = tmp_path / "own-cache"
    env = {"XDG_CACHE_HOME": str(own), "FLIGHTCHECK_NO_CACHE": ""}
    assert cli("check", "--example", "b300", "--model", str(model), env=env).returncode == 0
    path = ScanCache(model.resolve(), env=env).path
    assert path is not None
    doc = msgspec.msgpack.decode(path.read_bytes(), type=CacheFile)
    shard = sorted(model.glob("*.safetensors"))[1]
    os.truncate(shard, shard.stat().st_size - 64)
    for real, entry in doc.shards.items():
        entry.key = file_key(os.stat(real))  # what the other user can stat, too
    # the other user plants the "all fine" scan where `sudo -E` or a shared XDG_CACHE_HOME points
    planted = hostile_dir / "flightcheck"
    as_nobody("mkdir", "-m", "0700", str(planted))
    as_nobody("sh", "-c", f"cat > {planted / path.name}", stdin=msgspec.msgpack.encode(doc))
    proc = cli("check", "--example", "b300", "--model", str(model), env={"XDG_CACHE_HOME": str(hostile_dir)})
    # an XDG_CACHE_HOME another user owns is not the caller's cache at all (docs/security.md):
    # the planted scan is never read, and the truncated shard is found
    assert proc.returncode == 1 and "FC50" in proc.stdout, proc.stdout
    # and with the directories the caller's own, the file the other user wrote is still refused
    os.chown(hostile_dir, 0, 0)
    os.chown(planted, 0, 0)
    os.chmod(planted, 0o700)
    proc = cli("check", "--example", "b300", "--model", str(model), env={"XDG_CACHE_HOME": str(hostile_dir)})
    assert proc.returncode == 1 and f"owned by uid {NOBODY}, not by you" in proc.stdout, proc.stdout


def test_a_planted_cache_symlink_is_not_written_through(hostile_dir: Path, tmp_path: Path) -> None:
    target = tmp_path / "root-dir"
    target.mkdir(mode=0o700)
    as_nobody("ln", "-s", str(target), str(hostile_dir / "flightcheck"))
    model = write_checkpoint(tmp_path / "m", load_config("tiny-llama"), shards=2, dense=True)
    proc = cli("check", "--example", "b300", "--model", str(model), env={"XDG_CACHE_HOME": str(hostile_dir)})
    assert proc.returncode == 0, proc.stdout
    assert list(target.iterdir()) == []


def test_a_planted_directory_link_is_not_followed(hostile_dir: Path, tmp_path: Path) -> None:
    """`-o /tmp/shared/reports/node.prom` where the other user made `reports` a link to a
    directory only root may write (think /etc/cron.d)."""
    root_only = tmp_path / "cron.d"
    root_only.mkdir(mode=0o700)
    as_nobody("ln", "-s", str(root_only), str(hostile_dir / "reports"))
    proc = cli("check", "--example", "b300", "--format", "prometheus", "-o", str(hostile_dir / "reports" / "node.prom"))
    assert proc.returncode == 2 and "reports is a symbolic link owned by uid 65534" in proc.stderr, proc.stderr
    assert list(root_only.iterdir()) == []
