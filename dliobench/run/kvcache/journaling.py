"""A KV-cache rank's journal (``results.journal``), so that a killed run's ``dliobench
recover RUN_DIR`` builds a partial ``kvcache`` result: rank 0 writes the header (the
configuration, the run's facts and the ``kvcache`` facts) before serving, and each rank
appends its figures so far (``KVStats.to_record``) once a second while they change, then
its end record. A rank killed with SIGKILL loses at most its last second."""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path
from typing import Any

from dliobench.base.errors import DlioBenchError
from dliobench.comm.world import World
from dliobench.config.schema import Config
from dliobench.results.figures_journal import FiguresJournal
from dliobench.results.journal import EVERY_S, FOLDER
from dliobench.results.journal import drop as drop_journal
from dliobench.results.kv_recover import RECORD
from dliobench.results.kv_stats import KVStats
from dliobench.results.recover import RECOVER_HINT, write_header

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


class KVJournal(FiguresJournal):
    """Appends the rank's ``stats`` to its journal once a second while they change."""

    kind, what = RECORD, "the KV-cache figures"

    def __init__(self, run_dir: Path, world: World, stats: KVStats,
                 every_s: float = EVERY_S) -> None:
        self.stats = stats
        super().__init__(run_dir, world, every_s)

    def snapshot(self, last: Any) -> tuple[Any, dict[str, Any]] | None:
        s = self.stats
        assert s.lock is not None
        with s.lock:
            mark = (s.requests, s.unfinished, s.cancelled,
                    sum(o.bytes for o in s.reads.values()),
                    sum(o.bytes for o in s.writes.values()))
            if mark == last:
                return None
            record = s.to_record()
        if not record["elapsed_s"] and s.started_at:  # still serving: the time so far
            record["elapsed_s"] = min(time.perf_counter() - s.started_at, s.window_s or math.inf)
        return mark, {"stats": record, "at": time.time()}

def drop(run_dir: Path, world: World) -> None:
    """Remove this rank's journal once the result is committed (``results.journal.drop``)."""
    drop_journal(run_dir, world.rank, world.is_root)
