"""llama.cpp's generation counter, made live.

llama-server adds a request's generated tokens to `llamacpp:tokens_predicted_total` only when the request
ends (server-context.cpp flushes a slot's `stats.n_gen` at its release). A long answer on a slow box, say
2,000 tokens at 10 tok/s on a Mac Studio, reads 0 tok/s for 200 s and then a spike. `/slots` says how many
tokens each request in progress has generated so far (`next_token[0].n_decoded`, the same `stats.n_gen`),
so the counter the console rates is the finished requests' count plus the requests in progress:

    generated = tokens_predicted_total + sum(n_decoded of the slots processing)

`/metrics` and `/slots` are two requests: a request that ends between them is counted in neither (its
tokens left the slot but were not read in the counter yet) or in both. The sum is therefore held at its
highest reading unless the engine's own counter went back, which only a restart does; the error is at
most one request's tokens, for one poll, and it corrects itself at the next. A restart (the engine's
counter went back, or its `Process-Start-Time-Unix` changed) starts the count over.
"""

from __future__ import annotations


class LiveGeneration:
    """Per engine: the last engine counter and the last sum handed out."""

    def __init__(self) -> None:
        self.engine_count: float | None = None
        self.handed: float | None = None
        self.started: str | None = None

    def count(self, engine_count: float, decoding: int, started: str | None = None) -> float:
        """The live counter for this poll: the engine's `tokens_predicted_total` and the tokens of the
        requests in progress (0 when /slots did not answer: the count then holds until the engine's
        counter passes it, rather than fall and read as a restart). `started`: the engine's process
        start as it says it, if it does."""
        live = engine_count + decoding
        restarted = (self.engine_count is not None and engine_count < self.engine_count) or (
            started is not None and self.started is not None and started != self.started
        )
        if self.handed is not None and not restarted:
            live = max(live, self.handed)
        self.engine_count, self.handed, self.started = engine_count, live, started or self.started
        return live
