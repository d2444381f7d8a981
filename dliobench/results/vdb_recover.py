"""A killed vector-database run's ``vectordb`` section from its ranks' journals (``dliobench
recover``): each rank's last figures record read back (``journaling`` appends one a second),
merged as a finished run's are (``figures.section``; latencies from the ranks' journaled
percentiles), with the facts rank 0 put in the header."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dliobench.results.journal import FOLDER, decode
from dliobench.results.vdb_figures import RECORD, RankFigures, attach


def last_figures(path: Path) -> RankFigures | None:
    """The rank's last whole figures record in its journal (torn lines left out)."""
    found = None
    with open(path, "rb") as handle:
        for line in handle:
            record = decode(line)
            if record is not None and record["k"] == RECORD:
                found = record["stats"]
    return None if found is None else RankFigures.from_record(found)


def add_section(result: Any, run_dir: Path, facts: dict[str, Any], min_recall: float,
                cpu_floor: float | None) -> Any:
    """Put the ``vectordb`` section the journals in ``run_dir`` hold into ``result``."""
    ranks = [f for p in sorted((run_dir / FOLDER).glob("rank-*.jsonl"))
             if (f := last_figures(p)) is not None]
    return attach(result, ranks, facts.get("vectordb") or {}, min_recall, cpu_floor)
