#!/usr/bin/env python3
"""Check commit messages against CONTRIBUTING.md: the subject at most 72 characters, in the
imperative, without a trailing period; a blank line between the subject and the body.

    python scripts/check_commits.py main..HEAD          # the commits of a branch
    python scripts/check_commits.py --message FILE      # one message (a commit-msg hook)

For new ranges only: the history before CONTRIBUTING.md is not rewritten, and CI does not
run this over it. As a hook: ``.git/hooks/commit-msg`` holding
``exec python3 scripts/check_commits.py --message "$1"``.

The imperative test is a heuristic: the subject's first word (after an ``area:`` prefix,
``README: ...``) must not end in -ed or -ing ("Added", "Fixing"), except for verbs whose
imperative ends so ("Embed", "Bring"). Merge commits are skipped (git writes their
subjects). Prints one line per problem, ``<commit>: <problem>``; exit 0 when there are none,
1 when there are, 2 for a range git cannot read.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

MAX_SUBJECT = 72
#: imperatives that end in -ed / -ing
IMPERATIVE_EXCEPTIONS = frozenset(
    {
        "bed", "bleed", "breed", "embed", "exceed", "feed", "heed", "need", "proceed", "seed", "shed",
        "shred", "speed", "succeed", "wed", "weed",
        "bring", "cling", "fling", "ping", "ring", "sing", "sling", "spring", "sting", "string", "swing",
        "wring",
    }
)  # fmt: skip


def first_word(subject: str) -> str:
    """The subject's first word, after an ``area:`` prefix (``tests: Add ...`` -> ``Add``)."""
    words = subject.split()
    if len(words) > 1 and words[0].endswith(":"):
        words = words[1:]
    return re.sub(r"[^A-Za-z-]", "", words[0]) if words else ""


def subject_problems(subject: str) -> list[str]:
    """What is wrong with one subject line."""
    if not subject.strip():
        return ["empty subject"]
    out = []
    if len(subject) > MAX_SUBJECT:
        out.append(f"subject is {len(subject)} characters (at most {MAX_SUBJECT}; the evidence goes in the body)")
    if subject.rstrip().endswith("."):
        out.append("subject ends with a period")
    word = first_word(subject).lower()
    if word.endswith(("ed", "ing")) and word not in IMPERATIVE_EXCEPTIONS:
        out.append(f"subject starts with {first_word(subject)!r}: write it in the imperative (Add, Fix, Make)")
    return out


def message_problems(message: str) -> list[str]:
    """What is wrong with one commit message (subject, then an optional body)."""
    lines = message.splitlines()
    lines = [ln for ln in lines if not ln.startswith("#")]  # git's comment lines in a hook
    while lines and not lines[0].strip():
        lines.pop(0)
    if not lines:
        return ["empty message"]
    out = subject_problems(lines[0])
    if len(lines) > 1 and lines[1].strip():
        out.append("no blank line between the subject and the body")
    return out


def range_messages(rev_range: str, cwd: Path | None = None) -> list[tuple[str, str]]:
    """(short commit, message) of every non-merge commit of ``rev_range``, oldest first."""
    proc = subprocess.run(
        ["git", "log", "--no-merges", "--reverse", "--format=%h%x00%B%x1e", rev_range, "--"],
        capture_output=True,
        text=True,
        cwd=cwd,
        check=False,
    )
    if proc.returncode != 0:
        raise ValueError(proc.stderr.strip().splitlines()[0] if proc.stderr.strip() else f"git log {rev_range} failed")
    out = []
    for record in proc.stdout.split("\x1e"):
        record = record.strip("\n")
        if record:
            sha, _, body = record.partition("\x00")
            out.append((sha, body))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    what = ap.add_mutually_exclusive_group(required=True)
    what.add_argument("range", nargs="?", help="a git revision range, e.g. main..HEAD")
    what.add_argument("--message", type=Path, help="a file holding one commit message")
    args = ap.parse_args(argv)
    if args.message is not None:
        try:
            items = [("message", args.message.read_text(errors="replace"))]
        except OSError as exc:
            print(f"check_commits: cannot read {args.message}: {exc.strerror}", file=sys.stderr)
            return 2
    else:
        try:
            items = range_messages(args.range)
        except ValueError as exc:
            print(f"check_commits: {exc}", file=sys.stderr)
            return 2
    bad = 0
    for sha, message in items:
        for problem in message_problems(message):
            print(f"{sha}: {problem}")
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
