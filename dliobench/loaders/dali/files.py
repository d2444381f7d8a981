"""The DALI loader's feed for whole ``.npy`` files: the plan's paths in, DALI's C++ reads.

An external source in the run's own process hands DALI each batch's file paths in the plan's
order (and int64 ``[id, bytes]`` per sample); ``fn.io.file.read`` reads the files on DALI's
``num_threads`` threads; each file's header is then parsed by the format's own ``decode``
(the checks ``SampleReader`` makes) and the sample is a view of the batch DALI hands out. As
fast as DALI's own ``fn.readers.numpy``, but every sample of the plan exactly once, in its
order, and no other. ``fn.decoders.numpy`` instead of ``decode`` cost a copy more (16 MiB
samples at 32-83 against 182-197 samples/s); files are read with plain reads, not mapped
(DALI's default; 64 KiB samples at 18,500-26,400 against 10,800-12,750 samples/s, less CPU
at 16 MiB too). It serves npy files of one sample each, read through the page cache and not
verified sample by sample (the ``SourceFeed`` does the rest). The bytes counted are each
delivered file's size: DALI reads whole files, as ``SampleReader`` does for one-sample files.

A run that fails (a file gone, truncated, damaged: DALI's pipeline is then unusable) is
explained by reading the batches handed to DALI but not yet delivered through
``SampleReader``, whose error names the file in one sentence.
"""

from __future__ import annotations

import functools
import os
from collections import deque
from typing import Any

import numpy as np

from dliobench.base.errors import CorruptSampleError, DatasetError, DlioBenchError
from dliobench.formats.base import Stored
from dliobench.loaders.base import Batch, SampleReader
from dliobench.loaders.dali.base import BatchInfo, fn, host_samples, pipeline_def, release
from dliobench.loaders.dali.source import EpochRuns, epoch_length


def files_misfit(reader: SampleReader) -> str | None:
    """Why DALI cannot read this dataset's files itself in the plan's order (None: it can)."""
    if reader.fmt.name != "npy" or reader.samples_per_file != 1:
        return "not npy files of one sample each"
    if reader.sample_crcs is not None or reader.resize_bytes or reader.odirect:
        return "samples verified, resized or read with O_DIRECT"
    if reader.num_files and reader.backend.local_path(reader.keys[0]) is None:
        return "no local files"
    return None


NAMES_CACHED = 1 << 16  # encoded paths kept (a few MB): a small dataset's every file


class PathSource:
    """The external source's batch callback: batch ``iteration`` of epoch ``epoch_idx`` as
    file paths (uint8) and an (n, 2) array of ``[id, bytes]``; remembers the batches DALI may
    not have run."""

    def __init__(self, reader: SampleReader, batch_size: int, drop_last: bool,
                 remembered: int) -> None:
        self.reader, self.batch_size, self.drop_last = reader, batch_size, drop_last
        self.epochs: dict[int, np.ndarray] = {}
        self.handed: deque[np.ndarray] = deque(maxlen=remembered)
        self._name = functools.lru_cache(maxsize=NAMES_CACHED)(self._encode)

    def _encode(self, index: int) -> np.ndarray:
        """File ``index``'s path as DALI takes it."""
        path = self.reader.backend.local_path(self.reader.keys[index])
        return np.frombuffer(os.fsencode(str(path)), dtype=np.uint8)

    def __call__(self, info: BatchInfo) -> tuple[list[np.ndarray], np.ndarray]:
        ids = self.epochs[info.epoch_idx]
        full = epoch_length(ids.size, self.batch_size, True)
        end = full if self.drop_last else ids.size  # a partial last batch is returned short
        start = info.iteration * self.batch_size
        if start >= end:
            raise StopIteration
        chunk = ids[start:min(start + self.batch_size, end)]
        self.handed.append(chunk)
        sizes = self.reader.sizes
        meta = np.array([(i, sizes[i]) for i in chunk.tolist()], dtype=np.int64)
        return [self._name(i) for i in chunk.tolist()], meta


class FileFeed(EpochRuns):
    """Runs the path-source pipeline epoch by epoch (see the module)."""

    def __init__(self, reader: SampleReader, batch_size: int, read_threads: int,
                 prefetch_size: int, drop_last: bool) -> None:
        super().__init__(batch_size, drop_last)
        self.reader = reader
        depth = max(1, prefetch_size)
        self.source = PathSource(reader, batch_size, drop_last, remembered=depth + 2)

        @pipeline_def(batch_size=batch_size, num_threads=max(1, read_threads), device_id=None,
                      prefetch_queue_depth=depth)
        def graph() -> tuple[Any, Any]:
            names, meta = fn.external_source(source=self.source, num_outputs=2, batch=True,
                                             batch_info=True)
            return fn.io.file.read(names, dont_use_mmap=True), meta  # see the module

        self.pipe = graph()
        self.pipe.build()

    def _publish(self, epoch: int, ids: np.ndarray) -> None:
        self.source.epochs = {epoch: np.asarray(ids, dtype=np.int64)}  # the last one is done

    def _to_batch(self, outputs: Any) -> Batch:
        data, meta = outputs
        metas = meta.as_array()  # [id, bytes] per sample: dense
        ids = metas[:, 0].copy()
        samples = [self._decode(i, raw) for i, raw in zip(ids.tolist(), host_samples(data),
                                                          strict=True)]
        return Batch(ids=ids, nbytes=int(metas[:, 1].sum()), data=samples)

    def _decode(self, index: int, raw: np.ndarray) -> np.ndarray:
        """File ``index``'s sample from its bytes, checked as ``SampleReader`` checks it."""
        src = Stored(self.reader.backend, self.reader.keys[index])
        size = self.reader.sizes[index]
        if raw.size < size:
            raise CorruptSampleError(str(src), raw.size, "file is truncated: the manifest "
                                     f"says {size} bytes")
        return self.reader.fmt.decode(src, raw.data, whole_file=True)

    def _error(self, exc: Exception) -> BaseException | None:
        """The first sample of the batches handed to DALI that ``SampleReader`` cannot read
        either, in its sentence; else DALI's message in one."""
        for chunk in self.source.handed:
            for sample_id in chunk:
                try:
                    self.reader.read(int(sample_id))
                except DlioBenchError as error:
                    return error
        if not isinstance(exc, RuntimeError):
            return None
        said = next((line.strip() for line in str(exc).splitlines()
                     if line.strip().endswith(".") and "pipeline" not in line), str(exc))
        return DatasetError(f"DALI could not read the dataset: {said}; check the files, or "
                            "regenerate them with `dliobench generate`")

    def close(self) -> None:
        """Release the pipeline."""
        release(self.pipe)
        self.pipe = None
