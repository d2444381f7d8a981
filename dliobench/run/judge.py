"""The client judgement of a run's verdict: a run that waited below its floor is
"storage"-limited only if this host's loader could have delivered its demand from memory.

With ``metric.client_ceiling: auto`` the ceiling is taken from the cache (``run.ceiling``,
measured under the load the host has now) or measured now by every rank, and the verdict is
judged again against it. A ceiling below what the run itself delivered per rank is no
ceiling (the loader did better from the storage than "from memory"): it is measured once
more, and if still below, the verdict is judged without it and says
``ceiling X < delivered Y: not used`` (the result keeps both in
``verdict.client_ceiling_unused``). Measuring runs a probe run; the session hands its own
``run`` in (``run_probe``), so neither the ceiling nor this module imports the session.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from dliobench.comm.world import Comm, World
from dliobench.config.schema import Config
from dliobench.results.schema import RunResult
from dliobench.results.verdict import Bar, busy_hosts, verdict
from dliobench.run import ceiling

log = logging.getLogger(__name__)


def judge_client(config: Config, world: World, comm: Comm, result: RunResult | None,
                 run_probe: ceiling.ProbeRunner) -> None:
    """Judge a storage-limited run against the client ceiling (rank 0 holds the result,
    which gets the new verdict, where the ceiling came from and the load it counts under)."""
    waited = result is not None and result["verdict"]["limiter"] == "storage"
    if not comm.bcast(waited and config.metric.client_ceiling == "auto"):
        return
    delivered: float | None = comm.bcast(delivered_per_rank(result) if world.is_root else None)
    source = "cached"
    if world.node_count > 1:
        value, load = _slowest_node(config, world, comm)
        if value is None:
            return
    else:
        load = ceiling.host_load() if world.is_root else None
        value = comm.bcast(ceiling.cached(config, world, load=load) if world.is_root else None)
        if value is None:
            value, source = ceiling.measure(config, world, comm, run_probe, load), "measured"
        if below(value, delivered):
            log.info("the client ceiling (%.1f samples/s per rank) is below what the run "
                     "delivered (%.1f): measuring it once more", value, delivered)
            value, source = ceiling.measure(config, world, comm, run_probe, load), "re-measured"
    if result is None or value <= 0:
        return
    bar, busy = Bar.of(config), busy_hosts(result["nodes"])
    unused = below(value, delivered)
    judged = verdict(bar if unused else replace(bar, ceiling=value), dict(result["metrics"]),
                     result["time_shares"], result["honesty"], busy)
    if unused and delivered is not None:
        judged["reason"] += (f" (client ceiling {value:,.1f} < delivered {delivered:,.1f} "
                             "samples/s per rank: not used)")
        judged["client_ceiling_unused"] = {"samples_per_s_per_rank": value,
                                           "delivered_samples_per_s_per_rank": delivered}
    result["verdict"] = {**judged, "client_ceiling_source": source,
                         "client_ceiling_load": load}


def delivered_per_rank(result: RunResult | None) -> float | None:
    """Samples/s per rank the run delivered over its counted steps (None: not counted)."""
    if result is None or not result["metrics"]["samples_per_s"]:
        return None
    return float(result["metrics"]["samples_per_s"]) / max(1, result["ranks_count"])


def below(value: float, delivered: float | None) -> bool:
    """Whether a measured ceiling is below what the run delivered: then it is no ceiling."""
    return delivered is not None and 0 < value < delivered


def _slowest_node(config: Config, world: World,
                  comm: Comm) -> tuple[float | None, dict[str, float] | None]:
    """The ceiling of a job on several nodes: each node's own, cached by its host name and
    looked up by its first rank under its own load; the slowest node's (and its load), or
    None when a node has none cached (measuring needs each node's memory copy read by that
    node alone: ``dliobench ceiling`` on one node caches it)."""
    mine = None
    if world.local_rank == 0:
        load = ceiling.host_load()
        mine = (world.host, ceiling.cached(config, world, load=load), load)
    found = [m for m in comm.allgather(mine) if m is not None]
    missing = sorted(h for h, v, _ in found if v is None)
    if missing:
        if world.is_root:
            log.warning("the client ceiling is not cached for %s under its load now; a job "
                        "on %d nodes does not measure it: run `dliobench ceiling` with this "
                        "workload on such a node first", ", ".join(missing), world.node_count)
        return None, None
    host, value, load = min(found, key=lambda m: m[1])
    log.info("client ceiling of the slowest node, %s: %.1f samples/s per rank", host, value)
    return value, load
