"""What evaluating a check produces: severity, status, the result and its plan steps.

The words every layer shares: checks produce :class:`CheckResult`, the plan collects
:class:`PlanStep`, reports render them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


class Severity(str, enum.Enum):
    """How bad a failure is: ``error`` blocks the launch, ``warning`` and ``info`` do not."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


class Status(str, enum.Enum):
    """What evaluating a check found."""

    PASS = "pass"
    FAIL = "fail"
    SKIP = "skip"
    UNKNOWN = "unknown"


ERROR, WARNING, INFO = Severity.ERROR, Severity.WARNING, Severity.INFO


#: Families by hundreds: code prefix -> title shown in the report.
FAMILIES: dict[str, str] = {
    "FC1": "JIT toolchain",
    "FC2": "GPUs and driver",
    "FC3": "NVLink fabric and multicast",
    "FC4": "Memory fit",
    "FC5": "Checkpoint",
    "FC6": "Host",
    "FC7": "Engine",
    "FC8": "Across nodes",
    "FC9": "Orchestration",
}


@dataclass(frozen=True)
class PlanStep:
    """One change the fallback plan makes to the engine's launch, and why."""

    kind: str  # "env" | "add_arg" | "drop_arg"
    name: str  # variable name, or the flag
    value: str | None = None  # env value, or the flag's value (None: a bare flag)
    why: str = ""
    code: str = ""  # filled in by the framework
    cost: str = ""  # what the launch gives up, with the source of the figure


@dataclass(frozen=True)
class CheckResult:
    """One evaluated (check, subject) pair, as it appears in the report."""

    code: str
    name: str
    status: Status
    severity: Severity
    subject: str = "host"
    message: str = ""
    fix: str | None = None
    evidence: dict[str, Any] = field(default_factory=dict)
    plan: tuple[PlanStep, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of the report's ``checks`` entries."""
        return {
            "code": self.code,
            "name": self.name,
            "status": self.status.value,
            "severity": self.severity.value,
            "subject": self.subject,
            "message": self.message,
            "fix": self.fix,
            "evidence": self.evidence,
        }
