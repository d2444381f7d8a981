"""Progress bars for long work (rich), silent when disabled or on non-root ranks."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)


class Advance(Protocol):
    """Callback that moves a bar forward."""

    def __call__(self, amount: float = 1) -> None:
        """Advance by ``amount`` units."""


@contextmanager
def bar(description: str, total: float, enabled: bool, unit: str = "steps") -> Iterator[Advance]:
    """A progress bar over ``total`` units (``unit='bytes'`` shows sizes and speed)."""
    if not enabled:
        yield lambda amount=1: None
        return
    if unit == "bytes":
        columns = [DownloadColumn(binary_units=True), TransferSpeedColumn()]
    else:
        columns = [MofNCompleteColumn(), TextColumn(unit)]
    progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), TaskProgressColumn(),
                        *columns, TimeElapsedColumn(), TimeRemainingColumn(), transient=False)
    with progress:
        task = progress.add_task(description, total=total)
        yield lambda amount=1: progress.advance(task, amount)
