"""``flightcheck prepare`` (on a build box) and ``flightcheck prepare install`` (on the
node): the parsers and the handlers; the work is in :mod:`flightcheck._prepare`."""

from __future__ import annotations

import argparse
import json
import os
import sys


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """``prepare`` and ``prepare install`` (spelt ``prepare-install`` inside the parser)."""
    p = sub.add_parser(
        "prepare",
        help="on a build box: compile what the node would JIT, gather the official wheels, write a bundle",
    )
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--for", dest="node", default=None, metavar="NODE.json", help="the node's facts snapshot")
    target.add_argument("--arch", default=None, help="the node's GPU arch, e.g. 10.3a (B300), 10.0a (B200)")
    p.add_argument("--python", required=True, metavar="ENGINE_PY", help="an interpreter of the node's engine venv")
    p.add_argument("-o", "--output", default=None, metavar="BUNDLE", help="the bundle directory to write")
    p.add_argument("--dry-run", action="store_true", help="print the plan, build nothing")
    p.add_argument("--modules", default=None, metavar="LIST", help="build only these modules (comma-separated)")
    p.add_argument("--index-url", default=None, metavar="URL", help="where the official wheels are (PEP 503)")
    p.add_argument("--no-wheels", action="store_true", help="do not fetch the official wheels")
    p.add_argument("--libcuda-stub", default=None, metavar="PATH", help="a linkable libcuda.so (or its directory)")
    p.add_argument("--format", default="text", choices=("text", "json"))
    p.add_argument("engine_command", nargs=argparse.REMAINDER, help="-- <engine command>")

    i = sub.add_parser("prepare-install", help="on the node, offline: install a bundle (prepare install BUNDLE)")
    i.add_argument("bundle", metavar="BUNDLE")
    i.add_argument("--python", required=True, metavar="ENGINE_PY", help="the engine venv's interpreter")
    i.add_argument(
        "--gpu-cc", default=None, metavar="LIST", help="the node's compute capabilities, e.g. 10.3 (refuse a mismatch)"
    )
    i.add_argument("--format", default="text", choices=("text", "json"))


def _say(text: str) -> None:
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def cmd_prepare(args: argparse.Namespace) -> int:
    """``flightcheck prepare``."""
    from flightcheck._prepare import plan as _plan
    from flightcheck._vocabulary.errors import UsageError
    from flightcheck._vocabulary.intent import Intent

    arch = _plan.arch_from_node(args.node) if args.node else _plan.normalise_arch(args.arch)
    command = list(args.engine_command or [])
    if command and command[0] == "--":
        command = command[1:]
    intent = Intent()
    if command:
        from flightcheck._launch import parse_command

        intent = parse_command(command).intent
    if not args.dry_run and not args.output:
        raise UsageError("prepare: give -o BUNDLE (or --dry-run)")
    only = [m.strip() for m in args.modules.split(",") if m.strip()] if args.modules else None
    env = dict(os.environ)
    plan = _plan.make_plan(arch, args.python, intent, env, only=only, index_url=args.index_url)
    if args.dry_run:
        if args.format == "json":
            sys.stdout.write(json.dumps(plan.to_json(), indent=2) + "\n")
        else:
            sys.stdout.write(_plan.render(plan) + "\n(dry run: nothing built)\n")
        return 0
    from flightcheck._prepare.make import make_bundle

    _say(_plan.render(plan))
    manifest = make_bundle(
        plan, args.output, env, _say, libcuda_stub=args.libcuda_stub, fetch_wheels=not args.no_wheels
    )
    if args.format == "json":
        sys.stdout.write(json.dumps(manifest, indent=2) + "\n")
    return 0 if not manifest["failed"] else 1


def cmd_prepare_install(args: argparse.Namespace) -> int:
    """``flightcheck prepare install BUNDLE``."""
    from flightcheck._prepare.install import install

    ccs = [c.strip() for c in args.gpu_cc.split(",") if c.strip()] if args.gpu_cc else None
    done = install(args.bundle, args.python, dict(os.environ), _say, gpu_ccs=ccs)
    if args.format == "json":
        sys.stdout.write(json.dumps({"modules": done.modules, "wheels": done.wheels, "env": done.env}) + "\n")
        return 0
    for note in done.notes:
        _say(f"note: {note}")
    sys.stdout.write("# launch with:\n" + "".join(f"export {k}={v}\n" for k, v in sorted(done.env.items())))
    return 0
