"""Read a checkpoint for the checks: resolve, scan (cached), cross-check, find problems.

``load()`` never raises for anything on disk: each problem becomes a :class:`Finding` with
its kind (the checkpoint checks map kinds to codes) and the file as its subject
(``shard:model-00007-of-00096.safetensors``). Only shards the engine will load are judged:
those the index names, or every ``*.safetensors`` of the directory when there is no index
(vLLM ignores files the index does not name).
"""

from __future__ import annotations

import fnmatch
import os
import stat
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import msgspec

from flightcheck._checkpoint import bounded
from flightcheck._checkpoint import index as idx
from flightcheck._checkpoint.cache import FileKey, IndexScan, ScanCache, file_key
from flightcheck._checkpoint.formats import _gguf_summary, _other_format, _read_gguf, _text
from flightcheck._checkpoint.guard import Guard
from flightcheck._checkpoint.model import TIMEOUT_S, Checkpoint, Finding, ScanStats
from flightcheck._checkpoint.problems import Kind
from flightcheck._checkpoint.resolve import Resolved, expected_files, incomplete_downloads, offline, resolve
from flightcheck._checkpoint.shardio import TooLarge, read_small
from flightcheck._checkpoint.validate import ShardScan, scan_read

if TYPE_CHECKING:
    import subprocess  # (types only: a warm run starts no scan workers)

MAX_CONFIG = 64 << 20
#: Parsing the index costs about INDEX_COST_NUM / 16 of what the same bytes of shard headers
#: cost; the split gives this process (which parses it) that much less header to scan. It
#: was 3/4 (balanced end to end with bench/bench_checkpoint.py) while the index was decoded
#: as one dict; decoded in pieces it takes 138 instead of 187 ms of CPU, so 3/4 x 138/187.
INDEX_COST_NUM = 9


def load(
    model: str,
    *,
    revision: str | None = None,
    envs: tuple[Mapping[str, str | None], ...] = (),
    download_dir: str | None = None,
    cache_env: Mapping[str, str] | None = None,
    workers: int | None = None,
    sha: bool = False,
    timeout: float | None = None,
    engine: str | None = None,
    load_format: str | None = None,
    ready: list[subprocess.Popen[bytes]] | None = None,
) -> Checkpoint:
    """Resolve and read ``model``; see the module docstring. ``sha``: every scan also
    carries its header's sha256 (for ``collect``; cached scans without one are redone).
    ``engine`` and ``load_format`` say which files the engine loads (``None``: its default).
    A file name that is not valid UTF-8 is spelled with ``\\xff`` escapes in the findings,
    so that every report format can print it.

    Bounded by ``timeout``: every touch of the model's files runs on a thread or in a
    worker and is given up on at the deadline (a shard that has not answered is FC508,
    "did not answer within N s"); whatever else would still hang (a dead mount under the
    directory itself) ends the read a moment later with the model unreadable. Default:
    ``$FLIGHTCHECK_CHECKPOINT_TIMEOUT`` seconds, else ``scan.TIMEOUT_S``. ``ready``: scan
    workers already started (:func:`.workers.start_early`); the caller kills those the
    scan did not take out of the list."""
    t0 = time.perf_counter()
    if timeout is None:
        timeout = _env_timeout()
    deadline = time.monotonic() + timeout
    try:
        ck = bounded.call(
            lambda: _load(
                model,
                revision,
                envs,
                download_dir,
                cache_env,
                workers,
                sha,
                deadline,
                timeout,
                engine=engine,
                load_format=load_format,
                ready=ready,
            ),
            deadline=deadline + GRACE_S,
            budget=timeout,
        )
    except bounded.Hung as exc:
        ck = Checkpoint(Resolved(model=model))
        ck.findings.append(
            Finding(
                Kind.UNREADABLE,
                f"model:{model}",
                f"reading {model} {exc} (a hung or very slow filesystem?)",
                fix=f"check the mount that holds it: ls -l {model}",
            )
        )
        ck.seconds = time.perf_counter() - t0
    ck.findings = [_printable(f) for f in ck.findings]
    return ck


GRACE_S = 2.0  # past the scan's deadline, for the steps after it


def _env_timeout() -> float:
    try:
        value = float(os.environ.get("FLIGHTCHECK_CHECKPOINT_TIMEOUT") or TIMEOUT_S)
    except ValueError:
        return TIMEOUT_S
    return value if 0 < value < 86400 else TIMEOUT_S


