"""The one record every trace reader produces: an I/O call of one process, or a batch a
training process received. Readers (``strace``, ``dftracer``) fill it; inference and the
comparison read only this.
"""

from __future__ import annotations

from dataclasses import dataclass, field

OPEN, READ, SEEK, CLOSE, BATCH = "open", "read", "seek", "close", "batch"
COMPUTE = "compute"  # a region the job marked as a step's compute (DFTracer annotations)


@dataclass(frozen=True, slots=True)
class Event:
    """One call. ``ts``/``dur`` in seconds; ``path`` the file (None: not a file we know);
    ``offset`` where a read started in the file (None: unknown); ``size`` the bytes it
    returned (a read), the position it set (a seek), the descriptor (an open)."""

    op: str
    pid: int
    tid: int
    ts: float
    dur: float
    path: str | None
    offset: int | None = None
    size: int = 0
    asked: int = 0  # bytes asked for (a read's count)


@dataclass
class Trace:
    """The events of one trace, in time order, and what its reader could not tell."""

    source: str  # "strace" | "dftracer" | "dliobench"
    events: list[Event] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    root_pid: int | None = None  # the traced program's first process, when known

    def reads(self, paths: set[str] | None = None) -> list[Event]:
        """The reads that returned bytes, of ``paths`` when given."""
        return [e for e in self.events if e.op == READ and e.size > 0 and e.path is not None
                and (paths is None or e.path in paths)]


class Positions:
    """File positions per (process, file), so reads through ``read`` (no offset in the call)
    get one: a read advances it, a seek sets it, an open starts it at 0. Keyed by path, not
    descriptor, because ``dup`` shares the position and numpy's ``np.load`` reads through a
    dup of the descriptor Python opened."""

    def __init__(self) -> None:
        self._at: dict[tuple[int, str], int] = {}

    def opened(self, pid: int, path: str) -> None:
        """A fresh open: position 0."""
        self._at[(pid, path)] = 0

    def seek(self, pid: int, path: str, where: int) -> None:
        """A seek's result."""
        self._at[(pid, path)] = where

    def read(self, pid: int, path: str, nbytes: int) -> int:
        """The offset a read of ``nbytes`` started at; the position moves past it."""
        start = self._at.get((pid, path), 0)
        self._at[(pid, path)] = start + max(nbytes, 0)
        return start
