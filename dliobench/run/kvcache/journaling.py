"""A KV-cache rank's journal (``results.journal``), so that a killed run's ``dliobench
recover RUN_DIR`` builds a partial ``kvcache`` result: rank 0 writes the header (the
configuration, the run's facts and the ``kvcache`` facts) before serving, and each rank
appends its figures so far (``KVStats.to_record``) once a second while they change, then
its end record. A rank killed with SIGKILL loses at most its last second."""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from pathlib import Path
from typing import Any

from dliobench.base.errors import DlioBenchError
from dliobench.comm.world import World
from dliobench.config.schema import Config
from dliobench.results.journal import EVERY_S, FOLDER, HEADER, Journal, journal_path
from dliobench.results.kv_recover import RECORD
from dliobench.results.kv_stats import KVStats
from dliobench.results.measured import RankTrace
from dliobench.results.recover import RECOVER_HINT, write_header
from dliobench.results.timeline import Timeline

log = logging.getLogger(__name__)


def header(run_dir: Path, config: Config, run: tuple[str, str], extra: dict[str, Any],
           facts: dict[str, Any], ranks: int) -> None:
    """Rank 0, before serving: what a result needs besides the ranks' figures. ``run``:
    (id, start time). A header that cannot be written costs ``recover``, not the run."""
    try:
        write_header(run_dir, config, run[0], run[1], 0, extra, facts, ranks)
    except (DlioBenchError, OSError) as exc:
        log.warning("%s; a run killed before its end cannot be recovered", exc)
        return
    log.debug("the ranks journal their figures in %s; should the job be killed, %s",
              run_dir / FOLDER, RECOVER_HINT.format(run_dir))


class KVJournal:
    """Appends the rank's ``stats`` to its journal once a second while they change."""

    def __init__(self, run_dir: Path, world: World, stats: KVStats,
                 every_s: float = EVERY_S) -> None:
        self.stats, self.every_s = stats, every_s
        self.journal: Journal | None = None
        try:
            self.journal = Journal(journal_path(run_dir, world.rank),
                                   RankTrace(world.rank, world.host, Timeline(world.rank)),
                                   every_s)
        except OSError as exc:
            log.warning("the KV-cache figures cannot be journaled (%s); a run killed before "
                        "its end cannot be recovered", exc.strerror or exc)
        self._last: tuple[Any, ...] = ()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kvcache-journal", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self.write()

    def write(self) -> None:
        """Note the figures so far (when they changed) and flush them."""
        if self.journal is None:
            return
        s = self.stats
        assert s.lock is not None
        with s.lock:
            mark = (s.requests, s.unfinished, s.cancelled,
                    sum(o.bytes for o in s.reads.values()),
                    sum(o.bytes for o in s.writes.values()))
            if mark == self._last:
                return
            record = s.to_record()
        self._last = mark
        if not record["elapsed_s"] and s.started_at:  # still serving: the time so far
            record["elapsed_s"] = min(time.perf_counter() - s.started_at, s.window_s or math.inf)
        self.journal.note(RECORD, stats=record, at=time.time())
        self.journal.flush()

    def close(self, how: str, error: str | None = None) -> None:
        """The last figures and the end record (``complete`` or ``error``)."""
        self._stop.set()
        self._thread.join(timeout=10)
        if self.journal is not None:
            self.write()
            self.journal.close(how, error)


def drop(run_dir: Path, world: World) -> None:
    """Remove this rank's journal once the run's result is committed (rank 0: the header
    too), and the folder when it is left empty."""
    journal_path(run_dir, world.rank).unlink(missing_ok=True)
    if world.is_root:
        (run_dir / FOLDER / HEADER).unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        (run_dir / FOLDER).rmdir()