class _FirstReads(NamedTuple):
    """The directory's independent first reads, each a result or the exception (a
    :class:`bounded.Hung` at the deadline) in its place: ``config.json``'s bytes, the
    listing, the index's stat, the directory's real path, the Mistral index's stat."""

    config: Any
    listing: Any
    index: Any
    real_root: Any
    mistral_index: Any


def _load(
    model: str,
    revision: str | None,
    envs: tuple[Mapping[str, str | None], ...],
    download_dir: str | None,
    cache_env: Mapping[str, str] | None,
    workers: int | None,
    sha: bool,
    deadline: float,
    timeout: float,
    *,
    engine: str | None = None,
    load_format: str | None = None,
    ready: list[subprocess.Popen[bytes]] | None = None,
) -> Checkpoint:
    t0 = time.perf_counter()
    res = resolve(model, revision=revision, envs=envs, download_dir=download_dir)
    ck = Checkpoint(res)
    if res.path is None:
        _not_found(ck, model, envs, deadline, timeout)
        ck.seconds = time.perf_counter() - t0
        return ck
    root = res.path
    try:
        with os.scandir(root) as it:
            next(it, None)
    except OSError as exc:
        why = f"the model directory {root} cannot be read: {exc.strerror or exc}"
        ck.blocked = ck.unread = why
        ck.findings.append(
            Finding(Kind.UNREADABLE, f"model:{model}", why, fix=f"check permissions and the filesystem: ls -ld {root}")
        )
        ck.seconds = time.perf_counter() - t0
        return ck
    roots = [os.path.realpath(root)]
    if res.repo_dir is not None:
        roots.append(os.path.realpath(res.repo_dir / "blobs"))
    guard = Guard(root, roots)
    from flightcheck._knowledge import engines

    index_paths = [root / idx.INDEX_NAME, root / engines.get(engine).checkpoint.MISTRAL_INDEX]
    # The independent reads of the directory at once, on threads: on a network filesystem
    # each costs a round trip or several, and they need not wait for each other. The guard
    # looks at each file inside its task, before it is read: a hung mount still cannot hang.
    tasks: list[Callable[[], Any]] = [
        lambda: _config_raw(root, guard),
        lambda: _listing(root),
        lambda: _index_stat(index_paths[0], guard),
        root.resolve,
        lambda: _index_stat(index_paths[1], guard),
    ]
    reads = dict(bounded.imap(lambda f: f(), tasks, deadline=deadline, budget=timeout))
    first = _FirstReads(*(reads[i] for i in range(len(tasks))))
    _read_config(ck, root, guard, first.config)
    listing = first.listing if isinstance(first.listing, tuple) else None
    if _other_format(ck, root, engine, load_format, listing, guard=guard, deadline=deadline, timeout=timeout):
        _hf_cache_checks(ck, guard)
        ck.seconds = time.perf_counter() - t0
        return ck
    cache = ScanCache(first.real_root if isinstance(first.real_root, Path) else root, env=cache_env)
    ck.cache = "off" if not cache.enabled else "cold"
    on_disk = listing[0] if listing else []
    mistral = _mistral_format(engine, load_format, on_disk)
    if mistral:
        on_disk = [n for n in on_disk if fnmatch.fnmatchcase(n, mistral[0])]
    withheld: dict[str, str] = {}
    index_path, index_got = (index_paths[1], first.mistral_index) if mistral else (index_paths[0], first.index)
    raw_index: bytes | None = None
    index_key = None
    index_cost = 0  # header bytes' worth of parsing it, when not cached
    index_size = 0
    index_read = None
    if isinstance(index_got, bounded.Hung):
        ck.index_name = index_path.name
        ck.index = IndexScan(problem=f"cannot be read: it {index_got}")
    elif isinstance(index_got, tuple):
        index_withheld, st = index_got
        ck.index_name = index_path.name
        if index_withheld:
            ck.index = IndexScan(problem=index_withheld)
        if isinstance(st, os.stat_result):
            index_key = file_key(st)
            ck.index = ck.index or cache.index(index_key)
            # parsing the index costs less than the same bytes of headers (INDEX_COST_NUM)
            index_cost = st.st_size * INDEX_COST_NUM // 16 if ck.index is None else 0
            index_size = st.st_size
        if ck.index is None:  # read it now, meanwhile: parse_index waits for it (to the deadline)
            index_read = bounded.imap(idx.read_bytes, [index_path], deadline=deadline, budget=timeout)
    # Scan what is on disk now, while (if needed) this process parses the index: for a
    # 390k-tensor model both take ~0.2 s and they overlap.
    todo: list[tuple[str, str, FileKey]] = []  # (name, real path, key)
    scans: dict[str, ShardScan] = {}
    stats_by_name: dict[str, os.stat_result] = {}
    reals: dict[str, str] = {}
    names = [n for n in on_disk if not (n.startswith("consolidated") and ck.index_name and not mistral)]
    # (Mistral's duplicate consolidated file: the index's shards are loaded instead)
    # Half the time for the stats at most: a shard whose stat hangs must leave the other
    # shards the rest of it to be read.
    hung: set[str] = set()
    half = time.monotonic() + (deadline - time.monotonic()) / 2
    paths = [str(root / n) for n in names]
    real_root = str(first.real_root) if isinstance(first.real_root, Path) else None
    for i, got in bounded.imap(lambda p: _stat_real(p, guard, real_root), paths, deadline=half, budget=timeout / 2):
        name = names[i]
        if isinstance(got, bounded.Hung):
            scans[name] = scan_read(got)  # FC508: its stat did not answer
            hung.add(name)
            continue
        if isinstance(got, str):  # not read for the directory's owner (guard)
            withheld[name] = got
            continue
        if isinstance(got, BaseException):
            continue
        st, real = got
        stats_by_name[name] = st
        reals[name] = real
        key = file_key(st)
        hit = cache.shard(real, key) if _utf8(real) else None
        if hit is not None and (not sha or hit.header_sha256 or not hit.ok):
            scans[name] = hit
        else:
            todo.append((name, real, key))

    def parse_index() -> None:
        nonlocal raw_index
        if ck.index_name is None or ck.index is not None:
            return
        assert index_read is not None
        got = next(index_read)[1]
        raw_index, why = got if isinstance(got, tuple) else (None, f"cannot be read: {got}")
        spelled = [n for n in on_disk if _utf8(n)]  # an index (JSON) cannot name the others
        ck.index = IndexScan(problem=why) if raw_index is None else idx.parse(raw_index, spelled)
        if index_key is not None and ck.index.problem is None:
            cache.put_index(index_key, ck.index)

    fresh: list[ShardScan] = []
    if todo:
        from flightcheck._checkpoint.scan import scan_paths  # (subprocess: not imported on a warm run)

        fresh, ck.stats = scan_paths(
            [r for _, r, _ in todo],
            parent_extra=index_cost,
            parent_work=parse_index,
            workers=workers,
            sha=sha,
            timeout=max(0.1, deadline - time.monotonic()),
            header_bytes=index_size * 4 // 3 if index_cost else None,  # the headers: ~1.33x the index
            ready=ready,
        )
    else:  # every shard cached (or none to read): only the index, if it changed
        t_index = time.perf_counter()
        parse_index()
        ck.stats = ScanStats(seconds=time.perf_counter() - t_index)
    for (name, real, key), scan in zip(todo, fresh, strict=False):
        scans[name] = scan
        if _utf8(real):  # the cache (msgpack) keeps UTF-8 paths only
            cache.put_shard(real, key, scan)
    ck.stats.shards = len(scans)
    ck.stats.cached = len(scans) - len(fresh) - len(hung)  # (a stat that hung is no cache hit)
    if cache.enabled:
        ck.cache = "warm" if not todo else ("partial" if ck.stats.cached else "cold")
    if cache.note:  # a cache directory or file that is not the caller's was not trusted
        ck.cache += f"; {cache.note}"
    from flightcheck._checkpoint.crosscheck import assemble

    assemble(ck, root, on_disk, scans, stats_by_name, raw_index, cache, reals=reals, guard=guard, withheld=withheld)
    _hf_cache_checks(ck, guard, stats_by_name, hung)
    _fetched_at_launch(ck, envs)
    cache.prune(
        set(reals.values())
        | {os.path.realpath(s.path) for s in ck.shards if s.name not in reals and s.name not in hung}
    )
    cache.save()
    ck.seconds = time.perf_counter() - t0
    return ck


