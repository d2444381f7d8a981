"""Which files make up a dataset, where they live and how big their samples are.

Everything here is a pure function of the dataset configuration, so every rank (and every
later run) computes the same list. File i's sample size depends only on the seed and i, so a
dataset of N files is a prefix of one of M > N files: runs may use fewer files than exist.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import overload

import numpy as np

from dliobench.config.schema import DatasetConfig


@dataclass(frozen=True)
class DataFile:
    """One data file of the training set."""

    index: int
    relpath: str
    num_samples: int
    sample_bytes: int

    @property
    def payload_bytes(self) -> int:
        """Bytes of sample data in the file (headers excluded)."""
        return self.num_samples * self.sample_bytes


def train_dir(dataset: DatasetConfig) -> Path:
    """The folder holding the training files."""
    return Path(dataset.data_folder) / TRAIN


def sample_sizes(dataset: DatasetConfig) -> np.ndarray:
    """Bytes per sample of every file: normal(mean, stdev), at least 1 byte."""
    mean, stdev = dataset.record_length_bytes, dataset.record_length_bytes_stdev
    if stdev == 0:
        return np.full(dataset.num_files_train, mean, dtype=np.int64)
    rng = np.random.default_rng([dataset.generation_seed, 0x512E])
    draws = rng.normal(mean, stdev, dataset.num_files_train)
    return np.maximum(np.rint(draws), 1).astype(np.int64)


def relpath(dataset: DatasetConfig, index: int, extension: str) -> str:
    """Path of file ``index`` relative to the training folder."""
    return _name("", dataset.file_prefix, dataset.num_subfolders_train, extension, index)


def _name(prefix: str, file_prefix: str, folders: int, extension: str, index: int) -> str:
    """``prefix`` + the path of file ``index`` relative to the training folder."""
    if folders:
        return f"{prefix}{index % folders:04d}/{file_prefix}_{index:07d}.{extension}"
    return f"{prefix}{file_prefix}_{index:07d}.{extension}"


def relpaths(dataset: DatasetConfig, extension: str, prefix: str = "") -> RelPaths:
    """``prefix`` + ``relpath`` of each index of a list, as one callable (``RelPaths``)."""
    return RelPaths(dataset.file_prefix, dataset.num_subfolders_train, extension, prefix)


class RelPaths:
    """``prefix`` + ``relpath`` of each index of a list: the configuration read once (a loader
    names a file per sample). Picklable, for loader workers started by spawn."""

    __slots__ = ("extension", "file_prefix", "folders", "prefix")

    def __init__(self, file_prefix: str, folders: int, extension: str, prefix: str) -> None:
        self.file_prefix, self.folders = file_prefix, folders
        self.extension, self.prefix = extension, prefix

    def __call__(self, indices: list[int]) -> list[str]:
        prefix, stem, ext, folders = self.prefix, self.file_prefix, self.extension, self.folders
        return [_name(prefix, stem, folders, ext, i) for i in indices]


TRAIN = "train"  # the training files' folder under the data folder


class FileKeys(Sequence[str]):
    """Every training file's key (``train/<relpath>``), computed when asked: no list of
    names is ever held, whatever the file count."""

    def __init__(self, dataset: DatasetConfig, extension: str) -> None:
        self._dataset = dataset
        self._extension = extension
        self._keys = relpaths(dataset, extension, f"{TRAIN}/")

    def __len__(self) -> int:
        return self._dataset.num_files_train

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> list[str]: ...

    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if not 0 <= index < len(self):
            raise IndexError(index)
        return self._keys([index])[0]

    def pattern(self) -> tuple[str, str, int, str]:
        """How a key is made of its index: (prefix, file prefix, subfolders, extension), as
        ``_name`` (the native loader names files in C: ``storage._named.h``)."""
        k = self._keys
        return k.prefix, k.file_prefix, k.folders, k.extension

    def many(self, indices: list[int]) -> list[str]:
        """``[self[i] for i in indices]``, faster (one bounds check, one format per key)."""
        if indices and not (min(indices) >= 0 and max(indices) < len(self)):
            raise IndexError(next(i for i in indices if not 0 <= i < len(self)))
        return self._keys(indices)


def dataset_files(dataset: DatasetConfig, extension: str) -> list[DataFile]:
    """Every training file, in index order."""
    sizes = sample_sizes(dataset)
    return [
        DataFile(i, relpath(dataset, i, extension), dataset.num_samples_per_file, int(sizes[i]))
        for i in range(dataset.num_files_train)
    ]
