"""The manifest: a dataset's commit record and namespace (schema 2, columnar).

``dliobench-manifest/manifest.json`` holds the generation parameters and names the column
files; per file it records, as ``.npy`` columns indexed by file number, the size and CRC-32C
of the data file and of each side file (an index). File names are derived from the index and
the layout, so nothing lists a folder or a bucket, and each rank reads only the entries of
the files it needs (``entries``): per-rank memory and time O(files / ranks).

During generation each rank appends a record per durable file to its journal
(``journal/rank-NNNNN.bin``, fixed-size records with their own CRC, so a torn tail is
recognised); a file is done when its record is written. ``compact`` folds the journals into
new columns and then switches the header to them, so a crash at any point leaves either the
old columns with the journals (replayed next time) or the new columns. A schema-1 manifest
(one JSON document) is migrated on first load.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dliobench.base.errors import DatasetError
from dliobench.config.schema import DatasetConfig
from dliobench.dataset import legacy
from dliobench.dataset.columns import Column, write_column
from dliobench.dataset.legacy import LEGACY_KEY
from dliobench.dataset.records import ABSENT, checks, record_dtype, records, with_checks
from dliobench.formats import get_format
from dliobench.storage.backend import Backend

FOLDER = "dliobench-manifest"
HEADER_KEY = f"{FOLDER}/manifest.json"
SCHEMA = 2
# The dataset keys that decide the bytes of file i; the file count may differ between runs.
log = logging.getLogger(__name__)
IDENTITY_KEYS = ("format", "num_samples_per_file", "record_length_bytes",
                 "record_length_bytes_stdev", "file_prefix", "generation_seed",
                 "num_subfolders_train", "compressibility", "enable_chunking", "chunk_size",
                 "compression", "compression_level")


def identity(dataset: DatasetConfig) -> dict[str, Any]:
    """The generation parameters a dataset on disk must share with the configuration."""
    out = {k: getattr(dataset, k) for k in IDENTITY_KEYS}
    if dataset.format == "parquet":  # only there, so older manifests of other formats match
        out["parquet_row_group_size"] = dataset.parquet_row_group_size
        out["parquet_columns"] = ",".join(f"{c.name}:{c.dtype}:{c.size}"
                                          for c in dataset.parquet_columns)
    return out


@dataclass
class Entries:
    """Manifest entries of some files: sizes and CRCs, side files' as (files, sides)."""

    size: np.ndarray
    crc: np.ndarray
    side_size: np.ndarray
    side_crc: np.ndarray


