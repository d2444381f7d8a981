"""DALI's own readers, for the formats they fit (``DaliLoader(native_reader=True)``).

``fn.readers.numpy`` reads npy (one sample per file: it reads whole files),
``fn.readers.tfrecord`` reads tfrecord with the ``.idx`` files the format writes, and
``fn.readers.file`` + ``fn.decoders.image(device="cpu")`` read jpeg and png. Every other
format, or npy with several samples per file, goes through ``fn.external_source``.

These readers shard, shuffle and pad their own way: ``shard_id``/``num_shards`` are the
rank and the number of ranks and each rank keeps its shard (``stick_to_shard``); a shuffle
draws from a buffer of ``initial_fill`` samples (``random_shuffle``, ``seed``) instead of
the plan's full permutation; every shard is padded to the same number of batches by
repeating its last sample (``pad_last_batch``), which keeps DALI's epochs aligned with
ours. The ids a rank gets therefore differ from the plan. They are recovered from each
sample's ``source_info`` (its file, and for TFRecord the record's offset), so the runner's
exactly-once check sees what DALI really delivered, and ``deviations`` says how it departed
from the plan. Only batches holding at least one real sample are handed on (all of them
full when ``drop_last``); the rest of DALI's epoch is read and discarded.

Bytes are not seen at a read call (DALI reads the files itself); they are counted per
delivered sample, once per epoch: the encoded file's length as DALI read it (jpeg, png),
the file's size (npy: DALI reads the whole file), the framed record's size from the index
(tfrecord). Not counted: the ``.idx`` files DALI reads at start-up, and padded repeats
(DALI copies the sample rather than reading it again).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

import dliobench.formats.tfrecord as tfrecord
from dliobench.dataset.sharding import ShardSpec
from dliobench.formats.base import Stored
from dliobench.loaders.base import Batch, SampleReader
from dliobench.loaders.dali.base import (
    Feed,
    fn,
    host_samples,
    pipeline_def,
    reader_error,
    release,
)

SHUFFLE_BUFFER = 1024  # DALI's default initial_fill
_READER = "reader"


def native_misfit(fmt_name: str, samples_per_file: int) -> str | None:
    """Why none of DALI's readers fits this dataset (None: one does)."""
    if fmt_name not in ("npy", "tfrecord", "jpeg", "png"):
        return f"no DALI reader fits {fmt_name} files"
    if fmt_name == "npy" and samples_per_file > 1:
        return (f"fn.readers.numpy reads whole files and these hold {samples_per_file} "
                "samples each")
    return None


def native_feed(reader: SampleReader, spec: ShardSpec | None, batch_size: int,
                read_threads: int, prefetch_size: int, drop_last: bool,
                notes: list[str]) -> Feed | None:
    """A DALI reader's feed, or None (and a note) when none of DALI's readers fits."""
    if spec is None:
        raise ValueError("DaliLoader(native_reader=True) needs the rank's ShardSpec")
    misfit = native_misfit(reader.fmt.name, reader.samples_per_file)
    if not misfit and reader.num_files and reader.backend.local_path(reader.keys[0]) is None:
        misfit = f"{reader.backend.describe()} has no local files for DALI's readers to open"
    if misfit:
        notes.append(f"DALI native reader not used: {misfit}; read through "
                     "fn.external_source (the plan is followed exactly)")
        return None
    return NativeFeed(reader, spec, batch_size, read_threads, prefetch_size, drop_last)


def local_paths(reader: SampleReader) -> list[str]:
    """The local path of every file, which DALI's readers open themselves (they are handed
    paths: the bytes counted are those of the samples they delivered)."""
    return [str(reader.backend.local_path(key)) for key in reader.keys]


def resize(sample: np.ndarray, size: int) -> np.ndarray:
    """``sample`` as ``size`` bytes (cut, or padded), as ``SampleReader`` resizes; 0: as is."""
    if not size:
        return sample
    out = np.zeros(size, dtype=np.uint8)
    flat = sample.reshape(-1)[:size]
    out[:flat.size] = flat
    return out


