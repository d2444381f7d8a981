"""Progress bars for long work (rich), silent when disabled or on non-root ranks.

Rates are bytes done over time elapsed since the bar started (not a short window that one
large advance throws off), and the columns fit 80 characters. Piped (not a terminal), a bar
is printed as a line every ``PLAIN_EVERY_S`` and at its end. Under MPI ``job_bar`` shows
the whole job: every rank's done bytes are summed on rank 0 every ``JOB_EVERY_S`` by a
thread on a duplicated communicator, so the work itself is never interrupted.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from dliobench.comm.world import Comm, World

JOB_EVERY_S = 0.5
PLAIN_EVERY_S = 30.0  # piped output: a bar's line this often (rich draws none until the end)


class Advance(Protocol):
    """Callback that moves a bar forward."""

    def __call__(self, amount: float = 1) -> None:
        """Advance by ``amount`` units."""


def _unit(nbytes: float) -> tuple[str, float]:
    """The decimal unit that shows ``nbytes`` with a digit or more before the point."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if nbytes >= scale:
            return unit, scale
    return "kB", 1e3


class _Bytes(ProgressColumn):
    """Done / total and the average rate since the start, in decimal units (the total's,
    the rate's: a small dataset is not 0.00 GB), one line."""

    def render(self, task: Task) -> Text:
        elapsed = task.elapsed or 0.0
        rate = task.completed / elapsed if elapsed > 0 else 0.0
        total = task.total or 0.0
        unit, scale = _unit(total)
        per_s, per_s_scale = _unit(rate)
        return Text(f"{task.completed / scale:,.2f}/{total / scale:,.2f} {unit} "
                    f"{rate / per_s_scale:,.2f} {per_s}/s")


@contextmanager
def bar(description: str, total: float, enabled: bool, unit: str = "steps") -> Iterator[Advance]:
    """A progress bar over ``total`` units (``unit='bytes'`` shows GB and the mean GB/s)."""
    if not enabled:
        yield lambda amount=1: None
        return
    columns: list[ProgressColumn | str] = (
        [_Bytes()] if unit == "bytes" else [MofNCompleteColumn(), TextColumn(unit)])
    clock = [TimeRemainingColumn()] if unit == "bytes" else [TimeElapsedColumn(),
                                                           TimeRemainingColumn()]
    progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(bar_width=12),
                        TaskProgressColumn(), *columns, *clock, transient=False)
    with progress, _lines_when_piped(progress):
        task = progress.add_task(description, total=total)
        yield lambda amount=1: progress.advance(task, amount)


@contextmanager
def _lines_when_piped(progress: Progress) -> Iterator[None]:
    """Piped (a log file: rich draws a bar once, at its end), the bar as a line every
    ``PLAIN_EVERY_S``, so a long generation shows its progress and rate in the log too."""
    if on_terminal():
        yield
        return
    stop = threading.Event()

    def say() -> None:
        while not stop.wait(PLAIN_EVERY_S):
            progress.console.print(progress.make_tasks_table(progress.tasks))

    thread = threading.Thread(target=say, name="progress-lines", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()


def on_terminal() -> bool:
    """Whether the bars go to a terminal (piped, rich prints a bar once, at its end)."""
    from rich import get_console

    return get_console().is_terminal


class FigureBar:
    """A steps bar that carries a line of figures (``results.live``), with lines printed
    above it."""

    def __init__(self, progress: Progress, task: TaskID) -> None:
        self.progress, self.task = progress, task

    def update(self, steps: int, words: str, final: bool = False) -> None:
        """Move the bar to ``steps`` done and show ``words``."""
        self.progress.update(self.task, completed=steps, figures=words)

    def line(self, text: str) -> None:
        """Print ``text`` above the bar."""
        self.progress.console.print(text, highlight=False, soft_wrap=True)


@contextmanager
def figure_bar(description: str, total: int) -> Iterator[FigureBar]:
    """A bar of ``total`` steps with a line of figures after the count."""
    progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(bar_width=12),
                        MofNCompleteColumn(), TextColumn("{task.fields[figures]}"),
                        TimeElapsedColumn(), transient=False)
    with progress:
        yield FigureBar(progress, progress.add_task(description, total=total, figures=""))


@contextmanager
def job_bar(description: str, total: float, enabled: bool, world: World,
            comm: Comm) -> Iterator[Advance]:
    """A bytes bar of the whole job on rank 0: ``total`` and the advances are this rank's,
    the bar shows every rank's summed (one rank: an ordinary bar)."""
    if world.size == 1:
        with bar(description, total, enabled, unit="bytes") as advance:
            yield advance
        return
    totals = comm.allgather(total)
    done = [0.0]
    finished = threading.Event()
    with bar(description, sum(totals), enabled and world.is_root, unit="bytes") as shown:
        channel = comm.dup()

        def reduce() -> None:  # every rank runs it in lockstep until all are finished
            reported = 0.0
            while True:
                finished.wait(JOB_EVERY_S)
                states = channel.allgather((done[0], finished.is_set()))
                job = sum(d for d, _ in states)
                shown(job - reported)
                reported = job
                if all(f for _, f in states):
                    return

        thread = threading.Thread(target=reduce, name="progress", daemon=True)
        thread.start()
        try:
            yield lambda amount=1: done.__setitem__(0, done[0] + amount)
        except BaseException:
            finished.set()  # the failing rank ends the job: it does not wait for the others
            raise
        finished.set()
        thread.join()
