"""Result folders found and read: a ``Run`` per folder (its result.json), the ``RunSet`` a
report draws from, and each run's timeline.csv with the steps its metrics count.

Only reads ``result.json`` and ``timeline.csv`` (docs/results.md, "Result files"); never reruns.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd

from dliobench.base.errors import InputError
from dliobench.report import accelerator
from dliobench.report.accelerator import Accelerator
from dliobench.report.factors import sections
from dliobench.results.files import read_result
from dliobench.results.schema import RunResult


@dataclass(frozen=True)
class Run:
    """One run folder and its parsed result.json: the one description of a run that the
    report's tables and labels and ``dliobench check`` all read (ARCHITECTURE.md, Rules
    checks), so a label and a finding never say two things of one run."""

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

    @cached_property
    def flat(self) -> dict[str, Any]:
        """``{"section.key": value}`` of the configuration (``factors.sections``)."""
        return sections(dict(self.result.get("config") or {}))

    @property
    def workload(self) -> str:
        """The workload's name (``model.name`` or the workload file's name)."""
        return str(self.result.get("workload") or self.flat.get("model.name") or "")

    @property
    def ranks(self) -> int:
        """Emulated accelerators: one per rank."""
        return int(self.result.get("ranks_count") or len(self.result.get("ranks", [])) or 1)

    @property
    def hosts(self) -> int:
        """Hosts the ranks ran on."""
        return max(1, len(self.result.get("machine", {}).get("hosts") or [None]))

    @cached_property
    def emulated(self) -> Accelerator:
        """The accelerator the run emulated and how that is known (``report.accelerator``)."""
        return accelerator.which(self.workload, dict(self.result.get("config") or {}))

    @property
    def accelerator(self) -> str:
        """The accelerator's name ("" when nothing tells)."""
        return self.emulated.name

    @property
    def accelerator_how(self) -> str:
        """How the accelerator is known, in words."""
        return self.emulated.how

    def setup(self) -> tuple[str, str, int, int]:
        """What makes runs repeats of one benchmark setup: workload, accelerator, ranks,
        hosts."""
        return self.workload, self.accelerator, self.ranks, self.hosts

    def times(self) -> tuple[dt.datetime, dt.datetime] | None:
        """(start, end) of the run, or None when the result does not say."""
        try:
            start = dt.datetime.fromisoformat(str(self.result["started_at"]))
            end = dt.datetime.fromisoformat(str(self.result["finished_at"]))
        except (KeyError, ValueError):
            return None
        return start, end

    @property
    def place(self) -> dict[str, Any] | None:
        """The run's place in its run set (``run_set``), or None for a run outside a set."""
        found: Any = self.result.get("run_set")
        return found if isinstance(found, dict) else None

    @property
    def is_warmup(self) -> bool:
        """Whether the run is its set's warm-up (not scored)."""
        return bool((self.place or {}).get("warmup"))

    @property
    def role(self) -> str:
        """Its part in a run set: ``warm-up``, ``scored 2 of 5`` (a training set's runs after
        its warm-up), ``write phase``/``read phase`` (a split checkpoint set), ``run 1 of 3``;
        "" outside a set."""
        place = self.place
        if place is None:
            return ""
        if place.get("warmup"):
            return "warm-up"
        phase = str(place.get("phase") or "")
        if phase in ("write", "read"):
            return f"{phase} phase"
        index, count = int(place.get("index") or 0), int(place.get("count") or 0)
        if phase == "training":  # its first run is the warm-up (run.runset.plan)
            return f"scored {index} of {count - 1}"
        return f"run {index + 1} of {count}"


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
