"""A rank's figures that are not steps (the KV cache's, the vector database's) appended to its
journal (``results.journal``) once a second while they change, and once more at its end, so
that ``dliobench recover`` builds a killed run's section from each rank's last record. A
journal that cannot be opened is one warning: the run goes on, and cannot be recovered."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from dliobench.comm.world import World
from dliobench.results.journal import EVERY_S, Journal, journal_path
from dliobench.results.measured import RankTrace
from dliobench.results.timeline import Timeline

log = logging.getLogger(__name__)


class FiguresJournal:
    """The thread and the journal; a subclass says what its figures are (``snapshot``).
    Subclasses set what ``snapshot`` reads before calling ``__init__`` (the thread starts
    there)."""

    kind = ""  # the record's kind, which recovery looks for
    what = ""  # the figures, as the warning names them

    def __init__(self, run_dir: Path, world: World, every_s: float = EVERY_S) -> None:
        self.journal: Journal | None = None
        try:
            self.journal = Journal(journal_path(run_dir, world.rank),
                                   RankTrace(world.rank, world.host, Timeline(world.rank)),
                                   every_s)
        except OSError as exc:
            log.warning("%s cannot be journaled (%s); a run killed before its end cannot be "
                        "recovered", self.what, exc.strerror or exc)
        self._last: Any = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(every_s,),
                                        name=f"{self.kind}-journal", daemon=True)
        self._thread.start()

    def snapshot(self, last: Any) -> tuple[Any, dict[str, Any]] | None:
        """(a mark of the figures, the record's fields) when the mark differs from ``last``,
        else None (nothing new to note)."""
        raise NotImplementedError

    def _run(self, every_s: float) -> None:
        while not self._stop.wait(every_s):
            self.write()

    def write(self) -> None:
        """Note the figures so far (when they changed) and flush them."""
        if self.journal is None:
            return
        taken = self.snapshot(self._last)
        if taken is None:
            return
        self._last, fields = taken
        self.journal.note(self.kind, **fields)
        self.journal.flush()

    def close(self, how: str, error: str | None = None) -> None:
        """The last figures and the end record (``complete`` or ``error``)."""
        self._stop.set()
        self._thread.join(timeout=10)
        if self.journal is not None:
            self.write()
            self.journal.close(how, error)