def _stat_real(path: str, guard: Guard, real_root: str | None = None) -> tuple[os.stat_result, str] | str:
    """A shard's stat and real path; or why it is withheld (:mod:`.guard`), not read.
    ``real_root``: the directory's real path: a file that is not a symbolic link is then
    there, without ``realpath``'s lstat of every path component (each a round trip on a
    network filesystem)."""
    why = guard.withheld(path)
    if why:
        return why
    if real_root is not None:
        st = os.lstat(path)
        if not stat.S_ISLNK(st.st_mode):
            return st, os.path.join(real_root, os.path.basename(path))
    return os.stat(path), os.path.realpath(path)


def _index_stat(path: Path, guard: Guard) -> tuple[str | None, os.stat_result | str] | None:
    """(why it is withheld or None, its stat); the stat is "dangling" for a link to nothing,
    "unreadable" for a loop or permissions (reading it says why); None: no index."""
    try:
        st: os.stat_result | str = path.stat()
    except FileNotFoundError:
        if not path.is_symlink():
            return None
        st = "dangling"
    except OSError:
        st = "unreadable"
    return guard.withheld(path), st


def _config_raw(root: Path, guard: Guard) -> bytes | OSError | str:
    """config.json's bytes, the error reading it, or why it is withheld (:mod:`.guard`)."""
    why = guard.withheld(root / "config.json")
    if why:
        return why
    try:
        return read_small(root / "config.json", MAX_CONFIG)
    except OSError as exc:
        return exc


