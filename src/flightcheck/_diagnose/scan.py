"""One pass over a failed engine log: the causes the checks' signatures name, the most
likely root line when none does, the startup phase each happened in, and the launch.

How a line is judged:

- **The phase** follows the engine's own progress lines (vLLM 0.6-0.33 and SGLang 0.4-0.5
  wording: ``Starting to load model``, ``Model loading took``, ``GPU KV cache size``,
  ``Capturing CUDA graphs``, ``Application startup complete``, SGLang's ``Load weight
  begin`` ... ``The server is fired up``), and is refined by the frames of the traceback
  the line ends (``load_model`` is the load, ``profile_run`` the profile run,
  ``capture_model`` the graph capture, ``execute_model`` serving): the innermost frame
  that names a phase wins. A second start of the engine in the same log starts over.
- **A cause** is the first line a check's signature matches, on any rank; the same code on
  other ranks or later adds to its count. Wrappers (``Engine core initialization
  failed``, ``Worker failed with error '...'``) come after the root line they repeat, so
  the first line is the root one.
- **No known cause**: the most likely root line is the first exception line that ends a
  traceback (not a wrapper), else the first fatal-looking line (``Fatal Python error``,
  ``NCCL WARN``, ``nvcc fatal``, ``CUDA error``); it is reported as the likely root, with
  no code.

Bounded: the state is a few counters, the causes (one per code) and 64 frames per rank
(256 ranks at most); a line of ordinary serving output (an ``INFO`` line after startup)
costs two bounded substring searches.
"""

from __future__ import annotations

import ast
import functools
import re
from collections import deque
from collections.abc import Iterable
from typing import Any, NamedTuple

import msgspec

from flightcheck._diagnose.lines import Source, decode, strip
from flightcheck._diagnose.signatures import match
from flightcheck._knowledge import engines

PHASES = ("before-weights", "load", "profile", "warmup", "graph-capture", "serving")
_INDEX = {p: i for i, p in enumerate(PHASES)}
_SERVING = _INDEX["serving"]

# the engine's progress lines -> the phase they open (vLLM, SGLang)
_MARKERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "start",
        (
            "vLLM API server version",
            "Initializing a V1 LLM engine",
            "Initializing an LLM engine",
            r"server_args=ServerArgs\(",
        ),
    ),
    (
        "load",
        (
            "Starting to load model",
            "Loading weights(?! took)",
            "Loading safetensors checkpoint shards",
            "Load weight begin",
            "Loading model weights(?! took)",
            "Loading pt checkpoint shards",
            "Using model weights format",
        ),
    ),
    (
        "profile",
        (
            "Loading weights took",
            "Loading model weights took",
            "Model loading took",
            "Load weight end",
            "Memory profiling takes",
            r"torch\.compile takes",
            "Dynamo bytecode transform time",
            "Compiling a graph for",
        ),
    ),
    (
        "warmup",
        (
            "GPU KV cache size",
            "Available KV cache memory",
            "KV Cache is allocated",
            "# GPU blocks",
            "Maximum concurrency for",
            "Memory pool end",
        ),
    ),
    (
        "graph-capture",
        ("Capturing CUDA graph", "Capture cuda graph begin", "Capturing cudagraphs", "Capture CUDA graph"),
    ),
    (
        "serving",
        (
            "Graph capturing finished",
            r"init engine \(profile, create kv cache, warmup model\) took",
            "Starting vLLM API server",
            "Application startup complete",
            "Uvicorn running on",
            "The server is fired up and ready to roll",
            "Capture cuda graph end",
        ),
    ),
)
_MARKER = re.compile("|".join(f"(?P<m{i}>{'|'.join(alts)})" for i, (_, alts) in enumerate(_MARKERS)))

