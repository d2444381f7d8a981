"""Live figures of training while it runs: AU, samples/s and MB/s so far over the counted
window, a line per epoch (like DLIO's per-epoch log), and at compute 0 the rates alone.

The figures use the result's definitions (``results.metrics``): each epoch counts only the
steps of ``metrics.window`` (the first ``metric.exclude_start_steps`` and the last
``exclude_end_steps`` left out); AU is the mean over ranks and epochs of counted compute over
counted wall; samples/s and MB/s are each rank's counted samples (bytes) over its counted
wall, summed over ranks. So the last figures shown are the result's.

The loop pays nothing per step: a thread (``watch``) reads the rank's timeline every
``POLL_S`` and adds the rows it gained to per-epoch sums; the loop only wakes it after each
epoch. Under MPI every rank's thread sums the ranks' figures (a vector of a few numbers per
epoch, ``rank_vector``: its size does not grow with the ranks) on a duplicated communicator
at each wake, so rank 0 shows the job's: on a bar on a terminal
(``dataset.progress.figure_bar``) and, piped (a log file), as plain lines: one per epoch,
one every ``progress.PLAIN_EVERY_S`` and one at the end.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Any, Protocol

import numpy as np

from dliobench.comm.world import Comm, World
from dliobench.dataset import progress
from dliobench.results.metrics import window

log = logging.getLogger(__name__)

POLL_S = 0.25  # how often the figures are brought up to date
JOIN_S = 10.0  # at the end, how long to wait for the last gathering of the ranks' sums

# one epoch's counted sums on one rank: steps seen, compute, wall, samples, bytes
EpochSums = tuple[int, float, float, int, int]


class Tally:
    """The counted-window sums of one rank's timeline, per epoch, brought up to date with
    the rows it gained since the last time (``rows`` only grows)."""

    def __init__(self, rows: list[Any], steps: list[int], exclude_start: int,
                 exclude_end: int) -> None:
        self.rows, self._read = rows, 0
        self.windows = [window(n, exclude_start, exclude_end) for n in steps]
        self.steps = list(steps)
        self.seen = [0] * len(steps)
        self.first: list[float | None] = [None] * len(steps)
        self.end = [0.0] * len(steps)
        self.compute = [0.0] * len(steps)
        self.samples = [0] * len(steps)
        self.nbytes = [0] * len(steps)

    def update(self) -> list[EpochSums]:
        """Add the new rows; every epoch's sums so far."""
        end = len(self.rows)
        for e, _step, t, wait, compute, comm, ckpt, samples, nbytes in islice(
                self.rows, self._read, end):
            win = self.windows[e]
            if win.start <= self.seen[e] < win.stop:
                if self.first[e] is None:
                    self.first[e] = t
                self.end[e] = t + wait + compute + comm + ckpt
                self.compute[e] += compute
                self.samples[e] += samples
                self.nbytes[e] += nbytes
            self.seen[e] += 1
        self._read = end
        return [(self.seen[e], self.compute[e], self._wall(e), self.samples[e], self.nbytes[e])
                for e in range(len(self.steps))]

    def _wall(self, epoch: int) -> float:
        """The epoch's counted wall so far: first counted start to last counted end."""
        first = self.first[epoch]
        return 0.0 if first is None else self.end[epoch] - first



@dataclass(frozen=True)
class Figures:
    """AU, samples/s and bytes/s of some counted steps (None: no counted step yet)."""

    au: float | None
    samples_per_s: float | None
    bytes_per_s: float | None

    def words(self, with_au: bool, none: str = "no counted step yet") -> str:
        """``AU 99.5 %, 99.5 samples/s, 6.5 MB/s`` (without AU at compute 0); ``none``
        when there is no counted step."""
        if self.samples_per_s is None or self.bytes_per_s is None:
            return none
        au = f"AU {100 * self.au:.1f} %, " if with_au and self.au is not None else ""
        return f"{au}{self.samples_per_s:,.1f} samples/s, {self.bytes_per_s / 1e6:,.1f} MB/s"


# A rank's figures as a vector the ranks sum (``Comm.allreduce_buffer``: its size is fixed,
# whatever the number of ranks): per epoch AU, 1 when it has an AU, samples/s, bytes/s, and 1
# when the rank finished the epoch; then 1 when it has counted steps, its samples/s and
# bytes/s over them all, and 1 when it is ending.
PER_EPOCH = 5


def rank_vector(sums: list[EpochSums], steps: list[int], ending: bool) -> np.ndarray:
    """One rank's figures, in the form the ranks sum."""
    vector = np.zeros(PER_EPOCH * len(sums) + 4)
    wall = samples = nbytes = 0.0
    for e, (seen, compute, w, s, b) in enumerate(sums):
        at = PER_EPOCH * e
        if w > 0:
            vector[at:at + 4] = (compute / w, 1.0, s / w, b / w)
        vector[at + 4] = float(seen >= steps[e])
        wall, samples, nbytes = wall + w, samples + s, nbytes + b
    if wall > 0:
        vector[-4:-1] = (1.0, samples / wall, nbytes / wall)
    vector[-1] = float(ending)
    return vector


