"""A vector-database rank's journal (``results.journal``), so a killed run's ``dliobench
recover RUN_DIR`` builds a partial ``vectordb`` section: rank 0 writes the header (the
configuration, the run's and the index's facts) before the window, and each rank appends its
figures so far (``RankFigures.to_record``) once a second while they change, then its end
record. A rank killed with SIGKILL loses at most its last second."""

from __future__ import annotations

import contextlib
import logging
import threading
from pathlib import Path
from typing import Any

from dliobench.base.errors import DlioBenchError
from dliobench.comm.world import World
from dliobench.config.schema import Config
from dliobench.results.journal import EVERY_S, FOLDER, HEADER, Journal, journal_path
from dliobench.results.measured import RankTrace
from dliobench.results.recover import write_header
from dliobench.results.timeline import Timeline
from dliobench.results.vdb_figures import RECORD, RankFigures

log = logging.getLogger(__name__)


def header(run_dir: Path, config: Config, run: tuple[str, str], extra: dict[str, Any],
           facts: dict[str, Any], ranks: int) -> None:
    """Rank 0, before the window: what a result needs besides the ranks' figures."""
    try:
        write_header(run_dir, config, run[0], run[1], 0, extra, facts, ranks)
    except (DlioBenchError, OSError) as exc:
        log.warning("%s; a run killed before its end cannot be recovered", exc)


class VDBJournal:
    """Appends the rank's figures to its journal once a second while they change."""

    def __init__(self, run_dir: Path, world: World, figures: RankFigures,
                 every_s: float = EVERY_S) -> None:
        self.figures, self.journal = figures, None
        try:
            self.journal = Journal(journal_path(run_dir, world.rank),
                                   RankTrace(world.rank, world.host, Timeline(world.rank)),
                                   every_s)
        except OSError as exc:
            log.warning("the vector-database figures cannot be journaled (%s); a run killed "
                        "before its end cannot be recovered", exc.strerror or exc)
        self._last = -1
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(every_s,),
                                        name="vectordb-journal", daemon=True)
        self._thread.start()

    def _run(self, every_s: float) -> None:
        while not self._stop.wait(every_s):
            self.write()

    def write(self) -> None:
        """Note the figures so far (when they changed) and flush them."""
        f = self.figures
        if self.journal is None or f.lock is None:
            return
        with f.lock:
            if f.queries == self._last:
                return
            record = f.to_record()
            self._last = f.queries
        self.journal.note(RECORD, stats=record)
        self.journal.flush()

    def close(self, how: str, error: str | None = None) -> None:
        """The last figures and the end record (``complete`` or ``error``)."""
        self._stop.set()
        self._thread.join(timeout=10)
        if self.journal is not None:
            self.write()
            self.journal.close(how, error)


def drop(run_dir: Path, world: World) -> None:
    """Remove this rank's journal once the result is committed (rank 0: the header too)."""
    journal_path(run_dir, world.rank).unlink(missing_ok=True)
    if world.is_root:
        (run_dir / FOLDER / HEADER).unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        (run_dir / FOLDER).rmdir()
