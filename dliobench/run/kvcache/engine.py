"""Serving a rank's schedule: a dispatcher releases each request at its arrival time to a
pool of ``io_depth`` threads (sized for the device, not a thread per user), each serving a
request as upstream's worker does (mlcommons/storage ``kv_cache_benchmark/kv_cache/
benchmark.py``@23aa82ed ``process_requests``): read its shared prefix, reload the earlier
turns of its conversation, write its own entry (prefill), then read it back once plus once
per 32 generated tokens (decode). The generation time (tokens x the mode's time per token)
is added to the request's latency without holding a thread, as training's compute is
emulated; the run ends at ``duration`` or once ``max_requests`` are served.

At the end of the duration, as upstream's ``run`` (``benchmark.py``@0eeb5228: the workers
start no request once its stop event is set at the duration, the requests in flight are
abandoned, the figures taken over the duration): requests not started are dropped, requests
in flight stop at their next chunk of I/O and are not counted (``unfinished``), and the bytes
the tiers moved are those of the window (a chunk done after it is not counted).
"""

from __future__ import annotations

import math
import resource
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, replace
from typing import Any

from dliobench.config.kvcache_keys import KVCacheConfig
from dliobench.results.kv_stats import KVStats
from dliobench.run.kvcache.autoscale import Monitor, drawn_users, monitor_for
from dliobench.run.kvcache.cache import Waterfall
from dliobench.run.kvcache.schedule import PREFIX_TOKENS, Request
from dliobench.run.kvcache.tiers import Cancelled
from dliobench.storage.latency import LatencyLog

GENERATION_S = {"none": 0.0, "fast": 0.002, "realistic": 0.030}  # models.py@64f05b37
DECODE_BATCH = 32  # tokens per decode read (upstream's cfg('decode', 'batch_size'))


def pool_size(kv: KVCacheConfig) -> int:
    """Requests served at once: ``io_depth``, or 16 (fewer users: one each)."""
    return kv.io_depth or min(16, drawn_users(kv))


@dataclass
class Server:
    """Serves one request at a time on a pool thread."""

    kv: KVCacheConfig
    cache: Waterfall
    stats: KVStats
    entry_bytes_per_token: float
    start: float
    allocs: Any
    monitor: Monitor | None = None  # autoscaling: each request's storage I/O time to it

    def _bytes(self, tokens: int) -> int:
        return max(1, round(tokens * self.entry_bytes_per_token))

    def _reads(self, name: str, decode: bool = False) -> tuple[bool, int, float]:
        """Read an entry; a decode-phase read's bytes counted as they move (those of one cut
        at the end of the window too), as upstream's ``access_cache`` counts them."""
        try:
            tier, moved, seconds = self.cache.read(name)
        except Cancelled as exc:
            if decode:
                self._decoded(exc.moved)
            raise
        if decode:
            self._decoded(moved)
        return tier is not None, moved, seconds

    def _decoded(self, nbytes: int) -> None:
        assert self.stats.lock is not None
        with self.stats.lock:
            self.stats.decode_bytes_read += nbytes

    def serve(self, r: Request, writes_prefix: bool) -> None:
        """Serve ``r``; its figures go into ``stats``. When it fails or is in flight at the
        end of the window (``unfinished``, not counted), the entries it was to write are
        given up, so requests waiting to read them miss instead of hanging. One a thread
        takes after the end (before the dispatcher drops it) is dropped, not started."""
        if time.perf_counter() > self.cache.window.end:
            self._give_up(r, writes_prefix)
            assert self.stats.lock is not None
            with self.stats.lock:
                self.stats.cancelled += 1
            return
        try:
            self._serve(r, writes_prefix)
        except BaseException as exc:
            self._give_up(r, writes_prefix)
            if not isinstance(exc, Cancelled):
                raise
            assert self.stats.lock is not None
            with self.stats.lock:
                self.stats.unfinished += 1

    def _give_up(self, r: Request, writes_prefix: bool) -> None:
        self.cache.abandon(r.key)
        if writes_prefix:
            self.cache.abandon(f"prefix/p{r.prefix}")

    def _serve(self, r: Request, writes_prefix: bool) -> None:
        began = time.perf_counter()
        io, hits, misses, turn_hits, turn_misses = 0.0, 0, 0, 0, 0
        context = r.context_tokens
        if r.prefix >= 0:
            name, tokens = f"prefix/p{r.prefix}", PREFIX_TOKENS[r.prefix]
            if writes_prefix:
                io += self.cache.write(name, self._bytes(tokens))
            else:
                hit, _, seconds = self._reads(name)
                io, hits, misses = io + seconds, hits + hit, misses + (not hit)
            context = max(1, context - tokens)
        for name in r.previous_keys:  # decode-phase reads too (upstream counts them so)
            hit, _, seconds = self._reads(name, decode=True)
            io, turn_hits, turn_misses = io + seconds, turn_hits + hit, turn_misses + (not hit)
        with self.allocs:
            io += self.cache.write(r.key, self._bytes(context))
        if r.decodes:
            for _ in range(1 + math.ceil(r.generate_tokens / DECODE_BATCH)):
                hit, _, seconds = self._reads(r.key, decode=True)
                io, hits, misses = io + seconds, hits + hit, misses + (not hit)
        self._record(r, began, io, (hits, misses, turn_hits, turn_misses), context)

    def _record(self, r: Request, began: float, io: float, counts: tuple[int, ...],
                context: int) -> None:
        """Count a served request, unless its generation ends after the window (upstream's
        worker sleeps it: such a request is still in flight at the end)."""
        now = time.perf_counter()
        generation = r.generate_tokens * GENERATION_S[self.kv.generation_mode]
        if now + generation > self.cache.window.end:
            raise Cancelled()
        arrival = self.start + r.arrival_s
        s = self.stats
        assert s.lock is not None
        with s.lock:
            s.requests += 1
            s.tokens += r.generate_tokens
            s.prefill_tokens += context
            s.hits, s.misses = s.hits + counts[0], s.misses + counts[1]
            s.multi_turn_hits += counts[2]
            s.multi_turn_misses += counts[3]
            s.storage_io_s += io
            s.e2e_s += now - arrival + generation
            s.generation_s += generation
            e2e = now - arrival + generation
            s.e2e.record(e2e, e2e)
            s.storage_io.record(io, io)
            if self.monitor is not None:
                self.monitor.samples.append(io)
            s.generation.record(generation, generation)
            s.queue_wait.record(began - arrival, began - arrival)
            s.qos.setdefault(r.qos, LatencyLog()).record(e2e, e2e)
            s.tokens_per_second[int(now + generation - self.start)] += r.generate_tokens


