"""The facts snapshot, schema ``flightcheck.facts/v1``: typed sections, JSON in and out.

A snapshot is one JSON object whose top-level keys are *sections*. Every field may be
``null`` when it could not be read; the reason then sits in ``unavailable["section.field"]``.
Unknown keys are ignored (forward compatible); a wrong type in a known key is a usage
error that names the file and the key. ``--facts FILE`` replaces whole sections.

The model is built on ``msgspec`` structs: decoding validates types in C, fast enough to
load a snapshot on every launch, and its errors carry the JSON path of the bad key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

from flightcheck._vocabulary.errors import UsageError

SCHEMA = "flightcheck.facts/v1"

Memlock = int | Literal["unlimited"] | None
#: a size or a count: a negative one is not a snapshot flightcheck wrote (exit 2)
Count = Annotated[int, msgspec.Meta(ge=0)]


class _S(msgspec.Struct, kw_only=True, omit_defaults=False):
    """Base of every section: all fields optional, unknown keys ignored."""


class Host(_S):
    hostname: str | None = None
    os: str | None = None
    kernel: str | None = None
    machine: str | None = None
    virtualization: str | None = None
    container: str | None = None
    cpu_count: Count | None = None
    ram_total_bytes: Count | None = None
    ram_available_bytes: Count | None = None
    shm_bytes: Count | None = None
    ulimit_memlock: Memlock = None
    ulimit_nofile: int | None = None
    # extension: /proc/sys/kernel/random/boot_id (a new value every boot; the host's, also in
    # a container): part of the key of the cached multicast verdict
    boot_id: str | None = None


class Driver(_S):
    loaded: bool | None = None
    version: str | None = None
    cuda_version: str | None = None
    error: str | None = None


class FabricHealth(_S):
    degraded_bandwidth: bool | None = None
    route_unhealthy: bool | None = None
    incorrect_configuration: bool | None = None
    # extensions: which incorrect configuration (no_partition, insufficient_nvlinks, ...)
    # and the other health bits, so a fix can be specific
    configuration: str | None = None
    route_recovery: bool | None = None
    access_timeout_recovery: bool | None = None


class Fabric(_S):
    state: str | None = None  # not_supported | not_started | in_progress | completed
    status: str | None = None  # "success" | error text | null
    clique_id: int | None = None
    cluster_uuid: str | None = None
    health: FabricHealth | None = None
    health_mask: int | None = None  # extension: the raw NVML healthMask, for bug reports


class NvLink(_S):
    total: int | None = None
    active: int | None = None
    to_switch: bool | None = None


class RemappedRows(_S):
    pending: bool | None = None
    failure: bool | None = None


class Gpu(_S):
    index: int | None = None
    name: str | None = None
    uuid: str | None = None
    pci_bus_id: str | None = None
    compute_capability: str | None = None
    memory_total_bytes: Count | None = None
    memory_used_bytes: Count | None = None
    #: memory the driver reserves (NVML v2 ``reserved``): never visible to CUDA/torch
    memory_reserved_bytes: Count | None = None
    mig_enabled: bool | None = None
    persistence_mode: bool | None = None
    virtualization_mode: str | None = None
    multicast_supported: bool | None = None
    fabric: Fabric | None = None
    nvlink: NvLink | None = None
    remapped_rows: RemappedRows | None = None
    error: str | None = None  # extension: NVML said the GPU is unusable ("GPU is lost", hung)


class FabricManager(_S):
    nvswitch_system: bool | None = None
    service: str | None = None  # active | inactive | failed | not-installed | unknown
    version: str | None = None
    detected_by: list[str] | None = None  # extension: what showed NVSwitches (or their absence)
    # extension: seconds after boot at which the fabric manager last became active (systemd's
    # ActiveEnterTimestampMonotonic, else its process's start time): a restart changes it
    started_s: float | None = None


class Imex(_S):
    channels: list[str] | None = None
    service: str | None = None


class MulticastProbe(_S):
    ok: bool | None = None
    stage: str | None = None
    cuda_error: int | None = None
    cuda_error_name: str | None = None
    devices: int | None = None
    handle_type: str | None = None
    duration_s: float | None = None
    detail: str | None = None  # extension: what the child said (stderr tail, reason)
    # extensions: per-device CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED (probe device order),
    # the last stage reached (a timeout's context), the device a failing call was for,
    # and the libcuda that answered (forward-compat packages swap it)
    multicast_supported: list[bool | None] | None = None
    last_stage: str | None = None
    device: int | None = None
    libcuda: str | None = None
    # extensions: the verdict came from the cache of this boot (keyed by boot, fabric-manager
    # start, driver, GPU UUIDs: docs/architecture.md), when it was probed, why the cache was
    # not used, and the time budget an entry point gave the probe (the plugin: a timeout
    # within a budget is inconclusive, never a failure)
    cached: bool | None = None
    probed_at: str | None = None
    cache: str | None = None
    budget_s: float | None = None


class CudaHome(_S):
    path: str | None = None
    source: str | None = None  # CUDA_HOME | CUDA_PATH | nvcc-on-path | default | null
    exists: bool | None = None


class Tool(_S):
    path: str | None = None
    version: str | None = None


class Nvcc(Tool):
    archs: list[str] | None = None


class PathState(_S):
    """What a path-valued variable of the engine's environment names (extension)."""

    path: str | None = None
    kind: str | None = None  # executable | file | dir | missing
    writable: bool | None = None  # dirs: a file could be created in it (or its nearest existing parent)
    version: str | None = None  # tools: the "release X.Y" their --version prints
    problem: str | None = None  # why the write test or --version failed