def _listing(root: Path) -> tuple[list[str], list[str] | None, list[str]]:
    """(the ``*.safetensors`` names, the names of every file, every name) of the directory,
    sorted: one listing for both the shards and :func:`_other_format`; the files are None
    when one entry cannot be told (a symbolic link loop)."""
    with os.scandir(root) as it:
        entries = list(it)
    every = sorted(e.name for e in entries)
    shards = [n for n in every if n.endswith(".safetensors")]
    try:
        return shards, sorted(e.name for e in entries if e.is_file()), every
    except OSError:
        return shards, None, every


def _read_config(ck: Checkpoint, root: Path, guard: Guard, got: Any = None) -> None:
    """``got``: what :func:`_config_raw` gave (read on a thread), else it is read here."""
    why = got if isinstance(got, str) else (guard.withheld(root / "config.json") if got is None else None)
    if why:
        ck.config_error = f"config.json cannot be read: {why}"
        return
    try:
        if isinstance(got, BaseException):
            raise got
        raw = got if isinstance(got, bytes) else read_small(root / "config.json", MAX_CONFIG)
    except FileNotFoundError:
        ck.config_error = "config.json is missing: the engine cannot tell the architecture"
        return
    except TooLarge:
        ck.config_error = f"config.json is over {MAX_CONFIG >> 20} MiB: not a model config"
        return
    except OSError as exc:
        ck.config_error = f"config.json cannot be read: {exc.strerror or exc}"
        return
    except bounded.Hung as exc:
        ck.config_error = f"config.json {exc}: a hung or very slow filesystem?"
        return
    try:
        doc = msgspec.json.decode(raw)
    except (msgspec.DecodeError, RecursionError) as exc:
        ck.config_error = f"config.json is not valid JSON ({exc}): truncated or corrupt"
        return
    if not isinstance(doc, dict):
        ck.config_error = f"config.json holds a JSON {type(doc).__name__}, not an object"
        return
    ck.config = doc
    if not doc.get("quantization_config") and not guard.withheld(root / "hf_quant_config.json"):
        ck.hf_quant = _read_json_object(root / "hf_quant_config.json")
    if isinstance(doc.get("vision_config"), dict):
        # optional and bounded like hf_quant_config.json: a missing, withheld or bad file is None
        for name, attr in (
            ("preprocessor_config.json", "processor"),
            ("video_preprocessor_config.json", "video_processor"),
        ):
            if not guard.withheld(root / name):
                setattr(ck, attr, _read_json_object(root / name))


def _read_json_object(path: Path) -> dict[str, Any] | None:
    """A small JSON object file (ModelOpt's legacy hf_quant_config.json, a processor
    config), or None."""
    try:
        doc = msgspec.json.decode(read_small(path, MAX_CONFIG))
    except (OSError, msgspec.DecodeError, RecursionError):
        return None
    return doc if isinstance(doc, dict) else None


def _not_found_fix(res: Resolved) -> str:
    if res.repo_id:
        rev = f" --revision {res.revision}" if res.revision else ""
        return (
            f"hf download {res.repo_id}{rev}    # on this node, before the launch (or pass --model /path/to/the/model)"
        )
    return "pass the directory that holds config.json and the *.safetensors files"


