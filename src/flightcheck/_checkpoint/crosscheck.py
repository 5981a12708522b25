"""Turn scans into findings: which shards the engine loads, and whether the index agrees.

Runs after the header scan. Cheap when all is well (compare per-shard tensor counts and
name digests with the index's); only a disagreement re-reads names, to say exactly which
tensor is missing from which shard, or sits in two.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from flightcheck._checkpoint import index as idx
from flightcheck._checkpoint.cache import file_key
from flightcheck._checkpoint.problems import Kind
from flightcheck._checkpoint.validate import ShardScan, scan_file

if TYPE_CHECKING:
    from flightcheck._checkpoint.cache import ScanCache
    from flightcheck._checkpoint.guard import Guard
    from flightcheck._checkpoint.model import Checkpoint, Shard

#: A shard whose allocated blocks cover less than this share of its size is sparse (FC511);
#: well below 1 so that filesystems which compress (ZFS, btrfs) do not trip it.
SPARSE_RATIO = 0.5
SPARSE_MIN_BYTES = 1 << 20
MAX_LISTED = 5  # names quoted per finding
NOINDEX_DUP_CHECK_MAX = 256  # shards: beyond, a missing index is the bigger problem


def assemble(
    ck: Checkpoint,
    root: Path,
    on_disk: list[str],
    scans: dict[str, ShardScan],
    stats: dict[str, os.stat_result],
    raw_index: bytes | None,
    cache: ScanCache,
    reals: Mapping[str, str] | None = None,
    *,
    guard: Guard | None = None,
    withheld: dict[str, str] | None = None,
) -> None:
    """Fill ``ck.shards`` and ``ck.findings`` (FC502/503/504/506/508/509/511). ``reals``:
    real paths already known (each costs a round trip per component on a slow mount).
    ``withheld``: shards not read for the directory's owner (:mod:`.guard`), by name."""
    from flightcheck._checkpoint.model import Finding, Shard

    index_name = ck.index_name or idx.INDEX_NAME
    index_subject = f"file:{index_name}"
    if ck.index is not None and ck.index.problem:
        ck.findings.append(
            Finding(
                Kind.INDEX_MISMATCH,
                index_subject,
                f"{index_name} {ck.index.problem}",
                fix=_refetch_fix(ck, index_name),
            )
        )
    if ck.index is not None and ck.index.problem is None:
        names = sorted(ck.index.files)
    else:
        names = [n for n in on_disk if not (ck.index_name and n.startswith("consolidated"))] or on_disk
    if not names:
        bins = sorted(p.name for p in root.glob("*.bin"))[:3] if root.is_dir() else []
        hint = f" (found {', '.join(bins)}: flightcheck reads safetensors headers only)" if bins else ""
        ck.findings.append(
            Finding(
                Kind.MISSING_FILE,
                f"model:{ck.resolved.model}",
                f"no *.safetensors weights in {root}{hint}",
                fix=_refetch_fix(ck, None),
            )
        )
        return
    withheld = dict(withheld or {})
    for name in names:
        shard = Shard(name, root / name)
        ck.shards.append(shard)
        if idx.escapes(name):
            ck.findings.append(
                Finding(
                    Kind.ESCAPES,
                    shard.subject,
                    f"the index names {name!r}, a path outside the model directory: refused, never opened",
                    fix=f"the index is corrupt or hostile: re-download {index_name} and "
                    f"do not run this checkpoint until it names only files inside {root}",
                )
            )
            continue
        # A symlink is followed as the OS (and the engine) follows it: a symlink farm onto
        # shared storage is a common layout. Only a target the directory's owner could
        # not read is withheld when root reads it (guard), without content or size.
        st = stats.get(name)
        why = withheld.get(name) or (
            guard.withheld(shard.path) if guard is not None and st is None and name not in scans else None
        )
        if why:
            ck.findings.append(
                Finding(
                    Kind.UNREADABLE,
                    shard.subject,
                    f"{name}: {why}",
                    fix=f"make the link point at a file the directory's owner can read: ls -l {shard.path}",
                )
            )
            continue
        if st is None and name in scans:  # its stat did not answer in time: the scan says so
            shard.scan = scans[name]
            for p in shard.scan.problems:
                ck.findings.append(Finding(p.kind, shard.subject, p.message, fix=_problem_fix(ck, shard, p.kind)))
            continue
        try:
            st = st or os.stat(shard.path)
        except OSError as exc:
            _missing(ck, shard, exc)
            continue
        except ValueError:  # a name no file system can hold (a lone surrogate from the JSON)
            _missing(ck, shard, FileNotFoundError(errno.ENOENT, "no such file"))
            continue
        real = (reals or {}).get(name) or os.path.realpath(shard.path)
        shard.size = st.st_size
        shard.allocated = st.st_blocks * 512 if hasattr(st, "st_blocks") else None
        scan = scans.get(name)
        if scan is None:  # named by the index but outside the first listing (a subdirectory)
            key = file_key(st)
            cached = _utf8(real)  # the cache (msgpack) keeps UTF-8 paths only
            scan = cache.shard(real, key) if cached else None
            if scan is None:
                scan = scan_file(str(shard.path))
                if cached:
                    cache.put_shard(real, key, scan)
        shard.scan = scan
        for p in scan.problems:
            ck.findings.append(Finding(p.kind, shard.subject, p.message, fix=_problem_fix(ck, shard, p.kind)))
        if (
            shard.allocated is not None
            and shard.size >= SPARSE_MIN_BYTES
            and shard.allocated < shard.size * SPARSE_RATIO
        ):
            ck.findings.append(
                Finding(
                    Kind.SPARSE,
                    shard.subject,
                    f"{name} has {shard.allocated:,} bytes allocated on disk for a {shard.size:,}-byte file: "
                    "sparse or preallocated, its data may never have been written",
                    fix=_refetch_fix(ck, name),
                    evidence={"allocated": shard.allocated, "size": shard.size},
                )
            )
    if ck.index is not None and ck.index.problem is None:
        _against_index(ck, root, raw_index)
    elif len(ck.shards) > 1 and len(ck.shards) <= NOINDEX_DUP_CHECK_MAX:
        _duplicates_without_index(ck)


