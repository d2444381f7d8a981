"""How busy the host's CPUs were while a run was counted (docs/ARCHITECTURE.md, Verdicts).

The counter is the kernel's per-CPU time in ``/proc/stat``: busy is every state but idle and
iowait (a CPU waiting on I/O is idle for work), summed over the CPUs the rank may run on
(its affinity: the cores a bound rank shares with nothing of the run, or the whole host's
when unbound). It counts every process of the host, the run's own and any other's: a host
whose CPUs are saturated cannot keep a loader fed, whoever keeps them busy.

Each rank measures over its epochs' counted windows (``CpuMeter``: opened at the window's
first counted step, closed after its last). Per host (``host_busy``), ranks that measured
the same CPUs count once (ranks sharing an unbound host measured the same thing), ranks
bound to different CPUs add up; the share is busy jiffies over all jiffies, None where the
windows were shorter than the kernel's tick or ``/proc/stat`` is missing.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class HostCpu:
    """What one rank measured: busy and total jiffies of ``cpus`` over its windows."""

    busy: int
    total: int
    cpus: tuple[int, ...]


def jiffies(cpus: Iterable[int]) -> tuple[int, int]:
    """(busy, total) jiffies so far of the CPUs ``cpus``, from /proc/stat (OSError or
    ValueError where it cannot be read)."""
    wanted = set(cpus)
    busy = total = 0
    with open("/proc/stat") as handle:
        for line in handle:
            name, *fields = line.split()
            if not name.startswith("cpu") or name == "cpu" or int(name[3:]) not in wanted:
                continue
            ticks = [int(f) for f in fields[:8]]  # user nice system idle iowait irq softirq steal
            total += sum(ticks)
            busy += sum(ticks) - ticks[3] - ticks[4]
    return busy, total


class CpuMeter:
    """The host's busy and total jiffies, accumulated over windows (``open``/``close``)."""

    def __init__(self) -> None:
        self.cpus = tuple(sorted(os.sched_getaffinity(0)))
        self.busy = self.total = 0
        self.seen = True  # False once /proc/stat could not be read
        self._opened: tuple[int, int] | None = None

    def _now(self) -> tuple[int, int] | None:
        try:
            return jiffies(self.cpus)
        except (OSError, ValueError):
            self.seen = False
            return None

    def open(self) -> None:
        """A window starts."""
        self._opened = self._now()

    def close(self) -> None:
        """A window ends (a close without an open adds nothing)."""
        if self._opened is None:
            return
        now = self._now()
        if now is not None:
            self.busy += max(0, now[0] - self._opened[0])
            self.total += max(0, now[1] - self._opened[1])
        self._opened = None

    def result(self) -> HostCpu | None:
        """What the windows measured (None where /proc/stat could not be read)."""
        return HostCpu(self.busy, self.total, self.cpus) if self.seen else None


def host_busy(measured: Iterable[tuple[str, HostCpu | None]]) -> dict[str, float | None]:
    """Per host, the share of its CPUs' time that was busy over the ranks' counted windows,
    from each rank's (host, what it measured): one figure per distinct CPU set of a host
    (ranks that shared CPUs measured them alike: the largest window counts), summed over
    sets; None where a rank measured nothing or the windows held no tick."""
    sets: dict[str, dict[tuple[int, ...], HostCpu]] = {}
    unknown: set[str] = set()
    for host, cpu in measured:
        if cpu is None:
            unknown.add(host)
            continue
        mine = sets.setdefault(host, {})
        if cpu.cpus not in mine or cpu.total > mine[cpu.cpus].total:
            mine[cpu.cpus] = cpu
    out: dict[str, float | None] = {host: None for host in unknown}
    for host, by_cpus in sets.items():
        busy, total = sum(c.busy for c in by_cpus.values()), sum(c.total for c in by_cpus.values())
        out[host] = None if host in unknown or total <= 0 else busy / total
    return out


def busiest(shares: dict[str, float | None]) -> tuple[str, float] | None:
    """The host whose CPUs were the busiest and its share (None: no host measured)."""
    known = [(host, share) for host, share in shares.items() if share is not None]
    return max(known, key=lambda hs: hs[1]) if known else None
