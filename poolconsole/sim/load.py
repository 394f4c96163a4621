"""The load model of one simulated engine: a team of users with bursts, continuous batching with a KV
budget, queueing when KV is full, preemptions, per-user speed falling as concurrency rises.

Pure and deterministic for a given seed and sequence of `tick(now)` calls; the HTTP layer reads it.
"""

from __future__ import annotations

import bisect
import math
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

MAX_WAITING = 48
SPEC_K = 3
"""Draft tokens proposed per step (vLLM's num_speculative_tokens)."""
SPEC_COST = 0.25
"""The cost of drafting and verifying one draft token, in plain decode steps."""
TTFT_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
)
ITL_BUCKETS = (
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
)
E2E_BUCKETS = (
    0.3,
    0.5,
    0.8,
    1.0,
    1.5,
    2.0,
    2.5,
    5.0,
    10.0,
    15.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
    120.0,
    240.0,
    480.0,
    960.0,
    1920.0,
    7680.0,
)


@dataclass
class Hist:
    """A cumulative histogram with fixed upper bounds, observations added in bulk."""

    bounds: tuple[float, ...]
    counts: list[float] = field(default_factory=list)
    total: float = 0.0
    count: float = 0.0

    def __post_init__(self) -> None:
        if not self.counts:
            self.counts = [0.0] * len(self.bounds)

    def observe(self, value: float, n: float = 1.0) -> None:
        index = bisect.bisect_left(self.bounds, value)
        if index < len(self.bounds):
            self.counts[index] += n
        self.total += value * n
        self.count += n

    def cumulative(self) -> list[tuple[float, float]]:
        out, running = [], 0.0
        for bound, c in zip(self.bounds, self.counts, strict=True):
            running += c
            out.append((bound, running))
        out.append((math.inf, self.count))
        return out


@dataclass(frozen=True)
class LoadProfile:
    """How one engine behaves; numbers from the seeds (e.g. ~120 tok/s per user, ~350 aggregate at 4-5 users
    on the 80B MoE node)."""

    single_user_tps: float
    slowdown: float
    """per-user speed = single_user_tps / (1 + slowdown * (running - 1))"""
    max_seqs: int
    kv_tokens: int
    users: int
    think_time_s: float
    prompt_tokens: tuple[int, int]
    output_tokens: tuple[int, int]
    prefill_tps: float = 4000.0
    prefix_hit: float = 0.0
    spec_accept: float | None = None
    burst_every_s: float = 45.0
    burst_users: int = 0


@dataclass
class Req:
    prompt: int
    output: int
    arrived: float
    started: float | None = None
    first_token: float | None = None
    generated: float = 0.0
    external: bool = False
    user: int | None = None
    spec_accept: float | None = None
    """This request's draft acceptance (it depends on what is asked: openai_api.draft_acceptance); None:
    the engine's typical mix, `LoadProfile.spec_accept`."""

    @property
    def kv(self) -> float:
        return self.prompt + self.generated


@dataclass
class Counters:
    prompt_tokens: float = 0.0
    generation_tokens: float = 0.0
    preemptions: float = 0.0
    prefix_queries: float = 0.0
    prefix_hits: float = 0.0
    spec_drafts: float = 0.0
    spec_draft_tokens: float = 0.0
    spec_accepted: float = 0.0
    finished_stop: float = 0.0
    finished_length: float = 0.0
    released_tokens: int = 0
    """Each finished request's whole tokens, added as it ends: what llama-server counts in
    tokens_predicted_total at a slot's release (monotonic, unlike the running float total less those in
    flight)."""
    released_seconds: float = 0.0
    """Each finished request's decode time (first token to its end), added as it ends: llama-server's
    tokens_predicted_seconds_total."""


