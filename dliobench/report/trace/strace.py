"""Read ``strace -f -tt -T [-y]`` output: ``openat``, ``read``, ``pread64``, ``preadv``,
``lseek``, ``close`` (and ``clone``/``clone3``, for threads) of every process, as
``events.Event``.

What strace gives and how each field is recovered:

- the process of each line: ``-f`` writes ``PID`` first (with ``-o FILE``) or ``[pid N]``;
- the file of a descriptor: ``-y`` decorates it (``15</data/a.npy>``); without ``-y`` the
  file is the last ``openat`` of that descriptor number (per process, then any process: a
  thread shows its own id), and reads on a descriptor opened before tracing began are
  unattributed (counted in the notes);
- a ``read``'s offset: tracked per process and file from opens, seeks and reads
  (``events.Positions``); ``pread64``/``preadv`` carry theirs;
- a call split by another process (``<unfinished ...>`` / ``<... read resumed>``) is joined;
- threads: ``-f`` shows a thread under its own id; when ``clone``/``clone3`` are traced, a
  ``CLONE_THREAD`` clone makes its id a thread of the caller's process (else each thread
  looks like a process of its own, e.g. a loader's reader threads like worker processes).

A read in the traced program's first process of a pickled tensor
(``torch.multiprocessing``) is a batch handed over by a PyTorch DataLoader worker: it
becomes a ``BATCH`` event, which is how steps are seen in a strace trace.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from dliobench.report.trace.events import BATCH, CLOSE, OPEN, READ, SEEK, Event, Positions, Trace

_LINE = re.compile(r"^(?:\[pid\s+(\d+)\]\s+|(\d+)\s+)?(\d\d:\d\d:\d\d\.\d+|\d+\.\d+)\s+(.*)$")
_FD = re.compile(r"^\s*(-?\d+)(?:<(.*?)>)?\s*(?:,|$)")
_RET = re.compile(r"^(-?\d+)(?:<(.*?)>)?")
_DUR = re.compile(r"<(\d+\.\d+)>\s*$")
_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')
_READS = {"read": READ, "pread64": READ, "preadv": READ, "preadv2": READ}
_OPENS = {"openat", "open", "openat2"}
TORCH_BATCH = "torch.multiproces"  # a pickled tensor's rebuild function, as strace shows it


def read(lines: Iterable[str], name: str = "the trace") -> Trace:
    """The trace in ``lines`` (strace's output file, ``name`` in notes). strace ends every
    line it writes; a file's last line without its newline was cut mid-call (strace killed,
    the file truncated or copied short): its numbers may be cut too (``= 81`` of ``= 8192``),
    so it is left out, and said in the notes."""
    parser = _Parser()
    previous: str | None = None
    ended = False  # whether a line of the file ended with its newline (a file, not a list)
    for line in lines:
        if previous is not None:
            parser.line(previous.rstrip("\n"))
            ended = ended or previous.endswith("\n")
        previous = line
    if previous is not None and ended and not previous.endswith("\n") and previous.strip():
        parser.trace.notes.append(
            f"the last line of {name} is cut mid-call (strace was killed or the file was cut "
            "short); it was left out, so sizes and counts taken from the trace stop before it")
    elif previous is not None:
        parser.line(previous.rstrip("\n"))
    parser.finish()
    return parser.trace


def looks_like(head: str) -> bool:
    """Whether the text starting a file is strace output."""
    return any(_LINE.match(line) and "(" in line for line in head.splitlines()[:20])


def _seconds(stamp: str) -> float:
    """``HH:MM:SS.ffffff`` (-tt) or epoch seconds (-ttt) as seconds."""
    if ":" not in stamp:
        return float(stamp)
    h, m, s = stamp.split(":")
    return int(h) * 3600 + int(m) * 60 + float(s)


class _Parser:
    """State across lines: descriptors, positions, calls interrupted by another process."""

    def __init__(self) -> None:
        self.trace = Trace("strace")
        self.fds: dict[tuple[int, int], str] = {}
        self.any_fd: dict[int, str] = {}
        self.pending: dict[int, tuple[float, str]] = {}
        self.positions = Positions()
        self.unattributed = 0
        self.process: dict[int, int] = {}  # thread id -> its process (clone CLONE_THREAD)
        self.tid = 0

    def line(self, line: str) -> None:
        """One line of strace's output."""
        m = _LINE.match(line)
        if m is None:
            return
        pid = int(m.group(1) or m.group(2) or 0)
        ts, body = _seconds(m.group(3)), m.group(4)
        if self.trace.root_pid is None and not body.startswith(("+++", "---")):
            self.trace.root_pid = pid
        if body.endswith("<unfinished ...>"):
            self.pending[pid] = (ts, body[: -len("<unfinished ...>")].rstrip())
            return
        if body.startswith("<... "):
            started, head = self.pending.pop(pid, (ts, ""))
            if not head:
                return
            ts, body = started, head + body.split("resumed>", 1)[-1]
        self.call(pid, ts, body)

    def call(self, pid: int, ts: float, body: str) -> None:
        """One complete call."""
        head, sep, tail = body.rpartition(") = ")
        if not sep or "(" not in head:
            return
        name, args = head.split("(", 1)
        ret_m, dur_m = _RET.match(tail), _DUR.search(tail)
        if ret_m is None:
            return
        ret, dur = int(ret_m.group(1)), float(dur_m.group(1)) if dur_m else 0.0
        self.tid, pid = pid, self.process.get(pid, pid)  # a thread's calls are its process's
        if name in ("clone", "clone3") and ret > 0 and "CLONE_THREAD" in args:
            self.process[ret] = pid
        elif name in _OPENS:
            self.opened(pid, ts, dur, args, ret, ret_m.group(2))
        elif name in _READS or name in ("lseek", "close"):
            self.on_fd(pid, ts, dur, name, args, ret)

    def opened(self, pid: int, ts: float, dur: float, args: str, fd: int,
               decorated: str | None) -> None:
        """An open: its descriptor names the file from now on."""
        quoted = _QUOTED.search(args)
        if fd < 0 or quoted is None:
            return
        path = decorated or quoted.group(1)
        self.fds[(pid, fd)] = self.any_fd[fd] = path
        self.positions.opened(pid, path)
        self.trace.events.append(Event(OPEN, pid, self.tid, ts, dur, path, size=fd))

    def on_fd(self, pid: int, ts: float, dur: float, name: str, args: str, ret: int) -> None:
        """A call on a descriptor: read, pread64, preadv, lseek or close."""
        fd_m = _FD.match(args)
        if fd_m is None:
            return
        fd = int(fd_m.group(1))
        path = fd_m.group(2) or self.fds.get((pid, fd)) or self.any_fd.get(fd)
        if path is not None and ":[" in path:  # pipe:[n], socket:[n]: not a file
            if name == "read" and pid == self.trace.root_pid and TORCH_BATCH in args:
                self.trace.events.append(Event(BATCH, pid, self.tid, ts, dur, None, size=ret))
            return
        if path is None:
            self.unattributed += name in _READS and ret > 0
            return
        if name == "lseek":
            self.positions.seek(pid, path, ret)
            self.trace.events.append(Event(SEEK, pid, self.tid, ts, dur, path, size=ret))
        elif name == "close":
            self.trace.events.append(Event(CLOSE, pid, self.tid, ts, dur, path))
        else:
            self.read_call(pid, ts, dur, name, args, path, ret)

    def read_call(self, pid: int, ts: float, dur: float, name: str, args: str, path: str,
                  ret: int) -> None:
        """A read: offset from the call (pread64, preadv) or the tracked position."""
        parts = [p.strip() for p in args.rsplit(",", 2)]
        asked = int(parts[-1]) if name == "read" and parts[-1].isdigit() else 0
        offset: int | None
        if name == "read":
            offset = self.positions.read(pid, path, ret)
        else:
            offset = int(parts[-1]) if parts[-1].lstrip("-").isdigit() else None
            asked = int(parts[-2]) if name == "pread64" and parts[-2].isdigit() else asked
        self.trace.events.append(Event(READ, pid, self.tid, ts, dur, path, offset, max(ret, 0),
                                       asked))

    def finish(self) -> None:
        """Say what could not be attributed."""
        if self.unattributed:
            self.trace.notes.append(
                f"{self.unattributed} reads were on descriptors opened before tracing began "
                "or not decorated; trace with strace -y to attribute every read to its file")
