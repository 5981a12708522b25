"""JSON reporter: one object, schema ``flightcheck.report/v1`` (or, for ``flightcheck
cluster``, ``flightcheck.cluster-report/v1``), printed by the JSON library (never through a
terminal renderer, so piping it never wraps or colours it)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from flightcheck._checks.cluster.evaluate import ClusterReport
    from flightcheck._vocabulary.report import Report


def render(report: Report | ClusterReport) -> str:
    """The report as indented JSON text."""
    from flightcheck._report import no_surrogates

    return no_surrogates(json.dumps(report.to_dict(), indent=2, ensure_ascii=False, default=str) + "\n", json=True)
