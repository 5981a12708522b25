"""flightcheck: will this LLM-serving launch work on this GPU node, and if not, what must change?

Public API (everything else is private and may change):

    facts = flightcheck.collect(intent)              # read this host (no CUDA in this process)
    report = flightcheck.evaluate(facts, intent)     # every check, the plan, the verdict (reads --model's headers)
    result = flightcheck.probe_multicast()           # the active NVLS multicast bind test (child process)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from flightcheck._vocabulary.version import __version__

if TYPE_CHECKING:
    from flightcheck._collect import collect
    from flightcheck._pipeline import evaluate_launch as evaluate
    from flightcheck._vocabulary.errors import UsageError
    from flightcheck._vocabulary.facts import Facts
    from flightcheck._vocabulary.intent import Intent
    from flightcheck._vocabulary.plan import Plan
    from flightcheck._vocabulary.report import Report
    from flightcheck._vocabulary.results import CheckResult, PlanStep, Severity, Status

# Resolved on first use (PEP 562): vLLM imports this package in every `vllm` command to
# load the plugin, and `vllm collect-env` should not pay for msgspec and the catalogue.
_LAZY = {
    "CheckResult": "._vocabulary.results",
    "PlanStep": "._vocabulary.results",
    "Severity": "._vocabulary.results",
    "Status": "._vocabulary.results",
    "collect": "._collect",
    "UsageError": "._vocabulary.errors",
    "Report": "._vocabulary.report",
    "evaluate": "._pipeline:evaluate_launch",
    "Facts": "._vocabulary.facts",
    "Intent": "._vocabulary.intent",
    "Plan": "._vocabulary.plan",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module, _, attr = _LAZY[name].partition(":")
        value = getattr(importlib.import_module(module, __name__), attr or name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


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
    from flightcheck._collect.multicast import probe_multicast as _probe

    return _probe(devices=devices, timeout=timeout, **kwargs)
