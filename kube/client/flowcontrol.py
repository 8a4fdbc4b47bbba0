"""Client-side flow control: a token bucket shared by every request a component makes.

``qps`` tokens are added per second up to ``burst``; a request takes one, waiting for it if
none is left.  Waiting reserves the token first, so concurrent callers queue in order instead
of racing for the next refill.  Time comes from the injected clock.
"""

from __future__ import annotations

from kube.clock import Clock


class TokenBucket:
    def __init__(self, qps: float, burst: int, clock: Clock) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError(f"a token bucket needs qps > 0 and burst >= 1 (got {qps}, {burst})")
        self.qps = qps
        self.burst = burst
        self.clock = clock
        self._tokens = float(burst)
        self._last = clock.monotonic()

    def reserve(self) -> float:
        """Take a token; return how many seconds the caller must wait before using it."""
        now = self.clock.monotonic()
        self._tokens = min(self.burst, self._tokens + max(0.0, now - self._last) * self.qps)
        self._last = now
        self._tokens -= 1
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    async def wait(self) -> None:
        delay = self.reserve()
        if delay > 0:
            await self.clock.sleep(delay)