def _hf_cache_checks(
    ck: Checkpoint,
    guard: Guard,
    stats: Mapping[str, os.stat_result] | None = None,
    hung: set[str] | None = None,
) -> None:
    """FC505: interrupted downloads, and files whose size differs from the cache's record."""
    res = ck.resolved
    expected = expected_files(res)
    by_blob = {blob: name for name, (_size, blob) in expected.items() if blob}
    # An error only for what the engine reads (weights, config, index, tokenizer, ...): an
    # interrupted download of a README or of original/*.pth does not stop the launch.
    needed = {s.name for s in ck.shards} | set(ck.other_weights) | {"config.json", ck.index_name or idx.INDEX_NAME}
    needed |= {n for n in expected if "/" not in n and n.endswith((".json", ".model", ".tiktoken", ".txt"))}
    for path, size in incomplete_downloads(res):
        etag = path.name.split(".", 1)[0]
        name = by_blob.get(etag) or next((n for b, n in by_blob.items() if b.startswith(etag)), None)
        what = f" ({name}, {size:,} of {expected[name][0]:,} bytes)" if name else f" ({size:,} bytes so far)"
        loaded = name is not None and name in needed
        ck.findings.append(
            Finding(
                Kind.INCOMPLETE_DOWNLOAD,
                f"shard:{name}" if name and name.endswith(".safetensors") else f"file:{name or path.name}",
                f"an interrupted download: {path}{what}"
                + ("" if loaded else "; not a file the engine loads" if name else "; which file is unknown"),
                fix=_redownload_fix(res, name, path),
                evidence={"path": str(path), "bytes": size},
                severity=None if loaded else "warning",
            )
        )
    if res.path is None:
        return
    stats, hung = stats or {}, hung or set()
    for name, (size, _blob) in sorted(expected.items()):
        if name in hung:
            continue  # its stat did not answer: FC508 says so
        p = res.path / name
        if name not in stats and guard.withheld(p):
            continue  # FC508 says it cannot be read; its size is not ours to tell
        try:
            actual = stats[name].st_size if name in stats else p.stat().st_size
        except OSError:
            continue  # not downloaded: FC502 speaks for the files the engine needs
        if actual != size:
            loaded = name in needed
            ck.findings.append(
                Finding(
                    Kind.INCOMPLETE_DOWNLOAD,
                    f"shard:{name}" if name.endswith(".safetensors") else f"file:{name}",
                    f"{name} is {actual:,} bytes but the cache's record of commit "
                    f"{res.commit[:12] if res.commit else '?'} says {size:,}"
                    + ("" if loaded else "; not a file the engine loads"),
                    fix=_redownload_fix(res, name, p),
                    evidence={"bytes": actual, "expected": size},
                    severity=None if loaded else "warning",
                )
            )


def _fetched_at_launch(ck: Checkpoint, envs: tuple[Mapping[str, str | None], ...]) -> None:
    """A repo id the engine will download (not offline in its environment): a file the
    snapshot lacks, or has only as an interrupted ``*.incomplete`` blob, is fetched by the
    engine's ``snapshot_download`` at launch (vLLM 0.33.0 weight_utils.py
    ``download_weights_from_hf``: ``local_files_only=HF_HUB_OFFLINE``; the blob resumes):
    a warning that says how much, not a stop. Offline, it stays the error it is."""
    import msgspec

    res = ck.resolved
    if res.kind != "hf-cache" or not res.repo_id or offline(envs[0] if envs else os.environ):
        return
    expected = expected_files(res)
    out: list[Finding] = []
    for f in ck.findings:
        name = f.subject.split(":", 1)[-1]
        absent = f.kind == Kind.MISSING_FILE and "index_spelling" not in f.evidence and "the index names" in f.message
        partial = f.kind == Kind.INCOMPLETE_DOWNLOAD and str(f.evidence.get("path", "")).endswith(".incomplete")
        if f.severity is None and (absent or partial):
            size = expected.get(name, (None, ""))[0]
            left = size - int(f.evidence.get("bytes", 0)) if size is not None and partial else size
            f = msgspec.structs.replace(
                f,
                severity="warning",
                message=f"{f.message}; the engine downloads it at launch (HF_HUB_OFFLINE and TRANSFORMERS_OFFLINE"
                " are not set): " + (f"{left:,} bytes" if left is not None else "its size is not recorded"),
                evidence={**f.evidence, "downloads_bytes": left},
            )
        out.append(f)
    ck.findings = out


