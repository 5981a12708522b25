"""What reading a checkpoint gives: the :class:`Checkpoint`, its :class:`Shard` files and
the :class:`Finding` problems, by kind."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from flightcheck._checkpoint.cache import IndexScan
from flightcheck._checkpoint.groups import Group
from flightcheck._checkpoint.problems import Kind
from flightcheck._checkpoint.resolve import Resolved
from flightcheck._checkpoint.validate import ShardScan

if TYPE_CHECKING:  # (the GGUF reader is imported only when a model has *.gguf files)
    from flightcheck._checkpoint.gguf import GGUFScan

TIMEOUT_S = 30.0  # the whole scan: past it, a shard that has not answered is unreadable


class ScanStats(msgspec.Struct):
    """How a scan went, for the report's evidence and the benchmark."""

    shards: int = 0
    cached: int = 0
    scanned: int = 0
    workers: int = 0
    fallbacks: int = 0  # shards a worker failed to return, rescanned here
    seconds: float = 0.0


class Finding(msgspec.Struct, frozen=True):
    """One problem found on disk: its kind (:class:`~flightcheck._checkpoint.problems.Kind`),
    the file it concerns, what is wrong and how to repair it."""

    kind: str
    subject: str
    message: str
    fix: str | None = None
    severity: str | None = None  # "warning" / "error" to override the check's own
    evidence: dict[str, Any] = msgspec.field(default_factory=dict)


class Shard(msgspec.Struct):
    """One weight file the engine will load."""

    name: str  # as the index names it (relative to the model directory)
    path: Path
    size: int = 0
    allocated: int | None = None  # st_blocks x 512
    scan: ShardScan | None = None  # None: not scanned (missing, escaping)

    @property
    def subject(self) -> str:
        return f"shard:{self.name}"


class Checkpoint(msgspec.Struct):
    """Everything the memory and checkpoint checks and the memory model read about the model."""

    resolved: Resolved
    config: dict[str, Any] | None = None
    config_error: str | None = None
    hf_quant: dict[str, Any] | None = None  # hf_quant_config.json, when config.json says no quantization
    #: preprocessor_config.json / video_preprocessor_config.json (a vision model's pixel
    #: limits, which size vLLM's profiled encoder item for Qwen-VL), when present
    processor: dict[str, Any] | None = None
    video_processor: dict[str, Any] | None = None
    index_name: str | None = None  # "model.safetensors.index.json" when there is one
    index: IndexScan | None = None
    shards: list[Shard] = msgspec.field(default_factory=list)
    findings: list[Finding] = msgspec.field(default_factory=list)
    stats: ScanStats = msgspec.field(default_factory=ScanStats)
    cache: str = "off"  # "off" | "cold" | "warm" | "partial"
    seconds: float = 0.0
    throughput: dict[str, Any] | None = None  # --deep read measurement
    crash: str | None = None  # a flightcheck bug while reading: the checks say "unknown"
    #: why the weight files were not read (a load format or file type flightcheck does not
    #: read, ``dummy`` weights, a directory that cannot be listed): the shard checks skip
    #: with it, and the memory fit does not count weights.
    unread: str | None = None
    #: the model directory itself cannot be read (config.json is then not judged either).
    blocked: str | None = None
    #: weight files the engine loads that flightcheck does not read (``*.bin``, ``*.pt``,
    #: ``*.gguf``): name -> size in bytes, for the load estimate.
    other_weights: dict[str, int] = msgspec.field(default_factory=dict)
    #: the GGUF headers read (:mod:`.gguf`), by file name: tensors, their ggml types and sizes
    gguf: dict[str, GGUFScan] = msgspec.field(default_factory=dict)
    #: the ``*.gguf`` file the engine loads instead of any other weight file (vLLM's Flint),
    #: its tensors as the memory model's groups (:mod:`.ggufnames`), or None and why not
    gguf_loaded: str | None = None
    gguf_groups: list[Group] | None = None
    gguf_uncounted: str | None = None
    #: the separate draft checkpoint of the launch's speculative decoding (EAGLE / EAGLE-3 /
    #: draft_model, ``_knowledge.vllm.separate_draft``), read the same bounded way; None when
    #: the launch has none (or it is not read)
    draft: Checkpoint | None = None
    #: not read here: rebuilt from a recorded ``checkpoint`` facts section (``section.recorded``),
    #: which says where it came from; its shards are placeholders, never opened
    recorded: str | None = None
    recorded_totals: tuple[int, int] | None = None  # (tensors, weight bytes) as recorded

    @property
    def found(self) -> bool:
        return self.resolved.path is not None

    @property
    def path(self) -> Path | None:
        return self.resolved.path

    def of(self, kind: str) -> list[Finding]:
        """Findings for one check."""
        return [f for f in self.findings if f.kind == kind]

    @property
    def scanned(self) -> list[Shard]:
        """Shards whose header could be read and parsed (their groups are usable)."""
        return [
            s
            for s in self.shards
            if s.scan is not None and not any(p.kind in (Kind.BAD_HEADER, Kind.UNREADABLE) for p in s.scan.problems)
        ]

    @property
    def total_bytes(self) -> int:
        """Bytes of the weight files the engine will read."""
        if self.recorded_totals is not None:
            return self.recorded_totals[1]
        return sum(s.size for s in self.shards if s.scan is not None) + sum(self.other_weights.values())

    @property
    def tensor_count(self) -> int:
        if self.recorded_totals is not None:
            return self.recorded_totals[0]
        return sum(s.scan.n_tensors for s in self.shards if s.scan is not None) + sum(
            len(g.tensors) for g in self.gguf.values()
        )

    @property
    def gguf_weight_bytes(self) -> int | None:
        """The bytes of the tensors the GGUF headers describe (from each tensor's ggml type
        and dimensions); None when no GGUF header could be read whole."""
        good = [g for g in self.gguf.values() if g.ok]
        return sum(g.weight_bytes for g in good) if good else None