class SampleIndex:
    """A DALI sample's global id and the bytes counted for it, from its ``source_info``."""

    def __init__(self, reader: SampleReader) -> None:
        self.reader = reader
        self._files = {path: i for i, path in enumerate(local_paths(reader))}
        self._records: dict[int, np.ndarray] = {}

    def lookup(self, info: str, encoded_len: int | None) -> tuple[int, int]:
        """(id, bytes) of the sample DALI read from ``info`` ("<path> at index <offset>")."""
        path, sep, offset = info.rpartition(" at index ")
        if not sep:  # a whole-file reader: the file is the sample
            index = self._files[info]
            size = self.reader.sizes[index] if encoded_len is None else encoded_len
            return index * self.reader.samples_per_file, size
        index = self._files[path]
        table = self._records.get(index)
        if table is None:
            src = Stored(self.reader.backend, self.reader.keys[index])
            table = tfrecord.read_index(src, self.reader.sizes[index],
                                        self.reader.samples_per_file)
            self._records[index] = table
        k = int(np.searchsorted(table[:, 0], int(offset)))
        return index * self.reader.samples_per_file + k, int(table[k, 1])


def reader_graph(fmt_name: str, files: list[str], odirect: bool,
                 options: dict[str, Any], decode: bool = True) -> tuple[Any, ...]:
    """The reader (and decoder) of ``fmt_name``: (samples,) or (images, encoded shapes);
    images stay encoded without ``decode`` (reader.decode=false)."""
    if fmt_name == "npy":
        return (fn.readers.numpy(files=files, use_o_direct=odirect, **options),)
    if fmt_name == "tfrecord":
        from nvidia.dali import tfrecord as tfrec

        features = {"image": tfrec.FixedLenFeature([], tfrec.string, "")}
        index = [str(tfrecord.index_path(Path(f))) for f in files]
        return (fn.readers.tfrecord(path=files, index_path=index, features=features,
                                    use_o_direct=odirect, **options)["image"],)
    from nvidia.dali.types import DALIImageType

    encoded, _ = fn.readers.file(files=files, **options)
    if not decode:
        return encoded, encoded.shape()
    images = fn.decoders.image(encoded, device="cpu", output_type=DALIImageType.GRAY)
    return images, encoded.shape()


OPENS_FILES = ("DALI's reader opens the files itself (it is handed their paths, not the "
               "storage backend): bytes are counted from the samples it delivered")


def static_deviations(fmt_name: str, spec: ShardSpec, fill: int, odirect: bool) -> list[str]:
    """How DALI's reader departs from the plan whatever it reads."""
    out = [OPENS_FILES]
    if spec.file_shuffle or spec.sample_shuffle:
        out.append(f"DALI shuffles through a buffer of {fill} samples (random_shuffle, "
                   f"initial_fill, seed {spec.seed}), not the plan's full permutation per epoch")
        if spec.size > 1:
            out.append("DALI keeps each rank on its shard every epoch (stick_to_shard); the "
                       "plan deals the shuffled samples out to the ranks afresh each epoch")
    if spec.size > 1 and spec.sharding == "file" and spec.samples_per_file > 1:
        out.append("DALI shards records, not files (reader.sharding=file)")
    if odirect and fmt_name in ("jpeg", "png"):
        out.append("DALI's file reader has no O_DIRECT: reads may come from the page cache")
    return out