@dataclass
class Manifest:
    """A committed manifest: its header (small, broadcast) and its columns (read in slices)."""

    backend: Backend
    params: dict[str, Any]
    side_suffixes: list[str]
    sample_crcs: int = 0  # samples per file whose CRC-32C are recorded (0: none)
    num_files: int = 0  # entries in the columns
    generation: int = 0  # bumped by each compaction: names the current columns
    journals: list[str] = field(default_factory=list)  # journals not folded in yet

    def to_json(self) -> dict[str, Any]:
        """The header document."""
        return {"schema": SCHEMA, "params": self.params, "side_suffixes": self.side_suffixes,
                "sample_crcs": self.sample_crcs, "num_files": self.num_files,
                "generation": self.generation,
                "columns": {name: self.column_key(name) for name in self._columns()},
                "journals": self.journals}

    @classmethod
    def new(cls, backend: Backend, dataset: DatasetConfig,
            side_suffixes: Iterable[str]) -> Manifest:
        """An empty manifest for ``dataset`` (nothing on storage yet)."""
        samples = dataset.num_samples_per_file if dataset.sample_checksums else 0
        return cls(backend, identity(dataset), list(side_suffixes), samples)

    @classmethod
    def load(cls, backend: Backend) -> Manifest | None:
        """The dataset's manifest, migrated from schema 1 if need be; None if there is none."""
        try:
            data = read_whole(backend, HEADER_KEY)
        except OSError as exc:  # not a regular file, a symlink loop, an I/O error
            raise _damaged(backend, exc.strerror or str(exc)) from None
        if data is None:
            return _migrate(backend)
        try:
            doc = json.loads(bytes(data))
            if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
                raise ValueError("not a dliobench manifest of schema 2")
            return cls(backend, _typed(doc, "params", dict), _typed(doc, "side_suffixes", list),
                       _typed(doc, "sample_crcs", int, 0), _typed(doc, "num_files", int),
                       _typed(doc, "generation", int), _typed(doc, "journals", list))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise _damaged(backend, str(exc)) from None

    def save_header(self) -> None:
        """Commit the header atomically (it names the columns and journals to use)."""
        with self._writing():
            self.backend.make_room(FOLDER)
            self.backend.put(HEADER_KEY, json.dumps(self.to_json(), indent=1).encode())

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """A failed manifest write as one sentence (what is committed stays valid)."""
        try:
            yield
        except OSError as exc:
            raise DatasetError(
                f"cannot write the manifest under {self.backend.describe(FOLDER)}: "
                f"{exc.strerror}; free space and run `dliobench generate` again (complete "
                "files already recorded are kept)") from None

    def check_matches(self, dataset: DatasetConfig) -> None:
        """Raise DatasetError when the dataset on disk was generated with other parameters."""
        wanted = identity(dataset)
        diff = [f"{k}={self.params.get(k)!r} (this run: {v!r})"
                for k, v in wanted.items() if self.params.get(k) != v]
        if diff:
            raise DatasetError(
                f"the dataset in {dataset.data_folder} was generated with other parameters: "
                + ", ".join(diff)
                + "; point dataset.data_folder to another folder or delete this one"
            )

    def _columns(self) -> tuple[str, ...]:
        sides = ("side_size", "side_crc") if self.side_suffixes else ()
        return ("size", "crc", *sides, *(("sample_crc",) if self.sample_crcs else ()))

    def sample_checksums(self, ids: np.ndarray) -> np.ndarray:
        """(len(ids), samples per file) CRC-32C of the files' samples as recorded."""
        ids = np.asarray(ids, dtype=np.int64)
        if not self.sample_crcs or not self.num_files or (ids >= self.num_files).any():
            raise DatasetError(f"the manifest {self.backend.describe(HEADER_KEY)} holds no "
                               "per-sample checksums for these files; generate the dataset with "
                               "dataset.sample_checksums=true (in a new folder) to verify reads")
        out: np.ndarray = Column(self.backend, self.column_key("sample_crc")).gather(ids)
        return out

    def column_key(self, name: str) -> str:
        return f"{FOLDER}/{name}-{self.generation:06d}.npy"

    def entries(self, ids: np.ndarray) -> Entries:
        """Entries of the files ``ids`` (any order); files beyond the columns are absent."""
        ids = np.asarray(ids, dtype=np.int64)
        sides = len(self.side_suffixes)
        inside = ids < self.num_files
        out = Entries(np.full(ids.size, ABSENT, np.int64), np.zeros(ids.size, np.uint32),
                      np.full((ids.size, sides), ABSENT, np.int64),
                      np.zeros((ids.size, sides), np.uint32))
        if self.num_files and inside.any():
            for name in ("size", "crc", *(("side_size", "side_crc") if sides else ())):
                column = Column(self.backend, self.column_key(name))
                getattr(out, name)[inside] = column.gather(ids[inside])
        return out

    def sizes(self, ids: np.ndarray) -> np.ndarray:
        """Data file sizes of ``ids`` (``ABSENT`` for files the manifest does not hold)."""
        ids = np.asarray(ids, dtype=np.int64)
        out = np.full(ids.size, ABSENT, np.int64)
        inside = ids < self.num_files
        if self.num_files and inside.any():
            out[inside] = Column(self.backend, self.column_key("size")).gather(ids[inside])
        return out

    def held(self) -> dict[int, tuple[int, int]]:
        """{file index: (size, CRC-32C)} of every file held, the open journals included
        (read only), for tools and tests (O(files))."""
        ids = np.arange(self.num_files, dtype=np.int64)
        entries = self.entries(ids)
        out = {int(i): (int(s), int(c)) for i, s, c in
               zip(ids, entries.size, entries.crc, strict=True)}
        for rec in self._journal_records():
            out[int(rec["index"])] = (int(rec["size"]), int(rec["crc"]))
        return {i: entry for i, entry in out.items() if entry[0] >= 0}

    def journal_key(self, rank: int) -> str:
        """The journal of ``rank`` in the current generation."""
        return f"{FOLDER}/journal-{self.generation:06d}/rank-{rank:05d}.bin"

    def open_journals(self, files_per_rank: list[int]) -> None:
        """Name the journals of the writers (one per rank) before any of them writes, with
        room reserved for each rank's records: a disk that fills up with data files cannot
        lose the record of the complete ones."""
        keys = [self.journal_key(r) for r in range(len(files_per_rank))]
        self.journals = sorted(set(self.journals) | set(keys))
        self.backend.make_room(keys[0].rsplit("/", 1)[0])
        itemsize = self.record_dtype().itemsize
        with self._writing():
            for key, files in zip(keys, files_per_rank, strict=True):
                self.backend.reserve(key, files * itemsize)
        self.save_header()

    def record_dtype(self) -> np.dtype:
        """The records of this manifest's journals."""
        return record_dtype(len(self.side_suffixes), self.sample_crcs)

    def append(self, rank: int, records: np.ndarray) -> None:
        """Append journal records of durable files, durably (fields this manifest does not
        keep, per-sample CRCs, are dropped; those it keeps and ``records`` lack are zero)."""
        if records.dtype != self.record_dtype():
            fitted = np.zeros(records.size, self.record_dtype())
            for name in set(records.dtype.names or ()) & set(fitted.dtype.names or ()):
                fitted[name] = records[name]
            records = fitted
        if records.size:
            with self._writing():
                self.backend.append(self.journal_key(rank), with_checks(records).tobytes())

    def compact(self, min_files: int = 0, extra: np.ndarray | None = None) -> None:
        """Fold the journals (and ``extra`` records, applied last) into new columns, switch
        the header to them, drop the old columns and journals."""
        records = self._journal_records()
        if extra is not None and extra.size:
            records = np.concatenate([records, extra])
        if not records.size and not self.journals and self.num_files >= min_files:
            return
        top = int(records["index"].max()) + 1 if records.size else 0
        capacity = max(self.num_files, top, min_files)
        old = Manifest(self.backend, self.params, self.side_suffixes, self.sample_crcs,
                       self.num_files, self.generation, [])
        self.generation += 1
        self.num_files = capacity
        with self._writing():
            self.backend.make_room(FOLDER)
            for name in self._columns():
                write_column(self.backend, self.column_key(name), old, name, capacity, records)
        stale = [old.column_key(n) for n in old._columns()] if old.num_files else []
        stale += self.journals
        self.journals = []
        self.save_header()
        for key in stale:
            self.backend.delete(key)

    def _journal_records(self) -> np.ndarray:
        """Every whole, intact record of the open journals, later ones last."""
        dtype = self.record_dtype()
        parts = []
        for key in self.journals:
            data = read_whole(self.backend, key)
            if data is None:
                continue
            whole = len(data) - len(data) % dtype.itemsize  # a torn tail is dropped
            recs = np.frombuffer(data[:whole], dtype=dtype)
            parts.append(recs[checks(recs) == recs["check"]])
        return np.concatenate(parts) if parts else np.empty(0, dtype)


