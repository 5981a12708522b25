"""What the plugin benchmarks share (``bench_plugin.py``, ``bench_plugin_probe.py``): the
driver a fresh interpreter runs, which loads flightcheck's ``vllm.general_plugins`` entry
point and calls it as ``vllm serve`` would, and the summary line of a set of timings.

The driver reads the argv vLLM would have from ``BENCH_ARGV`` (JSON) and prints one JSON
line: ``load_s`` (importing the entry point), ``register_s`` (the call), ``outcome``
(``returned`` or ``exit N``) and ``fallback`` (whether the multicast fallback switched
torch's symmetric memory off).
"""

from __future__ import annotations

import statistics

DRIVER = r"""
import json, os, sys, time
t0 = time.perf_counter()
from importlib.metadata import entry_points
sys.argv = json.loads(os.environ.pop("BENCH_ARGV"))
(ep,) = [e for e in entry_points(group="vllm.general_plugins") if e.name == "flightcheck"]
register = ep.load()
t1 = time.perf_counter()
try:
    register()
    outcome = "returned"
except SystemExit as exc:
    outcome = f"exit {exc.code}"
t2 = time.perf_counter()
print(json.dumps({"load_s": t1 - t0, "register_s": t2 - t1, "outcome": outcome,
                  "fallback": os.environ.get("TORCH_SYMM_MEM_DISABLE_MULTICAST") == "1"}))
"""


def summary(values: list[float]) -> str:
    """Median, p90 and max of ``values`` (seconds), as one line."""
    values = sorted(values)
    p90 = values[min(len(values) - 1, round(0.9 * (len(values) - 1)))]
    return f"median {statistics.median(values):.3f} s  p90 {p90:.3f} s  max {values[-1]:.3f} s"
