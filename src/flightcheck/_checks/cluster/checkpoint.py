"""FC802's comparison: each node's copy of the model, file by file, through the
``checkpoint`` sections (file sizes and a sha256 of each shard's length + header).

No data moves: a node's copy is judged against what most nodes hold. A file most nodes
have is *missing* where it is absent; a file only a minority has is *extra* there (an extra
``*.safetensors`` is loaded when no index filters the directory). Sizes are compared first;
headers only between copies of the same size, so one truncated shard is one finding.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from flightcheck._checks.cluster.context import names_text, outliers
from flightcheck._checks.framework import Outcome, fail, ok, unknown

if TYPE_CHECKING:
    from flightcheck._checks.cluster.context import ClusterContext
    from flightcheck._vocabulary.facts import CheckpointFacts

#: Files that never change what is loaded (documentation, git metadata).
_IGNORED_PREFIXES = ("readme", "license", "notice", "use_policy", ".git")
#: At most this many files are named in one message / fix; the evidence has them all.
_LIST = 5


class Diff(msgspec.Struct, frozen=True):
    """One file of one node that differs from the reference copy."""

    file: str
    issue: str  # "missing" | "extra" | "size" | "header" | "content" (config.json) | "revision"
    mine: int | str | None
    reference: int | str | None
    reference_nodes: tuple[str, ...]

    def text(self) -> str:
        where = names_text(self.reference_nodes)
        if self.issue == "missing":
            return f"{self.file} is missing (present on {where})"
        if self.issue == "extra":
            return f"{self.file} is extra (absent on {where})"
        if self.issue == "size":
            return f"{self.file} is {self.mine:,} bytes ({self.reference:,} on {where})"
        if self.issue == "revision":
            return f"the model is at revision {str(self.mine)[:12]} ({str(self.reference)[:12]} on {where})"
        what = "header" if self.issue == "header" else "content"
        return (
            f"{self.file} has another {what} (sha256 {str(self.mine)[:12]}..., "
            f"{str(self.reference)[:12]}... on {where})"
        )


def _compared(name: str) -> bool:
    low = name.rsplit("/", 1)[-1].lower()
    return not (low.startswith(_IGNORED_PREFIXES) or low.endswith(".md"))


def _diffs(sections: dict[str, CheckpointFacts]) -> dict[str, list[Diff]]:
    out: dict[str, list[Diff]] = {name: [] for name in sections}
    total = len(sections)
    every = sorted({f for s in sections.values() for f in (s.files or {}) if _compared(f)})
    for file in every:
        sizes = {n: s.files[file] for n, s in sections.items() if s.files and file in s.files}
        absent = [n for n in sections if n not in sizes]
        if absent:
            if 2 * len(sizes) < total:  # a minority has it: extra there
                for n, size in sizes.items():
                    out[n].append(Diff(file, "extra", size, None, tuple(absent)))
                continue
            for n in absent:
                out[n].append(Diff(file, "missing", None, None, tuple(sorted(sizes))))
        ref_size, ref_nodes, others = outliers(sizes)
        for n, size in others:
            out[n].append(Diff(file, "size", size, ref_size, tuple(ref_nodes)))
        hashes = {n: h for n in ref_nodes if (h := (sections[n].header_sha256 or {}).get(file))}
        ref_hash, hash_nodes, other_hashes = outliers(hashes)
        for n, digest in other_hashes:
            out[n].append(Diff(file, "header", digest, ref_hash, tuple(hash_nodes)))
    # config.json of the same size but other content; another snapshot of a repo id
    for attr, file, issue in (("config_sha256", "config.json", "content"), ("commit", "revision", "revision")):
        ref_value, value_nodes, others = outliers({n: v for n, s in sections.items() if (v := getattr(s, attr, None))})
        for n, value in others:
            if not any(d.file == file for d in out[n]):
                out[n].append(Diff(file, issue, value, ref_value, tuple(value_nodes)))
    return out


def _fix(name: str, diffs: list[Diff], sections: dict[str, CheckpointFacts]) -> str:
    mine = sections[name].path or "<model dir>"
    votes: dict[str, int] = {}
    for d in diffs:
        for n in d.reference_nodes:
            votes[n] = votes.get(n, 0) + 1
    good = max(sorted(votes), key=lambda n: votes[n]) if votes else None
    lines = [f"rm {mine}/{d.file}   # not in the other nodes' copies" for d in diffs if d.issue == "extra"]
    model = sections[name].model or mine
    lines += [
        f"huggingface-cli download {model} --revision {d.reference}   # the revision the other nodes hold"
        for d in diffs
        if d.issue == "revision"
    ]
    fetch = [d for d in diffs if d.issue not in ("extra", "revision")]
    if fetch and good:
        src = sections[good].path or mine
        if len(fetch) > _LIST:
            lines.append(f"rsync -a --checksum {good}:{src}/ {mine}/")
        else:
            lines += [f"rsync -a --checksum {good}:{src}/{d.file} {mine}/{d.file}" for d in fetch]
    return (
        "\n".join(lines) + f"\nthen collect again on {name}: "
        f"flightcheck collect --model {sections[name].model or mine} -o <dir>/{name}.json"
    )


def checkpoint_findings(ctx: ClusterContext) -> list[Outcome] | None:
    """FC802's outcomes, or None when no node recorded a checkpoint and none was asked for."""
    sections = {
        n: f.checkpoint for n, f in ctx.nodes.items() if f.checkpoint is not None and f.checkpoint.files is not None
    }
    model = ctx.intent.model
    if not sections and not model:
        return None
    out: list[Outcome] = []
    for name, facts in ctx.nodes.items():
        if name in sections:
            continue
        ck = facts.checkpoint
        why = facts.reason("checkpoint") or (f"{ck.model} was not found there" if ck is not None and ck.model else None)
        if why:
            out.append(
                fail(
                    f"{name} could not read the model: {why}",
                    fix=f"make the model readable on {name} at the path the launch uses (copy it there, "
                    "or mount the shared copy), then collect again",
                    subject=f"node:{name}",
                    evidence={"reason": why},
                )
            )
        else:
            out.append(
                unknown(
                    f"{name}'s snapshot has no checkpoint section: "
                    f"collect it with `flightcheck collect --model {model or 'M'}`",
                    subject=f"node:{name}",
                )
            )
    if len(sections) < 2:
        return out or [unknown("fewer than two nodes recorded a checkpoint section", subject="cluster")]
    for name, diffs in _diffs(sections).items():
        if not diffs:
            continue
        listed = "; ".join(d.text() for d in diffs[:_LIST]) + (
            f"; and {len(diffs) - _LIST} more" if len(diffs) > _LIST else ""
        )
        out.append(
            fail(
                f"{name}'s copy differs in {len(diffs)} file{'s' if len(diffs) != 1 else ''}: {listed}",
                fix=_fix(name, diffs, sections),
                subject=f"node:{name}",
                evidence={
                    "path": sections[name].path,
                    "files": {
                        d.file: {
                            "issue": d.issue,
                            "node": d.mine,
                            "reference": d.reference,
                            "reference_nodes": list(d.reference_nodes),
                        }
                        for d in diffs
                    },
                },
            )
        )
    if not out:
        any_section = next(iter(sections.values()))
        files = [f for f in (any_section.files or {}) if _compared(f)]
        size = sum((any_section.files or {})[f] for f in files)
        out.append(
            ok(f"{len(sections)} nodes hold the same copy: {len(files)} files, {size / 1e9:,.1f} GB", subject="cluster")
        )
    return out
