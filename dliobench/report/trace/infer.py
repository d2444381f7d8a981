"""A dliobench workload from a trace: every value with how it was inferred, and what could
not be (``Inferred``). ``datafiles`` picks the dataset; this module reads how the job read
it: accesses (an open of a data file and the reads that follow, until the next open of it
in that process), epochs, order, workers, request pattern, batches and compute.
"""

from __future__ import annotations

import itertools
import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from dliobench.base.errors import InputError
from dliobench.config.read_requests import Requests
from dliobench.report.trace import datafiles
from dliobench.report.trace.events import BATCH, COMPUTE, OPEN, READ, Event, Trace

SEQUENTIAL_RHO = 0.8  # rank correlation with sorted order above which an epoch is in order


@dataclass
class Inferred:
    """Workload keys (dotted) with their values, how each was inferred, what was not."""

    values: dict[str, Any] = field(default_factory=dict)
    how: dict[str, str] = field(default_factory=dict)
    unknown: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def set(self, key: str, value: Any, how: str) -> None:
        self.values[key], self.how[key] = value, how


@dataclass
class Access:
    """One open of a data file by one process, and its reads."""

    path: str
    pid: int
    ts: float
    reads: list[Event] = field(default_factory=list)


def accesses(trace: Trace, paths: set[str]) -> list[Access]:
    """The accesses of ``paths``, in time order. A read with no open before it in its
    process starts an access of its own when it reads from offset 0."""
    out: list[Access] = []
    current: dict[tuple[int, str], Access] = {}
    for e in trace.events:
        if e.path not in paths:
            continue
        key = (e.pid, e.path)
        if e.op == OPEN or (e.op == READ and key not in current and e.offset == 0):
            current[key] = Access(e.path, e.pid, e.ts)
            out.append(current[key])
        if e.op == READ and e.size > 0 and key in current:
            current[key].reads.append(e)
    return [a for a in out if a.reads]