def serve_schedule(kv: KVCacheConfig, requests: list[Request], cache: Waterfall,
                   stats: KVStats, entry_bytes_per_token: float) -> None:
    """Release the requests at their arrival times to the pool and wait for the served ones;
    the elapsed time and CPU go into ``stats``. The first failed request, the end of the
    duration, the autoscaler's stop or an interruption (Ctrl-C, SIGTERM) drops the requests
    not yet started. Autoscaling: only the active users' requests are released."""
    start, cpu0, user0 = time.perf_counter(), time.process_time(), _user_s()
    stats.started_at = start
    if not kv.max_requests:
        cache.set_end(start + kv.duration)
        stats.window_s = kv.duration
    allocs = (threading.BoundedSemaphore(kv.max_concurrent_allocs)
              if kv.max_concurrent_allocs else nullcontext())
    server = Server(kv, cache, stats, entry_bytes_per_token, start, allocs, monitor_for(kv))
    queued: list[tuple[Request, bool, Future[None]]] = []
    failed = threading.Event()  # a request failed (or the autoscaler stopped): dispatch no
    quit_ = threading.Event()   # more, drop what waits; quit_: the monitor's end
    watcher = _watch(kv, server, failed, quit_)
    try:
        _serve(kv, requests, server, queued, failed)
    finally:  # a failed or interrupted run's figures too (its partial result)
        quit_.set()
        if watcher is not None:
            watcher.join()
        _finish(kv, server, len(requests) if server.monitor is None else len(queued),
                cpu0, user0)
    for _, _, future in queued:
        if not future.cancelled():
            future.result()  # a failed request's error is the run's


def _watch(kv: KVCacheConfig, server: Server, failed: threading.Event,
           quit_: threading.Event) -> threading.Thread | None:
    """Start the autoscaler's monitor (none without autoscaling); its stop ends the window
    at once, as upstream's sets its stop event."""
    monitor, start = server.monitor, server.start
    if monitor is None:
        return None

    def stop(now: float) -> None:
        server.cache.set_end(now)
        server.stats.window_s = now - start
        failed.set()

    end = None if kv.max_requests else start + kv.duration
    thread = threading.Thread(target=monitor.watch, name="kvcache-autoscaler", daemon=True,
                              args=(server.stats, start, end, quit_, stop))
    thread.start()
    return thread


