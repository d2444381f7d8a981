"""Each rank's measurements, journaled to the run folder as they are taken.

Like the dataset manifest's journals (``dataset.manifest``): one append-only file per rank,
``<run>/journal/rank-NNNNN.jsonl``, whose records are whole or absent. A record is one line,
``<CRC-32 of the JSON, 8 hex> <JSON>``; a torn last line (the process died while writing it)
fails its check and is ignored. Rank 0 writes ``<run>/journal/run.json`` before training:
the configuration and the run's facts, so that the journals alone make a result
(``results.recover``) when nothing of the job is left to gather them.

The training loop pays nothing per step: a rank's ``Journal`` watches its ``RankTrace`` and,
at most once a second (``EVERY_S``), a thread appends what the trace gained since the last
time (steps, epoch checks, checkpoints) and fsyncs. A rank killed with SIGKILL loses at most
its last second. With nothing new, the thread touches the journal instead (its mtime: a
heartbeat, so that ``results.lost`` tells a gone rank from one blocked at a collective). Its
last record, ``end``, says how the rank ended.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import threading
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dliobench.results.hostcpu import HostCpu
from dliobench.results.measured import CheckpointEvent, EpochCheck, RankTrace
from dliobench.results.timeline import Timeline
from dliobench.storage.devreads import DeviceReads
from dliobench.storage.latency import LatencyLog

log = logging.getLogger(__name__)

FOLDER = "journal"
HEADER = "run.json"
EVERY_S = 1.0  # a killed rank loses at most about this much of its measurements
ROWS_PER_RECORD = 128  # steps per record: each encoded in about 0.4 ms, the GIL let go after


def journal_path(run_dir: Path, rank: int) -> Path:
    """The journal of ``rank`` in the run folder ``run_dir``."""
    return run_dir / FOLDER / f"rank-{rank:05d}.jsonl"


def drop(run_dir: Path, rank: int, root: bool) -> None:
    """Remove ``rank``'s journal once the run's result is committed (rank 0, ``root``: the
    header too), and the journal folder when it is left empty."""
    journal_path(run_dir, rank).unlink(missing_ok=True)
    if root:
        (run_dir / FOLDER / HEADER).unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        (run_dir / FOLDER).rmdir()


def last_records(run_dir: Path, kind: str) -> list[dict[str, Any]]:
    """Each rank's last whole record of ``kind`` (its ``stats``) in the journals of
    ``run_dir``, in rank order; torn lines are skipped, ranks with none left out."""
    out = []
    for path in sorted((run_dir / FOLDER).glob("rank-*.jsonl")):
        found = None
        with open(path, "rb") as handle:
            for line in handle:
                record = decode(line)
                if record is not None and record["k"] == kind:
                    found = record["stats"]
        if found is not None:
            out.append(found)
    return out


def encode(record: dict[str, Any]) -> bytes:
    """One record as its line: CRC-32 of the JSON, the JSON, a newline."""
    payload = json.dumps(record, separators=(",", ":"), default=_plain).encode()
    return b"%08x %s\n" % (zlib.crc32(payload), payload)


def _plain(value: Any) -> Any:
    """A numpy scalar (a sample count, a check's verdict) as the Python value it holds."""
    return value.item()


def decode(line: bytes) -> dict[str, Any] | None:
    """The record of one line, or None when the line is torn or damaged."""
    if not line.endswith(b"\n") or len(line) < 11 or line[8:9] != b" ":
        return None
    payload = line[9:-1]
    try:
        if int(line[:8], 16) != zlib.crc32(payload):
            return None
        record = json.loads(payload)
    except ValueError:
        return None
    return record if isinstance(record, dict) and "k" in record else None


class Journal:
    """One rank's journal: what ``trace`` gains is appended once a second, durably."""

    def __init__(self, path: Path, trace: RankTrace, every_s: float = EVERY_S) -> None:
        self.path, self.trace = path, trace
        self.failed: str | None = None  # why the journal stopped (a full disk): said once
        self._sent = {"steps": 0, "checks": 0, "checkpoints": 0}
        self._notes: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd: int | None = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self.note("start", rank=trace.rank, host=trace.host, pid=os.getpid(), at=time.time(),
                  machine_id=trace.machine_id, memory_bytes=trace.memory_bytes)
        self.flush()
        self._thread = threading.Thread(target=self._run, args=(every_s,), name="journal",
                                        daemon=True)
        self._thread.start()

    def note(self, kind: str, **fields: Any) -> None:
        """Queue a record for the next flush (rare ones: the rank's progress, its end)."""
        with self._lock:
            self._notes.append({"k": kind, **fields})

    def progress(self, cpu: tuple[float, float, float], requests: LatencyLog | None,
                 reads: DeviceReads | None, deviations: list[str],
                 host_cpu: HostCpu | None = None) -> None:
        """The rank's figures so far: CPU use (seconds, over wall seconds, cores), its
        object-store requests since the last call, its device-read counter, its host's CPUs
        over the counted windows."""
        self.note("rank", cpu_s=cpu[0], cpu_wall_s=cpu[1], cpu_cores=cpu[2],
                  requests=requests.as_ints() if requests is not None else None,
                  device_reads=dataclasses.asdict(reads) if reads is not None else None,
                  deviations=list(deviations),
                  host_cpu=dataclasses.asdict(host_cpu) if host_cpu is not None else None)

    def _run(self, every_s: float) -> None:
        while not self._stop.wait(every_s):
            self.flush()

    def _fresh(self) -> Iterator[dict[str, Any]]:
        """The records of what the trace gained since the last flush, and the notes."""
        rows, sent = self.trace.timeline.rows, self._sent
        end = len(rows)
        for start in range(sent["steps"], end, ROWS_PER_RECORD):
            yield {"k": "steps", "rows": rows[start:min(end, start + ROWS_PER_RECORD)],
                   "at": time.time()}
        sent["steps"] = end
        for name, kind in (("checks", "epoch"), ("checkpoints", "ckpt")):
            items = getattr(self.trace, name)
            n = len(items)
            for item in items[sent[name]:n]:
                yield {"k": kind, **dataclasses.asdict(item)}
            sent[name] = n
        notes, self._notes = self._notes, []
        yield from notes

    def flush(self) -> None:
        """Append and fsync what is new (a journal that cannot be written stops, once said)."""
        with self._lock:
            if self._fd is None:
                return
            data = b"".join(_yielding(encode(r) for r in self._fresh()))
            if not data:  # a heartbeat: the process lives (``results.lost`` reads it)
                with contextlib.suppress(OSError):
                    os.utime(self._fd)
                return
            try:
                while data:  # a short write (a disk filling up) goes on where it stopped
                    data = data[os.write(self._fd, data):]
                os.fsync(self._fd)
            except OSError as exc:
                self.failed = f"{self.path}: {exc.strerror or exc}"
                log.warning("the measurements can no longer be journaled (%s); the run goes "
                            "on, and its result is written at its end", self.failed)
                os.close(self._fd)
                self._fd = None

    def close(self, how: str, error: str | None = None) -> None:
        """The rank's last record: ``how`` it ended (``complete``, ``error``, ``stalled``)
        and why; everything is flushed first. Safe to call twice (the first call wins)."""
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=10)
        with self._lock:
            if self._fd is None:
                return
        self.note("end", how=how, error=error, at=time.time())
        self.flush()
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


