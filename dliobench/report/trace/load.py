"""Open a trace of any supported kind: strace's text, or DFTracer's JSON lines (a file, a
``.gz`` of one, or a folder of them; ``run --trace-io`` writes the same)."""

from __future__ import annotations

import gzip
from pathlib import Path

from dliobench.base.errors import InputError
from dliobench.report.trace import dftracer, strace
from dliobench.report.trace.events import Trace


def load(path: Path) -> Trace:
    """The trace at ``path``, its kind told from its content."""
    if not path.exists():
        raise InputError(f"{path} does not exist; name a strace output file or a DFTracer "
                         "trace (.pfw, .pfw.gz, or their folder)")
    first = dftracer.files_of(path)[0]
    try:
        opener = gzip.open if first.name.endswith(".gz") else open
        with opener(first, "rt", encoding="utf-8", errors="replace") as handle:
            head = handle.read(65536)
    except (OSError, EOFError) as exc:
        raise InputError(f"cannot read {first} ({exc}); name a readable trace file") from None
    if dftracer.looks_like(head):
        return dftracer.read(path)
    if strace.looks_like(head):
        with open(first, encoding="utf-8", errors="replace") as handle:
            return strace.read(handle, str(first))
    raise InputError(f"{first} is neither strace output (strace -f -tt -T -y -o FILE) nor a "
                     "DFTracer trace (JSON lines); name one of those")
