"""Which ranks, or whole nodes, have gone silent: read from the run's journals.

Every rank's journal is touched at least once a second while its process lives
(``results.journal``, ``EVERY_S``), whether or not it made progress, so a journal silent for
``QUIET_S`` belongs to a process that is gone (killed, its node down) or frozen whole
(SIGSTOP), while a rank merely blocked at a collective keeps its journal fresh. A surviving
rank whose job stalled asks this to say who was lost, naming the node when all of its ranks
went silent (the journal's start record names the rank's host), and which survivor speaks
for the job (the lowest-numbered one), so that the job ends with one sentence.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from dliobench.results.journal import EVERY_S, FOLDER, decode, ended

QUIET_S = 3 * EVERY_S  # a journal silent this long: its process is gone or frozen


@dataclass(frozen=True)
class Lost:
    """Who went silent, in words, and the rank that speaks for the survivors."""

    words: str
    speaker: int


def _first_record_host(path: Path) -> str | None:
    """The host of a journal's start record (its first line)."""
    try:
        with open(path, "rb") as handle:
            record = decode(handle.readline(1 << 16))
    except OSError:
        return None
    return str(record["host"]) if record and record.get("k") == "start" else None


def _ranks(ranks: list[int]) -> str:
    return f"rank{'s' if len(ranks) > 1 else ''} {', '.join(str(r) for r in ranks)}"


def lost(run_dir: Path, now: float | None = None, quiet_s: float = QUIET_S) -> Lost | None:
    """The ranks whose journals in ``run_dir`` went silent for ``quiet_s``, grouped into
    whole nodes where every rank of a host did; None when none did, or all did."""
    now = time.time() if now is None else now
    hosts: dict[str, list[tuple[int, float]]] = {}
    for path in sorted((run_dir / FOLDER).glob("rank-*.jsonl")):
        host = _first_record_host(path)
        try:
            rank, age = int(path.stem.split("-")[1]), now - os.stat(path).st_mtime
        except (OSError, ValueError, IndexError):
            continue
        if host is not None:  # a rank that ended (its end record) is not lost
            hosts.setdefault(host, []).append((rank, -1.0 if ended(path) else age))
    silent = {h: [(r, a) for r, a in ranks if a > quiet_s] for h, ranks in hosts.items()}
    alive = sorted(r for ranks in hosts.values() for r, a in ranks if a <= quiet_s)
    if not alive or not any(silent.values()):
        return None
    parts = []
    for host, ranks in sorted(silent.items()):
        if not ranks:
            continue
        quiet = min(a for _, a in ranks)
        who = (f"node {host} ({_ranks([r for r, _ in ranks])})" if len(ranks) == len(hosts[host])
               else f"{_ranks([r for r, _ in ranks])} on {host}")
        parts.append(f"{who} stopped: no journal record or heartbeat for {quiet:.0f} s")
    return Lost("; ".join(parts), alive[0])