def _redownload_fix(res: Resolved, name: str | None, path: Path) -> str:
    if res.repo_id and name:
        rev = f" --revision {res.commit}" if res.commit else ""
        return f"rm -f {path}; hf download {res.repo_id} {name}{rev}"
    if res.repo_id:
        return f"rm -f {path}; hf download {res.repo_id}" + (f" --revision {res.commit}" if res.commit else "")
    return f"rm -f {path}; re-run the download that was interrupted"


def _not_found(
    ck: Checkpoint,
    model: str,
    envs: tuple[Mapping[str, str | None], ...],
    deadline: float | None = None,
    timeout: float = TIMEOUT_S,
) -> None:
    """FC501. An error when the launch will fail; a warning when the engine can still get
    the model: a repo id the engine downloads (it is not offline), or a single ``.gguf``
    file (flightcheck reads model directories only; its header is read and summed up)."""
    res = ck.resolved
    message = res.problem or f"{model} not found"
    fix: str | None = _not_found_fix(res)
    severity = None
    if res.kind == "file" and model.lower().endswith(".gguf"):
        name = os.path.basename(model)
        _read_gguf(ck, {name: model}, None, deadline or time.monotonic() + timeout, timeout, loaded=False)
        scan = ck.gguf.get(name)
        ck.findings.clear()  # a file, not a directory: the shard checks skip; FC501 says it all
        ck.unread = f"{model} is a GGUF file: flightcheck reads model directories (config.json, safetensors)"
        if scan is not None and scan.ok:
            message = f"{ck.unread}; its header: {_gguf_summary(scan)}; not otherwise checked"
        elif scan is not None:
            message = f"{ck.unread}; its header is broken: {scan.problems[0][1]}"
        else:
            message = f"{ck.unread}; its header could not be read, nothing of it is checked"
        severity, fix = "warning", None
    elif res.repo_id and not offline(envs[0] if envs else os.environ):
        ck.unread = f"{model} is not downloaded yet: its weights are unknown until the engine downloads them"
        message += (
            "; the engine downloads it at launch (HF_HUB_OFFLINE is not set), "
            "so only this download's time and disk are at stake"
        )
        severity = "warning"
        fix = f"{fix}; or let the engine download it"
    elif res.repo_id:
        env = envs[0] if envs else os.environ
        var = next(v for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE") if env.get(v))
        message += f"; the engine runs offline ({var}={env.get(var)} in its environment), so it will not download it"
        rev = f" --revision {res.revision}" if res.revision else ""
        # `hf download` honours the same variable: in that shell it fails too
        fix = (
            f"{var}=0 hf download {res.repo_id}{rev}    # on this node, before the launch ({var} makes "
            f"`hf download` fail too); or unset {var} for the launch; or pass --model /path/to/the/model"
        )
    ck.findings.append(Finding(Kind.NOT_FOUND, f"model:{model}", message, fix=fix, severity=severity))


def _utf8(name: str) -> bool:
    """A file name an index (JSON, UTF-8) can spell: not one with undecodable bytes."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _printable(f: Finding) -> Finding:
    evidence = {k: _text(v) if isinstance(v, str) else v for k, v in f.evidence.items()}
    if (_text(f.subject), _text(f.message), _text(f.fix) if f.fix else f.fix, evidence) == (
        f.subject,
        f.message,
        f.fix,
        f.evidence,
    ):
        return f
    return msgspec.structs.replace(
        f, subject=_text(f.subject), message=_text(f.message), fix=_text(f.fix) if f.fix else f.fix, evidence=evidence
    )


def _mistral_format(engine: str | None, load_format: str | None, on_disk: list[str]) -> tuple[str, str] | None:
    """(file pattern, index name) when the engine loads the Mistral format: ``mistral``, or
    vLLM's ``auto`` with a consolidated*.safetensors on disk; None otherwise."""
    from flightcheck._knowledge import engines

    knowledge = engines.get(engine).checkpoint
    fmt = (load_format or "auto").lower()
    pattern: str = knowledge.MISTRAL_FILES
    if fmt == "mistral" or (
        fmt == "auto" and knowledge.AUTO_MISTRAL and any(fnmatch.fnmatchcase(n, pattern) for n in on_disk)
    ):
        return pattern, knowledge.MISTRAL_INDEX
    return None
