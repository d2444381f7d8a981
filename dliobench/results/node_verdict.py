"""Per node, what set the pace on network storage: the client's network link, its CPU, the
storage, or the page cache (docs/results.md, ``nodes[].verdict``; issue 51, part 4).

A node's facts are its ranks' AU against the floor (did they wait?), the bytes its loaders
delivered, the bytes that crossed the wire in the counted window (``storage/wire.py``: the
counter is named), the window's length, its link's rate and whether its CPU was saturated.
The rules, in order:

- **page cache**: the wire carried under ``WIRE_SHARE_MIN`` (5 %) of the bytes delivered
  (the same threshold as the device-read share in ``results/verdict.py``, bytes from below
  the cache taken from the wire);
- **none**: the node's ranks did not wait (AU at or above the floor);
- **client network**: its link ran at ``LINK_FULL`` (95 %) of its rate or more, over the
  window or over the time its ranks waited for their batches (a node the page cache served
  in part: its link idles while cached batches are read, and runs full while the ranks
  wait for the rest);
- **client**: its CPU was saturated (Consistency's rule, decided by the caller);
- **storage**: every node's link ran below 95 % and no node's CPU was saturated;
- **unknown** otherwise, and wherever a figure the rule needs is missing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dliobench.results.verdict import DEVICE_SHARE_MIN

WIRE_SHARE_MIN = DEVICE_SHARE_MIN  # below this share off the wire, the page cache served it
LINK_FULL = 0.95  # a link at 95 % of its rate or more is full


@dataclass(frozen=True)
class NodeFacts:
    """One node's figures over its counted window."""

    host: str
    waited: bool | None  # its ranks' AU below the floor (None: no floor or no AU)
    delivered_bytes: int
    wire_bytes: int | None  # None: no counter on this file system
    window_s: float
    link_bytes_per_s: float | None
    cpu_saturated: bool | None
    counter: str = ""
    wait_wire_bytes: int | None = None  # what crossed while its ranks waited, their seconds
    wait_s: float = 0.0

    @property
    def wire_share(self) -> float | None:
        if self.wire_bytes is None or self.delivered_bytes <= 0:
            return None
        return self.wire_bytes / self.delivered_bytes

    @property
    def link_use(self) -> float | None:
        if self.wire_bytes is None or not self.link_bytes_per_s or self.window_s <= 0:
            return None
        return self.wire_bytes / self.window_s / self.link_bytes_per_s

    @property
    def waiting_link_use(self) -> float | None:
        """The link's use over the time the node's ranks waited for their batches."""
        if self.wait_wire_bytes is None or not self.link_bytes_per_s or self.wait_s <= 0:
            return None
        return self.wait_wire_bytes / self.wait_s / self.link_bytes_per_s


def _full(n: NodeFacts) -> bool:
    return any(u is not None and u >= LINK_FULL for u in (n.link_use, n.waiting_link_use))


def node_verdicts(nodes: list[NodeFacts]) -> dict[str, dict[str, Any]]:
    """Each node's ``limit``, its ``reason`` in one sentence, and the figures it rests on
    (``wire_share``, ``link_use``), by host."""
    all_below = all(n.link_use is not None and not _full(n) for n in nodes)
    no_cpu = all(n.cpu_saturated is False for n in nodes)
    return {n.host: {**_one(n, all_below and no_cpu), "wire_share": n.wire_share,
                     "link_use": n.link_use, "link_use_waiting": n.waiting_link_use}
            for n in nodes}


def _one(n: NodeFacts, storage_possible: bool) -> dict[str, str]:
    share, use = n.wire_share, n.link_use
    wire = (f"{n.wire_bytes:,} bytes crossed the wire for {n.delivered_bytes:,} delivered"
            if n.wire_bytes is not None else "")
    if share is not None and share < WIRE_SHARE_MIN:
        return _v("page cache", f"{wire}: {share:.1%}, under {WIRE_SHARE_MIN:.0%}, so the "
                  "page cache served the reads")
    if n.waited is None:
        return _v("unknown", "no AU floor or no counted step to judge")
    if not n.waited:
        return _v("none", "its ranks met the AU floor")
    if use is not None and use >= LINK_FULL:
        return _v("client network", f"its ranks waited while its link ran at {use:.0%} of "
                  f"{n.link_bytes_per_s / 1e6:,.1f} MB/s: {wire}")  # type: ignore[operator]
    waiting = n.waiting_link_use
    if use is not None and waiting is not None and waiting >= LINK_FULL:
        return _v("client network", f"its link ran at {waiting:.0%} of "
                  f"{n.link_bytes_per_s / 1e6:,.1f} MB/s while its ranks "  # type: ignore[operator]
                  f"waited ({use:.0%} over the window: {wire}, {share or 0:.0%}; the page "
                  "cache served the rest)")
    if n.cpu_saturated:
        return _v("client", "its ranks waited while its CPUs were saturated")
    if storage_possible and use is not None:
        return _v("storage", f"its ranks waited while its link ran at {use:.0%} of its rate "
                  f"{_while(waiting)}and every node's link below 95 %, no CPU saturated")
    if n.wire_bytes is None:
        return _v("unknown", "its ranks waited, and no counter sees what crossed the wire "
                  "on this file system")
    if use is None:
        return _v("unknown", f"its ranks waited; {wire}, but its link's rate is not known")
    return _v("unknown", f"its ranks waited with its link at {use:.0%} of its rate, while "
              "another node's link was full or a CPU saturated")


def _while(waiting: float | None) -> str:
    return "" if waiting is None else f"({waiting:.0%} while they waited) "


def _v(limit: str, reason: str) -> dict[str, str]:
    return {"limit": limit, "reason": reason}
