"""Result folders found and read: a ``Run`` per folder (its result.json), the ``RunSet`` a
report draws from, and each run's timeline.csv with the steps its metrics count.

Only reads ``result.json`` and ``timeline.csv`` (docs/results.md, "Result files"); never reruns.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from dliobench.base.errors import InputError
from dliobench.results.files import read_result
from dliobench.results.schema import RunResult


@dataclass(frozen=True)
class Run:
    """One run folder and its parsed result.json."""

    path: Path
    result: RunResult

    @property
    def run_id(self) -> str:
        """The run's id (the folder name when the result lacks one)."""
        return str(self.result.get("run_id") or self.path.name)

    def config(self, key: str, default: Any = None) -> Any:
        """A dotted config value, e.g. ``reader.read_threads``."""
        node: Any = self.result.get("config", {})
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        return node


@dataclass(frozen=True)
class RunSet:
    """Runs, their table, and what differs between them.

    ``factors`` groups the differing keys that always change together (e.g. samples per file,
    file count and data folder of a layout comparison), so each group is one variable.
    """

    runs: list[Run]
    table: pd.DataFrame
    differing: list[str]
    factors: list[tuple[str, ...]]


def _is_run(folder: Path) -> bool:
    return (folder / "result.json").is_file()


def find_run_dirs(paths: Iterable[str | Path]) -> list[Path]:
    """Run folders named directly, or found below folders that contain runs (sweeps, reports/)."""
    found: list[Path] = []
    for given in map(Path, paths):
        if given.is_file() and given.name == "result.json":  # the result file itself
            given = given.parent
        if _is_run(given):
            found.append(given)
            continue
        if (given / "journal" / "run.json").is_file():  # a killed job's: results.recover
            raise InputError(f"{given}: no result.json, but the journals of a killed run; "
                             f"`dliobench recover {given}` assembles its partial result")
        if not given.is_dir():
            what = "a file, not a folder" if given.exists() else "no such folder"
            raise InputError(f"{given}: {what}; give run folders (with a result.json) or "
                             "folders that contain them")
        below = []
        for root, dirs, files in os.walk(given):
            if "result.json" in files:
                below.append(Path(root))
                dirs.clear()  # a run folder holds no further runs
            dirs.sort()
        if not below:
            raise InputError(f"{given}: no result.json in it or in its subfolders, so it "
                             "holds no dliobench runs")
        found.extend(below)
    unique = {p.resolve(): p for p in found}
    return sorted(unique.values(), key=lambda p: p.name)


def load_runs(paths: Iterable[str | Path]) -> list[Run]:
    """Every run below ``paths``, in run-id (= start time) order."""
    runs = []
    for folder in find_run_dirs(paths):
        try:
            runs.append(Run(folder, read_result(folder)))
        except (OSError, json.JSONDecodeError) as exc:
            raise InputError(f"{folder / 'result.json'} cannot be read ({exc}); "
                             "leave that folder out") from exc
    return sorted(runs, key=lambda r: r.run_id)


def load_timeline(run: Run) -> pd.DataFrame | None:
    """The run's timeline.csv, or None when the run has none."""
    path = run.path / "timeline.csv"
    if not path.is_file():
        return None
    return pd.read_csv(path)


def counted_mask(run: Run, timeline: pd.DataFrame) -> pd.Series:
    """Which rows of the run's timeline the metrics count: its ``counted`` column, or for
    timelines written before it existed, the steps left after the run's exclusions."""
    if "counted" in timeline:
        return timeline["counted"].astype(bool)
    start = int(run.config("metric.exclude_start_steps", 1))
    end = int(run.config("metric.exclude_end_steps", 0))
    mask = pd.Series(False, index=timeline.index)
    mask[counted_steps(timeline, start, end).index] = True
    return mask


def counted_steps(timeline: pd.DataFrame, exclude_start: int, exclude_end: int) -> pd.DataFrame:
    """The steps the metrics count: per rank and epoch, without the first/last excluded ones."""
    by = timeline.groupby(["rank", "epoch"], sort=False)
    pos = by.cumcount()
    size = by["step"].transform("size")
    return timeline[(pos >= exclude_start) & (pos < size - exclude_end)]
