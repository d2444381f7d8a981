"""A vector-database rank's journal (``results.journal``), so a killed run's ``dliobench
recover RUN_DIR`` builds a partial ``vectordb`` section: rank 0 writes the header (the
configuration, the run's and the index's facts) before the window, and each rank appends its
figures so far (``RankFigures.to_record``) once a second while they change, then its end
record. A rank killed with SIGKILL loses at most its last second."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from dliobench.base.errors import DlioBenchError
from dliobench.comm.world import World
from dliobench.config.schema import Config
from dliobench.results.figures_journal import FiguresJournal
from dliobench.results.journal import EVERY_S
from dliobench.results.journal import drop as drop_journal
from dliobench.results.recover import write_header
from dliobench.results.vdb_figures import RECORD, RankFigures

log = logging.getLogger(__name__)


def header(run_dir: Path, config: Config, run: tuple[str, str], extra: dict[str, Any],
           facts: dict[str, Any], ranks: int) -> None:
    """Rank 0, before the window: what a result needs besides the ranks' figures."""
    try:
        write_header(run_dir, config, run[0], run[1], 0, extra, facts, ranks)
    except (DlioBenchError, OSError) as exc:
        log.warning("%s; a run killed before its end cannot be recovered", exc)


class VDBJournal(FiguresJournal):
    """Appends the rank's figures to its journal once a second while they change."""

    kind, what = RECORD, "the vector-database figures"

    def __init__(self, run_dir: Path, world: World, figures: RankFigures,
                 every_s: float = EVERY_S) -> None:
        self.figures = figures
        super().__init__(run_dir, world, every_s)

    def snapshot(self, last: Any) -> tuple[Any, dict[str, Any]] | None:
        f = self.figures
        if f.lock is None:
            return None
        with f.lock:
            if f.queries == last:
                return None
            return f.queries, {"stats": f.to_record()}

def drop(run_dir: Path, world: World) -> None:
    """Remove this rank's journal once the result is committed (``results.journal.drop``)."""
    drop_journal(run_dir, world.rank, world.is_root)
