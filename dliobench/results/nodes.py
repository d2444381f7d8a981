"""Per-node truth: each node's figures from its ranks' traces, the straggler node, and the
memory the page-cache rule weighs (docs/results.md, ``nodes``).

A node is a host name (``RankTrace.host``); a machine is a kernel (its boot id): emulated
nodes (``dliobench nodes``) are several nodes of one machine and share its memory and page
cache, so the page-cache rule adds each machine's memory once.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dliobench.results.hostcpu import host_busy
from dliobench.results.measured import RankTrace

BOOT_ID = "/proc/sys/kernel/random/boot_id"
STRAGGLER_NODE_FRACTION = 0.9  # a node below 90 % of the median node's samples/s per rank


def machine_id() -> str:
    """This kernel's boot id (the same in every namespace of one machine), or "" unknown."""
    try:
        with open(BOOT_ID) as handle:
            return handle.read().strip()
    except OSError:
        return ""


def staging_by_host(parts: list[tuple[str, int, int, float]]) -> list[dict[str, Any]]:
    """Staging per node from its ranks' (host, files, bytes, seconds): files and bytes
    summed, the time of its slowest rank."""
    hosts: dict[str, list[tuple[str, int, int, float]]] = {}
    for part in parts:
        hosts.setdefault(part[0], []).append(part)
    return [{"host": h, "files": sum(p[1] for p in ps), "bytes": sum(p[2] for p in ps),
             "seconds": max(p[3] for p in ps)} for h, ps in sorted(hosts.items())]


def _mean(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def per_node(per_rank: list[dict[str, Any]], traces: list[RankTrace],
             staging: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Figures per host: its ranks' samples, bytes and rates summed, AU and CPU share
    averaged, the share of its ranks' wall time spent waiting, how busy its CPUs were over
    the counted windows (``results.hostcpu``), its staging, its memory."""
    memory = {t.host: (t.machine_id, t.memory_bytes) for t in traces}
    busy = host_busy((t.host, t.host_cpu) for t in traces)
    staged = {s["host"]: s for s in (staging or {}).get("nodes", [])}
    hosts: dict[str, list[dict[str, Any]]] = {}
    for r in per_rank:
        hosts.setdefault(r["host"], []).append(r)
    out = []
    for host, ranks in sorted(hosts.items()):
        wall = sum(r["wall_s"] for r in ranks)
        machine, mem = memory.get(host, ("", 0))
        out.append({
            "host": host, "ranks": [r["rank"] for r in ranks],
            "au": _mean([r["au"] for r in ranks]),
            "samples": sum(r["samples"] for r in ranks),
            "bytes": sum(r["bytes"] for r in ranks),
            "samples_per_s": sum(r["samples_per_s"] or 0.0 for r in ranks),
            "bytes_per_s": sum(r["bytes_per_s"] or 0.0 for r in ranks),
            "wait_s": sum(r["wait_s"] for r in ranks),
            "wait_share": sum(r["wait_s"] for r in ranks) / wall if wall > 0 else None,
            "cpu_share": _mean([r.get("cpu_share") for r in ranks]),
            "host_cpu_busy_share": busy.get(host),
            "staging_s": staged[host]["seconds"] if host in staged else None,
            "staging_bytes": staged[host]["bytes"] if host in staged else None,
            "machine_id": machine, "memory_bytes": mem})
    return out


def straggler_nodes(nodes: list[dict[str, Any]]) -> list[str]:
    """Hosts whose samples/s per rank fall below ``STRAGGLER_NODE_FRACTION`` of the median
    node's: the nodes holding the others up (per rank, so a node with fewer ranks is not
    one for that alone)."""
    rates = {n["host"]: n["samples_per_s"] / len(n["ranks"]) for n in nodes if n["ranks"]}
    if len(rates) < 2:
        return []
    median = float(np.median(list(rates.values())))
    return [h for h, rate in rates.items() if rate < STRAGGLER_NODE_FRACTION * median]


def machines_memory(traces: list[RankTrace]) -> int | None:
    """The memory of the machines the ranks ran on, each machine once (None: a rank's
    machine is not known, as in a result from journals written before 1.7)."""
    machines = {t.machine_id: t.memory_bytes for t in traces}
    if not machines or "" in machines or not all(machines.values()):
        return None
    return sum(machines.values())
