"""The vLLM plugin: guard every ``vllm serve`` on a host where flightcheck is installed.

vLLM loads the entry points of the group ``vllm.general_plugins`` in every process it
starts (API server, engine core, each worker) and calls them without catching exceptions.
The first call, in the API-server process, happens while ``vllm serve`` builds its argument
parser: before the arguments are parsed, before any engine or worker process exists, and
long before a weight is read. So this plugin:

- acts only for ``vllm serve`` (read from ``sys.argv``; ``vllm collect-env``, ``bench``,
  ``--help`` ... return at once) and only once per launch: the first process sets
  ``FLIGHTCHECK_PLUGIN_DONE=<pid>``, which every later process inherits and honours
  (``flightcheck run`` sets it too: a launch it checked is not checked twice);
- on a blocking problem writes the report to stderr and raises ``SystemExit(1)``;
- on a fallback sets ``os.environ`` in this process, which the engine-core and worker
  processes inherit (vLLM reads its ``VLLM_*`` variables lazily, and config defaults are
  decided in this process, so this is early enough); under Ray the plan itself extends
  ``VLLM_RAY_EXTRA_ENV_VARS_TO_COPY``;
- reads the launch with vLLM's own serve parser, in this process (:func:`engine_reading`:
  vLLM and torch are already imported when vLLM calls the plugin; ``intent.reader`` is
  ``"engine"``), and with the built-in reader where that fails (``"built-in"``);
- never imports torch or vLLM itself (only vLLM's modules already in ``sys.modules`` are
  used) and never creates a CUDA context (collectors that touch the driver run in child
  processes), and never crashes vLLM: any internal error is one line on stderr and the
  launch goes on unchecked.

The multicast probe runs here where the launch needs it, and once per boot. After a warm
reboot the NVSwitch multicast team can be broken while the fabric manager and NVML report
Completed/Success: only binding multicast memory shows it (CUDA error 401), and without the
probe ``vllm serve`` dies after the load. So when the launch reaches a multicast path
(more than one GPU of it on an NVSwitch node, and a path of the fallback plan's list on:
``_checks/fabric/fallback.probe_needed``) the plugin probes those GPUs in a child, under a
time budget (:data:`PROBE_BUDGET_S`; a timeout is FC304 ``unknown``, never a stop), and
caches the verdict for the boot (keyed by boot id, fabric-manager start, driver version and
GPU UUIDs: ``_collect/multicast_cache``), so the first launch after a boot, a fabric-manager
restart or a GPU change pays seconds and later launches nothing. One GPU, PCIe, GPUs
without multicast: no probe, no cost, and FC304's skip says why. ``timings.probe_s`` is
what it cost this launch. ``FLIGHTCHECK_PROBE=0`` turns it off; ``=1`` probes every
launch, fresh, wherever two GPUs are used; ``FLIGHTCHECK_PROBE_TIMEOUT`` sets the budget.

Environment: ``FLIGHTCHECK_DISABLE=1`` (off), ``FLIGHTCHECK_FACTS=a.json:b.json`` (as
``--facts``, separated by ``os.pathsep``), ``FLIGHTCHECK_PROBE=0|1``, ``FLIGHTCHECK_PROBE_TIMEOUT=S``,
``FLIGHTCHECK_NO_FALLBACK=1`` (a needed fallback stops the launch), ``FLIGHTCHECK_STRICT=1``
(a failing warning blocks), ``FLIGHTCHECK_REPORT=path.json`` (write the JSON report).
"""

from __future__ import annotations

import os
import sys
from typing import Any

from flightcheck._vocabulary.envvars import MARKER

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")

#: seconds the plugin gives the multicast probe (the engine waits for it): CUDA init on 8
#: GPUs and the bind take seconds; a hang is cut here and is FC304 unknown, not a stop
PROBE_BUDGET_S = 20.0


