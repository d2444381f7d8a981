"""A killed KV-cache run's ``kvcache`` section, from its ranks' journals (``dliobench
recover``): each rank's last figures record (``run/kvcache/journaling.py`` appends one a
second while they change) read back as its ``KVStats``, merged and summarized as a finished
run's are (``kv_section.attach``), with the ``kvcache`` facts rank 0 put in the header."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dliobench.results.journal import last_records
from dliobench.results.kv_section import attach
from dliobench.results.kv_stats import KVStats

RECORD = "kvcache"  # the kind of a rank's figures record


def add_section(result: Any, run_dir: Path, facts: dict[str, Any]) -> Any:
    """Put the ``kvcache`` section the journals in ``run_dir`` hold into ``result``."""
    stats = [KVStats.from_record(r) for r in last_records(run_dir, RECORD)]
    return attach(result, stats, facts.get("kvcache") or {})
