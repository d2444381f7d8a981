"""The tf.data loader: one ``tf.data`` pipeline per epoch, as TensorFlow training builds it.

source (``TFRecordDataset(paths, num_parallel_reads)`` over the epoch's files; samples of one
size: a ``map`` over batch numbers reading each batch with dliobench's readers in a
``tf.numpy_function``, one dense element per batch; others: ``from_generator`` streams) ->
shuffle (TFRecord with ``sample_shuffle``: a seeded buffer) -> ``map`` (parse the Example,
resize; ``num_parallel_calls = read_threads``) -> ``batch`` (``ragged_batch`` when sample
sizes vary; ``drop_remainder = drop_last``) -> ``prefetch`` (``prefetch_size`` batches, or
``tf.data.AUTOTUNE``). The pipeline runs on a private pool of ``read_threads`` threads.

Bytes: through our readers they are counted at the read call. TFRecordDataset opens the files
itself and reads them whole, so a file's size is counted, spread over the records delivered
from it (``RecordFiles``); records dropped with a last partial batch take their share along.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import numpy as np

from dliobench.base.errors import ConfigError
from dliobench.dataset.sharding import ShardSpec, batches, epoch_seed
from dliobench.loaders.base import Batch, SampleReader
from dliobench.loaders.native import POOL_MIN_BYTES
from dliobench.loaders.tfdata.base import options, read_error, tf
from dliobench.loaders.tfdata.sources import (
    Failures,
    RecordFiles,
    batch_source,
    generator_source,
    parse_example,
    tfrecord_source,
)
from dliobench.storage.buffers import SampleBuffers

SHUFFLE_BUFFER = 1024  # records; as DALI's reader default, and DLIO's shuffle_size scale
AUTOTUNE = -1  # reader.prefetch_size: autotune


class TFDataLoader:
    """``reader.data_loader: tensorflow``."""

    def __init__(self, reader: SampleReader, spec: ShardSpec, batch_size: int,
                 read_threads: int, prefetch_size: int, drop_last: bool,
                 same_size: bool = False, shuffle_buffer: int = SHUFFLE_BUFFER) -> None:
        self.reader, self.spec = reader, spec
        self.batch_size, self.threads = batch_size, read_threads
        self.prefetch_size, self.drop_last = prefetch_size, drop_last
        self.shuffle_buffer = shuffle_buffer
        self.same_size = same_size or bool(reader.resize_bytes)  # dense batches will do
        self.records = reader.fmt.name == "tfrecord"
        if self.records and reader.num_files and \
                reader.backend.local_path(reader.keys[0]) is None:
            raise ConfigError(f"reader.data_loader: tensorflow reads TFRecord files with "
                              f"tf.data.TFRecordDataset, which cannot open "
                              f"{reader.backend.describe()}; use the native or pytorch loader")
        self._epochs = self._reordered = self._skipped = 0
        self._closed = False
        self._pool = self._sample_pool()

    @property
    def deviations(self) -> list[str]:
        """How the pipeline departs from the plan, in words for the result."""
        out: list[str] = []
        if self.records:
            out.append("tf.data.TFRecordDataset opens the TFRecord files itself (it is handed "
                       "their paths, not the storage backend): bytes are counted as the sizes "
                       "of the files handed to it")
            if self.reader.odirect:
                out.append("tf.data's TFRecord reader has no O_DIRECT: reads may come from "
                           "the page cache")
            if self.reader.sample_crcs is not None:
                out.append("reader.verify_samples: tf.data checks each record's CRC-32C, not "
                           "the per-sample checksums of the manifest")
            if self.spec.sample_shuffle:
                out.append(f"tf.data shuffles records through a buffer of "
                           f"{self.shuffle_buffer} (Dataset.shuffle, seeded per epoch), not "
                           "the plan's full permutation")
        if self._skipped:
            out.append(f"tf.data reads TFRecord files whole: {self._skipped} records outside "
                       f"this rank's shard were read and skipped over {self._epochs} epoch(s)")
        if self._reordered:
            why = self._order_causes()
            out.append(f"tf.data's sample order differed from the plan in {self._reordered} "
                       f"of {self._epochs} epoch(s){why}")
        return out

    def _sample_pool(self) -> SampleBuffers | None:
        """Reused memory for large one-sample files read by our readers (as the native
        loader's): each stream's chunk, twice over (tf.data copies a sample out on yield)."""
        size = None if self.records or self.reader.samples_per_file != 1 else \
            self.reader.uniform_file_size()
        if size is None or size < POOL_MIN_BYTES:
            return None
        return SampleBuffers(size, keep=2 * max(1, self.threads) * self.batch_size)

    def _order_causes(self) -> str:
        """Why tf.data's order is not the plan's, as the end of a sentence."""
        causes = []
        if self.records and self.threads > 1:
            causes.append(f"records interleaved from {self.threads} files at a time "
                          "(num_parallel_reads)")
        if self.records and self.spec.sample_shuffle:
            causes.append("the shuffle buffer")
        return f": {' and '.join(causes)}" if causes else ""

    def _pipeline(self, ids: np.ndarray, failures: Failures) -> tuple[Any, RecordFiles | None]:
        """This epoch's dataset of batches (and its TFRecord files, which count the bytes)."""
        parallel = {"num_parallel_calls": self.threads, "deterministic": True} \
            if self.threads > 1 else {}
        if self.records:
            files = RecordFiles.of(ids, self.reader.samples_per_file, self.reader.sizes)
            self._skipped += files.skipped
            local = self.reader.backend.local_path
            paths = [str(local(self.reader.keys[i])) for i in files.files.tolist()]
            ds = tfrecord_source(paths, files, self.reader.samples_per_file, self.threads)
            if self.spec.sample_shuffle:
                ds = ds.shuffle(self.shuffle_buffer, seed=epoch_seed(self.spec, self._epochs),
                                reshuffle_each_iteration=False)
            ds = ds.map(parse_example, **parallel)
        elif self.same_size:  # whole batches from our readers: one element per batch
            plan = list(batches(ids, self.batch_size, self.drop_last))
            files, ds = None, batch_source(self.reader, plan, self.threads, failures, self._pool)
        else:
            files = None
            ds = generator_source(self.reader, ids, self.threads, failures,
                                  chunk=self.batch_size, pool=self._pool)
        if files is not None or not self.same_size:
            ds = self._resize_and_batch(ds, parallel)
        if self.prefetch_size:
            ds = ds.prefetch(tf.data.AUTOTUNE if self.prefetch_size == AUTOTUNE
                             else self.prefetch_size)
        return ds.with_options(options(self.threads)), files

    def _resize_and_batch(self, ds: Any, parallel: dict[str, Any]) -> Any:
        """Per-sample elements padded or cut to ``resize_bytes`` and batched."""
        size = self.reader.resize_bytes
        if size:
            ds = ds.map(lambda s, *tags: (tf.pad(s[:size], [[0, size - tf.shape(s[:size])[0]]]),
                                          *tags), **parallel)
        batch = ds.batch if self.same_size else ds.ragged_batch  # ragged: a copy more
        return batch(self.batch_size, drop_remainder=self.drop_last)

    def epoch(self, ids: np.ndarray) -> Generator[Batch, None, None]:
        """This epoch's batches: the plan's samples (in its order, or as noted)."""
        assert not self._closed, "loader is closed"
        ids = np.asarray(ids, dtype=np.int64)
        failures = Failures()
        if not ids.size:
            self._epochs += 1
            return
        pipeline, files = self._pipeline(ids, failures)
        self._epochs += 1
        position, in_order = 0, True
        iterator = iter(pipeline)
        while True:
            try:
                samples, *tags = next(iterator)
            except StopIteration:
                break
            except tf.errors.OpError as exc:
                failures.check()  # our reader's own sentence, when one of ours failed
                self._name_the_damage(ids)
                raise read_error(exc) from None
            failures.check()
            if files is not None:  # TFRecord: local indices
                batch_ids, nbytes = files.account(np.asarray(tags[0]))
            else:  # our readers: ids and the bytes read for each
                batch_ids, nbytes = np.asarray(tags[0]), int(np.asarray(tags[1]).sum())
            batch = self._batch(samples, batch_ids, nbytes)
            if in_order and not np.array_equal(batch.ids, ids[position:position + batch.samples]):
                in_order = False
                self._reordered += 1
            position += batch.samples
            handed, samples = [batch], None
            del batch
            yield handed.pop()  # this frame keeps nothing of the batch while it waits
        failures.check()

    def _name_the_damage(self, ids: np.ndarray) -> None:
        """After TensorFlow failed to read a file (it does not say which), read the epoch's
        samples through our reader, which raises naming the file and the record's offset."""
        if self.records:
            for sample_id in ids.tolist():
                self.reader.read(sample_id)

    def _batch(self, samples: Any, ids: np.ndarray, nbytes: int) -> Batch:
        """A Batch from the pipeline's output."""
        if self.same_size:  # np.asarray: a view of the tensor (.numpy() copies)
            return Batch(ids=ids, nbytes=nbytes, data=list(np.asarray(samples)))
        values, splits = np.asarray(samples.values), np.asarray(samples.row_splits)
        return Batch(ids=ids, nbytes=nbytes, data=np.split(values, splits[1:-1]))

    def close(self) -> None:
        """Nothing to stop: each epoch's pipeline ends with its iterator."""
        self._closed = True
