"""A run's result assembled from its ranks' journals (``results.journal``).

The same assembly serves a surviving rank when the job ends early (a rank failed, stalled,
or was killed) and ``dliobench recover RUN_DIR`` on a folder a killed job left: the
journals on disk and the header rank 0 wrote before training are all it needs. The result
names, per launched rank, where its records end and why (``ranks_ended``).
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import Any

from dliobench.base.errors import InputError
from dliobench.config.load import layer_from_mapping, resolve
from dliobench.config.schema import Config
from dliobench.results.assemble import build_result
from dliobench.results.files import (
    RESULT_NAME,
    config_dict,
    write_json,
    write_leaf_outputs,
    write_result,
)
from dliobench.results.journal import FOLDER, HEADER, RankJournal, read_journals
from dliobench.results.kv_recover import add_section
from dliobench.results.schema import RunResult
from dliobench.results.timeline import write_csv
from dliobench.storage.posix_io import read_text

RECOVER_HINT = "`dliobench recover {}` assembles what the ranks measured from their journals"


def write_header(run_dir: Path, config: Config, run_id: str, started: str,
                 dataset_bytes: int, extra: dict[str, Any], facts: dict[str, Any],
                 launched: int) -> None:
    """Rank 0, before training: what a result needs besides the ranks' measurements."""
    doc = {"run_id": run_id, "started_at": started, "ranks_launched": launched,
           "dataset_bytes": dataset_bytes, "config": config_dict(config), "facts": facts,
           "extra": extra}
    (run_dir / FOLDER).mkdir(parents=True, exist_ok=True)
    write_json(run_dir / FOLDER / HEADER, doc)


def _read_header(run_dir: Path) -> dict[str, Any]:
    import json

    path = run_dir / FOLDER / HEADER
    try:
        doc = json.loads(read_text(path))
    except FileNotFoundError:
        raise InputError(f"{run_dir}: no {FOLDER}/{HEADER} in it: the run ended before "
                         "training (nothing was measured) or it is not a dliobench run "
                         "folder") from None
    except (OSError, ValueError) as exc:
        raise InputError(f"{path} cannot be read ({exc}); nothing can be recovered from "
                         f"{run_dir}") from None
    if not isinstance(doc, dict) or not {"run_id", "config", "facts"} <= set(doc):
        raise InputError(f"{path} is not a dliobench journal header; nothing can be "
                         f"recovered from {run_dir}")
    return doc


def config_from_dict(doc: dict[str, Any]) -> Config:
    """The run's configuration from its resolved (redacted) form in the header."""
    from dataclasses import replace

    dataset = dict(doc.get("dataset") or {})
    # values a run sets itself that a user may not type: an existing dataset of the user's
    # own files is read with layout "own" (dataset.existing), which the schema's choices
    # leave out; resolve with the user's "auto", then put the run's value back
    layout = dataset.get("layout")
    if layout == "own":
        doc = {**doc, "dataset": {**dataset, "layout": "auto"}}
    config, _ = resolve([layer_from_mapping(doc, "the run's journal header")])
    folder = dataset.get("data_folder")
    if folder and folder != config.dataset.data_folder:  # storage_root was applied already
        config = replace(config, dataset=replace(config.dataset, data_folder=folder))
    if layout == "own":
        config = replace(config, dataset=replace(config.dataset, layout="own"))
    return config


def _iso(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    return dt.datetime.fromtimestamp(seconds, dt.timezone.utc).isoformat(timespec="seconds")


def rank_ending(journal: RankJournal | None, rank: int) -> dict[str, Any]:
    """Where one rank's records end and why, for ``ranks_ended``."""
    if journal is None:
        return {"rank": rank, "steps": 0, "last_step": None, "ended": "no journal",
                "why": "no journal: the rank never started training (or its node's "
                       "output folder is not this one)"}
    rows = journal.trace.timeline.rows
    last = rows[-1] if rows else None
    out: dict[str, Any] = {
        "rank": rank, "host": journal.trace.host, "steps": len(rows),
        "last_step": {"epoch": last[0], "step": last[1], "t_start_s": last[2]} if last else None,
        "last_record_at": _iso(journal.last_at)}
    end = journal.end
    if end is None:
        out["ended"] = "no end record"
        out["why"] = ("its journal stops without an end record: the process was killed (or "
                      "stopped, or still ran when this was assembled); what it measured in "
                      "its last second at most is missing")
    else:
        out["ended"] = end["how"]
        out["why"] = end["error"] or "training completed"
        if end["how"] == "lost a peer":
            out["why"] = f"another rank ended first (its connection closed): {end['error']}"
    if journal.damaged:
        out["damaged_records"] = journal.damaged
    return out


def assemble(run_dir: Path) -> tuple[RunResult, list[Any]]:
    """The result of a run folder from its journals, and the ranks' timelines."""
    header = _read_header(run_dir)
    journals = {j.rank: j for j in read_journals(run_dir)}
    if not journals:
        raise InputError(f"{run_dir}: no rank journaled anything; there is nothing to "
                         "recover")
    config = config_from_dict(header["config"])
    launched = int(header.get("ranks_launched") or len(journals))
    endings = [rank_ending(journals.get(r), r) for r in range(max(launched, *journals) + 1)
               if r < launched or r in journals]
    complete = all(e["ended"] == "complete" for e in endings)
    traces = [journals[r].trace for r in sorted(journals)]
    now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    extra = {**header.get("extra", {}), "ranks_launched": launched, "ranks_ended": endings}
    result = build_result(config, header["run_id"], "complete" if complete else "partial",
                          traces, header.get("started_at", ""), now,
                          int(header.get("dataset_bytes") or 0), extra, header["facts"])
    if config.workflow.kvcache:  # its figures are in records of its own
        result = add_section(result, run_dir, header["facts"])
    if config.workflow.vectordb:
        from dliobench.results.vdb_recover import add_section as add_vdb

        busy = config.metric.client_cpu_busy
        result = add_vdb(result, run_dir, header["facts"], config.vectordb.min_recall,
                         None if busy == "off" else float(busy))
    return result, [t.timeline for t in traces]


def held(result: RunResult) -> str:
    """Whose measurements a result holds, in words: ``rank 0``, ``ranks 0, 2`` or ``no
    rank``."""
    ranks = [str(r["rank"]) for r in result["ranks"]]
    if not ranks:
        return "no rank"
    return f"rank{'s' if len(ranks) > 1 else ''} {', '.join(ranks)}"


def recover(run_dir: Path) -> tuple[Path, RunResult]:
    """Assemble the run folder's result from its journals and commit ``result.json`` and
    ``timeline.csv`` there (each atomically: ranks may do this at once)."""
    result, timelines = assemble(run_dir)
    config = result["config"]
    metric = config.get("metric", {})
    tmp = run_dir / f".timeline.csv.{os.getpid()}"
    write_csv(tmp, timelines, metric.get("exclude_start_steps", 1),
              metric.get("exclude_end_steps", 0))
    os.replace(tmp, run_dir / "timeline.csv")
    write_result(run_dir, result)
    write_leaf_outputs(run_dir, result, timelines)  # a complete one, under mlpstorage's layout
    return run_dir / RESULT_NAME, result
