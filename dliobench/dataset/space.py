"""How much storage a generation will take: payload, format overhead, block rounding.

The payload alone under-counts: every format frames its samples (headers, record framing,
an HDF5 superblock, index side files, image compression), and a file system allocates
whole blocks, so a thousand 4 KiB + 1 byte files take 8 MB, not 4. The overhead is measured,
not assumed: a few small files are written with the real writer into a scratch folder, and a
model ``bytes = A + n*C + n*s*B`` per file (``n`` samples of ``s`` bytes; ``A`` per file,
``C`` per sample, ``B`` per payload byte) is fitted to their sizes.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from dliobench.config.schema import Config, DatasetConfig
from dliobench.dataset.file_writer import Fill, write_file
from dliobench.dataset.layout import DataFile
from dliobench.formats.base import Format
from dliobench.storage.posix import PosixBackend

PROBE_SAMPLE_BYTES = 256 << 10  # the largest sample a probe writes
PROBE_SAMPLES = 4  # the most samples a probe file holds
MANIFEST_FILE_BYTES = 64  # manifest columns and journal records per file, generously
MANIFEST_SAMPLE_BYTES = 8  # per-sample checksums in the manifest and journal, if any


@dataclass(frozen=True)
class FileCost:
    """Stored bytes of a file of ``n`` samples of ``s`` bytes: ``A + n*C + n*s*B``."""

    per_file: float
    per_sample: float
    per_byte: float

    def bytes(self, num_samples: int, sample_bytes: np.ndarray) -> np.ndarray:
        """Stored bytes (data file and side files) of files of ``sample_bytes`` per sample."""
        return (self.per_file + num_samples * self.per_sample
                + num_samples * sample_bytes.astype(np.float64) * self.per_byte)


def measure_cost(fmt: Format, dataset: DatasetConfig, typical_sample_bytes: int,
                 one_size: bool = False) -> FileCost:
    """Fit the format's per-file, per-sample and per-byte cost from a few real small files.

    ``one_size``: every file's samples are ``typical_sample_bytes`` (no spread). Where that is
    small enough to probe, files of exactly that size are written and the cost is theirs, per
    file and per sample (a row of parquet columns is framed per column: a probe of other
    widths would have other columns, and a cost fitted across them is off by 2x for DLRM)."""
    fill = dataclasses.replace(Fill.for_dataset(dataset), direct=False, sample_crcs=False)
    hi = max(1, min(typical_sample_bytes, PROBE_SAMPLE_BYTES))
    n = max(1, min(dataset.num_samples_per_file, PROBE_SAMPLES))
    scratch = tempfile.mkdtemp(prefix="dliobench-space-",
                               dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    try:
        backend = PosixBackend(scratch)

        def stored(samples: int, sample_bytes: int) -> float:
            written = write_file(fmt, backend, f"probe_{samples}_{sample_bytes}",
                                 DataFile(0, "probe", samples, sample_bytes), fill)
            return float(written.size + sum(size for size, _ in written.sides))

        if one_size and hi == typical_sample_bytes:  # as many samples as PROBE_SAMPLE_BYTES
            rows = min(dataset.num_samples_per_file, PROBE_SAMPLE_BYTES // hi)
            return _at_one_size(stored, max(n, rows), hi)
        return _fitted(stored, n, hi)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _at_one_size(stored: Callable[[int, int], float], n: int, size: int) -> FileCost:
    """The cost of files of ``size``-byte samples, from files of 1 and ``n`` of them."""
    one = stored(1, size)
    per_sample = (stored(n, size) - one) / (n - 1) if n > 1 else 0.0
    return FileCost(max(0.0, one - per_sample), per_sample, 0.0)


def _fitted(stored: Callable[[int, int], float], n: int, hi: int) -> FileCost:
    """``A + n*C + n*s*B`` fitted to files of ``hi``- and ``hi / 4``-byte samples."""
    lo = max(1, hi // 4)
    big, small = stored(n, hi), stored(n, lo)
    per_byte = max(0.0, (big - small) / (n * (hi - lo))) if hi > lo else 1.0
    per_sample = 0.0
    if n > 1:
        one = stored(1, lo)
        per_sample = max(0.0, (small - one - (n - 1) * lo * per_byte) / (n - 1))
        small = one
    per_file = max(0.0, small - per_sample - lo * per_byte)
    return FileCost(per_file, per_sample, per_byte)


def bytes_needed(fmt: Format, dataset: DatasetConfig, sample_bytes: np.ndarray,
                 block_bytes: int) -> int:
    """Storage the files with ``sample_bytes`` per sample take, each of their data and side
    files rounded up to whole ``block_bytes``, plus their manifest records."""
    if not len(sample_bytes):
        return 0
    one_size = bool(sample_bytes.min() == sample_bytes.max())
    cost = measure_cost(fmt, dataset, int(np.median(sample_bytes)), one_size)
    per_file = cost.bytes(dataset.num_samples_per_file, sample_bytes)
    block = max(1, block_bytes)
    sides = len(fmt.side_suffixes)
    # the data file rounded up exactly; each side file may take one more block at most
    files = (np.ceil(per_file / block) * block).sum() + len(sample_bytes) * sides * block
    per_sample = MANIFEST_SAMPLE_BYTES if dataset.sample_checksums else 0  # only then kept
    manifest = len(sample_bytes) * (MANIFEST_FILE_BYTES
                                    + dataset.num_samples_per_file * per_sample)
    return int(files) + manifest


@dataclass(frozen=True)
class Pending:
    """What generating a configuration's dataset would write now: the files missing from its
    manifest, the storage they take (``bytes_needed``) and the free space where they go."""

    files: int
    bytes: int
    free: int | None  # None: not known (an object store, or dataset.check_free_space off)


def pending(config: Config,
            matters: Callable[[Pending], bool] = lambda _: True) -> Pending:
    """Estimate, reading only the manifest (no file is written or listed), what a generation
    of ``config``'s dataset would write; nothing for an existing dataset. Where the whole
    dataset would not ``matter``, that upper bound is returned without loading the manifest
    (the run loads it once, later)."""
    from dliobench.base.errors import DatasetError
    from dliobench.dataset.existing import wanted
    from dliobench.dataset.layout import sample_sizes
    from dliobench.dataset.manifest import Manifest
    from dliobench.formats import format_for
    from dliobench.storage import backend_for
    from dliobench.storage.location import is_url

    dataset = config.dataset
    if not config.workflow.generate_data or wanted(dataset):
        return Pending(0, 0, None)
    folder = dataset.data_folder
    # absolute: a relative folder not made yet has no nearest existing ancestor ('')
    backend = backend_for(folder if is_url(folder) else os.path.abspath(folder), config.storage)
    sizes = sample_sizes(dataset)
    # free space not to be trusted (dataset.check_free_space=false) is not reported
    free = backend.free_bytes() if dataset.check_free_space else None
    fmt = format_for(dataset)
    whole = Pending(len(sizes), bytes_needed(fmt, dataset, sizes, backend.block_bytes()), free)
    if not matters(whole):
        return whole
    try:
        manifest = Manifest.load(backend)  # None where there is none (no folder yet)
    except DatasetError:  # damaged: the run refuses it by itself, before writing, in words
        return Pending(0, 0, None)
    missing = np.ones(len(sizes), dtype=bool)
    if manifest is not None and manifest.num_files:
        missing = manifest.sizes(np.arange(len(sizes), dtype=np.int64)) < 0
    if not missing.any():
        return Pending(0, 0, free)
    need = bytes_needed(fmt, dataset, sizes[missing], backend.block_bytes())
    return Pending(int(missing.sum()), need, free)
