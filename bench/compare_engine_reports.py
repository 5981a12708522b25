#!/usr/bin/env python3
"""Do two checkouts of flightcheck read every engine command of the corpus the same way?
(A refactor of the engine layer must not change a report.)

For every bundled example facts file (``src/flightcheck/_examples/*.json``) and every
command line of the engine corpus (``tests/conformance/corpus/*_commands.jsonl``), runs
``flightcheck check --facts <example> --format json -- <command>`` once with flightcheck
imported from ``--a`` and once from ``--b`` (each tree's ``src/``), with the engine's own
reader off (``FLIGHTCHECK_ENGINE_READ=0``: the built-in reader, which needs no engine) and
no scan cache, and compares the reports with their timings removed. Each side runs all its
commands in one process (``main()`` in-process; a fresh interpreter a command would take
~10x as long), so the two sides see the same state. Also runs each example with no engine
command, and with ``--engine sglang``. Prints the counts and the first lines of each
difference; exits 1 when any differs.

    python bench/compare_engine_reports.py --a ../base/src --b src
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import io
import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CORPUS = REPO / "tests" / "conformance" / "corpus"


#: the options whose value is the model, in either engine's spelling
MODEL_OPTS = ("--model", "--model-path", "--model_path")


def with_model(words: list[str], model: str) -> list[str]:
    """``words`` with the model (``vllm serve M``'s positional, ``--model`` /
    ``--model-path``, either form) replaced by ``model``."""
    out = list(words)
    for i, w in enumerate(out):
        positional = w == "serve" and i + 1 < len(out) and not out[i + 1].startswith("-")
        if positional or (w in MODEL_OPTS and i + 1 < len(out)):
            out[i + 1] = model
        elif w.split("=", 1)[0] in MODEL_OPTS and "=" in w:
            out[i] = w.split("=", 1)[0] + "=" + model
    return out


def checkpoints(root: Path) -> dict[str, Path]:
    """Test checkpoints (tests/support) for the memory model: an MoE and an MLA model."""
    sys.path.insert(0, str(REPO / "tests"))
    from support.ckptgen import load_config, write_checkpoint

    return {
        "qwen3-moe": write_checkpoint(root / "moe", load_config("qwen3-30b-a3b"), shards=8),
        "deepseek-v3": write_checkpoint(root / "dsv3", load_config("deepseek-v3"), shards=16),
        "tiny-llama": write_checkpoint(root / "tiny", load_config("tiny-llama"), shards=3, dense=True),
    }


def cases(examples: Path, models: dict[str, Path]) -> dict[str, list[str]]:
    """Every flightcheck argv to compare, by a readable key."""
    out: dict[str, list[str]] = {}
    commands: list[tuple[str, list[str]]] = []
    for corpus in sorted(CORPUS.glob("*_commands.jsonl")):
        for n, line in enumerate(corpus.read_text(encoding="utf-8").splitlines()):
            if not line.strip():
                continue
            cmd = json.loads(line)["cmd"]
            try:
                words = shlex.split(cmd)
            except ValueError:
                continue
            commands.append((f"{corpus.stem}:{n}", words))
    for facts in sorted(examples.glob("*.json")):
        base = ["check", "--facts", str(facts), "--format", "json"]
        out[f"{facts.stem} (no command)"] = base
        out[f"{facts.stem} --engine sglang"] = [*base, "--engine", "sglang", "-tp", "8"]
        out[f"{facts.stem} -tp 8 --max-model-len 1M"] = [*base, "-tp", "8", "--max-model-len", "1M"]
        for key, words in commands:
            out[f"{facts.stem} {key}"] = [*base, "--", *words]
        for name, model in models.items():
            for engine in ("vllm", "sglang"):
                out[f"{facts.stem} {name} --engine {engine}"] = [*base, "--engine", engine, "--model", str(model)]
    # the memory model of every corpus line, on the examples with GPUs of two kinds
    for facts in (examples / "b300.json", examples / "h100-hgx.json"):
        base = ["check", "--facts", str(facts), "--format", "json"]
        for name, model in models.items():
            for key, words in commands:
                out[f"{facts.stem} {name} {key}"] = [*base, "--", *with_model(words, str(model))]
    return out


def child(argvs_file: str, out_file: str) -> None:
    """Run every argv in this process; write {key: report text}."""
    from flightcheck._cli.main import main

    todo = json.loads(Path(argvs_file).read_text())
    got: dict[str, str] = {}
    for key, argv in todo.items():
        buf, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(err):
            try:
                rc = main(argv)
            except SystemExit as exc:  # a --help or the like
                rc = int(exc.code or 0)
        text = buf.getvalue()
        try:
            doc = json.loads(text)
            doc.pop("timings", None)
            text = json.dumps(doc, indent=1, sort_keys=True)
        except ValueError:
            pass
        got[key] = f"exit {rc}\n{err.getvalue()}{text}"
    Path(out_file).write_text(json.dumps(got))


def side(src: str, argvs_file: str, out_file: str, cache: str) -> subprocess.Popen[bytes]:
    """Start one side's child (both run at once: they share nothing but the cache path)."""
    env = {
        **os.environ,
        "PYTHONPATH": os.path.abspath(src),
        "NO_COLOR": "1",
        "XDG_CACHE_HOME": cache,
        "FLIGHTCHECK_NO_CACHE": "1",
        "FLIGHTCHECK_ENGINE_READ": "0",
        "HF_HUB_OFFLINE": "1",
    }
    cmd = [sys.executable, __file__, "--child", argvs_file, out_file]
    return subprocess.Popen(cmd, env=env, cwd=tempfile.gettempdir())


def collect(proc: subprocess.Popen[bytes], out_file: str) -> dict[str, str]:
    if proc.wait() != 0:
        raise SystemExit(f"a side failed (exit {proc.returncode})")
    got: dict[str, str] = json.loads(Path(out_file).read_text())
    return got


def main() -> int:
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--a", required=True, help="one checkout's src/ (e.g. main's)")
    ap.add_argument("--b", default=str(REPO / "src"), help="the other's (default: this checkout's)")
    ap.add_argument("--examples", default=str(REPO / "src" / "flightcheck" / "_examples"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="fc-compare-engine-") as tmp:
        todo = cases(Path(args.examples), checkpoints(Path(tmp) / "models"))
        argvs = Path(tmp) / "argvs.json"
        argvs.write_text(json.dumps(todo))
        # one cache directory for both (FLIGHTCHECK_NO_CACHE: neither writes it; reports name it)
        pa = side(args.a, str(argvs), str(Path(tmp) / "a.json"), str(Path(tmp) / "cache"))
        pb = side(args.b, str(argvs), str(Path(tmp) / "b.json"), str(Path(tmp) / "cache"))
        a, b = collect(pa, str(Path(tmp) / "a.json")), collect(pb, str(Path(tmp) / "b.json"))
    differ = 0
    for key in todo:
        if a[key] != b[key]:
            differ += 1
            print(f"DIFFERS {key}")
            diff = difflib.unified_diff(a[key].splitlines(), b[key].splitlines(), "a", "b", lineterm="", n=1)
            print("\n".join(list(diff)[:30]))
    exits: dict[str, int] = {}
    for text in a.values():
        code = text.split("\n", 1)[0]
        exits[code] = exits.get(code, 0) + 1
    print(f"{len(todo)} reports compared ({', '.join(f'{k}: {v}' for k, v in sorted(exits.items()))})")
    print(f"{differ} report(s) differ" if differ else "every report is the same")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
