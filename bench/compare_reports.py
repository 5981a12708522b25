#!/usr/bin/env python3
"""Do two checkouts of flightcheck give the same JSON report? (A speed change must not
change a report.)

Writes test checkpoints (tests/support: a healthy 3-shard model, the same broken every way
``break_checkpoint`` knows, an MoE, a single-file model, a directory with no index) into a
temporary directory, then runs ``flightcheck check --facts b300.json --model M -tp 8
--format json`` on each, cold (FLIGHTCHECK_NO_CACHE=1) and warm (the scan cache primed by a
first run), once with flightcheck imported from ``--a`` and once from ``--b`` (each tree's
``src/``, with its own cache directory), and compares the reports with their timings
removed (``timings``; nothing else in a report depends on the clock). ``--model DIR`` adds
a checkpoint of your own (e.g. the benchmark's, ``bench/bench_checkpoint.py --keep``).
Prints one line a report and the first lines of each difference; exits 1 when any
differs.

``--commands`` also compares ``check --facts b300.json --format json -- <line>`` for every
launch line of the conformance corpora (``tests/conformance/corpus/*.jsonl``; the built-in
reader, ``FLIGHTCHECK_ENGINE_READ=0``), and ``--logs`` ``diagnose --format json`` of every
engine log under ``tests/fixtures/logs``: one child a side runs them all in process.

    python bench/compare_reports.py --a /work/main/src --b src [--model bench/out/ckpt-1p56tb]
    python bench/compare_reports.py --a ../base/src --commands --logs
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO / "tests"))

from support.checkpoints import BREAKAGES, break_checkpoint
from support.ckptgen import load_config, write_checkpoint

B300 = REPO / "src" / "flightcheck" / "_examples" / "b300.json"


def models(root: Path) -> dict[str, Path]:
    """The test checkpoints, by name."""
    tiny = load_config("tiny-llama")
    out = {"healthy": write_checkpoint(root / "healthy", tiny, shards=3, dense=True)}
    for how in BREAKAGES:
        m = write_checkpoint(root / how, tiny, shards=3, dense=True)
        break_checkpoint(m, how)
        out[how] = m
    out["single-file"] = write_checkpoint(root / "single-file", tiny, shards=1, dense=True)
    noindex = write_checkpoint(root / "no-index", tiny, shards=3, dense=True)
    (noindex / "model.safetensors.index.json").unlink()
    out["no-index"] = noindex
    moe = load_config("qwen3-30b-a3b")
    out["moe"] = write_checkpoint(root / "moe", moe, shards=8)
    # big enough (~7 MB of headers) for the scan's worker processes, sound and with its
    # index wrong both ways (a name the shard lacks; a tensor the index does not list)
    big = load_config("deepseek-v3")
    out["big"] = write_checkpoint(root / "big", big, shards=16)
    for how in ("ghost", "unlisted"):
        m = write_checkpoint(root / f"big-{how}", big, shards=16)
        index = m / "model.safetensors.index.json"
        doc = json.loads(index.read_text())
        if how == "ghost":
            doc["weight_map"]["model.layers.9.ghost.weight"] = sorted(set(doc["weight_map"].values()))[3]
        else:
            del doc["weight_map"][sorted(doc["weight_map"])[1000]]
        index.write_text(json.dumps(doc, indent=2))
        out[f"big-{how}"] = m
    return out


def report(src: str, model: Path, cache: Path, cold: bool) -> str:
    """The JSON report, its timings removed, as sorted, indented text."""
    env = {**os.environ, "PYTHONPATH": src, "NO_COLOR": "1", "XDG_CACHE_HOME": str(cache)}
    env.pop("FLIGHTCHECK_NO_CACHE", None)
    if cold:
        env["FLIGHTCHECK_NO_CACHE"] = "1"
    cmd = [sys.executable, "-m", "flightcheck", "check", "--facts", str(B300), "--model", str(model)]
    out = subprocess.run([*cmd, "-tp", "8", "--format", "json"], env=env, capture_output=True, text=True, check=False)
    if out.returncode not in (0, 1, 3):
        return f"exit {out.returncode}\n{out.stderr}"
    doc = json.loads(out.stdout)
    doc.pop("timings", None)
    return f"exit {out.returncode}\n" + json.dumps(doc, indent=1, sort_keys=True)


#: run in one child a side: flightcheck's CLI in process over JSON argvs on stdin; prints a
#: JSON list of [exit code, stdout] (a report's timings removed)
_DRIVER = """
import contextlib, io, json, sys
from flightcheck._cli.main import main
out = []
for argv in json.loads(sys.stdin.read()):
    buf, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as exc:
            rc = exc.code if isinstance(exc.code, int) else 2
    text = buf.getvalue()
    try:
        doc = json.loads(text)
        if isinstance(doc, dict):
            doc.pop("timings", None)
        text = json.dumps(doc, indent=1, sort_keys=True)
    except ValueError:
        text = text + err.getvalue()
    out.append([rc, text])
