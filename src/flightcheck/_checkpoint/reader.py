"""Read a checkpoint for the checks: resolve, scan (cached), cross-check, find problems.

``load()`` never raises for anything on disk: each problem becomes a :class:`Finding` with
its kind (the checkpoint checks map kinds to codes) and the file as its subject
(``shard:model-00007-of-00096.safetensors``). Only shards the engine will load are judged:
those the index names, or every ``*.safetensors`` of the directory when there is no index
(vLLM ignores files the index does not name).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import msgspec

from flightcheck._checkpoint import bounded
from flightcheck._checkpoint import index as idx
from flightcheck._checkpoint.cache import FileKey, IndexScan, ScanCache, file_key
from flightcheck._checkpoint.model import Checkpoint, Finding
from flightcheck._checkpoint.problems import Kind
from flightcheck._checkpoint.resolve import Resolved, expected_files, incomplete_downloads, resolve
from flightcheck._checkpoint.scan import TIMEOUT_S, scan_paths
from flightcheck._checkpoint.shardio import TooLarge, read_small
from flightcheck._checkpoint.validate import ShardScan, scan_read

MAX_CONFIG = 64 << 20


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
) -> Checkpoint:
    """Resolve and read ``model``; see the module docstring. ``sha``: every scan also
    carries its header's sha256 (for ``collect``; cached scans without one are redone).

    Bounded by ``timeout``: every touch of the model's files runs on a thread or in a
    worker and is given up on at the deadline (a shard that has not answered is FC508,
    "did not answer within N s"); whatever else would still hang (a dead mount under the
    directory itself) ends the read a moment later with the model unreadable. Default:
    ``$FLIGHTCHECK_CHECKPOINT_TIMEOUT`` seconds, else ``scan.TIMEOUT_S``."""
    t0 = time.perf_counter()
    if timeout is None:
        timeout = _env_timeout()
    deadline = time.monotonic() + timeout
    try:
        return bounded.call(
            lambda: _load(model, revision, envs, download_dir, cache_env, workers, sha, deadline, timeout),
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
        return ck


GRACE_S = 2.0  # past the scan's deadline, for the steps after it


def _env_timeout() -> float:
    try:
        value = float(os.environ.get("FLIGHTCHECK_CHECKPOINT_TIMEOUT") or TIMEOUT_S)
    except ValueError:
        return TIMEOUT_S
    return value if 0 < value < 86400 else TIMEOUT_S


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
) -> Checkpoint:
    t0 = time.perf_counter()
    res = resolve(model, revision=revision, envs=envs, download_dir=download_dir)
    ck = Checkpoint(res)
    if res.path is None:
        ck.findings.append(
            Finding(Kind.NOT_FOUND, f"model:{model}", res.problem or f"{model} not found", fix=_not_found_fix(res))
        )
        ck.seconds = time.perf_counter() - t0
        return ck
    root = res.path
    index_path = root / idx.INDEX_NAME
    # The independent reads of the directory at once, on threads: on a network filesystem
    # each costs a round trip or several, and they need not wait for each other.
    tasks: list[Callable[[], Any]] = [
        lambda: _config_raw(root),
        lambda: _safetensors_in(root),
        lambda: _index_stat(index_path),
        root.resolve,
    ]
    first = dict(bounded.imap(lambda f: f(), tasks, deadline=deadline, budget=timeout))
    _read_config(ck, root, first[0])
    cache = ScanCache(first[3] if isinstance(first[3], Path) else root, env=cache_env)
    ck.cache = "off" if not cache.enabled else "cold"
    on_disk = first[1] if isinstance(first[1], list) else []
    raw_index: bytes | None = None
    index_key = None
    index_cost = 0  # header bytes' worth of parsing it, when not cached
    index_read = None
    if isinstance(first[2], bounded.Hung):
        ck.index_name = idx.INDEX_NAME
        ck.index = IndexScan(problem=f"cannot be read: it {first[2]}")
    elif first[2] is not None and not isinstance(first[2], BaseException):
        ck.index_name = idx.INDEX_NAME
        st = first[2]
        if isinstance(st, os.stat_result):
            index_key = file_key(st)
            ck.index = cache.index(index_key)
            index_cost = st.st_size // 2 if ck.index is None else 0
        if ck.index is None:  # read it now, meanwhile: parse_index waits for it (to the deadline)
            index_read = bounded.imap(idx.read_bytes, [index_path], deadline=deadline, budget=timeout)
    # Scan what is on disk now, while (if needed) this process parses the index: for a
    # 390k-tensor model both take ~0.2 s and they overlap.
    todo: list[tuple[str, str, FileKey]] = []  # (name, real path, key)
    scans: dict[str, ShardScan] = {}
    stats_by_name: dict[str, os.stat_result] = {}
    reals: dict[str, str] = {}
    names = [n for n in on_disk if not (n.startswith("consolidated") and ck.index_name)]
    # (Mistral's duplicate consolidated file: the index's shards are loaded instead)
    # Half the time for the stats at most: a shard whose stat hangs must leave the other
    # shards the rest of it to be read.
    hung: set[str] = set()
    half = time.monotonic() + (deadline - time.monotonic()) / 2
    for i, got in bounded.imap(_stat_real, [str(root / n) for n in names], deadline=half, budget=timeout / 2):
        name = names[i]
        if isinstance(got, bounded.Hung):
            scans[name] = scan_read(got)  # FC508: its stat did not answer
            hung.add(name)
            continue
        if isinstance(got, BaseException):
            continue
        st, real = got
        stats_by_name[name] = st
        reals[name] = real
        key = file_key(st)
        hit = cache.shard(real, key)
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
        ck.index = IndexScan(problem=why) if raw_index is None else idx.parse(raw_index, on_disk)
        if index_key is not None and ck.index.problem is None:
            cache.put_index(index_key, ck.index)

    fresh, ck.stats = scan_paths(
        [r for _, r, _ in todo],
        parent_extra=index_cost,
        parent_work=parse_index,
        workers=workers,
        sha=sha,
        timeout=max(0.1, deadline - time.monotonic()),
        header_bytes=index_cost * 3 if index_cost else None,  # a header entry is ~1.4x the index's
    )
    for (name, real, key), scan in zip(todo, fresh):
        scans[name] = scan
        cache.put_shard(real, key, scan)
    ck.stats.shards = len(scans)
    ck.stats.cached = len(scans) - len(fresh) - len(hung)  # (a stat that hung is no cache hit)
    if cache.enabled:
        ck.cache = "warm" if not todo else ("partial" if ck.stats.cached else "cold")
    from flightcheck._checkpoint.crosscheck import assemble

    assemble(ck, root, on_disk, scans, stats_by_name, raw_index, cache, reals=reals)
    _hf_cache_checks(ck, stats_by_name, hung)
    cache.prune(
        set(reals.values())
        | {os.path.realpath(s.path) for s in ck.shards if s.name not in reals and s.name not in hung}
    )
    cache.save()
    ck.seconds = time.perf_counter() - t0
    return ck


def _stat_real(path: str) -> tuple[os.stat_result, str]:
    return os.stat(path), os.path.realpath(path)


def _index_stat(path: Path) -> os.stat_result | str | None:
    """The index's stat; "dangling" for a link to nothing (reading it says why); None: no index."""
    try:
        return path.stat()
    except FileNotFoundError:
        return "dangling" if path.is_symlink() else None
    except OSError:
        return "unreadable"  # a loop, permissions: reading it says why


