"""Result folders -> one pandas table (a row per run) and the config values that differ.

Only reads ``result.json`` and ``timeline.csv`` (docs/results.md, "Result files"); never reruns.
Columns carry their unit in the name (``mb_per_s`` = 10^6 B/s, ``wait_p50_ms``).
"""

from __future__ import annotations

import json
import logging
import math
import numbers
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from dliobench.errors import DlioBenchError, InputError
from dliobench.report.factors import PATH_KEYS, differing_keys, factors_of, flatten
from dliobench.results.files import read_result
from dliobench.results.schema import RunResult
from dliobench.results.storage_reads import made_storage_reads_by, page_cache_possible
from dliobench.results.verdict import verdict_words

log = logging.getLogger(__name__)

# Keys that differ between runs without changing what was measured (``accelerators`` holds
# the profiles; the one in use is resolved into train.computation_time and metric.au).
IGNORED_KEYS = frozenset({"output.folder", "output.label"})
IGNORED_SECTIONS = ("accelerators",)


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


def _settings(run: Run) -> dict[str, Any]:
    """What the run was asked to do: its flattened config plus the workload name."""
    flat = flatten(run.result.get("config", {}))
    flat["workload"] = run.result.get("workload")
    return {k: v for k, v in flat.items()
            if k not in IGNORED_KEYS and k.split(".", 1)[0] not in IGNORED_SECTIONS}


def short(key: str) -> str:
    """A config key without its section, for labels."""
    return key.rsplit(".", 1)[-1]


def _mb(x: Any) -> float | None:
    return None if x is None else x / 1e6


def _ms(x: Any) -> float | None:
    return None if x is None else x * 1e3


NUMERIC = ("au", "au_min", "au_floor", "samples_per_s", "mb_per_s", "wait_p50_ms",
           "wait_p99_ms")


def _row(run: Run) -> dict[str, Any]:
    """The headline columns of one run."""
    res, m = run.result, run.result.get("metrics") or {}
    machine = res.get("machine") or {}
    return {
        "run_id": run.run_id, "workload": res.get("workload"), "status": res.get("status"),
        "ranks": res.get("ranks_count", len(res.get("ranks") or []) or None),
        "accelerator": run.config("train.accelerator") or "custom",
        "compute_s_per_batch": run.config("train.computation_time"),
        "loader": run.config("reader.data_loader"), "format": run.config("dataset.format"),
        "samples_per_file": run.config("dataset.num_samples_per_file"),
        "subfolders": run.config("dataset.num_subfolders_train"),
        "file_access": run.config("reader.file_access"),
        "read_threads": run.config("reader.read_threads"),
        "batch": run.config("reader.batch_size"),
        "au": m.get("au"), "verdict": verdict_words(res["verdict"]) if res.get("verdict") else "",
        "au_min": m.get("au_min"), "au_floor": run.config("metric.au"),
        "samples_per_s": m.get("samples_per_s"), "mb_per_s": _mb(m.get("bytes_per_s")),
        "wait_p50_ms": _ms(m.get("wait_p50_s")), "wait_p99_ms": _ms(m.get("wait_p99_s")),
        **_checkpoint_rates(res.get("checkpoint") or {}),
        "page_cache_possible": page_cache_possible(res),
        "reads_from_storage": _storage_words(res),
        "dliobench_version": res.get("dliobench_version"), "commit": res.get("commit"),
        "hosts": " ".join(machine.get("hosts") or [machine.get("host") or ""]).strip(),
    }


def _storage_words(result: RunResult) -> str:
    """The run's console line "reads from storage": ``yes (evicted)``, ``not ensured``, or
    empty when it measured no reads."""
    possible = page_cache_possible(result)
    if possible is None:
        return ""
    return "not ensured" if possible else f"yes ({made_storage_reads_by(result)})"


