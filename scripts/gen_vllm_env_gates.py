#!/usr/bin/env python3
"""The vLLM variables flightcheck sets or reads, as each released wheel's ``vllm/envs.py`` declares them.

    python scripts/gen_vllm_env_gates.py --download 0.11.0 0.19.0 ... --wheels /work/scratch/wheels
    python scripts/gen_vllm_env_gates.py --wheels /work/scratch/wheels [--out FILE]   # regenerate
    python scripts/gen_vllm_env_gates.py --check [--fixture FILE]                      # verify

``--download`` fetches wheels with ``pip download --no-deps --only-binary :all: vllm==X``
(a few hundred MB each). Each wheel's ``vllm/envs.py`` is read as TEXT (``zipfile`` +
``ast``; nothing of vLLM is imported or executed): for every variable of
:data:`TRACKED` (the ``VLLM_*`` names of ``flightcheck._knowledge.vllm``), whether the
release declares it in ``environment_variables`` and the default its getter passes
(``os.getenv(NAME, DEFAULT)``, ``env_with_choices(NAME, DEFAULT, ...)``, ...), as source
text. The result goes to ``tests/fixtures/vllm_envs/gates.json`` (committed: CI cannot
download ~40 wheels of 250-500 MB each; tests/knowledge/test_vllm_env_gates.py checks the
knowledge module against it offline).

``--check`` compares ``_knowledge/vllm/``'s ``SINCE`` (first release declaring the
variable) and ``ENV_DEFAULTS`` (its default by release) with the fixture; exit 1 on a
difference, each printed. A variable the fixture never saw declared must not be in
``SINCE``. Files named ``envs-<version>.py`` in ``--wheels`` (envs.py extracted before)
are read too.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

from packaging.version import Version

from flightcheck._knowledge import vllm

FIXTURE = REPO / "tests" / "fixtures" / "vllm_envs" / "gates.json"

#: Every VLLM_* variable the knowledge module names (the plan sets, the checks read).
TRACKED: tuple[str, ...] = tuple(
    sorted(
        {
            value
            for name, value in vars(vllm).items()
            if name.isupper() and isinstance(value, str) and re.fullmatch(r"VLLM_[A-Z0-9_]+", value)
        }
    )
)

_GETTERS = {
    "getenv",
    "get",
    "env_with_choices",
    "env_list_with_choices",
    "env_set_with_choices",
    "get_env_or_set_default",
}


def _default(node: ast.AST, name: str) -> str | None:
    """The default the getter of ``name`` passes, as source text ("None" when it passes none)."""
    for sub in ast.walk(node):
        if not isinstance(sub, ast.Call) or not sub.args:
            continue
        func = sub.func
        fname = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        first = sub.args[0]
        if fname in _GETTERS and isinstance(first, ast.Constant) and first.value == name:
            if len(sub.args) >= 2:
                return ast.unparse(sub.args[1])
            kw = next((k.value for k in sub.keywords if k.arg in ("default", "default_value")), None)
            return ast.unparse(kw) if kw is not None else "None"
    return None


def declared(source: str) -> dict[str, str | None]:
    """Tracked variable -> default text, for those ``environment_variables`` declares."""
    tree = ast.parse(source)
    out: dict[str, str | None] = {}
    for node in ast.walk(tree):
        target = None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
        elif isinstance(node, ast.AnnAssign):
            target = node.target
        if not (isinstance(target, ast.Name) and target.id == "environment_variables"):
            continue
        value = node.value
        if not isinstance(value, ast.Dict):
            continue
        for key, val in zip(value.keys, value.values, strict=True):
            if isinstance(key, ast.Constant) and key.value in TRACKED:
                out[key.value] = _default(val, key.value)
    return out


def envs_sources(folder: Path) -> dict[str, str]:
    """version -> envs.py text, from ``vllm-<v>-*.whl`` and ``envs-<v>.py`` in ``folder``."""
    found: dict[str, str] = {}
    for whl in folder.glob("vllm-*.whl"):
        version = whl.name.split("-")[1]
        with zipfile.ZipFile(whl) as zf:
            found[version] = zf.read("vllm/envs.py").decode("utf-8")
    for f in folder.glob("envs-*.py"):
        found.setdefault(f.stem.removeprefix("envs-"), f.read_text(encoding="utf-8"))
    return found


def generate(folder: Path) -> dict:
    sources = envs_sources(folder)
    versions = sorted(sources, key=Version)
    return {
        "generated_by": "scripts/gen_vllm_env_gates.py",
        "source": "vllm/envs.py of each wheel from `pip download --no-deps vllm==X`, read as text",
        "tracked": list(TRACKED),
        "versions": versions,
        "declared": {v: declared(sources[v]) for v in versions},
    }


def check(doc: dict) -> list[str]:
    """Differences between the knowledge module and the wheels' envs.py."""
    problems: list[str] = []
    versions: list[str] = doc["versions"]
    for name in doc["tracked"]:
        have = [v for v in versions if name in doc["declared"][v]]
        since = vllm.SINCE.get(name)
        if not have:
            if since is not None:
                problems.append(f"{name}: SINCE says {since}, no release read declares it")
            continue
        first = have[0]
        if first == versions[0]:
            # declared in the oldest release read: its first release is not known from these wheels
            if since is not None and Version(since) > Version(first):
                problems.append(f"{name}: SINCE says {since}, {first} already declares it")
        elif since is None:
            if name in vllm.GATED:
                problems.append(f"{name}: first declared in {first}, SINCE has no entry")
        elif since != first:
            problems.append(f"{name}: SINCE says {since}, the wheels say {first}")
        if name in vllm.ENV_DEFAULTS:
            for v in have:
                text = doc["declared"][v][name]
                want = ast.literal_eval(text) if text is not None else None
                got = vllm.env_default(name, v)
                if got != want:
                    problems.append(f"{name} in {v}: ENV_DEFAULTS says {got!r}, envs.py passes {want!r}")
    return problems


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--wheels", type=Path, help="folder of vllm wheels (and envs-<version>.py extracts)")
    ap.add_argument("--download", nargs="*", default=[], metavar="VERSION", help="pip download these first")
    ap.add_argument("--out", type=Path, default=FIXTURE)
    ap.add_argument("--check", action="store_true", help="verify the knowledge module against --fixture")
    ap.add_argument("--fixture", type=Path, default=FIXTURE)
    args = ap.parse_args()
    if args.check:
        problems = check(json.loads(args.fixture.read_text()))
        for p in problems:
            print(p)
        print(f"{len(problems)} difference(s)")
        return 1 if problems else 0
    if args.wheels is None:
        ap.error("--wheels is needed to generate (or give --check)")
    args.wheels.mkdir(parents=True, exist_ok=True)
    for version in args.download:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", f"vllm=={version}"]
        subprocess.run([*cmd, "-d", str(args.wheels), "-q"], check=True)
    doc = generate(args.wheels)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n")
    print(f"{args.out}: {len(doc['versions'])} releases, {len(doc['tracked'])} variables")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
