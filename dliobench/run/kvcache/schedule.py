"""The request schedule of a KV-cache run: every user's requests (arrival time, prompt and
output lengths, conversation and turn, shared prefix), drawn up front as a pure function of
the seed and the rank, so two runs offer the same load whatever the storage's timing.

Upstream (mlcommons/storage ``kv_cache_benchmark/kv_cache/workload.py`` and ``benchmark.py``
@23aa82ed) draws the same quantities on a thread per user as it runs; its figures are kept:
the three user templates and their ranges, the QoS mix (15 % interactive, 35 % responsive,
50 % batch), a request's context drawn in [c/4, c] and its output in [g/4, g], its think time
x U(0.8, 1.2), a conversation going on with probability 0.8, and no decode for a context of
10,000 tokens or more (prefill only).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from dliobench.config.kvcache_keys import KVCacheConfig
from dliobench.run.kvcache.autoscale import drawn_users

# name: (context range, generation range, think time range in s) - workload.py@23aa82ed
TEMPLATES = {
    "chatbot": ((512, 4096), (50, 200), (0.1, 0.5)),
    "coding": ((4096, 25000), (100, 500), (0.2, 1.0)),
    "document": ((4096, 16384), (200, 800), (0.3, 1.5)),
}
QOS = (("interactive", 0.15), ("responsive", 0.50), ("batch", 1.0))  # cumulative thresholds
CONTINUE_P = 0.8  # a user's next request stays in its conversation (benchmark.py@23aa82ed)
MAX_TURNS = 10  # ours: upstream caps turns per conversation from its config file
PREFILL_ONLY_TOKENS = 10000  # a context this long is prefilled, not decoded (upstream)
PREFIX_TOKENS = (256, 512, 1024)  # ours: one shared system prompt per user template


@dataclass(frozen=True)
class Request:
    """One inference request and the KV entries it touches."""

    arrival_s: float
    user: int
    conversation: int
    turn: int
    context_tokens: int
    generate_tokens: int
    qos: str
    prefix: int  # index of its shared system prompt, -1: none

    @property
    def key(self) -> str:
        """Its own KV entry (written by its prefill)."""
        return f"u{self.user}/c{self.conversation}/t{self.turn}"

    @property
    def previous_keys(self) -> list[str]:
        """Earlier turns' entries of its conversation, read before the prefill."""
        return [f"u{self.user}/c{self.conversation}/t{t}" for t in range(1, self.turn)]

    @property
    def decodes(self) -> bool:
        """Whether the request decodes (reads its entry back while generating)."""
        return self.context_tokens < PREFILL_ONLY_TOKENS


def _rng(seed: int, rank: int, user: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([seed, rank, user]))


def _qos(draw: float) -> str:
    return next(name for name, top in QOS if draw < top)


def _user_stream(kv: KVCacheConfig, rank: int, user: int) -> Iterator[Request]:
    """One synthetic user's requests in arrival order, from its own generator."""
    rng = _rng(kv.seed, rank, user)
    kind = list(TEMPLATES)[int(rng.integers(len(TEMPLATES)))]
    (c0, c1), (g0, g1), (t0, t1) = TEMPLATES[kind]
    context, generate = int(rng.integers(c0, c1 + 1)), int(rng.integers(g0, g1 + 1))
    think, qos = float(rng.uniform(t0, t1)), _qos(float(rng.random()))
    prefix = -1 if kv.disable_prefix_caching else list(TEMPLATES).index(kind)
    at, conversation, turn = 0.0, 0, 0
    while True:
        at += think * float(rng.uniform(0.8, 1.2))
        if kv.disable_multi_turn or turn >= MAX_TURNS or (turn and rng.random() >= CONTINUE_P):
            conversation, turn = conversation + 1, 0
        turn += 1
        ctx = int(rng.integers(max(1, context // 4), context + 1))
        gen = int(rng.integers(max(1, generate // 4), generate + 1))
        yield Request(at, user, conversation, turn, ctx, gen, qos, prefix if turn == 1 else -1)


def _replay_stream(turns: list[tuple[int, int]], user: int, seed: int,
                   rank: int) -> Iterator[Request]:
    """A user replaying one recorded conversation's turns (context, output tokens)."""
    rng = _rng(seed, rank, user)
    (t0, t1) = TEMPLATES["chatbot"][2]
    at, think, qos = 0.0, float(rng.uniform(t0, t1)), _qos(float(rng.random()))
    for turn, (ctx, gen) in enumerate(turns, start=1):
        at += think * float(rng.uniform(0.8, 1.2))
        yield Request(at, user, 1, turn, ctx, gen, qos, -1)


def schedule(kv: KVCacheConfig, rank: int,
             conversations: list[list[tuple[int, int]]] | None = None) -> list[Request]:
    """This rank's requests in arrival order: the first ``max_requests`` when set, else
    those arriving within ``duration``; ``request_rate`` spaces arrivals at least 1/rate
    apart. ``conversations``: replayed turns (ShareGPT), one user per conversation.
    Autoscaling: every user the autoscaler may reach, over ``duration`` (those active are
    chosen as it runs, the first ``max_requests`` they offer served)."""
    if conversations:
        streams = [_replay_stream(c, u, kv.seed, rank) for u, c in enumerate(conversations)]
    else:
        streams = [_user_stream(kv, rank, u) for u in range(drawn_users(kv))]
    merged = heapq.merge(*streams, key=lambda r: (r.arrival_s, r.user))
    if kv.max_requests and not kv.enable_autoscaling:  # autoscaling: the engine counts
        chosen = list(itertools.islice(merged, kv.max_requests))
    else:
        chosen = list(itertools.takewhile(lambda r: r.arrival_s < kv.duration, merged))
    if kv.request_rate > 0 and not kv.enable_autoscaling:  # autoscaling: the engine spaces
        gap, last, spaced = 1.0 / kv.request_rate, -1e9, []
        for r in chosen:
            last = max(r.arrival_s, last + gap)
            spaced.append(_at(r, last))
        chosen = spaced
    return chosen


def _at(r: Request, arrival_s: float) -> Request:
    return Request(arrival_s, r.user, r.conversation, r.turn, r.context_tokens,
                   r.generate_tokens, r.qos, r.prefix)