print(json.dumps(out))
"""


def _with_model(words: list[str], model: Path) -> list[str] | None:
    """The line with its model (as the built-in reader reads it) replaced by ``model``;
    None when the line names none."""
    sys.path.insert(0, str(REPO / "src"))
    from flightcheck._launch.command import parse_command

    try:
        named = parse_command(words, None).intent.model
    except Exception:  # noqa: BLE001 - a line the reader refuses is compared as it is
        return None
    if not named:
        return None
    out = []
    for w in words:
        flag, eq, value = w.partition("=")
        out.append(str(model) if w == named else f"{flag}={model}" if eq and value == named else w)
    return out if out != words else None


def corpus_argvs(model: Path | None = None) -> dict[str, list[str]]:
    """``check`` of every corpus launch line, by a name (engine, line number); with
    ``model``, each line also with its model replaced by that checkpoint (the memory model
    and the checkpoint checks then run)."""
    import shlex

    out: dict[str, list[str]] = {}
    for path in sorted((REPO / "tests" / "conformance" / "corpus").glob("*.jsonl")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                words = shlex.split(json.loads(line)["cmd"])
            except ValueError:
                continue
            out[f"{path.stem}:{n}"] = ["check", "--facts", str(B300), "--format", "json", "--", *words]
            local = _with_model(words, model) if model is not None else None
            if local is not None:
                out[f"{path.stem}:{n}:ckpt"] = ["check", "--facts", str(B300), "--format", "json", "--", *local]
    return out


def log_argvs() -> dict[str, list[str]]:
    """``diagnose`` of every engine log of the fixtures."""
    logs = sorted((REPO / "tests" / "fixtures" / "logs").glob("*.log*"))
    return {f"log:{p.name}": ["diagnose", "--format", "json", str(p)] for p in logs}


def in_process(src: str, argvs: list[list[str]], cache: Path) -> list[list[object]]:
    """[exit code, output] of each argv, flightcheck imported from ``src``."""
    env = {**os.environ, "PYTHONPATH": src, "NO_COLOR": "1", "XDG_CACHE_HOME": str(cache)}
    env.update(FLIGHTCHECK_ENGINE_READ="0", FLIGHTCHECK_NO_CACHE="1")
    out = subprocess.run(
        [sys.executable, "-c", _DRIVER], input=json.dumps(argvs), env=env, capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        raise SystemExit(f"the driver failed under {src}: {out.stderr[-2000:]}")
    return json.loads(out.stdout)


def compare_in_process(a: str, b: str, todo: dict[str, list[str]], tmp: Path) -> int:
    """Print one line a differing item (and a count of the same); the number that differ."""
    argvs = list(todo.values())
    # one cache directory for both (its path shows in messages); FLIGHTCHECK_NO_CACHE keeps it empty
    got = [in_process(os.path.abspath(src), argvs, tmp / "cache") for src in (a, b)]
    differ = 0
    for name, x, y in zip(todo, got[0], got[1], strict=True):
        if x != y:
            differ += 1
            print(f"DIFFERS {name}")
            diff = difflib.unified_diff(str(x[1]).splitlines(), str(y[1]).splitlines(), "a", "b", lineterm="", n=1)
            print(f"  exit {x[0]} / {y[0]}\n" + "\n".join(list(diff)[:30]))
    print(f"same    {len(todo) - differ} of {len(todo)}")
    return differ


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--a", required=True, help="one checkout's src/ (e.g. main's)")
    ap.add_argument("--b", default=str(REPO / "src"), help="the other's (default: this checkout's)")
    ap.add_argument("--model", action="append", default=[], help="also compare on this checkpoint directory")
    ap.add_argument("--commands", action="store_true", help="also `check -- <line>` of the launch-line corpora")
    ap.add_argument("--logs", action="store_true", help="also `diagnose` of the engine logs of the fixtures")
    ap.add_argument("--no-models", action="store_true", help="skip the checkpoints (with --commands / --logs)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="fc-compare-"))
    differ = 0
    try:
        extra: dict[str, list[str]] = {}
        if args.commands:
            moe = write_checkpoint(tmp / "corpus-model", load_config("qwen3-30b-a3b"), shards=4)
            extra.update(corpus_argvs(moe))
        if args.logs:
            extra.update(log_argvs())
        if extra:
            differ += compare_in_process(args.a, args.b, extra, tmp)
        todo = {} if args.no_models else models(tmp / "models")
        todo.update({Path(m).name: Path(m) for m in args.model})
        for name, model in todo.items():
            for kind in ("cold", "warm"):
                got = []
                for side, src in (("a", args.a), ("b", args.b)):
                    cache = tmp / f"cache-{side}"
                    if kind == "warm":
                        report(os.path.abspath(src), model, cache, cold=False)  # prime it
                    got.append(report(os.path.abspath(src), model, cache, cold=kind == "cold"))
                same = got[0] == got[1]
                differ += not same
                print(f"{'same   ' if same else 'DIFFERS'} {kind:4s} {name}")
                if not same:
                    diff = difflib.unified_diff(got[0].splitlines(), got[1].splitlines(), "a", "b", lineterm="", n=1)
                    print("\n".join(list(diff)[:40]))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{differ} report(s) differ" if differ else "every report is the same")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
