"""Per node, what crossed the wire and what set the pace: the ``nodes[]`` fields of schema
1.12 (docs/results.md), from each rank's meter (``storage/devreads.DeviceMeter`` with
``storage/wire.py``) and the verdict rules of ``results/node_verdict.py``.

The ranks of one node read one counter (the node's interface or mount), over windows that
start and end together (epochs do), so the node's figure is its ranks' largest, not their
sum. A node's CPU counts as saturated by Consistency's rule: its host's CPU busy share over
the counted windows (``host_cpu_busy_share``) at least ``metric.client_cpu_busy``; where
that is off or unmeasured, its ranks' mean CPU share at least ``CPU_SATURATED``.
"""

from __future__ import annotations

from typing import Any

from dliobench.results.measured import RankTrace
from dliobench.results.node_verdict import NodeFacts, node_verdicts
from dliobench.results.verdict import Bar
from dliobench.storage.devreads import DeviceReads

CPU_SATURATED = 0.95


def node_reads(traces: list[RankTrace]) -> dict[str, DeviceReads]:
    """Each host's wire figures: its ranks' largest (they read one counter)."""
    reads: dict[str, DeviceReads] = {}
    for t in traces:
        r = t.device_reads
        if r is None or not r.wire_counter:
            continue
        best = reads.get(t.host)
        if best is None or (r.wire_bytes or 0) > (best.wire_bytes or 0):
            reads[t.host] = r
    return reads


def wire_total(traces: list[RankTrace]) -> tuple[int, str] | None:
    """The bytes that crossed the wire to every node, summed, and the counter in words;
    None unless every rank's node counted them."""
    reads = node_reads(traces)
    if not traces or any(t.host not in reads for t in traces) or \
            any(r.wire_bytes is None for r in reads.values()):
        return None
    counters = sorted({r.wire_counter for r in reads.values()})
    return (sum(r.wire_bytes or 0 for r in reads.values()),
            f"the wire to {len(reads)} node(s): {'; '.join(counters)}")


def add_wire(nodes: list[dict[str, Any]], traces: list[RankTrace],
             delivered: dict[str, int], bar: Bar) -> None:
    """Add the wire figures and the verdict to each node of ``nodes`` (in place), given the
    bytes each host's loaders ``delivered`` while the meters ran and the run's ``bar`` (its
    AU floor, none with compute 0; its CPU busy threshold). Nodes whose ranks measured no
    wire are left as they are."""
    au_floor = bar.au_floor if bar.demand is not None else None
    reads = node_reads(traces)
    if not reads:
        return
    facts = []
    for n in nodes:
        r = reads.get(n["host"])
        if r is None:
            continue
        au = n.get("au")
        facts.append(NodeFacts(
            n["host"], None if au is None or au_floor is None else au < au_floor,
            delivered.get(n["host"], 0), r.wire_bytes, r.wire_window_s, r.link_bytes_per_s,
            _saturated(n, bar.cpu_busy), r.wire_counter, r.wire_wait_bytes, r.wire_wait_s))
        n.update(wire_bytes=r.wire_bytes, wire_counter=r.wire_counter,
                 wire_window_s=r.wire_window_s, link_bytes_per_s=r.link_bytes_per_s,
                 link_source=r.link_source)
    verdicts = node_verdicts(facts)
    for n in nodes:
        v = verdicts.get(n["host"])
        if v is not None:
            n.update(wire_share=v["wire_share"], link_use=v["link_use"],
                     link_use_waiting=v["link_use_waiting"],
                     verdict={"limit": v["limit"], "reason": v["reason"]})


def _saturated(node: dict[str, Any], busy_min: float | None) -> bool | None:
    busy, cpu = node.get("host_cpu_busy_share"), node.get("cpu_share")
    if busy_min is not None and busy is not None:
        return bool(busy >= busy_min)
    return None if cpu is None else bool(cpu >= CPU_SATURATED)
