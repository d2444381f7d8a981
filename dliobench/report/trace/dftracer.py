"""Read DFTracer traces (``.pfw``, ``.pfw.gz``, or a folder of them): Chrome trace-event
JSON, one event a line, one file per process, as DFTracer 2.x writes them
(``dftracer``/``pydftracer`` 2.2.0/2.0.6 on PyPI; docs/trace.md says how to capture one) and
as ``run --trace-io`` writes ours.

An I/O event is ``{"name": "read", "cat": "POSIX", "pid", "tid", "ts", "dur", "args":
{...}}`` with ``ts``/``dur`` in microseconds. Its file is ``args.fname`` (DFTracer 1.x and
ours) or ``args.fhash``, named by an earlier ``"name": "FH"`` metadata event
(``args.name`` = path, ``args.value`` = hash; DFTracer 2.x with
``DFTRACER_INC_METADATA=1``). ``args.ret`` is the bytes a read returned, ``args.offset`` a
pread's offset; ``read``'s offset is tracked from opens, seeks and reads. A region named
``compute`` or ``*.compute`` (pydftracer's or DLIO's annotation of a training step) in the
first process is a step.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from dliobench.base.errors import InputError
from dliobench.report.trace.events import CLOSE, COMPUTE, OPEN, READ, SEEK, Event, Positions, Trace

_OPS = {"open": OPEN, "open64": OPEN, "openat": OPEN, "openat64": OPEN, "__open_2": OPEN,
        "fopen": OPEN, "fopen64": OPEN, "read": READ, "pread": READ, "pread64": READ,
        "readv": READ, "preadv": READ, "fread": READ, "lseek": SEEK, "lseek64": SEEK,
        "close": CLOSE, "fclose": CLOSE}
IO_CATS = ("POSIX", "STDIO")


def files_of(path: Path) -> list[Path]:
    """The trace files ``path`` names: itself, or the ``.pfw``/``.pfw.gz`` files in it."""
    if not path.is_dir():
        return [path]
    found = sorted(p for p in path.iterdir() if p.name.endswith((".pfw", ".pfw.gz")))
    if not found:
        raise InputError(f"{path} holds no .pfw or .pfw.gz files; name a DFTracer trace file "
                         "or the folder DFTRACER_LOG_FILE wrote into")
    return found


def read(path: Path, source: str = "dftracer") -> Trace:
    """The events of every trace file ``path`` names, in time order."""
    trace = Trace(source)
    records = [r for f in files_of(path) for r in _records(f, trace.notes)]
    starts = [r for r in records if r.get("name") == "start" and "ts" in r]
    if starts:
        trace.root_pid = int(min(starts, key=lambda r: r["ts"])["pid"])
    names: dict[str, str] = {}
    positions = Positions()
    for rec in records:
        _event(trace, rec, names, positions)
    trace.events.sort(key=lambda e: e.ts)
    return trace


def looks_like(head: str) -> bool:
    """Whether the text starting a file is a JSON-lines trace."""
    lines = [s.strip().rstrip(",") for s in head.splitlines() if s.strip() not in ("", "[")]
    return bool(lines) and lines[0].startswith("{")


def _records(path: Path, notes: list[str]) -> list[dict[str, Any]]:
    """The JSON events of one file (gzip or not); a line that does not parse (the last one
    cut by a process killed mid-write, or the file cut short) is skipped and a torn gzip
    stream read up to the tear, both said in ``notes``."""
    opener: Any = gzip.open if path.name.endswith(".gz") else open
    out: list[dict[str, Any]] = []
    bad = 0
    try:
        with opener(path, "rt", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                text = line.strip().rstrip(",")
                if text.startswith("{"):
                    try:
                        out.append(json.loads(text))
                    except json.JSONDecodeError:
                        bad += 1
    except EOFError:
        notes.append(f"{path} ends early (its process was killed while writing); its "
                     f"events up to there were read ({len(out)})")
    except OSError as exc:
        raise InputError(f"cannot read the trace {path} ({exc}); name a readable .pfw or "
                         ".pfw.gz file") from None
    if bad:
        notes.append(f"{bad} event line(s) of {path} are not whole JSON (cut short: its "
                     "process was killed while writing, or the file was truncated); they "
                     "were left out")
    return out


def _event(trace: Trace, rec: dict[str, Any], names: dict[str, str],
           positions: Positions) -> None:
    """Add the event ``rec`` describes, if it is one of ours."""
    args = rec.get("args") or {}
    if rec.get("name") == "FH" and isinstance(args, dict):
        names[str(args.get("value"))] = str(args.get("name"))
        return
    pid, tid = int(rec.get("pid", 0)), int(rec.get("tid", 0))
    ts, dur = float(rec.get("ts", 0)) / 1e6, float(rec.get("dur", 0)) / 1e6
    name = str(rec.get("name", ""))
    if rec.get("cat") not in IO_CATS or name not in _OPS:
        if (name == "compute" or name.endswith(".compute")) and pid == trace.root_pid:
            trace.events.append(Event(COMPUTE, pid, tid, ts, dur, None))
        return
    path = args.get("fname") or names.get(str(args.get("fhash")))
    if path is None:
        return
    op = _OPS[name]
    if op == OPEN:
        positions.opened(pid, path)
        trace.events.append(Event(OPEN, pid, tid, ts, dur, path))
    elif op == SEEK:
        positions.seek(pid, path, int(args.get("ret", 0)))
        trace.events.append(Event(SEEK, pid, tid, ts, dur, path, size=int(args.get("ret", 0))))
    elif op == CLOSE:
        trace.events.append(Event(CLOSE, pid, tid, ts, dur, path))
    else:
        trace.events.append(_read(pid, tid, ts, dur, name, path, args, positions))


def _read(pid: int, tid: int, ts: float, dur: float, name: str, path: str,
          args: dict[str, Any], positions: Positions) -> Event:
    """A read event: bytes returned (``fread``'s items times item size), its offset."""
    ret = int(args.get("ret", args.get("size", 0)) or 0)
    if name == "fread":
        ret *= int(args.get("size", 1) or 1)
    offset = args.get("offset")
    start = positions.read(pid, path, ret) if offset is None else int(offset)
    return Event(READ, pid, tid, ts, dur, path, start, max(ret, 0), int(args.get("count", 0)))
