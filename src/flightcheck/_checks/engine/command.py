"""FC703–FC704 — engine: will the engine accept this command line, and will it load
flightcheck's plugin?"""

from __future__ import annotations

from collections.abc import Iterator

from flightcheck._checks.framework import Context, Outcome, Skip, check, fail, ok, unknown
from flightcheck._knowledge import argtables, atlas, vllm
from flightcheck._vocabulary.results import ERROR, WARNING


@check(
    "FC703",
    "engine-refuses-command",
    ERROR,
    logs=(
        r"(?:vllm serve|api_server\.py|launch_server\.py|vllm): error: (?:unrecognized arguments|argument )",
        "error: unrecognized arguments: --",
    ),
)
def engine_refuses_command(ctx: Context) -> Iterator[Outcome]:
    """The engine's own parser or argument validation refuses the command line.

    ## What it checks
    The engine command given to ``run`` / ``check -- <command>`` (or the one the vLLM plugin
    sees) is read with the engine's own parser: asked of the engine itself when its
    interpreter is at hand, else with flightcheck's built-in reader, which rebuilds the
    engine's parser from the option tables generated from the engine release
    (``intent.reader`` says which). It fires only when that parser, or the validation the
    engine runs right after it, refuses the line: an unknown or ambiguous flag, a value of
    the wrong type or outside the choices, a JSON config that does not validate, a
    ``--config`` file that cannot be read, a key of a JSON config record (nested records
    included: ``--compilation-config '{"pass_config": {...}}'``) the record lacks. Once the
    facts name the installed release, the built-in reader reads the line again with that
    release's own options, aliases and records from the release atlas (generated from every
    release's wheel: vLLM from 0.6.0, SGLang from 0.4.0): a release past the newest one
    read (or one between two read, whose own wheel was not) is judged by the nearest older
    one's rules, and then only warned about (the reports say "rules of vLLM X applied to
    Y"); a release older than the oldest read is not judged (unknown).

    ## Why the launch dies
    The engine prints the same error and exits before it loads anything: the launch fails
    anyway, after the job was scheduled and its nodes were allocated.

    ## How to fix
    Correct the flag named in the message (``vllm serve --help=<word>`` /
    ``python -m sglang.launch_server --help`` list what this engine release accepts; flags
    are renamed and removed between releases). A shell variable that reached the command
    unexpanded (``$PORT``) needs to be set, or quoted differently.
    """
    intent = ctx.intent
    if intent.reader is None:
        raise Skip("no engine command to read (check without -- <command>)")
    said = f"; {intent.reader_note}" if intent.reader_note else ""
    if not intent.refused:
        by = f" with {intent.engine} {intent.reader_release}'s options" if intent.reader_release else ""
        yield ok(f"{intent.engine}'s parser accepts the command (read by the {intent.reader} reader{by}{said})")
        return
    if intent.reader != "engine" and intent.reader_relation is not None:
        yield from _by_release(ctx)
        return
    if intent.reader != "engine":
        # the built-in reader speaks for the release its tables come from, no other
        packages = ctx.python.packages or {}
        installed = packages.get(intent.engine)
        table = argtables.TABLE_VERSION.get(intent.engine)
        if installed != table:
            yield unknown(
                f"{intent.engine} {table}'s parser would refuse this command ({intent.refused[0]}); "
                f"the engine here is {intent.engine} {installed or 'unknown'}, whose parser was not asked",
                evidence={"refused": list(intent.refused), "reader": intent.reader, "installed": installed},
            )
            return
    yield fail(
        f"{intent.engine} will refuse this command: {intent.refused[0]}",
        fix="correct the flag or value named above; see the engine's --help for this release",
        evidence={"refused": list(intent.refused), "reader": intent.reader},
    )


def _by_release(ctx: Context) -> Iterator[Outcome]:
    """FC703 when the line was read again with the installed release's options."""
    intent = ctx.intent
    installed = (ctx.python.packages or {}).get(intent.engine)
    evidence = {
        "refused": list(intent.refused),
        "reader": intent.reader,
        "installed": installed,
        "rules_release": intent.reader_release,
        "relation": intent.reader_relation,
    }
    if intent.reader_relation == atlas.OLDER or intent.reader_release is None:
        yield unknown(
            f"{intent.engine} {argtables.TABLE_VERSION.get(intent.engine)}'s parser would refuse this command "
            f"({intent.refused[0]}); {intent.reader_note}",
            evidence=evidence,
        )
        return
    if intent.reader_relation in (atlas.NEWER, atlas.BETWEEN):
        # past the newest release read, or between two read (a release whose wheel was not
        # read: sdist-only SGLang 0.5.11-0.5.22): what the rules lack may be new in it; never a stop
        yield fail(
            f"{intent.engine} {installed} may refuse this command: {intent.refused[0]} ({intent.reader_note})",
            fix="check the flag named above against this release's --help",
            evidence=evidence,
            severity=WARNING,
        )
        return
    yield fail(
        f"{intent.engine} {installed} will refuse this command: {intent.refused[0]}"
        + (f" ({intent.reader_note})" if intent.reader_note else f" (read with {intent.engine} {installed}'s options)"),
        fix="correct the flag or value named above; see the engine's --help for this release",
        evidence=evidence,
    )


@check("FC704", "vllm-plugins-excludes-flightcheck", WARNING)
def plugins_exclude_flightcheck(ctx: Context) -> Iterator[Outcome]:
    """``VLLM_PLUGINS`` is set and leaves flightcheck out: vLLM will not run its checks.

    ## What it checks
    vLLM loads the general plugins named in ``VLLM_PLUGINS`` (a comma list) and, when it is
    unset, every installed one. This warns when the engine's environment sets it without
    ``flightcheck``.

    ## Why the launch dies
    It does not die here: the in-process checks of the vLLM plugin silently do not run, so
    a launch that flightcheck would have stopped (or fixed) goes ahead unchecked.

    ## How to fix
    Add it: ``VLLM_PLUGINS=<others>,flightcheck``, or unset ``VLLM_PLUGINS``; or launch
    through ``flightcheck run -- vllm serve ...``, which checks before the engine starts.
    """
    if ctx.intent.engine != "vllm":
        raise Skip("vLLM only")
    value = ctx.env.get(vllm.PLUGINS_VAR)
    if value is None:
        yield ok(f"{vllm.PLUGINS_VAR} unset: vLLM loads every installed plugin, flightcheck included")
        return
    names = [n.strip() for n in value.split(",") if n.strip()]
    if vllm.PLUGIN_NAME in names:
        yield ok(f"{vllm.PLUGINS_VAR}={value} includes {vllm.PLUGIN_NAME}")
        return
    wanted = ",".join([*names, vllm.PLUGIN_NAME])
    yield fail(
        f"{vllm.PLUGINS_VAR}={value!r} leaves out {vllm.PLUGIN_NAME}: vLLM will not run its checks",
        fix=f"export {vllm.PLUGINS_VAR}={wanted}  (or unset {vllm.PLUGINS_VAR})",
        evidence={vllm.PLUGINS_VAR: value},
    )
