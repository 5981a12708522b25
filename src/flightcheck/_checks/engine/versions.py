"""FC7xx — engine: is the engine named installed where it will run, with the FlashInfer it
was built against?"""

from __future__ import annotations

from collections.abc import Iterator

from flightcheck._checks.framework import Context, Outcome, Skip, check, fail, ok, summary
from flightcheck._checks.shared import jit as _jit
from flightcheck._knowledge import engines
from flightcheck._knowledge.units import version
from flightcheck._vocabulary.results import ERROR, WARNING


@summary("FC7")
def _headline(ctx: Context) -> str:
    py = ctx.facts.python
    if py is None or py.packages is None:
        return f"engine interpreter unknown ({ctx.facts.reason('python.packages') or 'not collected'})"
    parts = []
    for name, label in (
        (ctx.intent.engine, ctx.intent.engine),
        ("flashinfer-python", "flashinfer"),
        ("torch", "torch"),
    ):
        v = py.packages.get(name)
        parts.append(f"{label} {v}" if v else f"no {label}")
    return ", ".join(parts) + (f" ({py.executable})" if py.executable else "")


@check(
    "FC701",
    "engine-missing",
    ERROR,
    logs=(
        "No module named '?(?:vllm|sglang)'?$",
        "No module named '(?:vllm|sglang)'",
        "(?:vllm|sglang): command not found",
    ),
)
def engine_missing(ctx: Context) -> Iterator[Outcome]:
    """The engine named (vllm / sglang) is not installed in the engine's interpreter.

    ## What it checks
    The distribution ``vllm`` (or ``sglang`` with ``--engine sglang``) is installed in the
    interpreter that will run the engine: ``--python``, else the one behind the ``vllm`` /
    ``sglang`` command on PATH, else flightcheck's own.

    ## Why the launch dies
    It does not start at all, or, worse, starts from another environment than the one whose
    torch, FlashInfer and toolchain were checked: every other answer here would be about the
    wrong interpreter.

    ## How to fix
    Name the engine's interpreter with ``--python /path/to/venv/bin/python`` (or activate
    that venv), or install the engine there: ``python -m pip install vllm``.
    """
    packages = ctx.need(ctx.python.packages, "python.packages")
    engine = ctx.intent.engine
    exe = ctx.python.executable or "the engine's interpreter"
    installed = packages.get(engine)
    if installed:
        yield ok(f"{engine} {installed} in {exe}")
        return
    other = next((e for e in engines.names() if e != engine and packages.get(e)), None)
    hint = f" ({other} {packages[other]} is there: --engine {other}?)" if other else ""
    yield fail(
        f"{engine} is not installed in {exe}{hint}",
        fix=(
            f"pass --python /path/to/the/engine/venv/bin/python if {engine} lives elsewhere; "
            f"else {_jit.pip(ctx, engine)}"
        ),
        evidence={"executable": ctx.python.executable, "engine": engine},
    )


def declared_requirement(ctx: Context) -> tuple[str | None, str]:
    """(specifier such as ``==0.7.2.post1``, where it came from) for the engine in use."""
    py = ctx.facts.python
    engine = ctx.intent.engine
    if py is not None and py.engine == engine:  # collected for this engine: its metadata decides, none included
        spec = py.engine_requires.removeprefix("flashinfer-python") if py.engine_requires else None
        return spec, f"{engine}'s metadata"
    installed = py.packages.get(engine) if py and py.packages else None
    pins = engines.get(engine).flashinfer_pin
    if pins and installed:
        v = version(installed)
        pinned = pins.get(str(v.public) if v else installed)
        if pinned:
            return f"=={pinned}", f"{engines.get(engine).display} {installed}'s requirements/cuda.txt"
    return None, ""


@check("FC702", "flashinfer-version-unexpected", WARNING)
def flashinfer_version_unexpected(ctx: Context) -> Iterator[Outcome]:
    """flashinfer-python differs from the version the installed engine declares it needs.

    ## What it checks
    The installed flashinfer-python satisfies the installed engine's own requirement on it
    (from its package metadata, else a table of vLLM releases and their pins).

    ## Why the launch dies
    Engines call FlashInfer kernels by keyword with the signature of the version they pin;
    another version fails mid-serving with "unexpected keyword argument" or wrong results
    (vLLM 0.24 with FlashInfer 0.6.13 on the DeepSeek-V4 decode path), or misses kernels the
    engine expects.

    ## How to fix
    Install the version the engine declares, with the engine's interpreter:
    ``python -m pip install flashinfer-python==0.7.2.post1`` (and the same version of
    flashinfer-cubin / flashinfer-jit-cache when installed).
    """
    packages = ctx.need(ctx.python.packages, "python.packages")
    engine = ctx.intent.engine
    if not packages.get(engine):
        raise Skip(f"{engine} is not installed (FC701)")
    spec, source = declared_requirement(ctx)
    fi = packages.get("flashinfer-python")
    if spec is None:
        raise Skip(f"{engine} {packages[engine]} declares no flashinfer-python requirement that flightcheck knows")
    if spec == "":
        raise Skip(f"{engine} requires flashinfer-python without a version")
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        wanted = SpecifierSet(spec)
    except InvalidSpecifier:
        raise Skip(f"{engine}'s requirement flashinfer-python{spec} is not a valid specifier") from None
    if fi and (v := version(fi)) is not None and wanted.contains(v, prereleases=True):
        yield ok(f"flashinfer-python {fi} satisfies {spec} ({source})")
        return
    target = spec[2:] if spec.startswith("==") and "," not in spec else None
    fix = _jit.pip(ctx, f"'flashinfer-python{spec}'" if target is None else f"flashinfer-python=={target}")
    if target and (packages.get("flashinfer-cubin") or packages.get("flashinfer-jit-cache")):
        fix += " (and flashinfer-cubin / flashinfer-jit-cache at the same version, FC110)"
    yield fail(
        f"flashinfer-python {fi or 'is not installed'}; "
        f"{engine} {packages[engine]} declares flashinfer-python{spec} ({source})",
        fix=fix,
        evidence={"installed": fi, "declared": spec, "source": source},
    )