class EngineLoad:
    def __init__(self, profile: LoadProfile, seed: int, now: float) -> None:
        self.profile = profile
        self.rng = random.Random(seed)
        self.scale = 1.0
        self.spec_on = profile.spec_accept is not None
        """Speculative decoding on (a profile without it switches it off: POOL_SPEC=off)."""
        self.on_team_finished: Callable[[Req, float], None] | None = None
        """Told of each team request (not an HTTP one) as it finishes: the gateway it came through counts it
        (sim.litellm_metrics); kept across restarts."""
        self.reset(now)
        # Closed loop: a team member sends the next request after reading the last answer; the
        # overload scenario multiplies the team (arrivals > 1).
        self.next_arrival = [now + self.rng.uniform(0, profile.think_time_s) for _ in range(profile.users * 8)]
        self.next_burst = now + profile.burst_every_s * self.rng.uniform(0.3, 1.0)

    def reset(self, now: float) -> None:
        """A restart: every counter and histogram back to zero, the queue dropped."""
        if hasattr(self, "next_arrival"):  # the dropped requests' users retry after a pause
            self.next_arrival = [min(t, now + self.rng.uniform(2, 10)) for t in self.next_arrival]
        self.running: list[Req] = []
        self.waiting: deque[Req] = deque()
        self.c = Counters()
        self.ttft = Hist(TTFT_BUCKETS)
        self.itl = Hist(ITL_BUCKETS)
        self.e2e = Hist(E2E_BUCKETS)
        self.queue_time = Hist(E2E_BUCKETS)
        self.last_tick = now

    # -- what the exposition reads ----------------------------------------------------------------
    @property
    def kv_used(self) -> float:
        return sum(r.kv for r in self.running)

    @property
    def kv_usage(self) -> float:
        return min(1.0, self.kv_used / self.profile.kv_tokens)

    def per_user_tps(self, running: int | None = None) -> float:
        n = max(1, len(self.running) if running is None else running)
        return self.profile.single_user_tps * self.scale / (1.0 + self.profile.slowdown * (n - 1))

    # -- the model ------------------------------------------------------------------------------------
    def _new_request(self, now: float) -> Req:
        lo, hi = self.profile.prompt_tokens
        olo, ohi = self.profile.output_tokens
        return Req(int(self.rng.uniform(lo, hi)), int(self.rng.uniform(olo, ohi)), now)

    def add_external(self, prompt: int, output: int, now: float, spec_accept: float | None = None) -> Req:
        req = Req(prompt, output, now, external=True, spec_accept=spec_accept)
        self.waiting.append(req)
        self._admit(now)
        return req

    def add_request(self, prompt: int, output: int, now: float) -> Req:
        """A request the load model paces itself (as the team's), admitted now if it fits."""
        req = Req(prompt, output, now)
        self.waiting.append(req)
        self._admit(now)
        return req

    def _admit(self, now: float) -> None:
        while self.waiting and len(self.running) < self.profile.max_seqs:
            nxt = self.waiting[0]
            if self.kv_used + nxt.prompt > self.profile.kv_tokens and self.running:
                break
            self.waiting.popleft()
            nxt.started = now
            self.queue_time.observe(now - nxt.arrived)
            hits = nxt.prompt * self.profile.prefix_hit * self.rng.uniform(0.5, 1.5)
            hits = min(float(nxt.prompt), hits)
            self.c.prefix_queries += nxt.prompt
            self.c.prefix_hits += hits
            self.c.prompt_tokens += nxt.prompt
            self.running.append(nxt)

    def emit(self, req: Req, tokens: float, speed: float) -> None:
        """Count `tokens` generated for `req` at `speed` tok/s."""
        if tokens <= 0:
            return
        req.generated += tokens
        self.c.generation_tokens += tokens
        self.itl.observe(1.0 / speed, tokens)
        accept = self.acceptance(req)
        if accept is not None:
            drafts = tokens / (1 + SPEC_K * accept)
            self.c.spec_drafts += drafts
            self.c.spec_draft_tokens += drafts * SPEC_K
            self.c.spec_accepted += drafts * SPEC_K * accept

    def acceptance(self, req: Req) -> float | None:
        """The draft acceptance of `req`'s tokens; None when speculative decoding is off."""
        if not self.spec_on or self.profile.spec_accept is None:
            return None
        return req.spec_accept if req.spec_accept is not None else self.profile.spec_accept

    def spec_gain(self, req: Req) -> float:
        """How much faster speculative decoding makes `req` than decoding without it: each step yields
        1 + k x acceptance tokens and costs 1 + SPEC_COST x k of a plain step (drafting and verifying), so
        a draft that is rarely accepted makes the request slower than no draft at all."""
        accept = self.acceptance(req)
        return 1.0 if accept is None else (1 + SPEC_K * accept) / (1 + SPEC_COST * SPEC_K)

    def hold(self, now: float) -> None:
        """The engine is loading its model: nothing runs and nothing is counted until it serves (its
        counters start from zero then, as a restarted engine's do)."""
        self.last_tick = now

    def tick(self, now: float, arrivals: float = 1.0) -> None:
        """Advance to `now`. `arrivals` scales how busy the team is (the overload scenario raises it)."""
        dt = max(0.0, now - self.last_tick)
        self.last_tick = now
        p = self.profile
        team = min(len(self.next_arrival), max(1, round(p.users * arrivals)))
        for i in range(team):
            if now >= self.next_arrival[i]:
                req = self._new_request(now)
                req.user = i
                self.waiting.append(req)
                self.next_arrival[i] = math.inf
        if p.burst_users and now >= self.next_burst:
            for _ in range(int(p.burst_users * arrivals)):
                if len(self.waiting) < MAX_WAITING:
                    self.waiting.append(self._new_request(now))
            self.next_burst = now + p.burst_every_s * self.rng.uniform(0.6, 1.4)
        self._admit(now)
        if dt <= 0 or not self.running:
            return
        speed = self.per_user_tps()
        prefill_speed = p.prefill_tps * self.scale
        done: list[Req] = []
        for req in self.running:
            budget = dt
            if req.external and req.first_token is not None:
                if req.generated >= req.output:
                    done.append(req)
                continue  # an HTTP request paces its own tokens through emit()
            if req.first_token is None:
                prefill = req.prompt / prefill_speed
                elapsed = now - (req.started or now)
                if elapsed < prefill:
                    continue
                req.first_token = now
                self.ttft.observe(now - req.arrived)
                budget = min(dt, elapsed - prefill)
            if req.external:
                continue
            self.emit(req, min(speed * budget, req.output - req.generated), speed)
            if req.generated >= req.output:
                done.append(req)
        for req in done:
            self.running.remove(req)
            self.c.released_tokens += math.floor(req.generated)
            self.c.released_seconds += now - req.first_token if req.first_token is not None else 0.0
            if not req.external and self.on_team_finished is not None:
                self.on_team_finished(req, now)
            if req.user is not None:
                self.next_arrival[req.user] = now + self.rng.expovariate(1.0 / p.think_time_s)
            self.e2e.observe(now - req.arrived)
            if self.rng.random() < 0.8:
                self.c.finished_stop += 1
            else:
                self.c.finished_length += 1
        while self.running and self.kv_used > p.kv_tokens:
            victim = max(self.running, key=lambda r: r.started or 0.0)
            self.running.remove(victim)
            victim.first_token = None
            victim.generated = 0.0
            self.waiting.appendleft(victim)
            self.c.preemptions += 1
        self._admit(now)