class FlashinferCubins(_S):
    """Where FlashInfer will look for its trtllm-gen cubins, and what is there (extension)."""

    dir: str | None = None  # FLASHINFER_CUBIN_DIR, else a matching flashinfer-cubin, else the cache
    source: str | None = None  # FLASHINFER_CUBIN_DIR | flashinfer-cubin | cache
    repository: str | None = None  # where get_artifact downloads a missing one from
    artifacts: dict[str, str] | None = None  # TRTLLM_GEN_FMHA -> ok | missing | checksum-mismatch
    urls: list[str] | None = None  # the checksums.txt a first use would fetch, missing ones only


class PreparedModule(_S):
    """One module a ``flightcheck prepare`` bundle placed in FlashInfer's AOT directory."""

    name: str | None = None
    archs: list[str] | None = None  # read back from its fatbin when the bundle was built
    present: bool | None = None  # the .so is where the record says it was placed


class PreparedBundle(_S):
    """The record ``flightcheck prepare install`` leaves in ``<flashinfer>/data/aot``
    (extension): what the bundle was built against and what it placed."""

    record: str | None = None  # the record file's path
    arch: str | None = None  # the target it was built for, e.g. 10.3a
    flashinfer: str | None = None
    torch_cuda: str | None = None
    nvcc: str | None = None
    complete: bool | None = None  # every planned module was built
    modules: list[PreparedModule] | None = None
    problem: str | None = None  # the record is there but unreadable


class LibcudaLookup(_S):
    """How Triton's ``libcuda_dirs`` would find libcuda.so.1 (extension)."""

    ldconfig: str | None = None  # found | none | stale (listed, file gone) | missing (no /sbin/ldconfig)
    ld_library_path: list[str] | None = None  # LD_LIBRARY_PATH entries holding libcuda.so.1
    known: list[str] | None = None  # other directories of this host holding it (for the fix)


class TilelangCuda(_S):
    """The CUDA home tilelang compiles with (its ``_find_cuda_home`` replayed)."""

    home: str | None = None  # null: tilelang finds none ("Failed to automatically detect CUDA")
    source: str | None = None  # CUDA_HOME | CUDA_PATH | nvcc-on-path | nvidia-cuda-nvcc | default
    nvcc: Tool | None = None  # <home>/bin/nvcc when it is an executable file, with its version
    problem: str | None = None  # why there is no home (a variable naming nothing, ...)


class CudaEnv(_S):
    """One CUDA environment humming considers (``find_all_cuda_paths``) and its NVRTC."""

    path: str | None = None
    source: str | None = None  # system | pypi
    major: int | None = None
    minor: int | None = None
    header: bool | None = None  # nvrtc.h in one of its include paths
    nvrtc_lib: str | None = None  # the libnvrtc.so[.N] humming would load from it