@check("FC711", "engine-config-unreadable", ERROR)
def engine_config_unreadable(ctx: Context) -> Iterator[Outcome]:
    """The engine command's ``--config`` file cannot be read as the engine reads it.

    ## What it checks
    For a launch given as an engine command (``flightcheck run -- ...``, ``check -- ...``,
    the vLLM plugin): the ``--config`` file exists, is a regular file of at most 1 MiB,
    is UTF-8 YAML whose top level is a mapping of flag names to values, and does not expand
    to more than 100,000 values through aliases.

    ## Why the launch dies
    vLLM and SGLang read ``--config`` before anything else and exit with an argument error
    when the file is missing or is not a YAML mapping. flightcheck could not read the
    settings in it either, so every other check would judge a launch without them: the
    engine command is stopped rather than started unchecked.

    ## How to fix
    Point ``--config`` at the YAML file that holds the flags (``tensor-parallel-size: 8``,
    one per line), or drop ``--config``.
    """
    problem = ctx.intent.config_problem
    if problem is None:
        raise Skip("no unreadable --config file in the engine command")
    yield fail(
        f"{problem}: the engine would refuse to start",
        fix="point --config at a YAML mapping of flag names to values, or leave --config out",
        evidence={"config": problem},
    )


@check("FC710", "engine-pin-unmet", WARNING)
def engine_pin_unmet(ctx: Context) -> Iterator[Outcome]:
    """A package the engine pins (transformers, torch, FlashInfer, ...) is installed outside
    the range the engine's own metadata declares.

    ## What it checks
    The engine distribution's unconditional ``Requires-Dist`` lines (read from its
    ``METADATA`` in the engine's interpreter, e.g. vLLM 0.33.0's ``transformers>=5.16.1,
    <5.21.0`` and ``torch==2.14.0``) against the versions installed beside it: what
    ``pip check`` would say, for the packages that decide a verdict (``vllm collect-env``
    shows the same ones).

    ## Why the launch dies
    vLLM's compiled ops are built against one torch: another one fails to load them
    (``undefined symbol``) or mis-computes; a transformers outside the range lacks the
    config classes or keyword arguments the engine calls when it builds the model, which
    fails after the weights start loading. It is a warning: a patch release outside a pin
    often works.

    ## How to fix
    Install the versions the engine declares, in the engine's interpreter:
    ``python -m pip install 'transformers>=5.16.1,<5.21.0'`` (the failure prints the exact
    line), or reinstall the engine so pip resolves them: ``python -m pip install
    --force-reinstall vllm==<version>``.
    """
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    py = ctx.python
    pins = py.engine_pins
    if pins is None:
        raise Skip(ctx.facts.reason("python.engine_pins") or "the engine's declared requirements were not recorded")
    packages = py.packages or {}
    bad: list[str] = []
    for dist, spec in sorted(pins.items()):
        installed = packages.get(dist)
        v = version(installed)
        try:
            wanted = SpecifierSet(spec)
        except InvalidSpecifier:
            continue
        if installed is None or v is None:
            continue  # not installed: the engine's import names it; not ours to guess
        # a local build tag (+cu130) is the same release for the engine's pin
        if not wanted.contains(v.public, prereleases=True):
            bad.append(f"{dist} {installed} (needs {spec})")
    if not bad:
        yield ok(f"{len(pins)} pinned package(s) within {ctx.intent.engine}'s declared ranges")
        return
    lines = " ".join(f"'{b.split(' ', 1)[0]}{pins[b.split(' ', 1)[0]]}'" for b in bad)
    yield fail(
        f"{ctx.intent.engine} {packages.get(ctx.intent.engine)} declares other versions: {', '.join(bad)}",
        fix=_jit.pip(ctx, lines),
        evidence={"unmet": bad, "pins": pins},
    )
