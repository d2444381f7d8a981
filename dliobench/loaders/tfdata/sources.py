"""Where a tf.data epoch's samples come from: TFRecord files read by TensorFlow itself, or
dliobench's format readers run inside the pipeline.

Each source yields ``(sample bytes, global id, bytes read)`` with the sample a flat uint8
vector, so the rest of the pipeline (map, batch, prefetch) is one and the same.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import dliobench.storage.buffers as bufferpool
from dliobench.base.errors import DlioBenchError
from dliobench.loaders.base import SampleReader
from dliobench.loaders.tfdata.base import no_autograph, tf
from dliobench.storage.buffers import SampleBuffers

TFRECORD_BUFFER = 256 * 1024  # TFRecordDataset's default read buffer (bytes)


@dataclass
class RecordFiles:
    """One epoch's TFRecord files in the order the plan first reaches them, which of their
    records the plan holds (sample sharding may give a rank part of a file), and how each
    file's bytes are spread over its delivered records.

    TFRecordDataset reads a file whole, so its size is counted, spread evenly over the
    records delivered from it (``share`` each, the first also ``extra``): every batch
    carries the bytes read for it, and an epoch's total is the files' sizes.
    """

    files: np.ndarray   # file indices, in order
    keep: np.ndarray | None  # per record of these files (file position x spf): planned; None: all
    share: np.ndarray   # per file position: bytes counted per delivered record
    extra: np.ndarray   # per file position: the rest, counted with its first delivered record
    first: np.ndarray   # per file position: the record (local index) carrying ``extra``
    samples_per_file: int

    @classmethod
    def of(cls, ids: np.ndarray, samples_per_file: int, sizes: Any) -> RecordFiles:
        """The files holding ``ids`` (``sizes`` by file index), and the records to keep."""
        spf = samples_per_file
        per_file = ids // spf
        _, first_seen = np.unique(per_file, return_index=True)
        files = per_file[np.sort(first_seen)]
        position = np.empty(int(files.max()) + 1, dtype=np.int64)
        position[files] = np.arange(files.size)
        local = position[per_file] * spf + ids % spf
        kept = np.bincount(position[per_file], minlength=files.size)
        first = np.full(files.size, files.size * spf, dtype=np.int64)
        np.minimum.at(first, position[per_file], local)  # each file's first record delivered
        size = np.array([int(sizes[i]) for i in files.tolist()], dtype=np.int64)
        share = size // kept
        keep = None
        if files.size * spf != ids.size:
            keep = np.zeros(files.size * spf, dtype=bool)
            keep[local] = True
        return cls(files, keep, share, size - share * kept, first, spf)

    def account(self, local: np.ndarray) -> tuple[np.ndarray, int]:
        """The global ids of a batch of records (by local index) and the bytes they carry."""
        spf = self.samples_per_file
        pos = local // spf
        at_first = local == self.first[pos]
        ids = self.files[pos] * spf + local % spf
        return ids, int(self.share[pos].sum() + self.extra[pos][at_first].sum())

    @property
    def skipped(self) -> int:
        """Records read only to be skipped (not in this rank's plan)."""
        return 0 if self.keep is None else int((~self.keep).sum())


def interleave_order(files: int, per_file: int, cycle: int) -> np.ndarray:
    """The local indices (file position x ``per_file`` + record) of records in the order
    ``TFRecordDataset(paths, num_parallel_reads=cycle)`` delivers them from ``files`` files
    of ``per_file`` records each, deterministic.

    tf.data's interleave with ``block_length`` 1 (tensorflow/core/kernels/data/
    interleave_dataset_op.cc ``GetNextInternal``) visits ``cycle`` slots in turn, one record
    from each; an exhausted file empties its slot and the turn moves on, an empty slot opens
    the next file. With files of equal length, ``cycle`` files are read side by side, record
    by record, and all end in the same round: then the next ``cycle`` files (the last group
    may be smaller)."""
    if cycle <= 1 or files <= 1:
        return np.arange(files * per_file, dtype=np.int64)
    full, record = files // cycle * cycle, np.arange(per_file, dtype=np.int64)[:, None]
    groups = np.arange(full, dtype=np.int64).reshape(-1, 1, cycle)  # [group, 1, file]
    last = np.arange(full, files, dtype=np.int64)[None, :]
    return np.concatenate([(groups * per_file + record).reshape(-1),  # record-major
                           (last * per_file + record).reshape(-1)])


def tfrecord_source(paths: list[str], files: RecordFiles, samples_per_file: int,
                    num_parallel_reads: int) -> Any:
    """Records of ``paths`` through ``tf.data.TFRecordDataset(paths, num_parallel_reads)``,
    as a TensorFlow user builds it, each zipped with its local index (file position x spf +
    record; ``RecordFiles.account`` turns a batch of those into ids).

    The indices are the order tf.data's deterministic interleave delivers (``interleave_order``;
    tests/integration/test_tfdata_records.py checks every delivered sample's bytes against
    its id).
    Observing each record's file instead, by an interleave of per-file datasets each zipped
    with its indices, cost a dataset function per file and halved the rate at 64 KiB (one
    record per file): 3,600-4,100 against 9,000-9,400 samples/s here.
    """
    spf, count = samples_per_file, files.files.size
    reads = max(1, num_parallel_reads)
    records = tf.data.TFRecordDataset(paths, buffer_size=TFRECORD_BUFFER,
                                      num_parallel_reads=reads if reads > 1 else None)
    local = tf.data.Dataset.from_tensor_slices(interleave_order(count, spf, reads))
    ds = tf.data.Dataset.zip((records, local))
    if files.keep is not None:
        keep = tf.constant(files.keep)
        ds = ds.filter(no_autograph(lambda _r, at: tf.gather(keep, at)))
    return ds


@no_autograph
def parse_example(record: Any, at: Any) -> tuple[Any, Any]:
    """The sample bytes of one tf.train.Example record."""
    feature = {"image": tf.io.FixedLenFeature([], tf.string)}
    image = tf.io.parse_single_example(record, feature)["image"]
    return tf.io.decode_raw(image, tf.uint8), at


def batch_memory(count: int, size: int) -> np.ndarray:
    """A ``[count, size]`` uint8 array over page-aligned memory that is reused once nothing
    refers to it (``bufferpool.POOL``).

    TensorFlow wraps a numpy array a generator yields without a copy when its data is
    aligned to 64 bytes (``TF_NewTensor``; checked by tests/unit/test_tfdata_batches.py) and
    holds the array until the last tensor and numpy view of it are gone, which is when the
    pool lends the memory again. A batch in fresh memory (``np.stack``'s) cost its page
    faults on every batch (4,096 per 16 MiB sample) and a copy into TensorFlow's memory."""
    memory = bufferpool.POOL.take(count * size)
    return np.frombuffer(memory, dtype=np.uint8, count=count * size).reshape(count, size)


def batch_source(reader: SampleReader, plan: list[np.ndarray], parallel: int,
                 failures: Failures, pool: SampleBuffers | None = None) -> Any:
    """Whole batches of samples of one size (``plan``: the epoch's batches of ids), batch i
    read by ``reader.read_many`` in a ``tf.numpy_function`` that ``map`` calls on i, with
    ``max(1, parallel)`` calls at once and the plan's order kept (deterministic), and handed
    to tf.data as one dense ``[batch, bytes]`` element in reused aligned memory
    (``batch_memory``: TensorFlow takes it without a copy).

    One element per batch, not per sample: a batch's files are read in one call (the GIL
    released once for all of them) and cross from Python into tf.data once. A map over batch
    numbers costs TensorFlow's machinery 30 % less CPU per batch than ``from_generator``
    streams interleaved (its generator state, a flat_map and a finalizer per stream; 294
    against 420 us per batch of 8 handed over, no reading, on this project's VM).
    """

    def read(number: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        ids = plan[int(number)]
        try:
            got = reader.read_many(ids.tolist(), pool)
        except DlioBenchError as exc:
            failures.errors.append(exc)  # the consumer raises it: TensorFlow's error says less
            raise
        flat = [np.asarray(s).reshape(-1).view(np.uint8) for s, _ in got]
        samples = np.stack(flat, out=batch_memory(len(flat), flat[0].size))
        nbytes = np.array([b for _, b in got], dtype=np.int64)
        del got, flat  # the pool's blocks come back: the batch is a copy
        return samples, ids.astype(np.int64), nbytes

    @no_autograph
    def one_batch(number: Any) -> tuple[Any, Any, Any]:
        samples, ids, nbytes = tf.numpy_function(read, [number],
                                                 (tf.uint8, tf.int64, tf.int64))
        return (tf.ensure_shape(samples, [None, None]), tf.ensure_shape(ids, [None]),
                tf.ensure_shape(nbytes, [None]))

    numbers = tf.data.Dataset.range(len(plan))
    if parallel > 1:
        return numbers.map(one_batch, num_parallel_calls=parallel, deterministic=True)
    return numbers.map(one_batch)


def _signature() -> tuple[Any, Any, Any]:
    """What a source yields: (sample bytes, global id, bytes read)."""
    return (tf.TensorSpec([None], tf.uint8), tf.TensorSpec([], tf.int64),
            tf.TensorSpec([], tf.int64))


@dataclass
class Failures:
    """Read errors raised inside the pipeline's generators, raised again by the consumer."""

    errors: list[DlioBenchError] = field(default_factory=list)

    def check(self) -> None:
        """Raise the first error a generator met."""
        if self.errors:
            raise self.errors[0]


def generator_source(reader: SampleReader, ids: np.ndarray, parallel: int,
                     failures: Failures, chunk: int = 1,
                     pool: SampleBuffers | None = None) -> Any:
    """Samples ``ids`` read by ``reader`` in ``max(1, parallel)`` ``from_generator`` streams,
    interleaved back into the plan's order.

    Stream j reads ``ids[j::n]``; an interleave over the n streams taking one element from
    each in turn yields ``ids`` in order, with n streams reading at once. A stream reads
    ``chunk`` of its samples per call (``SampleReader.read_many``: one-sample files with the
    GIL released once for all of them, large ones into ``pool``'s reused memory); reading
    them one by one handed the GIL over around every system call. Bytes are counted at the
    read call, as every loader counts them.
    """
    n = max(1, min(parallel, ids.size)) if ids.size else 1

    def stream(part: Any) -> Iterator[tuple[np.ndarray, int, int]]:
        mine = ids[int(part)::n].tolist()
        for start in range(0, len(mine), max(1, chunk)):
            if failures.errors:
                return
            some = mine[start:start + max(1, chunk)]
            try:
                got = reader.read_many(some, pool)
            except DlioBenchError as exc:
                failures.errors.append(exc)
                return
            for sample_id, (sample, nbytes) in zip(some, got, strict=True):
                yield np.ascontiguousarray(sample).reshape(-1).view(np.uint8), sample_id, nbytes
            del got

    @no_autograph
    def one_stream(part: Any) -> Any:
        return tf.data.Dataset.from_generator(stream, args=(part,),
                                              output_signature=_signature())

    parts = tf.data.Dataset.range(n)
    if parallel > 1:
        return parts.interleave(one_stream, cycle_length=n, block_length=1,
                                num_parallel_calls=n, deterministic=True)
    return parts.flat_map(one_stream)
