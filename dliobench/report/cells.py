"""How the report prints a run's figures and settings: each column's header and format, the
one place a value of ``runs.csv`` becomes text, so the first section and the tables print a
figure alike.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from dliobench.report.labels import fmt_value
from dliobench.results.figures import FIGURES

Fmt = Callable[[Any], str]


def _num(digits: int, unit: str = "", scale: float = 1.0) -> Fmt:
    def fmt(x: Any) -> str:
        if x is None or (isinstance(x, float) and math.isnan(x)):
            return "n/a"
        return f"{x * scale:,.{digits}f}{unit}"
    return fmt


def _figure_formats() -> dict[str, Fmt]:
    """runs.csv's figure columns printed as the table of figures prints them (its unit and
    decimals: ``results.figures``), so the report and the console cannot differ."""
    out: dict[str, Fmt] = {}
    for fig in FIGURES:
        for where in fig.outputs:
            if where.file == "runs.csv" and where.path not in out:
                out[where.path] = _num(fig.decimals, f" {fig.unit}", 1 / where.per_unit)
    return out


FIGURE_FORMATS = _figure_formats()
# column -> (header, formatter); None formatter = text.
COLUMNS: dict[str, tuple[str, Fmt | None]] = {
    "label": ("run", None), "workload": ("workload", None),
    "au": ("AU", _num(1, " %", 100)), "au_floor": ("AU floor", _num(0, " %", 100)),
    "verdict": ("verdict", None),
    "samples_per_s": ("samples/s", _num(1, " /s")), "mb_per_s": ("read", _num(1, " MB/s")),
    "wait_p99_ms": ("wait p99", _num(2, " ms")),
    "reads_from_storage": ("reads from storage", None),
    "ckpt_write_gb_per_s": ("checkpoint write", _num(3, " GB/s")),
    "ckpt_read_gb_per_s": ("checkpoint read", _num(3, " GB/s")),
    "au_min": ("AU worst rank", _num(1, " %", 100)),
    "wait_p50_ms": ("wait p50", _num(2, " ms")),
    "ranks": ("ranks", None), "straggler_nodes": ("straggler node(s)", None),
    "accelerator": ("accelerator", None), "status": ("status", None),
    "compute_s_per_batch": ("compute per batch", _num(3, " s")),
    "loader": ("loader", None), "format": ("format", None),
    "samples_per_file": ("samples per file", None), "subfolders": ("subfolders", None),
    "file_access": ("file access", None), "read_threads": ("read threads", None),
    "batch": ("batch", None),
    "run_id": ("run id", None), "dliobench_version": ("dliobench", None),
    "commit": ("commit", None), "hosts": ("host(s)", None),
}
# The runs table: what each run achieved, narrow enough for one screen, "reads from storage"
# (which the page-cache note points to) among them; everything else is in the settings table.
COLUMNS.update({column: (COLUMNS[column][0], fmt) for column, fmt in FIGURE_FORMATS.items()
                if column in COLUMNS})
RESULT_COLUMNS = ("label", "workload", "au", "au_floor", "verdict", "samples_per_s",
                  "mb_per_s", "wait_p99_ms", "reads_from_storage", "ckpt_write_gb_per_s",
                  "ckpt_read_gb_per_s")


def header(column: str) -> str:
    """The column's header (its name where it has none)."""
    return COLUMNS.get(column, (column, None))[0]


def formatted(column: str) -> bool:
    """Whether the column is a figure with a unit."""
    return COLUMNS.get(column, (column, None))[1] is not None


def text(column: str, value: Any) -> str:
    """A value as the report prints it: a figure with its unit (``98.8 %``), yes/no, a short
    commit, or the setting as labels name it."""
    fmt = COLUMNS.get(column, (column, None))[1]
    if fmt is not None:
        return fmt(value)
    if isinstance(value, float) and math.isnan(value):
        return ""
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if column == "commit" and len(str(value)) > 12:
        return str(value)[:10] + ("-dirty" if str(value).endswith("-dirty") else "")
    return fmt_value(column, value)


def idle(row: pd.Series) -> bool:
    """A run with no emulated compute: its AU means nothing."""
    return bool(row.get("compute_s_per_batch") == 0)


def row_text(row: pd.Series, column: str) -> str:
    """Column ``column`` of a runs-table row as every part of the report prints it (AU and
    its floor ``n/a`` where no compute was emulated)."""
    if idle(row) and column in ("au", "au_min", "au_floor"):
        return "n/a"
    return text(column, row.get(column))
