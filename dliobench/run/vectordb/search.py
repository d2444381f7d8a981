"""The timed window of a vector-database run on one rank: ``vectordb.query_threads`` clients
(threads) each send search calls of ``batch_size`` queries, cycling through the seeded query
set from their own offset, until the runtime is over (timed) or their share of
``vectordb.queries`` is sent (query_count). Recall hits are counted against the ground truth
after each call's clock stops.

Reads per query, three ways: the engine's own count (DiskANN's I/Os), the reads completed by
the index's block device (``/sys/dev/block/M:m/stat``, field 1: every process of the host, so
exact only on a quiet host) and the bytes this process had from the block layer
(``/proc/self/io`` read_bytes: ``storage.devreads``).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

from dliobench.config.vectordb_keys import VectorDBConfig
from dliobench.results.hostcpu import CpuMeter
from dliobench.results.vdb_figures import RankFigures
from dliobench.run.vectordb.engines.base import Searcher
from dliobench.run.vectordb.manifest import Index
from dliobench.run.vectordb.truth import hits
from dliobench.storage.devreads import DeviceMeter

log = logging.getLogger("dliobench")


def block_stat(folder: Path) -> Path | None:
    """The stat file of the block device holding ``folder`` (None: not a block device)."""
    dev = os.stat(folder).st_dev
    path = Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}/stat")
    return path if os.major(dev) and path.exists() else None


def reads_completed(stat: Path | None) -> int | None:
    """Reads the device completed since boot (field 1 of its stat file)."""
    return None if stat is None else int(stat.read_text().split()[0])


def share(total: int, clients: int, client: int) -> int:
    """Client ``client``'s part of ``total`` queries over ``clients``."""
    return total // clients + (1 if client < total % clients else 0)


def _client(searcher: Searcher, index: Index, cfg: VectorDBConfig, figures: RankFigures,
            client: int, clients: int, until: float, budget: int | None,
            stop: threading.Event) -> None:
    nq, sent, at, calls = len(index.queries), 0, client % len(index.queries), 0
    started = said = time.perf_counter()
    while not stop.is_set() and ((budget is None and time.perf_counter() < until) or
                                 (budget is not None and sent < budget)):
        size = cfg.batch_size if budget is None else min(cfg.batch_size, budget - sent)
        rows = [(at + i) % nq for i in range(size)]
        batch = index.queries[rows]
        start = time.time()
        found = searcher.search(batch, cfg.k)
        end = time.time()
        figures.add(start, end, size, hits(found.ids, index.truth.ids[rows], cfg.k),
                    found.reads_per_query)
        sent += size
        at = (at + size * clients) % nq
        calls += 1
        if client == 0 and calls % cfg.report_count == 0 and time.perf_counter() - said >= 1:
            said = time.perf_counter()  # upstream's --report-count lines, a second apart
            log.info("client 0: %d queries in %.1f s; rank %d: %d queries, recall@%d %.4f",
                     sent, time.perf_counter() - started, figures.rank, figures.queries,
                     cfg.k, figures.hits / max(1, cfg.k * figures.queries))


def run_window(searcher: Searcher, index: Index, cfg: VectorDBConfig, figures: RankFigures,
               rank: int, ranks: int) -> None:
    """The timed window on this rank: its clients' searches, timed and counted into
    ``figures`` (the device counters read around the window)."""
    threads = cfg.query_threads
    clients = ranks * threads
    stat = block_stat(index.folder)
    meter = DeviceMeter(str(index.folder))
    figures.device_counter = (f"reads: {stat} field 1, host-wide; bytes: /proc/<pid>/io "
                              f"read_bytes" if stat else "reads uncounted; bytes: "
                              + meter.counter)
    before, cpu0, host = reads_completed(stat), os.times(), CpuMeter()
    meter.open()
    host.open()
    started = time.perf_counter()
    until = started + cfg.runtime
    errors: list[BaseException] = []
    stop = threading.Event()
    workers = [threading.Thread(
        target=_catching, name=f"vectordb-client-{t}",
        args=(errors, searcher, index, cfg, figures, rank * threads + t, clients, until,
              share(cfg.queries, clients, rank * threads + t)
              if cfg.mode == "query_count" else None, stop)) for t in range(threads)]
    for w in workers:
        w.start()
    try:
        for w in workers:
            w.join()
    finally:  # SIGTERM or Ctrl-C on this thread: the clients end after their call
        stop.set()
        for w in workers:
            w.join()
        figures.elapsed_s = time.perf_counter() - started
        meter.close()
        host.close()
        measured = host.result()
        figures.host_cpu = None if measured is None else (measured.busy, measured.total,
                                                          measured.cpus)
        cpu1 = os.times()
        figures.cpu_s = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
        figures.user_s = cpu1.user - cpu0.user
        figures.cpu_cores = float(len(os.sched_getaffinity(0)))
        after = reads_completed(stat)
        figures.device_reads = None if before is None or after is None else after - before
        figures.device_read_bytes = meter.result().nbytes
    if errors:
        raise errors[0]


def _catching(errors: list[BaseException], *args: Any) -> None:
    """A client whose failure is kept for the rank's thread to raise."""
    try:
        _client(*args)
    except BaseException as exc:
        errors.append(exc)