# the frames that say where in the startup a traceback was raised (the innermost wins)
_FRAME_PHASE = {
    **dict.fromkeys(
        ("load_model", "load_weights", "_load_weights", "get_model", "safetensors_weights_iterator"), "load"
    ),
    **dict.fromkeys(
        (
            "profile_run",
            "determine_available_memory",
            "determine_num_available_blocks",
            "_dummy_sampler_run",
            "profile_max_num_token",
            "get_kv_cache_config",
            "get_kv_cache_configs",
            "check_enough_kv_cache_memory",
            "_check_enough_kv_cache_memory",
            "init_memory_pool",
            "_init_cache",
            "raise_if_cache_size_invalid",
            "initialize_cache",
            "_initialize_kv_caches",
        ),
        "profile",
    ),
    **dict.fromkeys(("compile_or_warm_up_model", "kernel_warmup", "deep_gemm_warmup", "flashinfer_autotune"), "warmup"),
    **dict.fromkeys(("capture_model", "capture", "capture_one_batch_size", "_capture_cudagraphs"), "graph-capture"),
    **dict.fromkeys(
        (
            "execute_model",
            "run_busy_loop",
            "step_with_batch_queue",
            "sample_tokens",
            "event_loop_normal",
            "event_loop_overlap",
            "forward_batch_generation",
        ),
        "serving",
    ),
    **dict.fromkeys(
        (
            "init_device",
            "init_worker_distributed_environment",
            "init_distributed_environment",
            "initialize_model_parallel",
        ),
        "before-weights",
    ),
}
_FRAME = re.compile(r'File "[^"]*", line \d+, in (\w+)')
_EXC = re.compile(r"(?:[A-Za-z_][\w.]*\.)?(?:[A-Z]\w*)?(?:Error|Exception|Exit|Fault|Interrupt)(?::\s|$)")
_FATAL = re.compile(
    r"Fatal Python error|NCCL WARN|nvcc fatal|CUDA error|Segmentation fault|core dumped|^Killed$|OOMKilled"
    r"|^error: |\berror: |FATAL|terminate called after throwing"
)
# lines that repeat or announce a failure whose root is elsewhere
_WRAPPER = re.compile(
    r"Engine core initialization failed|EngineCore failed to start|WorkerProc initialization failed"
    r"|Worker failed with error|Engine process failed to start|EngineDeadError|WorkerProc hit an exception"
    r"|CalledProcessError|ninja: build stopped|Exception in thread|SystemExit|KeyboardInterrupt|ChildProcessError"
    r"|RayTaskError|ActorDiedError|ProcessRaisedException|EngineCore hit an exception|EngineCore encountered a fatal"
    r"|Traceback \(most recent call last\)|The above exception|During handling of the above|see root cause above"
    r"|See stack trace|please check the stack trace above|Received SIGTERM|was terminated|died unexpectedly"
    r"|Child process .* died|Scheduler hit an exception|Rank \d+ scheduler is dead|TokenizerManager hit"
    r"|RuntimeError: Initialization failed|Initialization failed\. |subprocess exited|BrokenPipeError|EOFError"
    r"|raise \w|ProcessGroupNCCL is destroyed|destroy_process_group"
)
_FAILED = re.compile(
    r"Engine core initialization failed|EngineCore failed to start|Traceback \(most recent call last\)"
    r"|Scheduler hit an exception|Fatal Python error|terminate called after throwing"
)

# the launch, as the engine logged it: every registered engine's log rules
# (``Engine.log``, in its knowledge package), in the registry's order


class _EngineLines(NamedTuple):
    """The registered engines' version and argument lines, compiled once."""

    version: re.Pattern[str]
    #: the outer group's index -> (engine, decisive)
    by_group: dict[int, tuple[str, bool]]
    hints: tuple[str, ...]
    args: tuple[tuple[str, tuple[str, ...], bool], ...]
    decisive: frozenset[str]


@functools.lru_cache(maxsize=4)
def _engine_lines(registered: tuple[str, ...]) -> _EngineLines:
    alternatives: list[str] = []
    by_group: dict[int, tuple[str, bool]] = {}
    group = 1
    hints: list[str] = []
    args = []
    for name in registered:
        rules = engines.get(name).log
        for pattern in rules.version_patterns:
            alternatives.append(f"({pattern})")
            by_group[group] = (name, rules.decisive)
            group += 1 + re.compile(pattern).groups
        hints += [h for h in rules.version_hints if h not in hints]
        args.append((name, rules.args_markers, rules.decisive))
    return _EngineLines(
        re.compile("|".join(alternatives)),
        by_group,
        tuple(hints),
        tuple(args),
        frozenset(n for n, _, decisive in args if decisive),
    )


_GPU = re.compile(
    r"(?:GPU \d+: |device_name=|[Dd]evice(?: name)?: |running on |on GPU: |Tesla |using )'?"
    r"(?P<g>NVIDIA (?:[A-Z][\w-]*|\d\w*)(?: (?:[A-Z0-9][\w-]*)){0,5})"
)
_KV = re.compile(r"(\w+)=('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|\[[^\]]*\]|\{[^}]*\}|\([^)]*\)|[^,()\s]+)")
_MAX_ARGS = 64 * 1024


class Cause(msgspec.Struct):
    """One code the log shows, at its first line."""

    code: str
    name: str
    severity: str
    line_number: int
    line: str
    matched: str
    note: str
    rank: str | None
    phase: str | None
    elapsed_s: float | None
    occurrences: int = 1
    ranks: list[str] = msgspec.field(default_factory=list)


class Root(msgspec.Struct):
    """The root-cause line: the first cause's, or the most likely one when no check names it."""

    line_number: int
    line: str
    rank: str | None
    phase: str | None
    elapsed_s: float | None
    known: bool


