"""One rank's budget for one launch (``Fit``): the usable memory, the reserve, the weights and
the KV demand of the PP stage with the least room, with the [low, high] bound around the point."""

from __future__ import annotations

import msgspec

from flightcheck._memory.kv import KvShape

_NO_KV = KvShape(0.0)


class Fit(msgspec.Struct, frozen=True):
    """One rank's budget for one launch: the rank of the PP stage with the least room."""

    total: int
    utilization: float
    usable: int
    reserve: int
    weights: float
    kv_need: float  # for one sequence of max_model_len
    max_model_len: int | None
    max_model_len_fit: int
    stage: int = 0  # which PP stage
    shape: KvShape = _NO_KV  # that stage's KV demand
    kv_override: int | None = None  # --kv-cache-memory-bytes: the KV budget, utilization ignored
    #: how far the facts not known before the launch may put the budget below / above the
    #: point (:func:`bound_terms`; 0 with --kv-cache-memory-bytes, which fixes the budget)
    below: float = 0.0
    above: float = 0.0
    #: bytes per token of max_model_len the engine holds besides ``reserve`` (``length_cost``),
    #: taken off the KV budget at ``cost_length`` tokens: a shorter length frees them for the KV
    length_cost: float = 0.0
    cost_length: int = 0

    @property
    def kv_budget(self) -> float:
        if self.kv_override is not None:
            # that many bytes, as long as the GPU physically has them
            return min(float(self.kv_override), self.total - self.weights - self.reserve)
        return self.usable - self.weights - self.reserve - self.length_bytes

    @property
    def length_bytes(self) -> float:
        """What the engine holds at this length besides the reserve and the KV cache."""
        return self.length_cost * self.cost_length

    def longest(self, shape: KvShape, budget: float) -> int:
        """The longest max_model_len whose KV on ``shape`` fits ``budget`` (this fit's KV budget, or
        an end of its bound), what the engine holds per token of length moving with it."""
        return shape.max_len(budget + self.length_bytes, length_cost=self.length_cost)

    @property
    def kv_budget_low(self) -> float:
        return self.kv_budget - self.below

    @property
    def kv_budget_high(self) -> float:
        return self.kv_budget + self.above

    @property
    def weights_fit(self) -> bool:
        room = self.total if self.kv_override is not None else self.usable
        return self.weights <= room - self.reserve

    @property
    def weights_fit_high(self) -> bool:
        """The weights fit where the facts not known before the launch are kindest."""
        room = self.total if self.kv_override is not None else self.usable
        return self.weights <= room - self.reserve + self.above

    @property
    def weights_fit_low(self) -> bool:
        """The weights fit even where those facts are least kind."""
        room = self.total if self.kv_override is not None else self.usable
        return self.weights <= room - self.reserve - self.below

    @property
    def kv_fits(self) -> bool:
        return self.max_model_len is None or self.kv_need <= self.kv_budget

    @property
    def fits(self) -> bool:
        return self.weights_fit and self.kv_fits and self.max_model_len_fit > 0

    @property
    def spare(self) -> float:
        """What is left once weights, reserve and one max-length sequence are placed."""
        return self.kv_budget - self.kv_need
