"""flightcheck's release reader against an OLDER release's own parser, line by line.

The release venvs (``scripts/release_venvs.sh``) hold vLLM 0.6.0, vLLM 0.10.2 and SGLang
0.4.0; ``scripts/release_reader.py`` runs in one of them and reads a batch of lines with
that release's parser. :func:`compare` reads the same words as ``flightcheck check`` does
once the facts say that release is installed (``parse_command``, then
``release_read.for_release``) and lists where the two differ:

* refusal: FC703 fails (``intent.refused``) exactly when the release's parser or launcher
  refuses the line (argparse's exit, vLLM's ``serve`` model check);
* on a line both accept, each field of :data:`FIELDS`: flightcheck's value, or where the
  line leaves it unset, the release's own default from the release atlas (what a check of
  that release would use), against the value the release parsed.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
DRIVER = REPO / "scripts" / "release_reader.py"
CORPUS = REPO / "tests" / "conformance" / "corpus"
#: the releases scripts/release_venvs.sh builds (venv name -> (engine, version))
RELEASES = {"vllm-0.6.0": ("vllm", "0.6.0"), "vllm-0.10.2": ("vllm", "0.10.2"), "sglang-0.4.0": ("sglang", "0.4.0")}

#: Intent field -> (the release reader's field, the atlas dests that hold its default)
FIELDS: dict[str, dict[str, tuple[str, ...]]] = {
    "vllm": {
        "model": ("model",),
        "tensor_parallel_size": ("tensor_parallel_size",),
        "pipeline_parallel_size": ("pipeline_parallel_size",),
        "data_parallel_size": ("data_parallel_size",),
        "data_parallel_size_local": ("data_parallel_size_local",),
        "enable_expert_parallel": ("enable_expert_parallel",),
        "max_model_len": ("max_model_len",),
        "kv_cache_dtype": ("kv_cache_dtype",),
        "gpu_memory_utilization": ("gpu_memory_utilization",),
        "quantization": ("quantization",),
        "dtype": ("dtype",),
        "enforce_eager": ("enforce_eager",),
        "load_format": ("load_format",),
        "max_num_batched_tokens": ("max_num_batched_tokens",),
        "max_num_seqs": ("max_num_seqs",),
        "cpu_offload_gb": ("cpu_offload_gb",),
    },
    "sglang": {
        "model": ("model_path",),
        "tensor_parallel_size": ("tp_size", "tensor_parallel_size"),
        "pipeline_parallel_size": ("pp_size",),
        "data_parallel_size": ("dp_size", "data_parallel_size"),
        "max_model_len": ("context_length",),
        "kv_cache_dtype": ("kv_cache_dtype",),
        "gpu_memory_utilization": ("mem_fraction_static",),
        "quantization": ("quantization",),
        "dtype": ("dtype",),
        "load_format": ("load_format",),
        "max_num_seqs": ("max_running_requests",),
    },
}


def venv_root() -> Path | None:
    """Where the release venvs are: $FLIGHTCHECK_RELEASE_VENVS, else the script's default
    (~/.cache/flightcheck/release-venvs, kept between CI runs), else <repo>/.release-venvs."""
    env = os.environ.get("FLIGHTCHECK_RELEASE_VENVS")
    cands = [Path(env)] if env else [Path.home() / ".cache" / "flightcheck" / "release-venvs", REPO / ".release-venvs"]
    for cand in cands:
        if (cand / "_torch").is_dir():
            return cand
    return None


def corpus(name: str) -> list[dict[str, Any]]:
    """The lines read for release ``name``: its own era's lines (release_commands.jsonl),
    then every line of the engine's conformance corpus (mostly newer flags: refusals)."""
    engine = RELEASES[name][0]
    rows = [json.loads(x) for x in (CORPUS / "release_commands.jsonl").read_text().splitlines() if x.strip()]
    own = [r for r in rows if name in r["releases"]]
    newer = [json.loads(x) for x in (CORPUS / f"{engine}_commands.jsonl").read_text().splitlines() if x.strip()]
    return own + newer