def job_epoch(job: np.ndarray, epoch: int) -> Figures:
    """The job's figures of one epoch from the summed vectors (the result's
    ``epochs[epoch]``: AU averaged over ranks, rates summed)."""
    au, ranks, rate, byte_rate = job[PER_EPOCH * epoch:PER_EPOCH * epoch + 4]
    return Figures(au / ranks, rate, byte_rate) if ranks else Figures(None, None, None)


def job_so_far(job: np.ndarray) -> Figures:
    """The job's figures over every counted step so far (the result's ``metrics``: AU the
    mean over ranks and epochs, rates summed over ranks)."""
    epochs = job[:-4]
    counted = epochs[1::PER_EPOCH].sum()
    if not job[-4] or not counted:
        return Figures(None, None, None)
    return Figures(epochs[0::PER_EPOCH].sum() / counted, job[-3], job[-2])


def epochs_done(job: np.ndarray, ranks: int) -> int:
    """How many epochs, from the first, every rank has finished."""
    done = job[:-4][PER_EPOCH - 1::PER_EPOCH]
    return next((e for e, n in enumerate(done) if n < ranks), done.size)


class Shown(Protocol):
    """Where rank 0 shows the figures: a bar on a terminal, plain lines when piped."""

    def update(self, steps: int, words: str, final: bool) -> None:
        """The figures so far after ``steps`` steps of this rank (``final``: the last)."""

    def line(self, text: str) -> None:
        """A line of its own (an epoch's figures)."""


class _Plain:
    """Piped output (a log file): a plain progress line every ``progress.PLAIN_EVERY_S``, a last
    one, each printed at once."""

    def __init__(self, description: str, total: int) -> None:
        self.description, self.total = description, total
        self.t0 = self.said = time.monotonic()

    def update(self, steps: int, words: str, final: bool) -> None:
        """Say the figures when it is time, and at the end."""
        now = time.monotonic()
        if final or now - self.said >= progress.PLAIN_EVERY_S:
            self.said = now
            print(f"{self.description}: {steps}/{self.total} steps in {now - self.t0:.1f} s; "
                  f"so far {words}", flush=True)

    def line(self, text: str) -> None:
        """Print ``text`` at once."""
        print(text, flush=True)


@contextlib.contextmanager
def _display(description: str, total: int, shown: bool) -> Iterator[Shown | None]:
    """A bar on a terminal, plain lines when piped; None when nothing is shown here."""
    if not shown:
        yield None
    elif progress.on_terminal():
        with progress.figure_bar(description, total) as bar:
            yield bar
    else:
        yield _Plain(description, total)


class _Watcher:
    """The thread's work: update the tally, gather the ranks' sums, show the job's."""

    def __init__(self, tally: Tally, channel: Comm | None, ranks: int, shown: Shown | None,
                 with_au: bool) -> None:
        self.tally, self.channel, self.shown, self.with_au = tally, channel, shown, with_au
        self.ranks = ranks
        self.wake, self.ending = threading.Event(), threading.Event()
        self.said = 0  # epochs whose line was printed

    def run(self) -> None:
        """Until every rank has ended: wake (each ``POLL_S`` or epoch), sum, show."""
        try:
            finished = False
            while not finished:
                self.wake.wait(POLL_S)
                self.wake.clear()
                ending = self.ending.is_set()  # before the update: the last one holds all
                mine = self.tally.update()
                job = rank_vector(mine, self.tally.steps, ending)
                if self.channel is not None:
                    self.channel.allreduce_buffer(job)
                finished = job[-1] >= self.ranks
                self.show(job, mine, finished)
        except Exception as exc:  # the figures are a view: their failure never ends a run
            log.debug("the live figures stopped: %s", exc)

    def show(self, job: np.ndarray, mine: list[EpochSums], final: bool) -> None:
        """Rank 0: each newly finished epoch's line, then the figures so far."""
        if self.shown is None:
            return
        done = epochs_done(job, self.ranks)
        for e in range(self.said, done):
            self.shown.line(f"epoch {e + 1}/{len(mine)}: "
                            f"{job_epoch(job, e).words(self.with_au, 'no counted step')}")
        self.said = max(self.said, done)
        self.shown.update(sum(s[0] for s in mine), job_so_far(job).words(self.with_au), final)


@contextlib.contextmanager
def watch(rows: list[Any], steps: list[int], exclude: tuple[int, int], world: World,
          comm: Comm, enabled: bool, description: str,
          with_au: bool) -> Iterator[Callable[[], None]]:
    """Show the job's live figures on rank 0 while the block runs, from each rank's timeline
    ``rows``; yields what to call after each epoch (its line at once). ``enabled`` must be
    the same on every rank (under MPI every rank takes part in the gathering)."""
    if not enabled:
        yield lambda: None
        return
    channel = comm.dup() if world.size > 1 else None
    with _display(description, sum(steps), world.is_root) as shown:
        watcher = _Watcher(Tally(rows, steps, *exclude), channel, world.size, shown, with_au)
        thread = threading.Thread(target=watcher.run, name="live-figures", daemon=True)
        thread.start()
        try:
            yield watcher.wake.set
        except BaseException:
            watcher.ending.set()  # a failing rank does not wait for the others' last sums
            watcher.wake.set()
            if channel is None:
                thread.join(JOIN_S)
            raise
        watcher.ending.set()
        watcher.wake.set()
        thread.join(JOIN_S)
