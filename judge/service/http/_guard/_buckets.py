"""Token buckets: the per-token request rate and the per-address failed authentications."""

from __future__ import annotations

import time
from collections import OrderedDict


class RateLimit:
    """Token buckets keyed by client address or token: ``per_minute`` a minute on average,
    as many at once. In memory, so per replica; at most ``max_keys`` keys are remembered
    (the least recently used go first, which only ever forgets a debt)."""

    def __init__(self, per_minute: int, *, max_keys: int = 50_000) -> None:
        self.per_minute = per_minute
        self.max_keys = max_keys
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def _level(self, key: str, moment: float) -> float:
        level, then = self._buckets.get(key, (float(self.per_minute), moment))
        return min(float(self.per_minute), level + (moment - then) * self.per_minute / 60.0)

    def wait(self, key: str) -> float:
        """Seconds until ``key`` may go again (0: now), without taking anything."""
        if self.per_minute <= 0:
            return 0.0
        level = self._level(key, time.monotonic())
        return 0.0 if level >= 1.0 else (1.0 - level) * 60.0 / self.per_minute

    def take(self, key: str) -> float:
        """Take one for ``key``; returns 0, or the seconds to wait when there is none left."""
        if self.per_minute <= 0:
            return 0.0
        moment = time.monotonic()
        level = self._level(key, moment)
        if level < 1.0:
            return (1.0 - level) * 60.0 / self.per_minute
        self._buckets[key] = (level - 1.0, moment)
        self._buckets.move_to_end(key)
        while len(self._buckets) > self.max_keys:
            self._buckets.popitem(last=False)
        return 0.0
