"""What the report's figures share: the ``Plot`` each returns, saving it as a PNG,
wrapping labels, and the dashed AU floors (scaling and comparison draw them).
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

DPI = 110


@dataclass(frozen=True)
class Plot:
    """One figure of the report: drawn (``path``) or not, with a caption or the reason why."""

    name: str
    title: str
    path: Path | None
    note: str


def save(fig: Figure, out: Path, name: str) -> Path:
    """``fig`` as ``out/name.png``."""
    path = out / f"{name}.png"
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    return path


def label_axes(fig: Figure, ax: Any, title: str, x: str, y: str) -> None:
    """Axis labels, a light grid, the legend outside at the right, the title."""
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.grid(alpha=0.3)
    fig.legend(loc="outside right upper", fontsize=8)
    ax.set_title(title)


def wrap(text: str, width: int = 28) -> str:
    """``text`` broken into lines of at most ``width`` characters (legends, tick labels), at
    spaces only: a ``key=value`` stays whole on a line of its own."""
    return "\n".join(textwrap.wrap(text, width, break_long_words=False,
                                   break_on_hyphens=False)) or text


def floors(ax: Any, table: pd.DataFrame) -> None:
    """One dashed AU floor per floor value, named by the workloads it belongs to."""
    for floor in sorted(table["au_floor"].dropna().unique()):
        names = sorted({str(w) for w in table.loc[table["au_floor"] == floor, "workload"]})
        ax.axhline(100 * floor, color="grey", linestyle="--", linewidth=1,
                   label=f"AU floor {100 * floor:g} % ({', '.join(names)})")