def _checkpoint_rates(ckpt: dict[str, Any]) -> dict[str, float | None]:
    """Checkpoint write and read GB/s of either workflow, when the run wrote checkpoints."""
    if not ckpt:
        return {}
    if ckpt.get("workflow") == "checkpoint-only":
        rates = [(ckpt.get(op) or {}).get("aggregate_bytes_per_s") for op in ("write", "read")]
    else:
        rates = [ckpt.get("write_bytes_per_s"), ckpt.get("read_bytes_per_s")]
    return {"ckpt_write_gb_per_s": None if rates[0] is None else rates[0] / 1e9,
            "ckpt_read_gb_per_s": None if rates[1] is None else rates[1] / 1e9}


# Keys that name a factor best, first first (a workload says more than its 20 keys).
TELLING = ("workload", "reader.data_loader", "dataset.format", "dataset.num_samples_per_file",
           "dataset.num_subfolders_train", "reader.file_access", "reader.read_threads",
           "reader.batch_size", "train.accelerator", "train.computation_time")


def fmt_value(key: str, value: Any) -> str:
    """A config value for a label; byte counts in binary units (4 MiB); missing as "unset"."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "unset"
    integral = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if key.endswith("bytes") and integral and abs(value) >= 1024:
        for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
            if abs(value) >= size and (value % (size // 16) == 0 or abs(value) >= 10 * 2**10):
                return f"{value / size:.4g} {unit}"
        return f"{value:,} B"
    if key.endswith("time") and isinstance(value, float):
        return f"{value:g} s"
    return str(value)


def plural(n: Any, word: str) -> str:
    """``1 rank``, ``4 ranks``."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def telling_keys(factor: tuple[str, ...]) -> list[str]:
    """The (at most two) keys that name a factor: the workload alone, else no paths."""
    if "workload" in factor:
        return ["workload"]
    keys = [k for k in factor if k not in PATH_KEYS] or list(factor)
    rank = {k: i for i, k in enumerate(TELLING)}
    return sorted(keys, key=lambda k: rank.get(k, len(rank)))[:2]


def factor_name(factor: tuple[str, ...]) -> str:
    """Short names of a factor's telling keys, ``...`` when it has more keys."""
    keys = telling_keys(factor)
    more = len(factor) > len(keys) and "workload" not in factor
    return " / ".join(short(k) for k in keys) + (" / ..." if more else "")


def factor_text(factor: tuple[str, ...], row: pd.Series) -> str:
    """``key=value`` of a factor's telling keys."""
    return ", ".join(f"{short(k)}={fmt_value(k, row[k])}" for k in telling_keys(factor))


def label_parts(table: pd.DataFrame, factor: tuple[str, ...]) -> list[str] | None:
    """Each run's part of its sweep label (``file per sample / 4 threads``) that names its
    value of ``factor``: the part that splits the runs exactly as the factor does, or None."""
    split = [str(lab or "").split(" / ") for lab in table["user_label"]]
    values = [str(v) for v in table[factor[0]]]
    if not split or len({len(parts) for parts in split}) != 1 or len(split[0]) < 2:
        return None
    for j in range(len(split[0])):
        part = [parts[j] for parts in split]
        if len(set(zip(part, values, strict=True))) == len(set(part)) == len(set(values)):
            return part
    return None


def _differ(table: pd.DataFrame, i: int, j: int, keys: Iterable[str]) -> bool:
    return any(str(table[k].iloc[i]) != str(table[k].iloc[j]) for k in keys)


def _part_keys(table: pd.DataFrame, i: int, factor: tuple[str, ...], apart: set[int]) -> list[str]:
    """The factor's telling keys, plus (shortest name first) the keys needed to tell run
    ``i`` from the runs in ``apart``, which the telling keys alone do not."""
    keys = [k for k in telling_keys(factor) if k in table]
    for j in sorted(apart):
        if not _differ(table, i, j, keys):
            keys.append(min((k for k in factor if k in table and _differ(table, i, j, [k])),
                            key=lambda k: (k in PATH_KEYS, len(short(k)), k)))
    return keys


