"""Capacity mode of the simulated server: continuous batching with a tokens/s ceiling (`Scheduler`)."""

from __future__ import annotations

import asyncio
import heapq


class Scheduler:
    """Capacity mode: decode tokens shared among the requests in flight (processor sharing).

    While n requests decode, each advances at r(n) = min(1 / decode_s_per_token, tokens_per_s / n)
    tokens per second; at most `max_batch` decode at once, the others wait for a slot. Event
    driven: a virtual clock V advances at r(n); a request of T tokens that starts at V0 finishes
    when V reaches V0 + T, and one loop sleeps until the next finish or arrival.
    """

    def __init__(self, tokens_per_s: float, max_batch: int, decode_s_per_token: float) -> None:
        self.tokens_per_s = tokens_per_s
        self.max_batch = max_batch
        self.decode_s_per_token = decode_s_per_token
        self._v = 0.0
        self._t = 0.0
        self._jobs: list[tuple[float, int, asyncio.Future[None]]] = []
        self._waiting: list[tuple[int, asyncio.Future[None]]] = []
        self._seq = 0
        self._wake: asyncio.Event | None = None
        self._loop_task: asyncio.Task[None] | None = None

    @property
    def active(self) -> int:
        return len(self._jobs)

    def _rate(self) -> float:
        n = max(len(self._jobs), 1)
        rate = self.tokens_per_s / n
        return min(rate, 1.0 / self.decode_s_per_token) if self.decode_s_per_token > 0 else rate

    def _advance(self, now: float) -> None:
        if self._jobs:
            self._v += (now - self._t) * self._rate()
        self._t = now

    async def decode(self, tokens: int) -> None:
        """Wait until `tokens` tokens of this request have been decoded."""
        if tokens <= 0:
            return
        loop = asyncio.get_running_loop()
        if self._wake is None:
            self._wake = asyncio.Event()
        if self._loop_task is None or self._loop_task.done():
            self._t = loop.time()
            self._loop_task = loop.create_task(self._run())
        done: asyncio.Future[None] = loop.create_future()
        self._advance(loop.time())
        self._seq += 1
        if len(self._jobs) < self.max_batch:
            heapq.heappush(self._jobs, (self._v + tokens, self._seq, done))
        else:
            self._waiting.append((tokens, done))
        self._wake.set()
        await done

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        assert self._wake is not None
        while True:
            self._advance(loop.time())
            while self._jobs and self._jobs[0][0] <= self._v + 1e-9:
                _, _, fut = heapq.heappop(self._jobs)
                if not fut.done():
                    fut.set_result(None)
                if self._waiting:
                    tokens, waiting = self._waiting.pop(0)
                    self._seq += 1
                    heapq.heappush(self._jobs, (self._v + tokens, self._seq, waiting))
            self._wake.clear()
            timeout = (self._jobs[0][0] - self._v) / self._rate() if self._jobs else None
            try:
                await asyncio.wait_for(self._wake.wait(), timeout=timeout)
            except TimeoutError:
                pass
