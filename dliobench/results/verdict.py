"""What a run concludes: did it meet its AU floor, and if not, what limited it.

Shares of counted wall time, summed over ranks: compute, wait (for the loader), comm (the
allreduce beyond what overlapped compute), checkpoint, other. A run below its floor is limited
by its largest non-compute share; a wait-limited run is ``storage``-limited unless

- its ranks waited while a host's CPUs were busy (``metric.client_cpu_busy``, 90 %, of their
  time over the counted window, ``nodes[].host_cpu_busy_share`` from /proc/stat): a client
  out of CPU cannot keep its loaders fed, whatever the storage could do; or
- it took (almost) none of its bytes from the storage device (``honesty.device_read_share``
  below ``DEVICE_SHARE_MIN``): the reads came from this host's page cache or a memory file
  system, so the waits were the client's own (decoding, the loader), never storage's; or
- each rank demanded more than this host's loader can deliver even from memory (the client
  ceiling, ``metric.client_ceiling``),

and then it is ``client``-limited, whatever the storage did. An unknown device share (an
object store, a network file system) leaves the judgement to the CPUs and the ceiling. With
compute 0 there is no demand and no floor (layout and tier comparisons run that way).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from dliobench.config.schema import Config
from dliobench.results.hostcpu import busiest

LIMITERS = ("none", "storage", "client", "communication", "checkpoint", "other",
            "not applicable", "unknown")
_SHARE_LIMITER = {"wait": "storage", "comm": "communication", "checkpoint": "checkpoint",
                  "other": "other"}
# Below this share of the bytes read coming from the device, waiting cannot be storage's: a
# page-cache hit costs a memory copy, and 5 % of the reads would have to take all the wait.
DEVICE_SHARE_MIN = 0.05


@dataclass(frozen=True)
class Bar:
    """What a run is judged against, as values (the verdict needs no configuration): its AU
    floor, the samples/s per rank it demands (None with compute 0), the client ceiling
    in samples/s per rank (None: not known) and the host CPU busy share at which waiting is
    the client's (None: 'off')."""

    au_floor: float
    demand: float | None
    ceiling: float | None = None
    cpu_busy: float | None = None

    @classmethod
    def of(cls, config: Config) -> Bar:
        """The bar a configuration sets (its ``metric.client_ceiling`` when pinned)."""
        compute_s = config.train.computation_time
        demand = config.reader.batch_size / compute_s if compute_s > 0 else None
        busy = config.metric.client_cpu_busy
        return cls(config.metric.au, demand, pinned_ceiling(config.metric.client_ceiling),
                   None if busy == "off" else float(busy))


def pinned_ceiling(value: str) -> float | None:
    """``metric.client_ceiling`` as samples/s per rank, or None ('auto' not measured yet,
    'off')."""
    return None if value in ("auto", "off") else float(value)


def time_shares(metrics: dict[str, Any]) -> dict[str, float] | None:
    """Shares of the counted wall time (summed over ranks); None without counted steps."""
    wall = float(metrics.get("wall_s") or 0.0)
    if wall <= 0:
        return None
    parts = {"compute": metrics["compute_s"], "wait": metrics["wait_s"],
             "comm": metrics["comm_s"], "checkpoint": metrics["ckpt_s"]}
    parts["other"] = max(0.0, wall - sum(parts.values()))
    return {name: float(value) / wall for name, value in parts.items()}


def busy_hosts(nodes: Iterable[Mapping[str, Any]]) -> dict[str, float | None]:
    """Each host's CPU busy share over the counted windows, from a result's ``nodes``
    (results before 1.12 have none: an empty mapping)."""
    return {str(n["host"]): n["host_cpu_busy_share"] for n in nodes
            if "host_cpu_busy_share" in n}


