"""What a cross-node (FC8xx) check may read: every node's facts, the intent, and which
expected nodes gave no facts.

A node check reads one :class:`~flightcheck._checks.framework.Context`; a cluster check
reads a :class:`ClusterContext`, which hands out a per-node ``Context`` on request so the
node derivations (the GPUs the engine will see, the GPUs used) are computed exactly as
``check`` computes them, never twice differently.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import TYPE_CHECKING, TypeVar

from flightcheck._checks.framework import Context

if TYPE_CHECKING:
    from flightcheck._vocabulary.facts import Facts
    from flightcheck._vocabulary.intent import Intent

V = TypeVar("V", bound=Hashable)


class ClusterContext:
    """All nodes of one launch, as the cluster checks see them.

    ``nodes`` maps a node's name (its hostname, made unique) to its facts; ``unreachable``
    maps an expected node that gave no facts to the reason; ``expected`` is how many nodes
    the launch needs (``--nnodes``), when the user said so.
    """

    def __init__(
        self,
        nodes: dict[str, Facts],
        intent: Intent,
        *,
        unreachable: dict[str, str] | None = None,
        expected: int | None = None,
        source: str = "facts-dir",
    ) -> None:
        self.nodes = dict(sorted(nodes.items()))
        self.intent = intent
        self.unreachable = dict(sorted((unreachable or {}).items()))
        self.expected = expected
        self.source = source  # "facts-dir" | "ray": decides which fix FC803 prints
        self._node_ctx: dict[str, Context] = {}

    @property
    def names(self) -> list[str]:
        """The nodes that gave facts, sorted."""
        return list(self.nodes)

    def node(self, name: str) -> Context:
        """The node-check context of one node (its visible GPUs, GPUs used, ...)."""
        if name not in self._node_ctx:
            self._node_ctx[name] = Context(self.nodes[name], self.intent)
        return self._node_ctx[name]

    def values(self, fn: Callable[[Context], V | None]) -> dict[str, V]:
        """``fn`` of every node, leaving out nodes where it is None (a fact nobody read)."""
        out: dict[str, V] = {}
        for name in self.nodes:
            value = fn(self.node(name))
            if value is not None:
                out[name] = value
        return out


def groups(values: dict[str, V]) -> list[tuple[V, list[str]]]:
    """Nodes grouped by value, the most common value first.

    Ties go to the group holding the alphabetically first node, so the same snapshots give
    the same report every time; a message about a tie names both sides.
    """
    by_value: dict[V, list[str]] = {}
    for name in sorted(values):
        by_value.setdefault(values[name], []).append(name)
    return sorted(by_value.items(), key=lambda kv: (-len(kv[1]), kv[1][0]))


def outliers(values: dict[str, V]) -> tuple[V | None, list[str], list[tuple[str, V]]]:
    """The reference value (the most common, as :func:`groups` ranks them), the nodes that
    hold it, and ``(node, value)`` for every other node, in :func:`groups`' order."""
    ranked = groups(values)
    if not ranked:
        return None, [], []
    (ref, ref_nodes), rest = ranked[0], ranked[1:]
    return ref, ref_nodes, [(name, value) for value, members in rest for name in members]


def names_text(names: Iterable[str], limit: int = 3) -> str:
    """'a', 'a, b', 'a, b, c and 4 more'."""
    items = list(names)
    if len(items) <= limit:
        return ", ".join(items)
    return f"{', '.join(items[:limit])} and {len(items) - limit} more"