class NativeFeed:
    """Runs a DALI reader pipeline epoch by epoch and turns its output into Batches."""

    def __init__(self, reader: SampleReader, spec: ShardSpec, batch_size: int,
                 read_threads: int, prefetch_size: int, drop_last: bool,
                 shuffle_buffer: int = SHUFFLE_BUFFER) -> None:
        self.reader, self.batch_size = reader, batch_size
        self.pipe = self._build(spec, read_threads, prefetch_size, shuffle_buffer)
        meta = self.pipe.reader_meta(_READER)
        total, rank, size = meta["epoch_size"], spec.rank, spec.size
        real = total * (rank + 1) // size - total * rank // size  # DALI's shard of this rank
        self.handed = real // batch_size if drop_last else -(-real // batch_size)
        self.iterations = -(-(meta["epoch_size_padded"] // size) // batch_size)
        self._index = SampleIndex(reader)
        self._static = static_deviations(reader.fmt.name, spec, shuffle_buffer, reader.odirect)
        self._plan = np.zeros(total, dtype=bool)
        self._seen = np.zeros(total, dtype=bool)
        # decoded as (rows, columns, 1); encoded bytes are flat
        self._image = reader.fmt.name in ("jpeg", "png") and reader.decode
        self._left = self._done = self._pos = 0
        self._in_order = True
        self._order = np.empty(0, dtype=np.int64)
        self._epochs = self._repeats = self._foreign = self._reordered = 0

    def _build(self, spec: ShardSpec, read_threads: int, prefetch_size: int, fill: int) -> Any:
        files = local_paths(self.reader)
        shuffle = spec.file_shuffle or spec.sample_shuffle
        options = {"name": _READER, "shard_id": spec.rank, "num_shards": spec.size,
                   "stick_to_shard": True, "pad_last_batch": True, "random_shuffle": shuffle,
                   "initial_fill": fill, "seed": spec.seed, "dont_use_mmap": self.reader.odirect}
        fmt_name, odirect, decode = self.reader.fmt.name, self.reader.odirect, self.reader.decode

        @pipeline_def(batch_size=self.batch_size, num_threads=max(1, read_threads),
                      device_id=None, prefetch_queue_depth=max(1, prefetch_size),
                      seed=spec.seed)
        def graph() -> tuple[Any, ...]:
            return reader_graph(fmt_name, files, odirect, options, decode)

        pipe = graph()
        pipe.build()
        return pipe

    def start(self, ids: np.ndarray) -> None:
        """Begin an epoch whose plan is ``ids`` (DALI delivers its own shard regardless)."""
        self._left, self._done, self._pos, self._in_order = self.iterations, 0, 0, True
        self._order = np.asarray(ids, dtype=np.int64)
        self._plan[:] = False
        self._plan[self._order] = True
        self._seen[:] = False
        self._epochs += 1

    def left(self) -> int:
        """Pipeline runs left in DALI's epoch."""
        return self._left

    def skip(self) -> None:
        """Run the pipeline once and discard the batch."""
        self._run()
        self._left -= 1

    def _run(self) -> Any:
        """One pipeline run; a file DALI's reader cannot read is said in one sentence."""
        try:
            return self.pipe.run()
        except RuntimeError as exc:
            error = reader_error(exc)
            if error is None:
                raise
            raise error from None

    def next_batch(self) -> Batch | None:
        """The next batch of the epoch, or None when the batches to hand on are done."""
        if self._done == self.handed:
            return None
        outputs = self._run()
        self._left -= 1
        self._done += 1
        return self._to_batch(outputs)

    def _to_batch(self, outputs: Any) -> Batch:
        data = outputs[0]
        encoded = [int(np.array(s)[0]) for s in outputs[1]] if len(outputs) > 1 else None
        ids, fresh, nbytes = [], [], 0
        for i in range(len(data)):
            sample_id, size = self._index.lookup(data[i].source_info(),
                                                 None if encoded is None else encoded[i])
            ids.append(sample_id)
            if self._seen[sample_id]:
                self._repeats += 1  # a padded repeat: DALI copies it, no read
            else:
                self._seen[sample_id] = True
                fresh.append(sample_id)
                nbytes += size
        self._check_plan(np.array(ids, dtype=np.int64), fresh)
        samples = [resize(s[..., 0] if self._image else s.reshape(-1), self.reader.resize_bytes)
                   for s in host_samples(data)]
        return Batch(ids=np.array(ids, dtype=np.int64), nbytes=nbytes, data=samples)

    def _check_plan(self, ids: np.ndarray, fresh: list[int]) -> None:
        """Count samples from outside the plan, and an epoch whose order is not the plan's."""
        self._foreign += int((~self._plan[ids]).sum())
        expected = self._order[self._pos:self._pos + len(fresh)]
        if self._in_order and not np.array_equal(expected, fresh):
            self._reordered += 1
            self._in_order = False
        self._pos += len(fresh)

    def close(self) -> None:
        """Release the pipeline."""
        release(self.pipe)
        self.pipe = None

    @property
    def deviations(self) -> list[str]:
        """How the delivered samples departed from the plan so far, in words."""
        out = list(self._static)
        epochs = f"over {self._epochs} epoch(s)"
        if self._repeats:
            out.append(f"DALI padded {self._repeats} repeated samples (pad_last_batch) {epochs}")
        if self._foreign:
            out.append(f"DALI delivered {self._foreign} samples outside this rank's planned "
                       f"shard (its own sharding) {epochs}")
        if self._reordered:
            out.append(f"DALI's sample order differed from the plan in {self._reordered} "
                       f"of {self._epochs} epoch(s)")
        return out