def verdict(bar: Bar, metrics: dict[str, Any], shares: dict[str, float] | None,
            honesty: Mapping[str, Any] | None = None,
            busy: Mapping[str, float | None] | None = None) -> dict[str, Any]:
    """``meets_floor``, ``limiter``, one ``reason`` sentence, and the figures they rest on
    (``honesty`` brings where the counted bytes came from, ``busy`` each host's CPU busy
    share over the counted windows)."""
    floor, au = bar.au_floor, metrics.get("au")
    demand, ceiling = bar.demand, bar.ceiling
    device_share = (honesty or {}).get("device_read_share")
    top = busiest(dict(busy or {}))
    figures = {"au": au, "au_floor": floor, "demand_samples_per_s_per_rank": demand,
               "client_ceiling_samples_per_s_per_rank": ceiling,
               "client_ceiling_source": "pinned" if ceiling is not None else None,
               "device_read_share": device_share,
               "host_cpu_busy_share": top[1] if top else None,
               "host_cpu_busy_host": top[0] if top else None,
               "host_cpu_busy_min": bar.cpu_busy}
    if demand is None:
        return {"meets_floor": None, "limiter": "not applicable", **figures,
                "reason": "compute time is 0: no demand and no AU floor (a storage or layout "
                          "comparison: read samples/s and bytes/s)"}
    if au is None or shares is None:
        return {"meets_floor": None, "limiter": "unknown", **figures,
                "reason": "no step was counted, so there is no AU to judge"}
    if au >= floor:
        return {"meets_floor": True, "limiter": "none", **figures,
                "reason": f"AU {au:.1%} meets the floor of {floor:.0%}"}
    worst = max(("wait", "comm", "checkpoint", "other"), key=lambda k: shares[k])
    limiter, reason = _limit(worst, shares[worst], f"AU {au:.1%} is below the floor of "
                             f"{floor:.0%}", bar, device_share, top, len(busy or {}))
    return {"meets_floor": False, "limiter": limiter, **figures, "reason": reason}


def _limit(worst: str, share: float, below: str, bar: Bar, device_share: float | None,
           top: tuple[str, float] | None, hosts: int) -> tuple[str, str]:
    """(limiter, reason) of a run below its floor whose largest non-compute share is
    ``worst``: waiting is the client's when the host's CPUs were busy (``top``: the busiest
    host of ``hosts``), the bytes came from memory or the demand is beyond the client
    ceiling."""
    limiter = _SHARE_LIMITER[worst]
    waited = f"{below}: {share:.0%} of the counted time went waiting for the loader"
    if limiter == "storage" and top is not None and bar.cpu_busy is not None \
            and top[1] >= bar.cpu_busy:
        whose = "this host's CPUs were" if hosts <= 1 else f"the CPUs of {top[0]} were"
        return "client", (
            f"{waited} while {whose} {top[1]:.0%} busy over the counted window (at least "
            f"{bar.cpu_busy:.0%}): the client's CPUs are the limit, whatever the storage did")
    if limiter == "storage" and device_share is not None and device_share < DEVICE_SHARE_MIN:
        return "client", (
            f"{waited}, but only {device_share:.1%} of the bytes it read came from the storage "
            "device, the rest from this host's memory (page cache or a memory file system): "
            "the client (decoding, the loader, its CPUs) is the limit, not storage")
    demand, ceiling = bar.demand, bar.ceiling
    if limiter == "storage" and ceiling is not None and demand is not None and demand > ceiling:
        return "client", (f"{below}: each rank needs {demand:,.1f} samples/s, more than this "
                          f"host's loader delivers even from memory ({ceiling:,.1f} samples/s "
                          "per rank)")
    what = {"storage": "waiting for the loader", "communication": "in the allreduce beyond "
            "compute", "checkpoint": "checkpointing", "other": "outside wait, compute, "
            "communication and checkpoints"}[limiter]
    return limiter, f"{below}: {share:.0%} of the counted time went {what}"


def verdict_words(verdict: dict[str, Any]) -> str:
    """A verdict in words: ``meets the floor``, ``storage-limited``, or the limiter itself
    when there is no floor to meet (``not applicable``, ``unknown``)."""
    meets = verdict.get("meets_floor")
    if meets:
        return "meets the floor"
    limiter = str(verdict.get("limiter") or "unknown")
    if meets is None:
        return limiter
    return f"{limiter}-limited" if limiter != "none" else "below the floor"
