"""The check framework: one declaration per check, outcomes, and running them safely.

A check is a generator function decorated with :func:`check`. Its docstring is its
documentation (``flightcheck explain CODE`` prints it) and must carry three sections:
``## What it checks``, ``## Why the launch dies`` and ``## How to fix``. The function reads
only the :class:`Context` (facts + intent + the checkpoint on disk) and yields outcomes:

    @check("FC601", "shm-too-small", ERROR)
    def shm_too_small(ctx):
        '''...'''
        shm = ctx.need(ctx.host.shm_bytes, "host.shm_bytes")      # missing fact -> status "unknown"
        if ctx.intent.world_size == 1:
            raise Skip("one rank: no shared-memory transport")
        if shm < GiB:
            yield fail("...", fix="...")
        else:
            yield ok("...")

A check may also declare the engine-log lines it explains (``logs=``, beside the docstring):
regular expressions searched in one line of a failed engine log, with its prefixes (ANSI
colours, timestamps, ``(EngineCore_DP0 pid=…)``, Ray and Kubernetes prefixes) removed.
``flightcheck diagnose`` names the check when its line is in a log, and ``explain`` shows
them. They are stored as text here and compiled once, by the first diagnosis (the import
of the checks stays as cheap as it was):

    @check("FC601", "shm-too-small", ERROR, logs=(
        r"NCCL WARN Error while creating shared memory segment /dev/shm/nccl-",
        Log(r"Fatal Python error: Bus error", note="a worker's shared memory ran out"),
    ))

A check that yields nothing passes. ``Skip`` makes it ``skip``, ``Missing`` (raised by
``ctx.need``) makes it ``unknown`` naming the fact, and any other exception becomes
``unknown`` naming the exception: one broken check never stops the others.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Iterator
from functools import cached_property
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import msgspec

from flightcheck._checks.retired import refusal
from flightcheck._knowledge.derived import visible_gpus
from flightcheck._vocabulary import facts
from flightcheck._vocabulary.facts import Facts, Gpu
from flightcheck._vocabulary.intent import Intent
from flightcheck._vocabulary.results import CheckResult, PlanStep, Severity, Status

if TYPE_CHECKING:
    from flightcheck._checkpoint import Checkpoint
    from flightcheck._memory import MemoryModel

T = TypeVar("T")
S = TypeVar("S")


DOC_SECTIONS = ("## What it checks", "## Why the launch dies", "## How to fix")


class Outcome(msgspec.Struct, frozen=True):
    """What a check function yields; the framework turns it into a :class:`CheckResult`."""

    status: Status
    message: str = ""
    subject: str = "host"
    fix: str | None = None
    evidence: dict[str, Any] = msgspec.field(default_factory=dict)
    severity: Severity | None = None  # overrides the check's severity (e.g. FC207)
    plan: tuple[PlanStep, ...] = ()


def fail(
    message: str,
    *,
    fix: str | None = None,
    subject: str = "host",
    evidence: dict[str, Any] | None = None,
    severity: Severity | None = None,
    plan: Iterable[PlanStep] = (),
) -> Outcome:
    """A failure of this check for ``subject``; ``plan`` holds the fallback, if one exists."""
    return Outcome(Status.FAIL, message, subject, fix, evidence or {}, severity, tuple(plan))


def ok(message: str = "", *, subject: str = "host", evidence: dict[str, Any] | None = None) -> Outcome:
    """A pass, with an optional line saying what was verified."""
    return Outcome(Status.PASS, message, subject, None, evidence or {})


def unknown(message: str, *, subject: str = "host", evidence: dict[str, Any] | None = None) -> Outcome:
    """The check could not tell (a probe that did not run, a fact nobody could read)."""
    return Outcome(Status.UNKNOWN, message, subject, None, evidence or {})


class Skip(Exception):
    """Raised by a check that does not apply to this launch (the message says why)."""


class Missing(Exception):
    """Raised by :meth:`Context.need` when a fact the check needs is null."""

    def __init__(self, path: str, reason: str | None) -> None:
        self.path, self.reason = path, reason
        super().__init__(f"{path} is unavailable" + (f" ({reason})" if reason else ""))


class Log(msgspec.Struct, frozen=True):
    """One engine-log line a check explains (see ``flightcheck diagnose``).

    ``pattern`` is a regular expression searched in one log line (prefixes removed).
    ``phases`` limits it to the startup phases where the line means this check's cause
    (``"load"``: a CUDA OOM while the weights load is FC401; the same line while serving
    is not); empty: anywhere. ``note`` says what the line means when that is not obvious
    (a misleading message), and is printed with the diagnosis. ``frames``, a regular
    expression, limits it to a line that ends a traceback through a function it matches
    (``rendezvous``: CUDA error 802 in torch's symmetric-memory rendezvous is the multicast
    path, FC304, where 802 elsewhere is the fabric, FC301).
    """

    pattern: str
    phases: tuple[str, ...] = ()
    note: str = ""
    frames: str = ""


#: The startup phases a log line can fall in, in order (``diagnose``'s ``phase``).
PHASES = ("before-weights", "load", "profile", "warmup", "graph-capture", "serving")


class Check(msgspec.Struct, frozen=True):
    """One declared check: stable code, kebab-case name, severity, docs, function."""

    code: str
    name: str
    severity: Severity
    func: Callable[[Context], Iterable[Outcome]]
    scope: str = "node"  # "node": one host's facts; "cluster": across node snapshots
    logs: tuple[Log, ...] = ()  # the engine-log lines this check explains

    @property
    def doc(self) -> str:
        """The documentation, dedented."""
        return inspect.cleandoc(self.func.__doc__ or "")

    @property
    def summary(self) -> str:
        """The first line of the documentation."""
        return self.doc.splitlines()[0] if self.doc else ""

    @property
    def source(self) -> str:
        """Where the check is declared: ``src/flightcheck/_checks/toolchain/nvcc.py``."""
        return "src/" + self.func.__module__.replace(".", "/") + ".py"

    @property
    def family(self) -> str:
        """The code prefix of the family (``FC1`` for FC101)."""
        return self.code[:3]


REGISTRY: dict[str, Check] = {}


def check(
    code: str, name: str, severity: Severity, *, scope: str = "node", logs: Iterable[str | Log] = ()
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Declare a check. Codes and names are unique and never reused: not within the
    registry, and not what the ledger of :mod:`flightcheck._checks.retired` retired.
    ``logs``: the engine-log lines the check explains (a pattern, or a :class:`Log`)."""
    declared = tuple(x if isinstance(x, Log) else Log(x) for x in logs)
    for sig in declared:
        bad = [p for p in sig.phases if p not in PHASES]
        if bad:
            raise RuntimeError(f"check {code}: log phase {bad[0]!r} is not one of {', '.join(PHASES)}")

    def register(func: Callable[..., Any]) -> Callable[..., Any]:
        refused = refusal(code, name)
        if refused:
            raise RuntimeError(f"check {code} {name}: {refused}")
        if code in REGISTRY:
            raise RuntimeError(f"check code {code} declared twice")
        if any(c.name == name for c in REGISTRY.values()):
            raise RuntimeError(f"check name {name} declared twice")
        REGISTRY[code] = Check(code, name, severity, func, scope, declared)
        return func

    return register


