"""Names for runs and their settings in a report: values formatted for labels, the keys
that name a factor, and a short unique label per run (the sweep's own, else what sets the
run apart from the others).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from typing import Any

import pandas as pd

from dliobench.report.factors import PATH_KEYS
from dliobench.report.runs import RunSet


def short(key: str) -> str:
    """A config key without its section, for labels."""
    return key.rsplit(".", 1)[-1]


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
    """``key=value`` of a factor's telling keys (the workload by its name alone)."""
    return ", ".join(str(row[k]) if k == "workload" else f"{short(k)}={fmt_value(k, row[k])}"
                     for k in telling_keys(factor))


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
                     str(table[k].iloc[i]) if k == "workload" else
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
    from: the workload's first whenever the runs differ in it (a rank count must never stand
    for a workload: "1 rank" of one workload beside "2 ranks" of another reads as scaling),
    with the rank count where it differs from another workload's runs (their rates are sums
    over ranks), then greedily the factor telling it from most of the runs left, the shorter
    on a tie."""
    left, chosen = set(range(len(table))) - {i}, {}
    for factor in factors:
        if "workload" in factor and "workload" in table and table["workload"].nunique() > 1:
            apart = {j for j in left if _differ(table, i, j, [k for k in factor if k in table])}
            if apart:
                chosen[factor] = apart
                left -= apart
            if ("ranks",) in factors and any(_differ(table, i, j, ["ranks"]) for j in apart):
                ranks = {j for j in range(len(table)) if _differ(table, i, j, ["ranks"])}
                chosen[("ranks",)] = ranks  # rates of 1 rank beside 2 ranks of another
                left -= ranks
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
    """Run ``i`` named by only what differs: the workload first where runs differ in it, then
    the fewest factors that tell it from every other run, shortest first
    (``workload=unet3d; 2 ranks``, ``read_threads=1; format=npy, batch_size=2``)."""
    chosen = label_factors(table, factors, i)
    parts = [_factor_part(table, i, f, apart) for f, apart in chosen.items()]
    first = [p for f, p in zip(chosen, parts, strict=True) if "workload" in f]
    return "; ".join(first + sorted((p for p in parts if p not in first), key=len))


def run_labels(table: pd.DataFrame, factors: list[tuple[str, ...]]) -> list[str]:
    """A short, unique name per run: its role in a run set first (``warm-up``, ``scored 1 of
    5``), then the sweep's label (with the workload where runs differ in it), else what sets
    it apart, with its rank count when runs differ in it; its id when nothing else tells it
    apart."""
    labels = []
    many_ranks = table["ranks"].nunique() > 1
    many_workloads = "workload" in table and table["workload"].nunique() > 1
    table = table.reset_index(drop=True)
    for i, (_, row) in enumerate(table.iterrows()):
        text = str(row.get("user_label") or "")
        if text and many_workloads and str(row["workload"]) not in text:
            text = f"{row['workload']}: {text}"
        if text and many_ranks:  # a sweep's label names its point, not its rank count
            text = f"{text}; {plural(row['ranks'], 'rank')}"
        text = text or describe(table, _with_ranks(table, factors), i)
        role = str(row.get("role") or "")
        labels.append("; ".join(p for p in (role, text) if p) or str(row["run_id"]))
    counts = pd.Series(labels).value_counts()
    return [lab if counts[lab] == 1 else f"{lab} [{rid[-6:]}]"
            for lab, rid in zip(labels, table["run_id"], strict=True)]
