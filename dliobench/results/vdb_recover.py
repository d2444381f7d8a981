"""A killed vector-database run's ``vectordb`` section from its ranks' journals (``dliobench
recover``): each rank's last figures record read back (``journaling`` appends one a second),
merged as a finished run's are (``figures.section``; latencies from the ranks' journaled
percentiles), with the facts rank 0 put in the header."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dliobench.results.journal import last_records
from dliobench.results.vdb_figures import RECORD, RankFigures, attach


def add_section(result: Any, run_dir: Path, facts: dict[str, Any], min_recall: float,
                cpu_floor: float | None) -> Any:
    """Put the ``vectordb`` section the journals in ``run_dir`` hold into ``result``."""
    ranks = [RankFigures.from_record(r) for r in last_records(run_dir, RECORD)]
    return attach(result, ranks, facts.get("vectordb") or {}, min_recall, cpu_floor)