def _finish(kv: KVCacheConfig, server: Server, scheduled: int, cpu0: float,
            user0: float) -> None:
    """The run's elapsed time (the window's length), CPU and autoscaling record."""
    stats, start = server.stats, server.start
    stats.scheduled = scheduled
    stats.elapsed_s = time.perf_counter() - start  # the window's figures: its length
    if not kv.max_requests:
        stats.elapsed_s = min(stats.elapsed_s, kv.duration)
    else:  # a request's generation may end after its thread is free
        stats.elapsed_s = max(stats.elapsed_s, max(stats.tokens_per_second, default=0) + 0.0)
    monitor = server.monitor
    if monitor is not None:
        if monitor.stopped_at is not None:
            stats.elapsed_s = min(stats.elapsed_s, monitor.stopped_at - start)
        stats.autoscaling = monitor.scaler.record(kv.num_users, kv.autoscaler_interval)
    stats.cpu_s = time.process_time() - cpu0
    stats.user_s = _user_s() - user0


def _serve(kv: KVCacheConfig, requests: list[Request], server: Server,
           queued: list[tuple[Request, bool, Future[None]]], failed: threading.Event) -> None:
    """Dispatch to the pool; drop what has not started at the end of the duration, after a
    failure or an interruption; wait for what has."""
    with ThreadPoolExecutor(pool_size(kv), thread_name_prefix="kvcache") as pool:
        try:
            _dispatch(kv, requests, server, pool, queued, failed)
        except BaseException:  # the pool's shutdown waits only for the requests started
            _drop_unstarted(queued, server.cache, server.stats)
            raise
        if not kv.max_requests or failed.is_set():
            _drop_unstarted(queued, server.cache, server.stats)


def _user_s() -> float:
    """This process's user-mode CPU seconds: Python runs there, one thread at a time (the
    GIL), so a share near 1 of the elapsed time is a client bound to one core."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_utime


def _dispatch(kv: KVCacheConfig, requests: list[Request], server: Server,
              pool: ThreadPoolExecutor, queued: list[tuple[Request, bool, Future[None]]],
              failed: threading.Event) -> None:
    """Queue each request at its arrival time (its entries registered first) until the
    schedule, the duration or a failure ends; then wait out the duration."""
    start, cache = server.start, server.cache
    end = None if kv.max_requests else start + kv.duration

    def watch(future: Future[None]) -> None:
        if not future.cancelled() and future.exception() is not None:
            failed.set()

    for r in _offered(kv, requests, server, end, failed):
        prefix = r.prefix >= 0 and cache.expect(f"prefix/p{r.prefix}")
        cache.expect(r.key)
        queued.append((r, prefix, pool.submit(server.serve, r, prefix)))
        queued[-1][2].add_done_callback(watch)
    if end is not None:
        failed.wait(max(0.0, end - time.perf_counter()))


def _offered(kv: KVCacheConfig, requests: list[Request], server: Server, end: float | None,
             failed: threading.Event) -> Iterator[Request]:
    """Each request at its arrival time, until the schedule or the duration ends (or a
    failure: none more). Autoscaling: only the active users' requests (the first
    ``max_requests`` of them when set), spaced by ``request_rate`` here (the schedule leaves
    it to the requests offered), each arriving when released."""
    start, monitor = server.start, server.monitor
    gap = 1.0 / kv.request_rate if monitor is not None and kv.request_rate > 0 else 0.0
    last, offered = -1e9, 0
    for r in requests:
        if monitor is not None and kv.max_requests and offered >= kv.max_requests:
            return
        if end is not None and start + r.arrival_s >= end:
            return
        if failed.wait(max(0.0, start + r.arrival_s - time.perf_counter())):
            return
        if monitor is not None and not monitor.scaler.active(r.user):
            continue  # an inactive user's request is not offered
        if gap and r.arrival_s < last + gap:
            r = replace(r, arrival_s=last + gap)
            if end is not None and start + r.arrival_s >= end:
                return
            if failed.wait(max(0.0, start + r.arrival_s - time.perf_counter())):
                return
        last, offered = r.arrival_s, offered + 1
        yield r


def _drop_unstarted(queued: list[tuple[Request, bool, Future[None]]], cache: Waterfall,
                    stats: KVStats) -> None:
    """Cancel the requests no thread has started (their entries are forgotten, so a request
    waiting on one misses it)."""
    for r, prefix, future in reversed(queued):
        if future.cancel():
            stats.cancelled += 1
            cache.abandon(r.key)
            if prefix:
                cache.abandon(f"prefix/p{r.prefix}")
