"""Recorded launch deltas (tests/fixtures/launch) and the facts file of a healthy node."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from support import FIXTURES
from support.evaluation import host_doc

LAUNCH = FIXTURES / "launch"
MULTICAST_401 = LAUNCH / "multicast-401.json"
FM_STOPPED = LAUNCH / "fabric-manager-stopped.json"
FALLBACK_ENV = {"VLLM_ALLREDUCE_USE_SYMM_MEM": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1"}


def base_facts(tmp_path: Path, **sections: Any) -> Path:
    """The healthy B300 snapshot (optionally with sections replaced) as a file."""
    doc = host_doc("b300")
    doc.update(sections)
    path = tmp_path / "base.json"
    path.write_text(json.dumps(doc))
    return path
