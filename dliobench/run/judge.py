"""The client judgement of a run's verdict: a run that waited below its floor is
"storage"-limited only if this host's loader could have delivered its demand from memory.

With ``metric.client_ceiling: auto`` the ceiling is taken from the cache (``run.ceiling``,
measured under the load the host has now) or measured now by every rank, and the verdict is
judged again against it. Measuring runs a probe run; the session hands its own ``run`` in
(``run_probe``), so neither the ceiling nor this module imports the session.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from dliobench.comm.world import Comm, World
from dliobench.config.schema import Config
from dliobench.results.schema import RunResult
from dliobench.results.verdict import Bar, verdict
from dliobench.run import ceiling

log = logging.getLogger(__name__)


def judge_client(config: Config, world: World, comm: Comm, result: RunResult | None,
                 run_probe: ceiling.ProbeRunner) -> None:
    """Judge a storage-limited run against the client ceiling (rank 0 holds the result,
    which gets the new verdict, where the ceiling came from and the load it counts under)."""
    waited = result is not None and result["verdict"]["limiter"] == "storage"
    if not comm.bcast(waited and config.metric.client_ceiling == "auto"):
        return
    load = ceiling.host_load() if world.is_root else None
    value = comm.bcast(ceiling.cached(config, world, load=load) if world.is_root else None)
    source = "cached"
    if value is None and world.node_count > 1:
        # the probe's copy lives in each node's /dev/shm, which the other nodes cannot see:
        # a ceiling is measured on one node (``dliobench ceiling``) and cached by host
        log.warning("the client ceiling is not cached for %s; a job on %d nodes does not "
                    "measure it (its copy in memory is per node): run `dliobench ceiling` "
                    "with this workload on one node first", world.host, world.node_count)
        return
    if value is None:
        value, source = ceiling.measure(config, world, comm, run_probe, load), "measured"
    if result is not None and value > 0:
        bar = replace(Bar.of(config), ceiling=value)
        result["verdict"] = {**verdict(bar, dict(result["metrics"]), result["time_shares"],
                                       result["honesty"]),
                             "client_ceiling_source": source, "client_ceiling_load": load}
