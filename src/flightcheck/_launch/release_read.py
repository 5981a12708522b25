"""Read the engine command with the options of the engine release that will run it.

The built-in reader (:mod:`.engine_args`) first reads a command with the option table
generated from the conformance release (vLLM 0.33.0, SGLang 0.5.23), before the facts say
which release is installed. Once they do (``_pipeline.assess(by_release=...)``), this
reads the line again with that release's own options, aliases and validation, from the
release atlas (``_knowledge/atlas.py``, generated from every release's wheel):

* a release the atlas read (or one between two it read: the older one's options): the
  line is judged by that release: FC703 names a flag the release does not have, a value
  outside its choices, a config record key its records lack;
* past the newest release read: the newest release's rules, and the reports say so
  (``intent.reader_note``: "rules of vLLM 0.33.0 applied to 0.34.0"); FC703 then warns;
* before the oldest release read: one note, and the line is not judged (FC703 unknown).

Only the built-in reading is re-read: when the engine itself was asked
(``intent.reader == "engine"``) its answer stands.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from flightcheck._knowledge import argtables, atlas, engines
from flightcheck._vocabulary.facts import Facts
from flightcheck._vocabulary.intent import Intent

if TYPE_CHECKING:
    from flightcheck._launch.command import EngineCommand


def installed_release(engine: str, facts: Facts) -> str | None:
    """The engine release the facts found in the engine's interpreter."""
    packages = (facts.python.packages if facts.python is not None else None) or {}
    return packages.get(engine)


def note(engine: str, installed: str, release: str | None, relation: str) -> str | None:
    """The report's line on which release's rules judged the command (None: its own)."""
    known = engines.find(engine)
    name = known.display if known is not None else engine
    if relation == atlas.NEWER:
        return f"rules of {name} {release} applied to {installed} (the newest release read; extrapolated)"
    if relation == atlas.OLDER:
        oldest = (atlas.releases(engine) or ["?"])[0]
        return f"{name} {installed} is older than the oldest release read ({oldest}): its command line is not judged"
    if relation == atlas.BETWEEN:
        return f"rules of {name} {release} applied to {installed} (the nearest older release read)"
    return None


def by_release(cmd: EngineCommand) -> Callable[[Intent, Facts], Intent]:
    """The hook ``_pipeline.assess`` calls once the facts are known."""

    def reread(intent: Intent, facts: Facts) -> Intent:
        engine = cmd.engine
        if engine is None or intent.reader != "built-in" or engine not in argtables.TABLE_VERSION:
            return intent
        installed = installed_release(engine, facts)
        if not installed:
            return intent
        return for_release(cmd, intent, installed)

    return reread


def for_release(cmd: EngineCommand, intent: Intent, installed: str) -> Intent:
    """``intent`` with its refusal judged by ``installed``'s options (see the module)."""
    from flightcheck._launch import engine_args
    from flightcheck._launch.tokens import config_tokens
    from flightcheck._vocabulary.errors import UsageError

    engine = cmd.engine or engines.DEFAULT
    release, relation = atlas.nearest_release(engine, installed)
    changes: dict[str, object] = {
        "reader_release": release,
        "reader_relation": relation,
        "reader_note": note(engine, installed, release, relation),
    }
    table = argtables.TABLE_VERSION[engine]
    if release is None or release == table:
        # nothing older to read by, or the generated table is that very release's
        return dataclasses.replace(intent, **changes)  # type: ignore[arg-type]

    if cmd.form.endswith("-cli") and not atlas.serve_launcher(engine, release):
        known = engines.find(engine)
        name = known.display if known is not None else engine
        changes["refused"] = [f"{name} {release} has no '{engine} serve' launcher (its wheel has no CLI package)"]
        return dataclasses.replace(intent, **changes)  # type: ignore[arg-type]

    def load_config(path: str) -> list[str]:
        try:
            tokens, _ = config_tokens(path, engine)
        except UsageError as exc:
            raise engine_args.Refused(str(exc)) from None
        return tokens

    try:
        engine_args.release_parser(engine, release)
    except (argparse.ArgumentError, ValueError, TypeError, KeyError):  # a table argparse cannot build
        return dataclasses.replace(intent, reader_note=changes["reader_note"])  # type: ignore[arg-type]
    try:
        parsed = engine_args.parse(
            engine, cmd.argv[cmd.start :], serve=cmd.form.endswith("-cli"), load_config=load_config, release=release
        )
        changes["refused"] = []
    except engine_args.Refused as exc:
        changes["refused"] = [str(exc)]
        return dataclasses.replace(intent, **changes)  # type: ignore[arg-type]
    if intent.refused:  # the first reading was the lenient one: the release's parse is better
        changes.update(_release_fields(cmd, intent, parsed))
    return dataclasses.replace(intent, **changes)  # type: ignore[arg-type]


def _release_fields(cmd: EngineCommand, intent: Intent, parsed: Any) -> dict[str, object]:
    """The settings as the installed release's parser read them, where they differ from
    the first reading. That reading used the conformance release's options: where those
    refused the line (a flag the newest release dropped), it was read leniently, which
    takes no abbreviation: vLLM 0.6.0's ``--num-scheduler-steps 10 --tensor 4`` is
    tensor_parallel_size 4 to 0.6.0's parser (vllm/utils.py FlexibleArgumentParser,
    argparse's allow_abbrev; checked against the real 0.6.0 parser,
    tests/conformance/test_releases.py) but 1 to a lenient reading."""
    from flightcheck._knowledge import engines
    from flightcheck._launch.intent_read import intent_fields

    engine = cmd.engine or "vllm"
    given = {dest for dest, _, _ in parsed.given}
    fields = intent_fields(engine, cmd.form, parsed.values, given, [], None)
    blank = Intent()
    names = {*engines.get(engine).reader.intent_fields.values(), "model"}
    out: dict[str, object] = {}
    for name in names:
        if not hasattr(intent, name):
            continue
        value, first = fields.get(name, getattr(blank, name)), getattr(intent, name)
        if isinstance(value, str) and isinstance(first, (int, float)):
            continue  # a type the atlas could not spell (a str): the first reading's number stands
        if first != value:
            out[name] = value
    return out