class Launch(msgspec.Struct):
    """What the log says about the launch."""

    engine: str | None = None
    version: str | None = None
    args: dict[str, Any] = msgspec.field(default_factory=dict)
    args_line: int | None = None
    gpus: list[str] = msgspec.field(default_factory=list)
    starts: int = 0  # how many times the engine started in this log


def _literal(text: str) -> Any:
    """``text`` as a Python literal (bounded; anything else stays text)."""
    if len(text) > _MAX_ARGS:
        return text[:200]
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text.strip("'\"")


def parse_args(msg: str) -> dict[str, Any] | None:
    """The arguments of a ``non-default args: {...}``, ``args: Namespace(...)`` or
    ``server_args=ServerArgs(...)`` line; None if the line has none."""
    i = msg.find("non-default args:")
    if i >= 0:
        body = msg[i + len("non-default args:") :].strip()
        value = _literal(body)
        if isinstance(value, dict):
            return {str(k): v for k, v in value.items()}
        return {k: _literal(v) for k, v in _KV_DICT.findall(body)}
    for head in ("ServerArgs(", "Namespace("):
        i = msg.find(head)
        if i >= 0:
            return {k: _literal(v) for k, v in _KV.findall(msg[i + len(head) : i + len(head) + _MAX_ARGS])}
    return None


_KV_DICT = re.compile(r"'(\w+)':\s*('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|\[[^\]]*\]|\{[^}]*\}|[^,{}\s]+)")


