"""Contenders taking turns over repetitions, and the spread of what each measured."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


@dataclass(frozen=True)
class Spread:
    """min, median and max of one contender's repetitions."""

    low: float
    median: float
    high: float
    n: int

    @classmethod
    def of(cls, values: Iterable[float]) -> Spread:
        got = list(values)
        if not got:
            raise ValueError("no values to summarise")
        return cls(min(got), statistics.median(got), max(got), len(got))

    def cell(self, fmt: str = ",.3f") -> str:
        """``median (min-max)``, the table cell every script prints."""
        return f"{self.median:{fmt}} ({self.low:{fmt}}-{self.high:{fmt}})"


def interleave(contenders: Mapping[K, Callable[[], T]], reps: int, *,
               rotate: bool = True) -> dict[K, list[T]]:
    """Run every contender once per repetition, ``reps`` times, and collect what each returned.

    The contenders take turns within a repetition, so a drift in the machine's load hits them
    alike; with ``rotate`` the turn order shifts by one each repetition, so none always goes
    first (after a cache drop, say)."""
    names = list(contenders)
    got: dict[K, list[T]] = {name: [] for name in names}
    for rep in range(reps):
        shift = rep % len(names) if rotate and names else 0
        for name in names[shift:] + names[:shift]:
            got[name].append(contenders[name]())
    return got


def spreads(values: Mapping[K, Iterable[float]]) -> dict[K, Spread]:
    """Each contender's min/median/max."""
    return {name: Spread.of(got) for name, got in values.items()}