def _factor_part(table: pd.DataFrame, i: int, factor: tuple[str, ...], apart: set[int]) -> str:
    """``key=value`` of the keys that name run ``i``'s value of ``factor`` (``2 ranks``)."""
    return ", ".join(plural(table[k].iloc[i], "rank") if k == "ranks" else
                     f"{short(k)}={fmt_value(k, table[k].iloc[i])}"
                     for k in _part_keys(table, i, factor, apart))


def _with_ranks(table: pd.DataFrame, factors: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """The factors a label may name: the differing settings, and the rank count when the
    runs differ in it (named only where it tells a run apart)."""
    return [*factors, ("ranks",)] if table["ranks"].nunique() > 1 else factors


def label_keys(rs: RunSet) -> list[list[str]]:
    """Per run, the config keys its label names (none for a sweep's own label)."""
    table = rs.table.reset_index(drop=True)
    factors = _with_ranks(table, rs.factors)
    return [[] if str(table["user_label"].iloc[i] or "") else
            [k for f, apart in label_factors(table, factors, i).items()
             for k in _part_keys(table, i, f, apart)] for i in range(len(table))]


def label_factors(table: pd.DataFrame, factors: list[tuple[str, ...]],
                  i: int) -> dict[tuple[str, ...], set[int]]:
    """The factors that tell run ``i`` from every other run, each with the runs it tells it
    from: greedily the factor telling it from most of the runs left, the shorter on a tie."""
    left, chosen = set(range(len(table))) - {i}, {}
    while left:
        options = [(f, {j for j in left if _differ(table, i, j, [k for k in f if k in table])})
                   for f in factors if f not in chosen]
        options = [o for o in options if o[1]]
        if not options:
            break  # equal in every setting: the rank count or the run id tells them apart
        factor, apart = max(options, key=lambda o: (len(o[1]),
                                                    -len(_factor_part(table, i, *o))))
        chosen[factor] = apart
        left -= apart
    return chosen


def describe(table: pd.DataFrame, factors: list[tuple[str, ...]], i: int) -> str:
    """Run ``i`` named by only what differs: the fewest factors that tell it from every other
    run, shortest first (``read_threads=1; format=npy, batch_size=2``)."""
    parts = [_factor_part(table, i, f, apart)
             for f, apart in label_factors(table, factors, i).items()]
    return "; ".join(sorted(parts, key=len))


def _labels(table: pd.DataFrame, factors: list[tuple[str, ...]]) -> list[str]:
    """A short, unique name per run: the sweep's label, else what sets it apart, with its
    rank count when runs differ in it; its id when nothing else tells it apart."""
    labels = []
    many_ranks = table["ranks"].nunique() > 1
    table = table.reset_index(drop=True)
    for i, (_, row) in enumerate(table.iterrows()):
        text = str(row.get("user_label") or "")
        if text and many_ranks:  # a sweep's label names its point, not its rank count
            text = f"{text}; {plural(row['ranks'], 'rank')}"
        labels.append(text or describe(table, _with_ranks(table, factors), i)
                      or str(row["run_id"]))
    counts = pd.Series(labels).value_counts()
    return [lab if counts[lab] == 1 else f"{lab} [{rid[-6:]}]"
            for lab, rid in zip(labels, table["run_id"], strict=True)]


def run_set(runs: list[Run]) -> RunSet:
    """The table of ``runs``: headline columns, then each differing config value."""
    if not runs:
        raise DlioBenchError("no runs to report")
    settings = [_settings(r) for r in runs]
    diff = differing_keys(settings)
    rows = [{**_row(r), "user_label": r.config("output.label", ""),
             **{k: s.get(k) for k in diff if k != "workload"}}
            for r, s in zip(runs, settings, strict=True)]
    table = pd.DataFrame(rows)
    for col in NUMERIC:
        table[col] = pd.to_numeric(table[col], errors="coerce").astype(float)
    factors = factors_of(settings, diff)
    table["label"] = _labels(table, factors)
    return RunSet(runs, table, diff, factors)


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
