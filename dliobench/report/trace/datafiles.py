"""Which files of a trace are the training data, their format and their sizes.

A data file is one the job read (bytes returned) that is not part of the program (no
``/proc``, ``/sys``, ``/dev``, Python or shared-library files) and whose extension or first
bytes name a data format; of those, the extension that carried the most bytes is the
dataset (one training job reads one dataset). Every choice is returned in words with how it
was made.
"""

from __future__ import annotations

import os
import statistics
from collections import Counter
from dataclasses import dataclass, field

from dliobench.formats._npyheader import parse as parse_npy
from dliobench.report.trace.events import Trace

FORMATS = {"npy": "npy", "npz": "npz", "h5": "hdf5", "hdf5": "hdf5", "tfrecord": "tfrecord",
           "jpg": "jpeg", "jpeg": "jpeg", "png": "png", "parquet": "parquet"}
MAGIC = ((b"\x93NUMPY", "npy"), (b"PK\x03\x04", "npz"), (b"\x89HDF\r\n\x1a\n", "hdf5"),
         (b"\xff\xd8\xff", "jpeg"), (b"\x89PNG", "png"), (b"PAR1", "parquet"))
SYSTEM = ("/proc/", "/sys/", "/dev/", "/etc/", "/usr/", "/lib", "/bin/", "/opt/conda/")
PROGRAM = (".py", ".pyc", ".so", ".pth", ".json", ".yaml", ".yml", ".txt", ".cfg", ".toml")
NPY_HEADER = 128  # numpy's usual header (np.save pads the header to 64-byte multiples)


@dataclass
class DataFiles:
    """The dataset a trace read: files and sizes, its format, how each was told."""

    paths: list[str]
    sizes: dict[str, int]
    fmt: str | None
    header_bytes: int
    how: dict[str, str] = field(default_factory=dict)


def magic_of(path: str) -> str | None:
    """The format the file's first bytes name, or None (unknown, or the file is gone)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(8)
    except OSError:
        return None
    return next((name for sig, name in MAGIC if head.startswith(sig)), None)


def _ext(path: str) -> str:
    return os.path.splitext(path)[1].lstrip(".").lower()


def find(trace: Trace) -> DataFiles:
    """The data files of ``trace`` (an empty list when none is found)."""
    nbytes: Counter[str] = Counter()
    for e in trace.reads():
        assert e.path is not None
        if not e.path.startswith(SYSTEM) and not e.path.endswith(PROGRAM) and ".so." not in e.path:
            nbytes[e.path] += e.size
    kinds: Counter[str] = Counter()
    for path, n in nbytes.items():
        kind = FORMATS.get(_ext(path)) or magic_of(path)
        if kind is not None:
            kinds[_ext(path) or kind] += n
    if not kinds:
        read = len({e.path for e in trace.reads()})
        return DataFiles([], {}, None, 0, {"files": f"none of the {read} files read is a data "
                                           "file: a data format's extension or magic bytes, "
                                           "outside the program's files"})
    ext = kinds.most_common(1)[0][0]
    paths = sorted(p for p in nbytes if (_ext(p) or FORMATS.get(magic_of(p) or "")) == ext
                   and (FORMATS.get(_ext(p)) or magic_of(p)))
    files = DataFiles(paths, {}, None, 0)
    others = len(nbytes) - len(paths)
    files.how["files"] = (f"the {len(paths)} files read with extension .{ext} (the data format "
                          f"that carried the most bytes); {others} other files read were "
                          "left out (program, libraries, other formats)")
    _format(files, ext)
    _sizes(files, trace)
    return files


def _format(files: DataFiles, ext: str) -> None:
    """The format, from the extension, checked against the first file's magic bytes."""
    by_ext = FORMATS.get(ext)
    magic = magic_of(files.paths[0])
    files.fmt = by_ext or magic
    if magic is None:
        files.how["format"] = f"by the extension .{ext} (magic bytes not checked: " \
                              f"{files.paths[0]} is not readable here)"
    elif by_ext is None or magic == by_ext:
        files.how["format"] = f"by the extension .{ext} and the magic bytes of {files.paths[0]}"
    else:
        files.how["format"] = f"by the magic bytes of {files.paths[0]} ({magic}; the " \
                              f"extension .{ext} says {by_ext})"
        files.fmt = magic


def _sizes(files: DataFiles, trace: Trace) -> None:
    """Each file's size: on disk when it is still there, else the end of the furthest read
    or seek (a lower bound when the job never read to the end)."""
    seen: dict[str, int] = {}
    wanted = set(files.paths)
    for e in trace.events:
        if e.path in wanted:
            end = (e.offset or 0) + e.size if e.op == "read" else e.size if e.op == "seek" else 0
            seen[e.path] = max(seen.get(e.path, 0), end)
    on_disk = 0
    for p in files.paths:
        try:
            files.sizes[p] = os.stat(p).st_size
            on_disk += 1
        except OSError:
            files.sizes[p] = seen.get(p, 0)
    files.how["sizes"] = (f"{on_disk} from the files on disk, {len(files.paths) - on_disk} "
                          "from the furthest read or seek in the trace")
    files.header_bytes = _header(files) if files.fmt == "npy" else 0


def _header(files: DataFiles) -> int:
    """numpy's header size, read from the first file when present."""
    try:
        with open(files.paths[0], "rb") as handle:
            head = handle.read(4096)
        return int(parse_npy(files.paths[0], memoryview(head)).data_offset)
    except (OSError, ValueError, Exception):
        files.how["header"] = f"numpy's usual {NPY_HEADER}-byte header (the files are gone)"
        return NPY_HEADER


def size_stats(files: DataFiles) -> tuple[float, float]:
    """Mean and standard deviation of the files' payload (size less the header)."""
    payload = [files.sizes[p] - files.header_bytes for p in files.paths]
    return statistics.fmean(payload), statistics.pstdev(payload) if len(payload) > 1 else 0.0
