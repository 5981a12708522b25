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
    folder = _folder(ck)
    for name in names:
        inside = _inside(name, root, folder)  # an absolute value that names a file of the directory
        shard = Shard(name, root / (inside or name))
        ck.shards.append(shard)
        if inside is None and idx.escapes(name):
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
        if ck.index is not None and not _glob_spelling(name, folder):
            # the engine's own comparison decides (FC502 says per engine what it does)
            base = os.path.basename(os.path.normpath(name))
            ck.findings.append(
                Finding(
                    Kind.MISSING_FILE,
                    shard.subject,
                    f"the index names {name!r}, where the file directly in the model directory is {base!r}",
                    fix=f"write the index's values as bare file names ({base!r}), as save_pretrained does",
                    evidence={"index_spelling": name, "joined": os.path.join(folder, name)},
                )
            )
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


def _folder(ck: Checkpoint) -> str:
    """The directory as the engine spells it when it joins the index's values to it: the
    ``--model`` string of a local directory (vLLM: ``hf_folder = model_name_or_path``),
    else the snapshot directory."""
    res = ck.resolved
    return res.model if res.kind == "dir" else str(res.path)


def _inside(name: str, root: Path, folder: str) -> str | None:
    """The file name of an absolute index value naming a file directly in the model
    directory (as the directory is spelled, given or real), else None."""
    if not name.startswith("/") or "\x00" in name:
        return None
    head, base = os.path.split(os.path.normpath(name))
    if not base or base in (".", ".."):
        return None
    return base if head in {str(root), os.path.abspath(folder), os.path.realpath(root)} else None


def _glob_spelling(name: str, folder: str) -> bool:
    """Is ``os.path.join(folder, name)`` how ``glob(join(folder, "*.safetensors"))`` spells
    that file? vLLM 0.33.0 compares the two strings (weight_utils.py
    ``filter_duplicate_safetensors_files``); a glob never returns a hidden name, a
    subdirectory's file or ``./name``."""
    base = os.path.basename(name)
    return (
        bool(base)
        and not base.startswith(".")
        and base.endswith(".safetensors")
        and os.path.join(folder, name) == os.path.join(folder, base)
    )


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

    data_total, complete = 0, True
    mismatched: list[tuple[Shard, list[str], list[str]]] = []  # (shard, its header's names, the index's)
    for shard in ck.shards:
        scan = shard.scan
        if scan is None or scan.names_digest is None:
            complete = False
            continue
        data_total += scan.data_end
        count, digest = ck.index.files.get(shard.name, (0, ""))
        if (scan.n_tensors, scan.names_digest) == (count, digest):
            continue
        mismatched.append((shard, idx.header_names(str(shard.path)) or [], index_names().get(shard.name, [])))
    if mismatched:
        _mismatches(ck, mismatched, index_names())
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


#: Index entries vLLM's models never load, so no shard need hold them: the rotary
#: embedding's inverse frequencies (a buffer every ``load_weights`` skips: ``if
#: "rotary_emb.inv_freq" in name: continue``, vLLM 0.33.0 models/llama.py and the rest), and
#: the head of a model whose head is its embeddings (``tie_word_embeddings``: skipped).
_SKIPPED_SUFFIX = "rotary_emb.inv_freq"