def _missing(ck: Checkpoint, shard: Shard, exc: OSError) -> None:
    from flightcheck._checkpoint.model import Finding

    name, subject = shard.name, shard.subject
    if exc.errno == errno.ELOOP:
        ck.findings.append(Finding(Kind.UNREADABLE, subject, f"{name} is a symlink loop", fix=_refetch_fix(ck, name)))
    elif exc.errno in (errno.ENOENT, errno.ENOTDIR):
        dangling = os.path.islink(shard.path)
        what = "a symlink to a blob that is gone" if dangling else "not there"
        ck.findings.append(
            Finding(Kind.MISSING_FILE, subject, f"the index names {name} but it is {what}", fix=_refetch_fix(ck, name))
        )
    else:
        ck.findings.append(
            Finding(
                Kind.UNREADABLE,
                subject,
                f"{name} cannot be read: {exc.strerror or exc}",
                fix=f"check permissions and the filesystem: ls -l {shard.path}",
            )
        )


def _against_index(ck: Checkpoint, root: Path, raw_index: bytes | None) -> None:
    from flightcheck._checkpoint.model import Finding

    assert ck.index is not None
    full: dict[str, list[str]] | None = None  # file -> names, read only when needed

    def index_names() -> dict[str, list[str]]:
        nonlocal full
        if full is None:
            raw = (
                raw_index
                if raw_index is not None
                else idx.read_bytes(root / (ck.index_name or idx.INDEX_NAME))[0] or b""
            )
            full = idx.names_by_file(raw)
        return full

    owner: dict[str, str] = {}
    data_total, complete = 0, True
    for shard in ck.shards:
        scan = shard.scan
        if scan is None or scan.names_digest is None:
            complete = False
            continue
        data_total += scan.data_end
        count, digest = ck.index.files.get(shard.name, (0, ""))
        if (scan.n_tensors, scan.names_digest) == (count, digest):
            continue
        in_header = idx.header_names(str(shard.path)) or []
        expected = index_names().get(shard.name, [])
        if not owner:
            owner = {n: f for f, ns in index_names().items() for n in ns}
        missing, extra, n_missing, n_extra = idx.diff_names(expected, in_header, MAX_LISTED)
        if n_missing:
            ck.findings.append(
                Finding(
                    Kind.INDEX_MISMATCH,
                    shard.subject,
                    f"the index maps {n_missing} tensor(s) "
                    f"to {shard.name} that it does not contain: {', '.join(missing)}"
                    + (" ..." if n_missing > len(missing) else ""),
                    fix=_refetch_fix(ck, shard.name),
                    evidence={"missing": n_missing},
                )
            )
        dups = sorted(n for n in set(in_header) - set(expected) if owner.get(n, shard.name) != shard.name)
        if dups:
            ck.findings.append(
                Finding(
                    Kind.INDEX_MISMATCH,
                    shard.subject,
                    f"{len(dups)} tensor(s) of {shard.name} are also in another shard: "
                    f"{', '.join(f'{n} (index: {owner[n]})' for n in dups[:MAX_LISTED])}",
                    fix=_refetch_fix(ck, shard.name),
                    evidence={"duplicates": len(dups)},
                )
            )
        strays = n_extra - len(dups)
        if strays > 0:
            listed = [n for n in extra if n not in owner][:MAX_LISTED]
            ck.findings.append(
                Finding(
                    Kind.INDEX_MISMATCH,
                    shard.subject,
                    f"{shard.name} holds {strays} tensor(s) the index does not list: {', '.join(listed)}",
                    severity="warning",
                    fix=_refetch_fix(ck, ck.index_name or idx.INDEX_NAME),
                    evidence={"unlisted": strays},
                )
            )
    total = ck.index.total_size
    if complete and total is not None and total != data_total:
        ck.findings.append(
            Finding(
                Kind.INDEX_MISMATCH,
                f"file:{ck.index_name or idx.INDEX_NAME}",
                f"metadata.total_size says {total:,} bytes but the headers add up to {data_total:,}",
                severity="warning",
                fix="harmless on its own if every shard checks out; otherwise re-download the index",
                evidence={"total_size": total, "headers": data_total},
            )
        )