class Toolchain(_S):
    cuda_home: CudaHome | None = None
    nvcc: Nvcc | None = None
    ninja: Tool | None = None
    cxx: Tool | None = None
    cc: Tool | None = None
    libcudart: bool | None = None
    python_headers: bool | None = None
    # extensions: what helps write an exact fix
    ninja_in_venv: str | None = None  # a ninja in the engine's venv bin that PATH misses
    alternatives: list[Tool] | None = None  # other CUDA toolkits found on this host (nvcc path, version)
    python_include: str | None = None  # the include dir searched for Python.h
    # what runtime compilers resolve besides nvcc (Triton, DeepGEMM, FlashInfer's lookups)
    host_tools: dict[str, str | None] | None = None  # which / gcc / clang / ... -> path on the engine's PATH
    env_paths: dict[str, PathState] | None = None  # TRITON_PTXAS_PATH, triton cache, DG nvcc -> state
    flashinfer_cubins: FlashinferCubins | None = None
    # nvcc's host compiler (``-ccbin $CC`` in FlashInfer, else gcc on PATH) and the bounds its
    # crt/host_config.h enforces ({"gcc_max": 15, "clang_below": 21})
    nvcc_host: Tool | None = None
    nvcc_host_kind: str | None = None  # gcc | clang (by the resolved file name)
    host_compiler_bounds: dict[str, int] | None = None
    libcuda_lookup: LibcudaLookup | None = None
    cute_dsl_flavors: list[int] | None = None  # CUDA majors of nvidia-cutlass-dsl's _cutlass_ir.cu{N} builds
    link_libcuda: list[str] | None = None  # unversioned libcuda.so files FlashInfer's -lcuda can link
    tilelang_cuda: TilelangCuda | None = None  # tilelang's CUDA home, when tilelang is installed
    cuda_envs: list[CudaEnv] | None = None  # humming's CUDA environments, when humming is installed
    prepared_bundle: PreparedBundle | None = None  # a `flightcheck prepare` bundle installed for FlashInfer


class CompileSmokeArch(_S):
    ok: bool | None = None
    cached: bool | None = None
    duration_s: float | None = None
    output: str | None = None


class PtxasSmokeArch(_S):
    """``--deep``: a small PTX kernel assembled by the ptxas Triton will use (extension)."""

    ok: bool | None = None
    ptxas: str | None = None
    version: str | None = None  # its CUDA release
    source: str | None = None  # the variable that chose it, or "bundled"
    output: str | None = None


class CompileSmoke(_S):
    """Extension: the ``--deep`` compile smoke test (FC109), one entry per arch (``"103a"``)."""

    nvcc: str | None = None
    ninja: str | None = None
    archs: dict[str, CompileSmokeArch] | None = None
    error: str | None = None  # the test could not run at all (no nvcc, timeout, ...)
    cache: str | None = None  # why the cached verdicts were not trusted (another user's file, ...)
    triton_ptxas: dict[str, PtxasSmokeArch] | None = None  # sm_103a -> Triton's ptxas on a tiny PTX
    cubin_repository_ok: bool | None = None  # --deep: FlashInfer's cubin repository served a checksums.txt
    cubin_repository_error: str | None = None


class CudaLibrary(_S):
    """The device code in one installed package's extension modules, read from their
    ``.nv_fatbin`` headers (extension): what decides whether the driver must JIT PTX."""

    version: str | None = None  # the distribution's version
    files: list[str] | None = None  # the .so files read, relative to the package directory
    cubins: list[str] | None = None  # archs with a cubin (SASS): "9.0", "10.0a", "12.0f"
    # PTX arch -> the PTX ISA versions of its entries ({"9.0": ["8.7"]}); [] where the
    # entries' version field was unreadable
    ptx: dict[str, list[str]] | None = None
    problem: str | None = None  # files that could not be read, and why


class Python(_S):
    executable: str | None = None
    version: str | None = None
    packages: dict[str, str | None] | None = None
    torch_cuda: str | None = None
    torch_arch_list: list[str] | None = None
    jit_cache_archs: list[str] | None = None
    # extensions: how jit_cache_archs was learnt ("fatbin: ..." read from its .so files, or
    # "table: ..." from its +cuXYZ tag and FlashInfer's release table)
    jit_cache_archs_source: str | None = None
    engine: str | None = None  # the engine the two fields below describe (vllm | sglang)
    engine_requires: str | None = None  # its declared requirement on flashinfer-python
    engine_env_vars: list[str] | None = None  # VLLM_* / SGLANG_* names the installed engine reads
    # extension: the engine's own unconditional requirements on the distributions recorded in
    # ``packages`` (its Requires-Dist), e.g. {"transformers": ">=5.16.1,<5.21.0"}
    engine_pins: dict[str, str] | None = None
    # extension: the device code of the engine's package and of the kernel packages it loads
    # (sgl-kernel, flashinfer-jit-cache), by distribution name
    cuda_libraries: dict[str, CudaLibrary] | None = None


class JitCache(_S):
    dir: str | None = None
    writable: bool | None = None
    free_bytes: Count | None = None
    tested: str | None = None  # extension: the existing directory the write test ran in
    problem: str | None = None  # extension: why the write test failed