def _on(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in _TRUE


def serve_command(argv: list[str]) -> list[str] | None:
    """The launch as an engine command line when this process is ``vllm serve`` (the CLI
    or the OpenAI API-server module), else None."""
    if not argv:
        return None
    prog = argv[0].replace(os.sep, "/")
    rest = argv[1:]
    if "-h" in rest or "--help" in rest or any(a.startswith("--help=") for a in rest):
        return None
    from flightcheck._knowledge import engines

    cli = engines.get("vllm").command.cli  # the plugin is vLLM's: it rides in `vllm serve`
    if os.path.basename(prog) == cli or prog.endswith("vllm/entrypoints/cli/main.py"):
        return [cli, *rest] if rest[:1] == ["serve"] else None
    if prog.endswith("vllm/entrypoints/openai/api_server.py"):
        return [sys.executable, "-m", "vllm.entrypoints.openai.api_server", *rest]
    if prog.endswith("vllm/entrypoints/launchers/api_server/entry.py"):
        return [sys.executable, "-m", "vllm.entrypoints.launchers.api_server.entry", *rest]
    return None


#: vLLM modules that say this process is ``vllm serve`` building its parser: the plugin is
#: called from ``AsyncEngineArgs.add_cli_args`` (vllm/engine/arg_utils.py) via
#: ``load_general_plugins`` (vllm/plugins/__init__.py), so both are imported already.
_VLLM_LOADED = ("vllm.engine.arg_utils", "vllm.plugins")


def engine_reading(command: list[str], env: dict[str, str]) -> dict[str, Any] | None:
    """vLLM's own reading of the launch, in this process; None keeps the built-in reading.

    vLLM calls this plugin while it builds the serve parser, before ``parse_args``, with
    vLLM and torch imported. ``_collect/engine_reader.read_in_process`` builds a second serve
    parser the way ``vllm serve`` does (vllm/entrypoints/cli/main.py: a
    ``FlexibleArgumentParser`` with subparsers, ``ServeSubcommand.subparser_init`` from
    vllm/entrypoints/cli/serve.py, which calls ``make_arg_parser`` of
    vllm/entrypoints/common/cli_args.py; vllm/utils/argparse_utils.py does the
    pre-processing), parses the full argv, runs ``ServeSubcommand.validate`` and
    ``AsyncEngineArgs.from_cli_args``: the same document the child reader of ``run`` prints.
    Building that parser calls ``load_general_plugins`` again, which returns at once
    (``plugins_loaded`` is set before the plugins run, and this process already set
    ``FLIGHTCHECK_PLUGIN_DONE``). Only modules vLLM already imported are used; anything that
    moved in vLLM's API (an ImportError, an AttributeError, a document without the fields)
    keeps the built-in reading. ``FLIGHTCHECK_ENGINE_READ=0`` turns it off here too.
    """
    from flightcheck._launch.engine_ask import enabled, usable

    if not enabled(env) or not all(name in sys.modules for name in _VLLM_LOADED):
        return None
    try:
        from flightcheck._collect.engine_reader import read_in_process
        from flightcheck._knowledge import engines

        doc = read_in_process(engines.reader_spec("vllm"), command)
    except Exception:  # noqa: BLE001 - the built-in reading stays
        return None
    return doc if usable(doc) else None


def engine_platform() -> str | None:
    """vLLM's platform in this process, lower-case (``"cuda"``, ``"rocm"``, ``"cpu"``, ...),
    when vLLM has imported ``vllm.platforms`` (it has when it calls the plugin); None when
    it cannot be told.

    vLLM 0.33.0 ``vllm/platforms/__init__.py``: ``current_platform`` (a module
    ``__getattr__``) resolves once, from the builtin platform plugins (CUDA when NVML sees
    an NVIDIA GPU, ROCm, CPU for ``VLLM_TARGET_DEVICE=cpu`` builds, ...); the platform's
    ``_enum`` (``PlatformEnum``, vllm/platforms/interface.py) names it. vLLM resolves it
    itself while it builds the serve parser, so asking costs nothing more. Only the module
    vLLM imported is used; anything else (an API that moved) is None."""
    mod = sys.modules.get("vllm.platforms")
    if mod is None:
        return None
    try:
        platform = mod.current_platform
        name = getattr(getattr(platform, "_enum", None), "name", None)
        if isinstance(name, str) and name:
            return name.lower()
        is_cuda = getattr(platform, "is_cuda", None)
        return ("cuda" if is_cuda() else "not-cuda") if callable(is_cuda) else None
    except Exception:  # noqa: BLE001 - vLLM's own code; the launch is checked as before
        return None


def probe_mode(env: dict[str, str]) -> tuple[str, float, str | None]:
    """(``auto`` | ``force`` | ``off``, the probe's budget in seconds, a warning for a value
    that was not understood) from FLIGHTCHECK_PROBE / FLIGHTCHECK_PROBE_TIMEOUT."""
    raw = env.get("FLIGHTCHECK_PROBE", "").strip().lower()
    mode = "force" if raw in _TRUE else "off" if raw in _FALSE else "auto"
    warning = (
        f"FLIGHTCHECK_PROBE={raw!r} is neither 0 nor 1: probing where the launch needs it"
        if (raw and mode == "auto")
        else None
    )
    budget = PROBE_BUDGET_S
    text = env.get("FLIGHTCHECK_PROBE_TIMEOUT", "").strip()
    if text:
        try:
            value = float(text)
        except ValueError:
            value = -1.0
        if 0 < value <= 600:
            budget = value
        else:
            warning = f"FLIGHTCHECK_PROBE_TIMEOUT={text!r} is not a number of seconds in (0, 600]: {budget:g}s"
    return mode, budget, warning


def register() -> None:
    """The entry point vLLM calls (``flightcheck._plugin:register``)."""
    if _on("FLIGHTCHECK_DISABLE"):
        return
    command = serve_command(sys.argv)
    if command is None or os.environ.get(MARKER):
        return
    os.environ[MARKER] = str(os.getpid())  # before anything can fail: children never re-check
    platform = engine_platform()
    if platform is not None and platform != "cuda" and not os.environ.get("FLIGHTCHECK_FACTS"):
        # flightcheck's checks are about NVIDIA launches (NVML, nvcc, NVLink): on another
        # platform they would stop every launch on FC201 (a FLIGHTCHECK_FACTS snapshot asks
        # to judge the node it records: checked as before)
        sys.stderr.write(f"flightcheck: launch not checked: vLLM runs on the {platform} platform here, not CUDA\n")
        sys.stderr.flush()
        return
    try:
        _guard(command)
    except SystemExit:
        raise
    except Exception as exc:  # noqa: BLE001 - never the reason vLLM crashes
        msg = str(exc).splitlines()[0] if str(exc) else ""
        sys.stderr.write(f"flightcheck: launch not checked: {type(exc).__name__}: {msg}\n")
        sys.stderr.flush()


def _guard(command: list[str]) -> None:
    """Check the launch; stop it (SystemExit) or apply the fallback to this process."""
    import time

    from flightcheck._collect import env_facts_files
    from flightcheck._launch.command import parse_command
    from flightcheck._launch.guard import color_for, decide, grouped_lines, passed_line, print_changes, print_stop, say
    from flightcheck._pipeline import assess

    t0 = time.perf_counter()
    env = dict(os.environ)
    cmd = parse_command(command, env)
    t_read = time.perf_counter()
    doc = engine_reading(command, env)
    read_s = time.perf_counter() - t_read
    if doc is not None:
        from flightcheck._launch.engine_ask import apply_engine_reading

        apply_engine_reading(cmd, doc)
    intent = cmd.intent
    intent.python = sys.executable  # this process is the engine's interpreter
    facts_files = env_facts_files(os.environ)
    mode, budget, bad = probe_mode(env)
    if bad:
        say(sys.stderr, f"warning: {bad}")
    report = assess(  # this process's environment is the engine's: it wins over a recorded one
        intent,
        facts_files,
        env=env,
        python=sys.executable,
        strict=_on("FLIGHTCHECK_STRICT"),
        multicast=mode,
        probe_budget=budget,
        live_env=True,
    )
    report.timings["engine_read_s"] = round(read_s, 4)  # vLLM's own parser, in this process
    probe_line = _probe_line(report)
    report.timings["total_s"] = round(time.perf_counter() - t0, 4)
    d = decide(report, cmd, env, no_fallback=_on("FLIGHTCHECK_NO_FALLBACK"))
    err = sys.stderr
    out = os.environ.get("FLIGHTCHECK_REPORT")
    if out:
        from flightcheck._report import render, write_atomic
        from flightcheck._vocabulary.errors import UsageError

        try:
            write_atomic(out, render(report, "json"))
        except UsageError as exc:  # a report that cannot be written must not undo the decision
            say(err, f"warning: FLIGHTCHECK_REPORT: {exc}")
    if d.action == "stop":
        from flightcheck._report import render

        err.write(render(report, "text", color=color_for(err)))
        print_stop(err, d, "stopping vllm serve before it loads anything:")
        say(err, "fix the above, or set FLIGHTCHECK_DISABLE=1 to launch anyway")
        say(err, "if a launch fails later anyway: `flightcheck diagnose LOG` names the cause and its fix")
        raise SystemExit(1)
    if probe_line:
        say(err, probe_line)
    for w in d.warnings:
        say(err, f"warning: {w}")
    for severity in ("warning", "info"):  # not blocking (a blocking one stopped above)
        said = [r for r in report.failures if r.code not in report.plan.reasons and r.severity.value == severity]
        for line in grouped_lines(said):
            say(err, f"{severity}: {line}")
    for name, value in d.launch.env_set.items():
        os.environ[name] = value
    if d.launch.argv != cmd.argv:
        # vLLM parses sys.argv after this call: argument changes still take effect
        offset = len(command) - (len(sys.argv) - 1)
        sys.argv[1:] = d.launch.argv[offset:]
    print_changes(err, d)
    if not d.launch.changes:
        say(err, passed_line(report))


def _probe_line(report: Any) -> str | None:
    """One line on the multicast probe when this launch asked for it: its verdict and what
    it cost here (seconds, or this boot's cached verdict)."""
    p = report.facts.multicast_probe
    spent = report.timings.get("probe_s")
    if p is None or spent is None:
        return None
    if p.ok:
        verdict = "ok"
    elif p.stage == "timeout":
        verdict = f"no answer within {p.budget_s or 0:g}s (unknown: FC304)"
    else:
        err = f"CUDA error {p.cuda_error} {p.cuda_error_name}" if p.cuda_error is not None else (p.detail or "failed")
        verdict = f"FAILED at {p.stage}: {err}"
    cost = f"this boot's verdict, cached at {p.probed_at}" if p.cached else f"{spent:.2f}s, once per boot"
    return f"multicast probe on {p.devices} GPUs: {verdict} ({cost})"