class Scan:
    """The state of one pass; feed lines with :meth:`feed`, then read the fields."""

    def __init__(self) -> None:
        self.phase: str | None = None  # None until the engine logs its first progress line
        self.first_ts: dict[str, float] = {}
        # the frames of the traceback each rank is printing (ranks interleave theirs)
        self._frames: dict[str | None, deque[str]] = {}
        self._overflow: deque[str] = deque(maxlen=64)  # the ranks past 256 share one
        self.frames: deque[str] = self._overflow
        self.causes: dict[str, Cause] = {}
        self.candidate: Root | None = None  # the first exception line that ends a traceback
        self.weak: Root | None = None  # the first fatal-looking line
        self.wrapped: Root | None = None  # the first wrapper's exception line (the root is elsewhere)
        self.first_failure: Root | None = None  # the first line that says something failed
        self.failed = False
        self.launch = Launch()
        self._after_frame = False  # the next line is a traceback's source line

    # ---- the phase -----------------------------------------------------------------------

    def _marker(self, msg: str, ts: float | None = None, ts_kind: str | None = None) -> None:
        m = _MARKER.search(msg)
        if m is None or m.lastgroup is None:
            return
        kind = _MARKERS[int(m.lastgroup[1:])][0]
        if kind == "start":
            if self.phase is None or _INDEX[self.phase] > _INDEX["before-weights"]:
                if self.phase is not None:
                    self.first_ts.clear()  # a restart: times count from the new start
                    if ts is not None and ts_kind is not None:
                        self.first_ts[ts_kind] = ts
                self.launch.starts += 1
                self.phase = "before-weights"
            return
        if self.phase is None or _INDEX[kind] > _INDEX[self.phase]:
            self.phase = kind

    def _frame_phase(self) -> str | None:
        for func in reversed(self.frames):
            phase = _FRAME_PHASE.get(func)
            if phase is not None:
                return phase
        return None

    @property
    def serving(self) -> bool:
        """True once the engine reported it serves (ordinary lines can then be skipped)."""
        return self.phase == "serving"

    # ---- one line ------------------------------------------------------------------------

    def feed(self, raw: bytes, number: int) -> None:
        """Judge one line of the log (``number`` counts from 1)."""
        p = strip(decode(raw))
        msg = p.msg
        if not msg:
            return
        frames = self._frames.get(p.rank)
        if frames is None:
            if len(self._frames) < 256:
                frames = self._frames[p.rank] = deque(maxlen=64)
            else:
                frames = self._overflow
        self.frames = frames
        # the source line under a frame (``raise RuntimeError("Could not find nvcc")``)
        # quotes the message the exception line will carry: the exception line is the root
        code_line, self._after_frame = self._after_frame, False
        if p.ts is not None and p.ts_kind is not None and p.ts_kind not in self.first_ts:
            self.first_ts[p.ts_kind] = p.ts
        fm = _FRAME.match(msg)
        if fm is not None:
            self.frames.append(fm.group(1))
            self._after_frame = True
            return
        if code_line and _EXC.match(msg) is None:  # a frame without source: the exception follows it
            return
        if "Traceback (most recent call last)" in msg:
            self.frames.clear()
            self.failed = True
            if self.first_failure is None:
                self.first_failure = Root(number, msg, p.rank, self.phase, None, False)
            return
        if p.level in (None, "INFO", "WARNING", "WARN", "DEBUG"):
            self._marker(msg, p.ts, p.ts_kind)
        if not self.serving:
            self._launch(msg, number)
        elapsed = None
        if p.ts is not None and p.ts_kind in self.first_ts:
            elapsed = round(p.ts - self.first_ts[p.ts_kind], 3)
            if elapsed < 0:  # a year boundary in year-less stamps
                elapsed = round(elapsed + 366 * 86400, 3) if elapsed > -366 * 86400 else None
        frame_phase = self._frame_phase()
        phase = frame_phase or self.phase
        exc = _EXC.match(msg) is not None
        found = match(msg, phase, self.frames)
        if found is not None:
            sig, text = found
            self.failed = True
            cause = self.causes.get(sig.code)
            if cause is None:
                self.causes[sig.code] = Cause(
                    sig.code,
                    sig.name,
                    sig.severity,
                    number,
                    msg,
                    text,
                    sig.note,
                    p.rank,
                    phase,
                    elapsed,
                    ranks=[p.rank] if p.rank else [],
                )
            else:
                cause.occurrences += 1
                if p.rank and p.rank not in cause.ranks and len(cause.ranks) < 64:
                    cause.ranks.append(p.rank)
        if _FAILED.search(msg):
            self.failed = True
            if self.first_failure is None:
                self.first_failure = Root(number, msg, p.rank, phase, elapsed, False)
        wrapper = _WRAPPER.search(msg) is not None
        if wrapper and exc and self.wrapped is None:
            self.wrapped = Root(number, msg, p.rank, phase, elapsed, False)
        if p.level not in ("INFO", "DEBUG", "WARNING", "WARN") and not wrapper:
            if exc and self.frames and self.candidate is None:
                self.candidate = Root(number, msg, p.rank, phase, elapsed, False)
                self.failed = True
            elif self.weak is None and (exc or _FATAL.search(msg)) and p.level != "INFO":
                self.weak = Root(number, msg, p.rank, phase, elapsed, False)
                if exc or "Fatal" in msg or "fatal" in msg:
                    self.failed = True
        if exc:
            self.frames.clear()

    def _launch(self, msg: str, number: int) -> None:
        lines = _engine_lines(engines.names())
        if "args" in msg:
            claims = [(name, decisive) for name, markers, decisive in lines.args if any(m in msg for m in markers)]
            args = parse_args(msg) if claims else None
            if args:
                self.launch.args, self.launch.args_line = args, number
                # an unmistakable line names its engine; a generic one only where none is named yet
                strong = [name for name, decisive in claims if decisive]
                if strong:
                    self.launch.engine = strong[0]
                elif self.launch.engine is None:
                    self.launch.engine = claims[0][0]
        if any(h in msg for h in lines.hints):
            vm = lines.version.search(msg)
            if vm is not None:
                name, decisive = lines.by_group[vm.lastindex or 0]
                version = vm.group((vm.lastindex or 0) + 1)
                if decisive or self.launch.version is None or self.launch.engine not in lines.decisive:
                    self.launch.engine, self.launch.version = name, version
        if "NVIDIA" in msg and len(self.launch.gpus) < 64:
            gm = _GPU.search(msg)
            if gm is not None:
                self.launch.gpus.append(gm.group("g").strip())

    # ---- after the last line -------------------------------------------------------------

    def ordered_causes(self) -> list[Cause]:
        """The causes in the order their first lines appear."""
        return sorted(self.causes.values(), key=lambda c: c.line_number)

    def root(self) -> Root | None:
        """The root-cause line (None: the log shows no failure)."""
        causes = self.ordered_causes()
        if causes:
            c = causes[0]
            return Root(c.line_number, c.line, c.rank, c.phase, c.elapsed_s, True)
        if not self.failed:
            return None
        # no better line: the wrapper that announced it, else the first line that said so
        return self.candidate or self.weak or self.wrapped or self.first_failure


def scan(blocks: Iterable[list[bytes]], source: Source) -> Scan:
    """Read every line once (see the module docstring for what is skipped cheaply)."""
    state = Scan()
    feed = state.feed
    number = 0  # the number of the line before the block
    for lines in blocks:
        i, n = 0, len(lines)
        while i < n:
            if state.phase == "serving":
                # ordinary serving output: an INFO line (two bounded substring searches, no
                # copy), picked out of the rest of the block at C speed; "version" is a
                # restart's first line
                todo = [
                    j
                    for j in range(i, n)
                    if lines[j].find(b"INFO", 0, 160) < 0 or lines[j].find(b"ersion", 0, 240) >= 0
                ]
                i = n
                for j in todo:
                    feed(lines[j], number + j + 1)
                    if state.phase != "serving":  # a restart: the rest of the block in full
                        i = j + 1
                        break
            else:
                feed(lines[i], number + i + 1)
                i += 1
        number += n
    return state
