"""The arguments of ``dliobench workload`` (``from-trace``, ``compare``) and of ``run
--trace-io``; kept apart from ``parser.py`` so that module stays one screenful per command."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from pathlib import Path

Commands = Mapping[str, Callable[[argparse.Namespace], int]]


def _count(text: str) -> int:
    """An argparse type: a whole number above 0."""
    if not text.isdigit() or int(text) == 0:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number above 0")
    return int(text)


def _seconds(text: str) -> float:
    """An argparse type: seconds, 0 or more."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < 1e9:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number of seconds (0 or more)")
    return value


def add_trace_io_arg(p: argparse.ArgumentParser) -> None:
    """``run --trace-io``."""
    p.add_argument("--trace-io", action="store_true",
                   help="also write a DFTracer-format trace of every data read to "
                   "<run-dir>/io-trace/ (output.trace_io), for `dliobench workload compare`")


def add_workload_parser(sub: argparse._SubParsersAction, commands: Commands) -> None:
    """`dliobench workload from-trace | compare`."""
    p = sub.add_parser("workload", help="a workload from a traced job; a replay compared "
                       "with its trace", description="Import a real training job's I/O trace "
                       "(strace -f -tt -T -y, or DFTracer's .pfw/.pfw.gz) as a workload, and "
                       "compare a replay of it with the trace (docs/trace.md).")
    verbs = p.add_subparsers(dest="verb", metavar="VERB", required=True)
    f = verbs.add_parser("from-trace", help="write a workload file from a trace",
                         description="Infer files, sizes, format, request pattern, order, "
                         "workers, epochs, batch and compute from a trace; print each value "
                         "with how it was inferred, and what could not be.")
    f.add_argument("trace", type=Path, metavar="TRACE",
                   help="strace output file, or a DFTracer .pfw/.pfw.gz file or folder")
    f.add_argument("-o", "--output", type=Path, required=True, metavar="YAML",
                   help="the workload file to write")
    f.add_argument("--name", default="", help="the workload's model.name (default: the "
                   "file's name)")
    f.add_argument("--batch-size", type=_count, default=0,
                   help="samples per step, when the trace does not show batches")
    f.add_argument("--computation-time", type=_seconds, default=-1.0, metavar="SECONDS",
                   help="compute per batch, when the trace does not show steps")
    f.add_argument("--measure-compute", action="store_true",
                   help="compute per batch from training steps of a real small PyTorch "
                   "model (GPU when present, else CPU) instead of the trace's gaps")
    f.set_defaults(func=commands["workload"])
    c = verbs.add_parser("compare", help="compare a replay's I/O with the trace",
                         description="Files touched, bytes and requests per epoch, request-size "
                         "histogram, reads per step and step times of a run made with "
                         "--trace-io against the trace; exit 1 when one differs by more than 2 %.")
    c.add_argument("trace", type=Path, metavar="TRACE", help="the trace the workload came from")
    c.add_argument("run_dir", type=Path, metavar="RESULT_DIR",
                   help="the replay's run folder (made with run --trace-io)")
    c.set_defaults(func=commands["workload"])
