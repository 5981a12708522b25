"""scripts/check_commits.py (CONTRIBUTING.md's commit habits) on synthetic messages and on a
throwaway repository; never on the project's own history."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from support import REPO

SCRIPT = REPO / "scripts" / "check_commits.py"


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_commits", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


cc = load()


@pytest.mark.parametrize(
    "subject",
    [
        "Add a ledger of retired check codes",
        "Fix FC402's near miss on SGLang",
        "tests: Make every must-not-stop helper fail on a crash",
        "Embed the engine's tables",  # -ed, but the imperative
        "Bring the memory model to vLLM 0.33",  # -ing, but the imperative
        "x" * 72,
    ],
)
def test_good_subjects_pass(subject: str) -> None:
    assert cc.subject_problems(subject) == []


@pytest.mark.parametrize(
    "subject,problem",
    [
        ("x" * 73, "subject is 73 characters (at most 72"),
        ("Add the retired-codes table.", "ends with a period"),
        ("Added the retired-codes table", "starts with 'Added'"),
        ("Fixing FC309", "starts with 'Fixing'"),
        ("README: Updated the numbers", "starts with 'Updated'"),
        ("   ", "empty subject"),
    ],
)
def test_bad_subjects_say_why(subject: str, problem: str) -> None:
    (got,) = cc.subject_problems(subject)
    assert problem in got


def test_messages_need_a_blank_line_before_the_body() -> None:
    assert cc.message_problems("Add X\n\nThe evidence: 3 of 4 measured.\n") == []
    assert cc.message_problems("Add X\nthe evidence\n") == ["no blank line between the subject and the body"]
    # a commit-msg hook's file: git's comment lines are not the message
    assert cc.message_problems("# Please enter the commit message\nAdd X\n") == []
    assert cc.message_problems("\n# only comments\n") == ["empty message"]
    problems = cc.message_problems("Updated " + "y" * 80 + ".\nbody")
    assert len(problems) == 4


def git(repo: Path, *args: str) -> str:
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": str(repo),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }
    return subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True).stdout


@pytest.mark.skipif(shutil.which("git") is None, reason="no git here")
def test_a_range_of_a_throwaway_repository(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q", "-b", "main")
    git(tmp_path, "commit", "-q", "--allow-empty", "-m", "Fixed everything.")  # before the range
    git(tmp_path, "checkout", "-q", "-b", "topic")
    git(tmp_path, "commit", "-q", "--allow-empty", "-m", "Add the first thing\n\nMeasured: 3 s.")
    git(tmp_path, "commit", "-q", "--allow-empty", "-m", "Adding the second thing")
    msgs = cc.range_messages("main..topic", cwd=tmp_path)
    assert [m.splitlines()[0] for _, m in msgs] == ["Add the first thing", "Adding the second thing"]
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "main..topic"], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    (line,) = proc.stdout.splitlines()
    assert proc.returncode == 1 and "starts with 'Adding'" in line and line.split(":")[0] == msgs[1][0]
    ok = subprocess.run(
        [sys.executable, str(SCRIPT), "main..topic~1"], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert (ok.returncode, ok.stdout) == (0, "")
    bad = subprocess.run(
        [sys.executable, str(SCRIPT), "nosuch..topic"], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert bad.returncode == 2 and bad.stderr.startswith("check_commits: ") and "Traceback" not in bad.stderr


def test_a_message_file(tmp_path: Path) -> None:
    msg = tmp_path / "COMMIT_EDITMSG"
    msg.write_text("Add X\n\nwhy\n")
    assert cc.main(["--message", str(msg)]) == 0
    msg.write_text("Added X.\n")
    assert cc.main(["--message", str(msg)]) == 1
    assert cc.main(["--message", str(tmp_path / "absent")]) == 2
