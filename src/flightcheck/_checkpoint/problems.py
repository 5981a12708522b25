"""What can be wrong with a checkpoint on disk, as the reader finds it.

The reader names a problem by its kind; the checkpoint check family maps each kind to the
check that reports it (``flightcheck._checks.checkpoint.kinds``). Kinds are stored in the
scan cache, so a new kind is fine but a renamed one needs a new cache format.
"""

from __future__ import annotations


class Kind:
    """Problem kinds (plain strings: they travel through msgpack and the cache)."""

    NOT_FOUND = "not-found"  # the model directory or repo id is not there
    MISSING_FILE = "missing-file"  # a file the engine loads is absent or not a file
    TRUNCATED = "truncated"  # a shard is shorter than its header says
    BAD_HEADER = "bad-header"  # a safetensors header the library refuses
    INCOMPLETE_DOWNLOAD = "incomplete-download"  # *.incomplete blobs, sizes unlike the hub's
    INDEX_MISMATCH = "index-mismatch"  # the index and the shards disagree
    UNREADABLE = "unreadable"  # cannot be opened or read (permissions, FIFO, hung mount)
    ESCAPES = "escapes"  # a name that leaves the model directory
    SPARSE = "sparse"  # allocated blocks cover too little of the file (a sparse copy)
    SEVERAL_GGUF = "several-gguf"  # more *.gguf files than the model's loader accepts