def _mismatches(
    ck: Checkpoint, mismatched: list[tuple[Shard, list[str], list[str]]], by_file: dict[str, list[str]]
) -> None:
    """Say how the index and the headers of ``mismatched`` shards disagree, as vLLM takes
    it: the index only chooses the files (weight_utils.py ``filter_duplicate_safetensors_files``,
    0.33.0) and every file is loaded whole, so a tensor mapped to the wrong file loads
    (info); an entry no file holds fails only if the model has that parameter ("Following
    weights were not initialized from checkpoint", unquantized models): a warning; a tensor
    in two files is loaded twice, the last one read winning (a warning)."""
    from flightcheck._checkpoint.model import Finding

    owner = {n: f for f, ns in by_file.items() for n in ns}
    held: dict[str, list[str]] = {}  # tensor -> the mismatched shards whose headers hold it
    for shard, in_header, _ in mismatched:
        for n in in_header:
            held.setdefault(n, []).append(shard.name)
    tied = bool((ck.config or {}).get("tie_word_embeddings")) or bool(
        ((ck.config or {}).get("text_config") or {}).get("tie_word_embeddings")
    )
    headers = {shard.name: set(in_header) for shard, in_header, _ in mismatched}

    def in_owner(n: str) -> bool:
        """Does the shard the index maps ``n`` to hold it too? (one that agrees with the
        index holds exactly what it maps to it)"""
        return n in headers.get(owner[n], (n,))

    for shard, in_header, expected in mismatched:
        missing, extra, _, _ = idx.diff_names(expected, in_header, 1 << 62)
        moved = [n for n in missing if n in held]
        skipped = [
            n for n in missing if n not in held and (n.endswith(_SKIPPED_SUFFIX) or (tied and n == "lm_head.weight"))
        ]
        ghosts = [n for n in missing if n not in held and n not in skipped]
        if moved:
            ck.findings.append(
                Finding(
                    Kind.INDEX_MISMATCH,
                    shard.subject,
                    f"the index maps {len(moved)} tensor(s) to {shard.name} that another shard holds: "
                    + ", ".join(f"{n} (in {held[n][0]})" for n in moved[:MAX_LISTED])
                    + "; harmless: vLLM loads every file the index names, whole",
                    severity="info",
                    fix=_refetch_fix(ck, ck.index_name or idx.INDEX_NAME),
                    evidence={"moved": len(moved)},
                )
            )
        if skipped:
            ck.findings.append(
                Finding(
                    Kind.INDEX_MISMATCH,
                    shard.subject,
                    f"the index maps {len(skipped)} tensor(s) to {shard.name} that no shard holds and the "
                    f"engine never loads: {', '.join(skipped[:MAX_LISTED])}",
                    severity="info",
                    fix=_refetch_fix(ck, ck.index_name or idx.INDEX_NAME),
                    evidence={"skipped": len(skipped)},
                )
            )
        if ghosts:
            ck.findings.append(
                Finding(
                    Kind.INDEX_MISMATCH,
                    shard.subject,
                    f"the index maps {len(ghosts)} tensor(s) to {shard.name} that no shard holds: "
                    f"{', '.join(ghosts[:MAX_LISTED])}"
                    + (" ..." if len(ghosts) > MAX_LISTED else "")
                    + '; vLLM loads the files whole, and fails ("Following weights were not initialized '
                    'from checkpoint") only if the model has such a parameter',
                    severity="warning",
                    fix=_refetch_fix(ck, shard.name),
                    evidence={"missing": len(ghosts)},
                )
            )
        dups = sorted(n for n in extra if len(held.get(n, ())) > 1 or (n in owner and in_owner(n)))
        if dups:
            ck.findings.append(
                Finding(
                    Kind.INDEX_MISMATCH,
                    shard.subject,
                    f"{len(dups)} tensor(s) of {shard.name} are also in another shard: "
                    f"{', '.join(f'{n} (index: {owner.get(n, shard.name)})' for n in dups[:MAX_LISTED])}"
                    "; vLLM loads both, the one read last wins",
                    severity="warning",
                    fix=_refetch_fix(ck, shard.name),
                    evidence={"duplicates": len(dups)},
                )
            )
        strays = [n for n in extra if n not in owner]
        if strays:
            ck.findings.append(
                Finding(
                    Kind.INDEX_MISMATCH,
                    shard.subject,
                    f"{shard.name} holds {len(strays)} tensor(s) the index does not list: "
                    f"{', '.join(strays[:MAX_LISTED])}",
                    severity="warning",
                    fix=_refetch_fix(ck, ck.index_name or idx.INDEX_NAME),
                    evidence={"unlisted": len(strays)},
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