def _duplicates_without_index(ck: Checkpoint) -> None:
    from flightcheck._checkpoint.model import Finding

    seen: dict[str, str] = {}
    for shard in ck.shards:
        if shard.scan is None or shard.scan.names_digest is None:
            continue
        dups = []
        for n in idx.header_names(str(shard.path)) or []:
            if n in seen:
                dups.append(f"{n} (also in {seen[n]})")
            else:
                seen[n] = shard.name
        if dups:
            ck.findings.append(
                Finding(
                    Kind.INDEX_MISMATCH,
                    shard.subject,
                    f"{len(dups)} tensor(s) are in two shards: {', '.join(dups[:MAX_LISTED])}; "
                    "with no index the engine loads both and one silently wins",
                    fix="remove the stray file, or restore model.safetensors.index.json",
                )
            )


def _problem_fix(ck: Checkpoint, shard: Shard, kind: str) -> str:
    if kind == Kind.UNREADABLE:
        return f"check permissions and the filesystem: ls -lL {shard.path}"
    return _refetch_fix(ck, shard.name)


def _refetch_fix(ck: Checkpoint, name: str | None) -> str:
    res = ck.resolved
    if res.repo_id:
        rev = f" --revision {res.commit}" if res.commit else ""
        if name:
            blob = ""
            p = (res.path / name) if res.path else None
            if p is not None and os.path.islink(p):
                blob = f"rm -f {os.path.realpath(p)} {p}; "
            return f"{blob}hf download {res.repo_id} {name}{rev}"
        return f"hf download {res.repo_id}{rev}"
    where = f" {name}" if name else " the weights"
    return f"re-copy{where} from the source into {res.path} (compare its size and sha256 with the source)"


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
