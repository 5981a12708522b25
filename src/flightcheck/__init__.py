"""flightcheck: will this LLM-serving launch work on this GPU node, and if not, what must change?

Public API (everything else is private and may change):

    facts = flightcheck.collect(intent)              # read this host (no CUDA in this process)
    report = flightcheck.evaluate(facts, intent)     # pure: every check, the plan, the verdict
    result = flightcheck.probe_multicast()           # the active NVLS multicast bind test (child process)
"""

from __future__ import annotations

from typing import Any

from ._checks._framework import CheckResult, PlanStep, Severity, Status
from ._collect import collect
from ._errors import UsageError
from ._evaluate import Report, evaluate
from ._facts import Facts
from ._intent import Intent
from ._plan import Plan
from ._version import __version__

__all__ = [
    "CheckResult",
    "Facts",
    "Intent",
    "Plan",
    "PlanStep",
    "Report",
    "Severity",
    "Status",
    "UsageError",
    "__version__",
    "collect",
    "evaluate",
    "probe_multicast",
]


def probe_multicast(devices: list[int] | None = None, timeout: float = 30.0, **kwargs: Any) -> Any:
    """Run the NVLS multicast bind probe in a child process; see ``flightcheck probe multicast``."""
    from ._collect.multicast import probe_multicast as _probe

    return _probe(devices=devices, timeout=timeout, **kwargs)