_SHELL_END = ("|", "||", "&", "&&", ";")


def words(cmd: str) -> list[str] | None:
    """The words the shell hands the command (a redirection or control operator ends it)."""
    try:
        out = shlex.split(cmd)
    except ValueError:
        return None
    for i, w in enumerate(out):
        if w in _SHELL_END or w[:1] in "<>" or w[:2] in ("1>", "2>", "&>"):
            return out[:i]
    return out


def read_with_release(python: Path, engine: str, lines: list[list[str]], cwd: Path) -> list[dict[str, Any]]:
    """One driver child reads every line (the release is imported once)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "SGLANG_", "HF_", "PYTHONPATH"))}
    proc = subprocess.run(
        [str(python), str(DRIVER), engine],
        input="".join(json.dumps(w) + "\n" for w in lines),
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
        cwd=cwd,
        env=env,
    )
    docs = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    assert proc.returncode == 0 and len(docs) == len(lines), proc.stderr[-3000:]
    return docs


def _default(engine: str, release: str, dests: tuple[str, ...]) -> Any:
    from flightcheck._knowledge import atlas

    for opt in atlas.options(engine, release):
        if opt["dest"] in dests and opt["option_strings"]:
            return opt["default"]
    return None


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return float(a) == float(b)
    return bool(a == b)


def flightcheck_view(engine: str, release: str, line: list[str]) -> tuple[bool | None, dict[str, Any], list[str]]:
    """(refused, fields, the refusal) as flightcheck reads ``line`` with ``release``
    installed; refused None when flightcheck does not read it as an engine launch."""
    from flightcheck._launch import parse_command
    from flightcheck._launch.release_read import for_release

    cmd = parse_command(list(line), env={"PATH": "/nonexistent"})
    if cmd.engine != engine or cmd.intent.reader is None:
        return None, {}, []
    intent = for_release(cmd, cmd.intent, release)
    fields = {}
    for key, dests in FIELDS[engine].items():
        value = getattr(intent, key, None)
        fields[key] = _default(engine, release, dests) if value is None else value
    return bool(intent.refused), fields, list(intent.refused)


def engine_view(engine: str, doc: dict[str, Any]) -> dict[str, Any]:
    """The release's reading in the same terms."""
    out = {key: doc.get(key) for key in FIELDS[engine]}
    if engine == "sglang" and doc.get("enable_dp_attention"):
        out["data_parallel_size"] = 1  # DP attention: the dp ranks are the TP group (no replicas)
    return out


def compare(engine: str, release: str, line: list[str], doc: dict[str, Any]) -> list[str]:
    """Where flightcheck (with ``release`` installed) and the release's parser differ."""
    refused, mine, why = flightcheck_view(engine, release, line)
    if refused is None or doc.get("error_stage") == "form":  # no launcher of this release's in the line
        same = refused is None and doc.get("error_stage") == "form"
        return [] if same else [f"launcher: release {doc.get('error')!r}, flightcheck read={refused is not None}"]
    theirs_refused = doc.get("error") is not None
    if refused or theirs_refused:
        if refused != theirs_refused:
            return [f"refusal: release {doc.get('error')!r}, flightcheck {why!r}"]
        return []
    theirs = engine_view(engine, doc)
    # compared: what flightcheck states (a value the line set, or the release's default in
    # the atlas) for a setting the release has; None is "the engine's default", which the
    # atlas cannot always spell (0.6.0's ``default=EngineArgs.x`` is not a literal)
    return [
        f"{k}: release {theirs[k]!r}, flightcheck {mine[k]!r}"
        for k in mine
        if mine[k] is not None and _has(engine, release, FIELDS[engine][k]) and not _same(mine[k], theirs[k])
    ]


def _has(engine: str, release: str, dests: tuple[str, ...]) -> bool:
    from flightcheck._knowledge import atlas

    return any(opt["dest"] in dests for opt in atlas.options(engine, release))