#: Per-family one-line summaries for the text report: prefix -> fn(ctx) -> str.
SUMMARIES: dict[str, Callable[[Context], str]] = {}


def summary(prefix: str) -> Callable[[Callable[[Context], str]], Callable[[Context], str]]:
    """Declare the function that writes a family's headline (``8x B300, driver 590.44.01``)."""

    def register(func: Callable[[Context], str]) -> Callable[[Context], str]:
        SUMMARIES[prefix] = func
        return func

    return register


#: Per-family gates: prefix -> fn(ctx, code) -> a reason the check does not apply, or None.
#: A family whose checks share one precondition (the toolchain's: the engine compiles CUDA
#: kernels at all) says it once here, so each of its checks skips with the same one line.
GATES: dict[str, Callable[[Context, str], str | None]] = {}


def gate(prefix: str) -> Callable[[Callable[[Context, str], str | None]], Callable[[Context, str], str | None]]:
    """Declare the gate of a family (see :data:`GATES`)."""

    def register(func: Callable[[Context, str], str | None]) -> Callable[[Context, str], str | None]:
        GATES[prefix] = func
        return func

    return register


class _Section(Generic[S]):
    """A facts section as a typed attribute of :class:`Context`: the collected struct, or an
    empty one (every field None) when the section was not collected."""

    def __init__(self, name: str, empty: Callable[[], S]) -> None:
        self.name, self.empty = name, empty

    def __get__(self, ctx: Context, owner: type | None = None) -> S:
        value: S | None = getattr(ctx.facts, self.name)
        return value if value is not None else self.empty()