def _config_raw(root: Path) -> bytes | OSError:
    try:
        return read_small(root / "config.json", MAX_CONFIG)
    except OSError as exc:
        return exc


def _safetensors_in(root: Path) -> list[str]:
    try:
        return sorted(e.name for e in os.scandir(root) if e.name.endswith(".safetensors"))
    except OSError:
        return []


def _read_config(ck: Checkpoint, root: Path, got: Any = None) -> None:
    """``got``: what :func:`_config_raw` gave (read on a thread), else it is read here."""
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
    if not doc.get("quantization_config"):
        ck.hf_quant = _read_json_object(root / "hf_quant_config.json")


def _read_json_object(path: Path) -> dict[str, Any] | None:
    """A small JSON object file (ModelOpt's legacy hf_quant_config.json), or None."""
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
    ck: Checkpoint, stats: Mapping[str, os.stat_result] | None = None, hung: set[str] | None = None
) -> None:
    """FC505: interrupted downloads, and files whose size differs from the cache's record."""
    res = ck.resolved
    expected = expected_files(res)
    by_blob = {blob: name for name, (_size, blob) in expected.items() if blob}
    for path, size in incomplete_downloads(res):
        etag = path.name.split(".", 1)[0]
        name = by_blob.get(etag) or next((n for b, n in by_blob.items() if b.startswith(etag)), None)
        what = f" ({name}, {size:,} of {expected[name][0]:,} bytes)" if name else f" ({size:,} bytes so far)"
        ck.findings.append(
            Finding(
                Kind.INCOMPLETE_DOWNLOAD,
                f"shard:{name}" if name else f"file:{path.name}",
                f"an interrupted download: {path}{what}",
                fix=_redownload_fix(res, name, path),
                evidence={"path": str(path), "bytes": size},
            )
        )
    if res.path is None:
        return
    stats, hung = stats or {}, hung or set()
    for name, (size, _blob) in sorted(expected.items()):
        if name in hung:
            continue  # its stat did not answer: FC508 says so
        p = res.path / name
        try:
            actual = stats[name].st_size if name in stats else p.stat().st_size
        except OSError:
            continue  # not downloaded: FC502 speaks for the files the engine needs
        if actual != size:
            ck.findings.append(
                Finding(
                    Kind.INCOMPLETE_DOWNLOAD,
                    f"shard:{name}" if name.endswith(".safetensors") else f"file:{name}",
                    f"{name} is {actual:,} bytes but the cache's record of commit "
                    f"{res.commit[:12] if res.commit else '?'} says {size:,}",
                    fix=_redownload_fix(res, name, p),
                    evidence={"bytes": actual, "expected": size},
                )
            )


def _redownload_fix(res: Resolved, name: str | None, path: Path) -> str:
    if res.repo_id and name:
        rev = f" --revision {res.commit}" if res.commit else ""
        return f"rm -f {path}; hf download {res.repo_id} {name}{rev}"
    if res.repo_id:
        return f"rm -f {path}; hf download {res.repo_id}" + (f" --revision {res.commit}" if res.commit else "")
    return f"rm -f {path}; re-run the download that was interrupted"