def _typed(doc: dict[str, Any], name: str, kind: type, default: Any = None) -> Any:
    """Field ``name`` of a manifest document, checked to be a ``kind``."""
    value = doc.get(name, default)
    if not isinstance(value, kind) or isinstance(value, bool):
        want = {dict: "an object", list: "a list", int: "an integer"}.get(kind, kind.__name__)
        raise TypeError(f"its field {name!r} is {json.dumps(value)[:40]}, not {want}")
    return value


def _damaged(backend: Backend, why: str) -> DatasetError:
    """The error for a manifest header that cannot be used."""
    return DatasetError(f"the manifest {backend.describe(HEADER_KEY)} is damaged or of another "
                        f"dliobench ({why}); delete the folder dliobench-manifest and run "
                        "`dliobench generate` to check and complete the dataset")


def read_whole(backend: Backend, key: str) -> memoryview | None:
    """A small object whole (a header, a journal), or None when it does not exist."""
    size = backend.size(key)
    if size is None:
        return None
    data, _ = backend.read_range(key, 0, size)
    return data


def _migrate(backend: Backend) -> Manifest | None:
    """The schema-2 manifest of a dataset with a schema-1 one (which is then removed)."""
    data = read_whole(backend, LEGACY_KEY)
    if data is None:
        return None
    path = backend.describe(LEGACY_KEY)
    params, entries = legacy.parse(bytes(data), path)
    sides = get_format(str(params["format"])).side_suffixes
    manifest = Manifest(backend, params, list(sides))
    manifest.compact(extra=records(entries, len(sides)))
    backend.delete(LEGACY_KEY)
    log.info("migrated the manifest %s (%d files) to %s", path, len(entries),
             backend.describe(manifest.to_json()["columns"]["size"]))
    return manifest
