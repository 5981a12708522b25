"""The committed extract of the wheels' envs.py (tests/fixtures/vllm_envs/gates.json) says of
the installed vLLM what its own vllm/envs.py says (read as text, extracted by
scripts/gen_vllm_env_gates.py): the fixture the offline gate test relies on is the wheels'."""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path
from typing import Any

FIND = (
    "import importlib.util as u, importlib.metadata as m; print(u.find_spec('vllm').origin); print(m.version('vllm'))"
)


def test_the_extract_of_the_installed_release_is_its_envs_py(engine_python: str, conformance: Any) -> None:
    out = subprocess.run([engine_python, "-c", FIND], capture_output=True, text=True, check=True, timeout=60)
    origin, version = out.stdout.split()
    envs = Path(origin).parent / "envs.py"
    spec = importlib.util.spec_from_file_location("gen", conformance.REPO / "scripts" / "gen_vllm_env_gates.py")
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    extract = json.loads((conformance.REPO / "tests/fixtures/vllm_envs/gates.json").read_text())
    assert extract["declared"][version] == gen.declared(envs.read_text())


def test_the_fallback_defaults_are_the_installed_envs_py(engine_python: str) -> None:
    """``vllm.ENV_DEFAULTS`` (what the cheapest fallback leaves out when the release's default
    already does it, e.g. VLLM_USE_NCCL_SYMM_MEM off from 0.11.0) against the installed release's
    own getters in vllm/envs.py: ``os.getenv(NAME, DEFAULT)`` / ``env_with_choices(NAME,
    DEFAULT, ...)``, or ``os.getenv(NAME)`` for "unset"."""
    import re

    from flightcheck._knowledge import vllm

    out = subprocess.run([engine_python, "-c", FIND], capture_output=True, text=True, check=True, timeout=60)
    origin, version = out.stdout.split()
    text = (Path(origin).parent / "envs.py").read_text(encoding="utf-8")
    checked = 0
    for name in vllm.ENV_DEFAULTS:
        m = re.search(r"\(\s*[\"']" + re.escape(name) + r"[\"']\s*(?:,\s*([\"'])(.*?)\1)?\s*[,)]", text)
        if m is None:
            assert vllm.env_default(name, version) is None, (name, "not read by this envs.py")
            continue
        assert vllm.env_default(name, version) == (m.group(2) if m.group(1) else None), name
        checked += 1
    assert checked >= 8, checked