class RecordedFinding(_S):
    """One problem the checkpoint reader found when the section was collected (its kind,
    ``_checkpoint/problems.py``; the file; what is wrong; how to repair it)."""

    kind: str | None = None
    subject: str | None = None
    message: str | None = None
    fix: str | None = None
    severity: str | None = None  # "warning" / "error" where the reader overrides the check's
    evidence: dict[str, Any] | None = None


class CheckpointFacts(_S):
    model: str | None = None
    path: str | None = None
    files: dict[str, int] | None = None
    header_sha256: dict[str, str] | None = None
    # extensions: what else must match between nodes
    commit: str | None = None  # the HF cache snapshot's commit, when --model is a repo id
    config_sha256: str | None = None  # of config.json as stored
    # extensions: what the reader found, so that ``check --facts`` judges the recorded
    # checkpoint (FC5xx) where the model is not here to read; absent in older snapshots
    findings: list[RecordedFinding] | None = None  # [] when the reader found nothing wrong
    tensors: Count | None = None  # tensors in the shards' headers
    weight_bytes: Count | None = None  # bytes of the weight files the engine reads
    index_name: str | None = None  # "model.safetensors.index.json" when there is one
    config: dict[str, Any] | None = None  # config.json as parsed (FC507); null when unreadable
    config_error: str | None = None  # why config.json could not be used
    unread: str | None = None  # why the weight files were not read (a load format not read, ...)
    blocked: str | None = None  # the model directory itself could not be read
    gguf_loaded: str | None = None  # the *.gguf file the engine loads (vLLM's Flint)
    repo_id: str | None = None  # the Hugging Face repo id --model named


class Probe(_S):
    """A Kubernetes probe's timing (the kubelet's defaults filled in: 0 s, every 10 s, 3 failures)."""

    initial_delay_s: Count | None = None
    period_s: Count | None = None
    failure_threshold: Count | None = None


class Pod(_S):
    """Extension: the engine's container as a Kubernetes manifest (``check --k8s``) declares it.

    Only what the FC9xx checks read: never the command line or the environment (they may
    hold tokens)."""

    source: str | None = None  # the manifest file ("-": stdin)
    kind: str | None = None  # Pod | Deployment | StatefulSet | LeaderWorkerSet | ...
    name: str | None = None  # metadata.name of that object
    container: str | None = None  # the container that runs the engine
    image: str | None = None
    group_size: Count | None = None  # LeaderWorkerSet leaderWorkerTemplate.size (1 otherwise)
    gpu_limit: Count | None = None  # nvidia.com/gpu (limits, else requests; 0: none)
    other_gpu_resources: list[str] | None = None  # nvidia.com/mig-*, HAMi ...: counted differently
    host_ipc: bool | None = None
    shm_mounted: bool | None = None  # a volume is mounted at /dev/shm
    shm_medium: str | None = None  # its emptyDir medium ("Memory", "" disk), or the volume kind
    shm_size_limit_bytes: Count | None = None  # its emptyDir sizeLimit (None: unbounded)
    startup_probe: Probe | None = None
    liveness_probe: Probe | None = None
    require_cuda: str | None = None  # NVIDIA_REQUIRE_CUDA set on the container
    disable_require: bool | None = None  # NVIDIA_DISABLE_REQUIRE set (the check is off)
    kv_transfer: bool | None = None  # the command sets --kv-transfer-config (P/D)


