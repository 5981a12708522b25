"""Write N node snapshots made from the bundled examples, for ``flightcheck cluster``:
a plausible fleet with varied failures and some skew between nodes.

    python scripts/gen_fleet.py N DIR        (then: flightcheck cluster --facts-dir DIR -tp 8 -dp N)

Every node starts from ``src/flightcheck/_examples/b300.json`` (a healthy 8x B300) with its
own hostname and GPU UUIDs; by the node's index (deterministic, no randomness) some get a
failure or a skew taken from the other examples or written here:

- ``b300-no-toolkit.json``'s toolchain (FC101/FC103: not ready);
- ``b300-multicast-401.json``'s multicast probe (FC304: ready with the fallback plan);
- an older driver and fabric manager (FC801 across nodes), an older vLLM (FC801);
- a small /dev/shm (FC601), four visible GPUs (FC804), a GPU section nobody read (unknown).

The tests of the HTML report (tests/report/test_cluster_html.py) and the README's
screenshot use it; nothing here is imported by flightcheck.
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

EXAMPLES = Path(__file__).resolve().parent.parent / "src" / "flightcheck" / "_examples"


def _load(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((EXAMPLES / f"{name}.json").read_text())
    return doc


def _no_toolkit(doc: dict[str, Any], other: dict[str, Any]) -> None:
    doc["toolchain"], doc["env"] = copy.deepcopy(other["toolchain"]), copy.deepcopy(other["env"])


def _multicast_401(doc: dict[str, Any], other: dict[str, Any]) -> None:
    doc["multicast_probe"] = copy.deepcopy(other["multicast_probe"])


def _old_driver(doc: dict[str, Any]) -> None:
    doc["driver"]["version"] = doc["fabric_manager"]["version"] = "580.95.05"


def _old_vllm(doc: dict[str, Any]) -> None:
    doc["python"]["packages"]["vllm"] = "0.32.1"


def _small_shm(doc: dict[str, Any]) -> None:
    doc["host"]["shm_bytes"] = 64 << 20


def _four_gpus(doc: dict[str, Any]) -> None:
    doc["env"]["CUDA_VISIBLE_DEVICES"] = doc["visible_devices"] = "0,1,2,3"


def _gpus_unread(doc: dict[str, Any]) -> None:
    doc["gpus"] = None
    doc["unavailable"]["gpus"] = "nvml: the child timed out after 20s"


def node(i: int, n: int) -> dict[str, Any]:
    """Snapshot of node ``i`` (0-based) of a fleet of ``n``."""
    doc = _load("b300")
    doc["host"]["hostname"] = f"gpu-b300-{i:03d}"
    for g in doc["gpus"] or []:  # one node's GPUs are its own: the loader refuses a node recorded twice
        g["uuid"] = f"{g['uuid'][:-6]}{i:03d}{g['index']:03d}"
    # where each kind of trouble lands: the small fleet shows every kind, a large one a few percent each
    if i == 1 or (n > 16 and i % 23 == 5):
        _no_toolkit(doc, _load("b300-no-toolkit"))
    if i == 2 or (n > 16 and i % 17 == 3):
        _multicast_401(doc, _load("b300-multicast-401"))
    if (i == 3 and n > 2) or (n > 16 and i % 61 == 7):
        _old_driver(doc)
    if i == 6 and n > 6:
        _old_vllm(doc)
    if (i == 5 and n > 5) or (n > 16 and i % 29 == 11):
        _small_shm(doc)
    if i == 9 and n > 9:
        _four_gpus(doc)
    if i == n - 2 and n > 10:
        _gpus_unread(doc)
    return doc


def write(n: int, directory: str | Path) -> list[Path]:
    """Write ``n`` snapshots into ``directory`` (created); return their paths."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        p = d / f"node{i:03d}.json"
        p.write_text(json.dumps(node(i, n)))
        paths.append(p)
    return paths


def main(argv: list[str]) -> int:
    """``gen_fleet.py N DIR``."""
    if len(argv) != 2 or not argv[0].isdigit() or int(argv[0]) < 1:
        sys.stderr.write("usage: gen_fleet.py N DIR\n")
        return 2
    write(int(argv[0]), argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