class Context:
    """What a check may read: the facts (as typed sections), the intent, the checkpoint
    read for this launch and the memory model built from it.

    Sections are never None here: a section that was not collected reads as an empty one
    (every field None), so ``ctx.toolchain.ninja`` is simply None. A check that cannot
    decide without a fact says so with :meth:`need`.
    """

    def __init__(self, facts: Facts, intent: Intent, checkpoint: Checkpoint | None = None) -> None:
        self.facts = facts
        self.intent = intent
        self._checkpoint = checkpoint
        self.cache: dict[str, Any] = {}  # derived values shared between checks

    def need(self, value: T | None, path: str) -> T:
        """``value`` (the fact at ``path``); raises :class:`Missing` (-> status unknown,
        with the reason the collector recorded) when it is None."""
        if value is None:
            raise Missing(path, self.facts.reason(path))
        return value

    # ---- typed sections (an uncollected one reads as empty) --------------------------------

    host = _Section("host", facts.Host)
    driver = _Section("driver", facts.Driver)
    fabric_manager = _Section("fabric_manager", facts.FabricManager)
    imex = _Section("imex", facts.Imex)
    multicast_probe = _Section("multicast_probe", facts.MulticastProbe)
    toolchain = _Section("toolchain", facts.Toolchain)
    python = _Section("python", facts.Python)
    jit_cache = _Section("jit_cache", facts.JitCache)
    pod = _Section("pod", facts.Pod)

    @cached_property
    def nvcc(self) -> facts.Nvcc:
        """``toolchain.nvcc`` (empty when no nvcc was found)."""
        return self.toolchain.nvcc or facts.Nvcc()

    @cached_property
    def env(self) -> dict[str, str | None]:
        return self.facts.env or {}

    # ---- derived -------------------------------------------------------------------------

    @cached_property
    def visible_gpus(self) -> list[Gpu]:
        """The GPUs the engine will see: ``gpus`` filtered and ordered by CUDA_VISIBLE_DEVICES."""
        return visible_gpus(self.facts)

    @cached_property
    def gpus_used(self) -> list[Gpu]:
        """The first TP x PP (x DP on one node) visible GPUs."""
        return self.visible_gpus[: self.intent.gpus_per_node]

    @property
    def checkpoint(self) -> Checkpoint | None:
        """The checkpoint read for ``--model`` (None without a model).

        Raises:
            Skip: a model is named but no checkpoint was handed to the evaluation.
        """
        if not self.intent.model:
            return None
        if self._checkpoint is None:
            raise Skip("the checkpoint was not read (evaluate was given none)")
        return self._checkpoint

    @cached_property
    def memory(self) -> MemoryModel | None:
        """The memory-fit model for this launch (None without a model)."""
        if not self.intent.model:
            return None
        from flightcheck._checks.shared.memory import model_for_context

        return model_for_context(self)


def run_check(chk: Check, ctx: Context) -> list[CheckResult]:
    """Evaluate one check; never raises."""

    def result(o: Outcome) -> CheckResult:
        steps = tuple(PlanStep(s.kind, s.name, s.value, s.why, chk.code, s.cost) for s in o.plan)
        return CheckResult(
            chk.code, chk.name, o.status, o.severity or chk.severity, o.subject, o.message, o.fix, o.evidence, steps
        )

    try:
        family_gate = GATES.get(chk.family)
        reason = family_gate(ctx, chk.code) if family_gate else None
        if reason:
            raise Skip(reason)
        outcomes = list(chk.func(ctx))
    except Skip as exc:
        return [result(Outcome(Status.SKIP, str(exc)))]
    except Missing as exc:
        return [result(Outcome(Status.UNKNOWN, f"cannot evaluate: {exc}", evidence={"missing": exc.path}))]
    except Exception as exc:  # noqa: BLE001 - a crashing check must not stop the others
        return [
            result(
                Outcome(
                    Status.UNKNOWN,
                    f"check crashed: {type(exc).__name__}: {exc}",
                    evidence={"exception": type(exc).__name__},
                )
            )
        ]
    if not outcomes:
        return [result(Outcome(Status.PASS))]
    return [result(o) for o in outcomes]


def iter_checks(scope: str = "node") -> Iterator[Check]:
    """Every registered check of ``scope``, in code order."""
    from flightcheck._checks import load_all

    load_all()
    for code in sorted(REGISTRY):
        if REGISTRY[code].scope == scope:
            yield REGISTRY[code]