class Facts(_S):
    """One node's snapshot. ``None`` for a section means it was not collected or is null."""

    schema: str = SCHEMA
    collected_at: str | None = None
    unavailable: dict[str, str] = msgspec.field(default_factory=dict)
    host: Host | None = None
    driver: Driver | None = None
    gpus: list[Gpu] | None = None
    visible_devices: str | None = None
    fabric_manager: FabricManager | None = None
    imex: Imex | None = None
    multicast_probe: MulticastProbe | None = None
    toolchain: Toolchain | None = None
    python: Python | None = None
    env: dict[str, str | None] | None = None
    jit_cache: JitCache | None = None
    checkpoint: CheckpointFacts | None = None
    compile_smoke: CompileSmoke | None = None
    pod: Pod | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict (every field, nulls included)."""
        out: dict[str, Any] = msgspec.to_builtins(self)
        return out

    def to_json(self, indent: int = 1) -> str:
        """The snapshot as JSON text."""
        try:
            raw = msgspec.json.encode(self).decode()
        except UnicodeEncodeError:  # an undecodable byte in a path: written as \xNN, never a lone surrogate
            import json

            from flightcheck._vocabulary.inputs import escape_surrogates

            raw = escape_surrogates(json.dumps(msgspec.to_builtins(self), ensure_ascii=False), json=True)
        return msgspec.json.format(raw, indent=indent) + "\n"

    def reason(self, path: str) -> str | None:
        """Why ``path`` (``section.field`` or a prefix of it) is missing, if recorded."""
        probe = path
        while probe:
            if probe in self.unavailable:
                return self.unavailable[probe]
            probe = probe.rpartition(".")[0]
        return None


#: Top-level keys of a snapshot (every one is replaced whole by ``--facts``).
SECTIONS: tuple[str, ...] = tuple(f for f in Facts.__struct_fields__ if f not in ("schema",))


def sections_of(doc: dict[str, Any]) -> set[str]:
    """The known sections present (as keys) in a raw snapshot dict."""
    return {k for k in doc if k in SECTIONS}


def _check_doc(doc: Any, origin: str) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise UsageError(f"{origin}: a facts snapshot must be a JSON object, got {type(doc).__name__}")
    schema = doc.get("schema", SCHEMA)
    if schema != SCHEMA:
        raise UsageError(f"{origin}: schema {schema!r} is not {SCHEMA!r}")
    if "schema" not in doc:  # a partial snapshot (a delta) may leave the schema out, but only that
        unknown = sorted(str(k) for k in doc if k not in Facts.__struct_fields__)
        if unknown:
            raise UsageError(
                f"{origin}: not a flightcheck snapshot (no schema, unknown keys: {', '.join(unknown[:5])})"
            )
    try:
        msgspec.convert(doc, Facts)
    except msgspec.ValidationError as exc:
        raise UsageError(f"{origin}: {_explain(exc)}") from None
    except RecursionError:
        raise UsageError(f"{origin}: nested too deeply to be a facts snapshot") from None
    return doc


def _explain(exc: msgspec.ValidationError) -> str:
    """'Expected `int`, got `str` - at `$.host.cpu_count`' -> 'host.cpu_count: expected int, got str'."""
    text = str(exc)
    msg, sep, where = text.partition(" - at `")
    msg = msg.replace("`", "")
    if sep:
        key = where.rstrip("`").removeprefix("$").lstrip(".")
        return f"key {key}: {msg[:1].lower()}{msg[1:]}"
    return msg


#: the largest facts file read (a 96-shard model's checkpoint section is ~1 MB)
MAX_FACTS = 64 << 20


def load_file(path: str | Path) -> dict[str, Any]:
    """Read and validate one facts file; return its raw dict (sections as given)."""
    from flightcheck._vocabulary.inputs import read_bounded, shown

    raw = read_bounded(path, MAX_FACTS, "facts file")
    origin = f"facts file {shown(path)}"
    try:
        doc = msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        raise UsageError(f"{origin}: not valid JSON: {exc}") from None
    except RecursionError:
        raise UsageError(f"{origin}: nested too deeply to be a facts snapshot") from None
    return _check_doc(doc, origin)


def merge(*docs: dict[str, Any]) -> dict[str, Any]:
    """Later documents replace whole sections of earlier ones; ``unavailable`` entries are
    kept only for sections that were not replaced afterwards."""
    out: dict[str, Any] = {}
    unavailable: dict[str, str] = {}
    for doc in docs:
        replaced = sections_of(doc) - {"unavailable"}
        unavailable = {k: v for k, v in unavailable.items() if k.split(".", 1)[0].split("[", 1)[0] not in replaced}
        unavailable.update(doc.get("unavailable") or {})
        for key in replaced:
            out[key] = doc[key]
        if "collected_at" in doc:
            out["collected_at"] = doc["collected_at"]
    out["schema"] = SCHEMA
    out["unavailable"] = unavailable
    return out


def from_dict(doc: dict[str, Any], origin: str = "facts") -> Facts:
    """Validate a raw dict into :class:`Facts` (a bad type is a :class:`UsageError`)."""
    try:
        return msgspec.convert(doc, Facts)
    except msgspec.ValidationError as exc:
        raise UsageError(f"{origin}: {_explain(exc)}") from None


def loads(text: str | bytes, origin: str = "facts") -> Facts:
    """Parse and validate snapshot JSON text."""
    try:
        doc = msgspec.json.decode(text)
    except msgspec.DecodeError as exc:
        raise UsageError(f"{origin}: not valid JSON: {exc}") from None
    return from_dict(_check_doc(doc, origin), origin)