def _yielding(lines: Iterator[bytes]) -> Iterator[bytes]:
    """``lines``, letting other threads have the GIL after each: the training loop must not
    wait for the journal's encoding (``time.sleep(0)`` releases it)."""
    for line in lines:
        yield line
        time.sleep(0)


@dataclass
class RankJournal:
    """What one rank's journal holds, read back."""

    rank: int
    trace: RankTrace
    pid: int | None = None
    started_at: float | None = None
    last_at: float | None = None  # wall-clock time of its last record
    end: dict[str, Any] | None = None  # its end record; None: it died (or still runs)
    damaged: int = 0  # lines that failed their check (a torn last line: 1)
    extra: dict[str, Any] = field(default_factory=dict)


def read_journal(path: Path) -> RankJournal:
    """Rebuild a rank's trace from its journal; torn or damaged lines are left out."""
    rank = int(path.stem.split("-")[1])
    trace = RankTrace(rank, "", Timeline(rank))
    out = RankJournal(rank, trace)
    requests = LatencyLog()
    with open(path, "rb") as handle:
        for line in handle:
            record = decode(line)
            if record is None:
                out.damaged += 1
                continue
            _apply(out, record, requests)
    trace.requests = requests if requests.count else None
    return out


def _apply(out: RankJournal, record: dict[str, Any], requests: LatencyLog) -> None:
    """Add one record to the rank's rebuilt trace."""
    kind, trace = record.pop("k"), out.trace
    out.last_at = record.get("at", out.last_at)
    if kind == "start":
        trace.host, out.pid, out.started_at = record["host"], record["pid"], record["at"]
        trace.machine_id = record.get("machine_id", "")
        trace.memory_bytes = record.get("memory_bytes", 0)
    elif kind == "steps":
        trace.timeline.rows.extend(tuple(r) for r in record["rows"])
    elif kind == "epoch":
        trace.checks.append(EpochCheck(**record))
    elif kind == "ckpt":
        trace.checkpoints.append(CheckpointEvent(**record))
    elif kind == "rank":
        trace.cpu_s, trace.cpu_wall_s = record["cpu_s"], record["cpu_wall_s"]
        trace.cpu_cores, trace.deviations = record["cpu_cores"], record["deviations"]
        if record["requests"]:
            requests.merge(LatencyLog.from_ints(record["requests"]))
        reads = record["device_reads"]
        trace.device_reads = DeviceReads(**reads) if reads else None
        cpu = record.get("host_cpu")  # journals before 1.12 have none
        trace.host_cpu = HostCpu(cpu["busy"], cpu["total"], tuple(cpu["cpus"])) if cpu else None
    elif kind == "end":
        out.end = record
        trace.error = record["error"]


def read_journals(run_dir: Path) -> list[RankJournal]:
    """Every rank's journal in the run folder, by rank."""
    paths = sorted((run_dir / FOLDER).glob("rank-*.jsonl"))
    out = []
    for path in paths:
        with contextlib.suppress(ValueError, IndexError):
            out.append(read_journal(path))
    return sorted(out, key=lambda j: j.rank)


def ended(path: Path) -> bool:
    """Whether the journal at ``path`` ends with its rank's end record (its tail only)."""
    try:
        with open(path, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - 4096))
            tail = handle.read()
    except OSError:
        return False
    lines = tail.splitlines(keepends=True)
    record = decode(lines[-1]) if lines else None
    return record is not None and record["k"] == "end"
