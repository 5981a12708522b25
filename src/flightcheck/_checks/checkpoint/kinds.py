"""Which check reports each kind of problem the checkpoint reader finds.

The reader (``flightcheck._checkpoint``) knows what is wrong with a file, never which check
says so: this table is the one place that decides.
"""

from __future__ import annotations

from flightcheck._checkpoint.problems import Kind

#: FC code -> the problem kind it reports.
KIND_OF: dict[str, str] = {
    "FC501": Kind.NOT_FOUND,
    "FC502": Kind.MISSING_FILE,
    "FC503": Kind.TRUNCATED,
    "FC504": Kind.BAD_HEADER,
    "FC505": Kind.INCOMPLETE_DOWNLOAD,
    "FC506": Kind.INDEX_MISMATCH,
    "FC508": Kind.UNREADABLE,
    "FC509": Kind.ESCAPES,
    "FC511": Kind.SPARSE,
    "FC512": Kind.SEVERAL_GGUF,
}
#: problem kind -> the FC code that reports it.
CODE_OF: dict[str, str] = {kind: code for code, kind in KIND_OF.items()}