def infer(trace: Trace, batch_size: int = 0, computation_time: float = -1.0) -> Inferred:
    """The workload ``trace`` shows; ``batch_size``/``computation_time`` given by the user
    win over what the trace shows (0 / negative: infer them)."""
    files = datafiles.find(trace)
    if not files.paths:
        raise InputError(f"the trace holds no reads of data files ({files.how['files']}); "
                         "trace the training process itself, with -f to follow its workers")
    got = Inferred(notes=list(trace.notes))
    acc = accesses(trace, set(files.paths))
    _dataset(got, files, acc)
    epochs = _epochs(got, acc, len(files.paths))
    _order(got, acc, files.paths, epochs)
    _workers(got, trace, acc)
    _requests(got, acc, files)
    _batches(got, trace, len(acc) // max(epochs, 1), epochs, batch_size, computation_time)
    got.set("ranks", 1, "one process tree in the trace (each rank of a multi-node job is "
            "traced apart; run the workload with as many ranks)")
    return got


def _dataset(got: Inferred, files: datafiles.DataFiles, acc: list[Access]) -> None:
    """Files, format, sizes, samples per file."""
    got.set("dataset.num_files_train", len(files.paths), files.how["files"])
    if files.fmt is not None:
        got.set("dataset.format", files.fmt, files.how["format"])
    mean, stdev = datafiles.size_stats(files)
    header = files.how.get("header", f"the {files.header_bytes}-byte header of the first file"
                           if files.header_bytes else "no header")
    got.set("dataset.record_length_bytes", round(mean),
            f"mean file size less {header}; sizes {files.how['sizes']}")
    got.set("dataset.record_length_bytes_stdev", round(stdev), "their standard deviation")
    whole = sum(1 for a in acc if _covered(a) >= files.sizes[a.path])
    got.set("dataset.num_samples_per_file", 1,
            f"{whole} of {len(acc)} accesses read their file to the end: one sample per access"
            if whole == len(acc) else f"only {whole} of {len(acc)} accesses read the whole "
            "file; the trace cannot tell samples inside a file apart, so 1 is assumed")
    if whole < len(acc):
        got.notes.append(f"{len(acc) - whole} of {len(acc)} accesses read part of their file: "
                         "the job reads parts, or the tracer missed reads (DFTracer does not "
                         "see numpy's reads through a duplicated descriptor); the replay "
                         "reads what the trace shows")


def _covered(a: Access) -> int:
    """How far from the start an access read without a gap."""
    end = 0
    for e in sorted(a.reads, key=lambda e: e.offset or 0):
        if (e.offset or 0) > end:
            break
        end = max(end, (e.offset or 0) + e.size)
    return end


def _epochs(got: Inferred, acc: list[Access], nfiles: int) -> int:
    """Epochs: how many times the median file was opened."""
    per_file = Counter(a.path for a in acc)
    epochs = max(1, round(statistics.median(per_file.values())))
    got.set("train.epochs", epochs, f"each file was opened {min(per_file.values())} to "
            f"{max(per_file.values())} times (median {epochs}); {len(acc)} accesses of "
            f"{nfiles} files")
    return epochs


def _order(got: Inferred, acc: list[Access], paths: list[str], epochs: int) -> None:
    """In order or shuffled, from the rank correlation of each epoch's first opens with the
    sorted file names; reshuffled each epoch when the orders differ."""
    rank = {p: i for i, p in enumerate(paths)}
    orders = [[rank[a.path] for a in acc[e * len(paths):(e + 1) * len(paths)]]
              for e in range(epochs)]
    rhos = [_spearman(o) for o in orders if len(o) > 2]
    rho = statistics.fmean(rhos) if rhos else 1.0
    if rho >= SEQUENTIAL_RHO:
        got.set("reader.sample_shuffle", "off", f"files read in name order (rank correlation "
                f"{rho:.2f} with sorted names, >= {SEQUENTIAL_RHO})")
        return
    got.set("reader.sample_shuffle", "seed", f"files read out of name order (rank correlation "
            f"{rho:.2f}): a shuffled sampler (one sample per file, so by sample and by file "
            "are the same)")
    changes = len({tuple(o) for o in orders}) > 1
    got.set("train.seed_change_epoch", changes, "each epoch's order differs" if changes
            else "every epoch read the files in the same order")


def _spearman(order: list[int]) -> float:
    """Rank correlation of an access order with ascending order."""
    n = len(order)
    ranks = {v: i for i, v in enumerate(sorted(order))}
    d2 = sum((i - ranks[v]) ** 2 for i, v in enumerate(order))
    return 1 - 6 * d2 / (n * (n * n - 1))


def _workers(got: Inferred, trace: Trace, acc: list[Access]) -> None:
    """Loader: worker processes (PyTorch's DataLoader) or threads of one process."""
    readers = Counter(a.pid for a in acc)
    threads = {e.tid for a in acc for e in a.reads}
    if len(readers) > 1 or (trace.root_pid is not None and trace.root_pid not in readers):
        got.set("reader.data_loader", "pytorch", f"{len(readers)} processes other than the "
                "first read the data: DataLoader worker processes")
        got.set("reader.read_threads", len(readers), f"the processes that read data files "
                f"({', '.join(f'{p}: {n} accesses' for p, n in readers.items())})")
    else:
        got.set("reader.data_loader", "native" if len(threads) > 1 else "pytorch",
                "the data was read in the first process")
        got.set("reader.read_threads", len(threads) if len(threads) > 1 else 0,
                f"{len(threads)} threads read data files")


def _requests(got: Inferred, acc: list[Access], files: datafiles.DataFiles) -> None:
    """The read requests of the most common access pattern among files of the most common
    size, as the replay issues them (``reader.read_requests``)."""
    size = Counter(files.sizes.values()).most_common(1)[0][0]
    patterns = Counter(tuple((e.offset or 0, e.size) for e in a.reads)
                       for a in acc if files.sizes[a.path] == size)
    pattern, n = patterns.most_common(1)[0]
    total = sum(patterns.values())
    if len(pattern) == 1 and pattern[0] == (0, size):
        got.notes.append("each access is one read of the whole file, as dliobench reads it")
        return
    got.set("reader.read_requests", Requests(list(pattern), size).text(),
            f"the requests (offset+bytes) of {n} of the {total} accesses of {size}-byte files; "
            f"{len(patterns) - 1} other patterns")


def _batches(got: Inferred, trace: Trace, per_epoch: int, epochs: int, batch_size: int,
             computation_time: float) -> None:
    """Batch size and compute per batch: given, or from the batches the first process
    received (strace: pickled tensors from workers; DFTracer: compute regions)."""
    marks = [e for e in trace.events if e.op in (BATCH, COMPUTE)]
    if batch_size:
        got.set("reader.batch_size", batch_size, "given (--batch-size)")
    elif marks:
        steps = max(1, round(len(marks) / epochs))
        seen = ("compute regions" if marks[0].op == COMPUTE else
                "batches the first process received")
        got.set("reader.batch_size", max(1, round(per_epoch / steps)),
                f"{per_epoch} files per epoch / {steps} {seen} per epoch")
    else:
        got.unknown.append("reader.batch_size: the trace shows no batches (give --batch-size)")
    if computation_time >= 0:
        got.set("train.computation_time", computation_time, "given (--computation-time)")
        got.set("train.computation_source", "given (workload from-trace --computation-time)",
                "carried into every result's config")
        return
    gaps = _gaps(marks, epochs)
    if not gaps:
        got.unknown.append("train.computation_time: the trace shows no steps "
                           "(give --computation-time)")
        return
    how = ("durations of the compute regions" if marks[0].op == COMPUTE else
           "time between consecutive batches the first process received (its compute, plus "
           "any wait for data)")
    q = sorted(gaps)
    spread = (f"; {len(q)} steps, p10 {q[len(q) // 10] * 1e3:.2f} ms, p50 "
              f"{q[len(q) // 2] * 1e3:.2f} ms, p90 {q[len(q) * 9 // 10] * 1e3:.2f} ms")
    got.set("train.computation_time", round(statistics.fmean(gaps), 6),
            f"mean of the {how}{spread}")
    got.set("train.computation_time_stdev", round(statistics.pstdev(gaps), 6),
            "their standard deviation")
    got.set("train.computation_source", f"trace ({trace.source}): mean of the {how}",
            "carried into every result's config")


def _gaps(marks: list[Event], epochs: int) -> list[float]:
    """Compute per step: a region's duration, or the time to the next batch in its epoch."""
    if marks and marks[0].op == COMPUTE:
        return [e.dur for e in marks]
    steps = max(1, round(len(marks) / max(epochs, 1)))
    return [b.ts - a.ts for i, (a, b) in enumerate(itertools.pairwise(marks))
            if (i + 1) % steps != 0]
