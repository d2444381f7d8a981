"""Index a folder of existing data files: which format, which files, how many samples each.

The one step allowed to list a folder (DESIGN, the storage seam). Sizes come from ``stat``;
samples per file from the format's headers where it has them (npz: its member's shape along
the split's axis, ``formats.npz.Split``; npy: the array's shape;
tfrecord: the lines of its DALI index beside it, else its records walked; jpeg and png: one
image per file); nothing else is read unless checksums are asked for. Every refusal is one sentence.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from dliobench.base.errors import CorruptSampleError, DatasetError, InputError
from dliobench.dataset.check import crc_of
from dliobench.dataset.manifest import FOLDER
from dliobench.formats import _npyheader as npyheader
from dliobench.formats.base import Stored
from dliobench.formats.npz import Split, locate, members, samples_along
from dliobench.formats.tfrecord import walk_records
from dliobench.storage.backend import Backend

log = logging.getLogger(__name__)

# file name extension -> format; formats whose headers give samples per file (or one per file)
EXTENSIONS = {"npz": "npz", "npy": "npy", "jpg": "jpeg", "jpeg": "jpeg", "png": "png",
              "tfrecord": "tfrecord", "tfrecords": "tfrecord"}
NOT_YET = {"h5": "hdf5", "hdf5": "hdf5", "parquet": "parquet", "bin": "indexed_binary"}
SIDE_SUFFIXES = (".idx",)  # TFRecord's DALI index, beside its data file
HEAD_BYTES = 4096
DLIO_NAME = re.compile(r"_(\d+)_of_(\d+)\.[^./]+$")  # <prefix>_<i>_of_<n>.<format>
MAGIC = {"jpeg": b"\xff\xd8\xff", "png": b"\x89PNG\r\n\x1a\n"}


@dataclass(frozen=True)
class Index:
    """What a folder of data files holds: keys (relative to the data folder) in reading order,
    their sizes, samples per file and bytes per sample."""

    format: str
    keys: list[str]
    sizes: np.ndarray
    samples: np.ndarray  # samples in each file
    sample_bytes: np.ndarray  # bytes of one sample of each file
    crcs: np.ndarray | None = None
    members: tuple[str, ...] = ()  # npz: the first file's members (the split reads one)


def list_files(backend: Backend, prefix: str) -> list[str]:
    """The data files under ``prefix`` (our manifest, lock and hidden files left out), in
    DLIO's order: by file name, then by path (subfolders interleave as DLIO reads them)."""
    keys = [k for k in backend.list(prefix)
            if not k.startswith(f"{FOLDER}/") and not k.rsplit("/", 1)[-1].startswith(".")]
    odd = next((k for k in keys if "\n" in k), None)
    if odd is not None:
        raise InputError(f"{backend.describe(odd)!r} has a line break in its name; rename it")
    return sorted(keys, key=lambda k: (k.rsplit("/", 1)[-1], k))


def data_format(where: str, keys: list[str]) -> tuple[str, list[str]]:
    """The one format of the files (side files set aside) and the data files' keys."""
    if not keys:
        raise InputError(f"{where} holds no files; point dataset.data_folder (or --dataset) "
                           "at a folder of npz, npy, jpeg, png or tfrecord files")
    ext = {k: k.rsplit(".", 1)[-1].lower() if "." in k.rsplit("/", 1)[-1] else "" for k in keys}
    data = [k for k in keys if not k.endswith(SIDE_SUFFIXES) or ext[k] in EXTENSIONS]
    kinds = Counter(EXTENSIONS.get(ext[k], NOT_YET.get(ext[k], f".{ext[k]}" if ext[k] else
                                                         "no extension")) for k in data)
    if len(kinds) > 1:
        named = ", ".join(f"{n} {kind}" for kind, n in kinds.most_common())
        raise InputError(f"{where} mixes file kinds ({named}); point dataset.data_folder at a "
                           "folder holding one format")
    (kind,) = kinds
    if kind in NOT_YET.values():
        raise InputError(f"{where} holds {kind} files: reading an existing {kind} dataset is "
                           "not supported yet (npz, npy, jpeg, png and tfrecord are)")
    if kind not in EXTENSIONS.values():
        raise InputError(f"{where} holds files dliobench cannot read as samples ({kind}, e.g. "
                           f"{data[0]}); supported: npz, npy, jpeg/jpg, png, tfrecord")
    return kind, data


def dlio_named(keys: list[str]) -> bool:
    """Whether the files bear DLIO's names, ``<prefix>_<i>_of_<n>.<format>`` with n the
    number of files (whatever the configuration says of their count)."""
    found = [DLIO_NAME.search(k) for k in keys]
    return bool(keys) and all(m is not None and int(m.group(2)) == len(keys) for m in found)


def index(backend: Backend, prefix: str, split: Split, samples_last: bool,
          checksums: bool) -> Index:
    """List and index the data files under ``prefix``: npz files cut as ``split`` says, npy
    files along their first axis (``samples_last``, or files with DLIO's names: their last, as
    DLIO writes them)."""
    where = backend.describe(prefix)
    fmt, keys = data_format(where, list_files(backend, prefix))
    samples_last = samples_last or dlio_named(keys)
    sizes = np.empty(len(keys), np.int64)
    samples = np.empty(len(keys), np.int64)
    sample_bytes = np.empty(len(keys), np.int64)
    for i, key in enumerate(keys):
        size = backend.size(key)
        if size is None:
            raise InputError(f"{backend.describe(key)} vanished while it was indexed; index "
                               "again once nothing changes the folder")
        sizes[i] = size
        samples[i], sample_bytes[i] = _samples(backend, key, fmt, size, split, samples_last)
    crcs = None
    if checksums:
        crcs = np.array([crc_of(backend, k, int(s)) for k, s in zip(keys, sizes, strict=True)],
                        dtype=np.uint32)
    names = _member_names(backend, keys[0], int(sizes[0])) if fmt == "npz" else ()
    return Index(fmt, keys, sizes, samples, sample_bytes, crcs, names)


def _reader(backend: Backend, key: str, size: int) -> Callable[[int, int], memoryview]:
    """Reads of the file's bytes at an offset, clipped to its size."""
    def read(offset: int, length: int) -> memoryview:
        return backend.read_range(key, offset, max(0, min(length, size - offset)))[0]

    return read


def _member_names(backend: Backend, key: str, size: int) -> tuple[str, ...]:
    """The members of an npz file, in order (for saying which ones the split leaves)."""
    try:
        return tuple(m[0] for m in members(backend.describe(key), _reader(backend, key, size)))
    except (CorruptSampleError, DatasetError):
        return ()


def _samples(backend: Backend, key: str, fmt: str, size: int, split: Split,
             samples_last: bool) -> tuple[int, int]:
    """(samples, bytes per sample) of one file, from its header."""
    name = backend.describe(key)
    if size == 0:
        raise InputError(f"{name} is empty (0 bytes); remove it or point at another folder")
    if fmt == "tfrecord":
        return _tfrecord_samples(backend, key, size)
    if fmt == "npz":
        return _npz_samples(backend, key, size, split)
    head, _ = backend.read_range(key, 0, min(size, HEAD_BYTES))
    if fmt in MAGIC:
        if bytes(head[:len(MAGIC[fmt])]) != MAGIC[fmt]:
            raise InputError(f"{name} is not a {fmt} file (its first bytes are not the "
                               f"{fmt} signature); remove it or fix it")
        return 1, size
    try:
        header = npyheader.parse(name, head, 0)
    except CorruptSampleError as exc:
        raise InputError(f"{name} is not a readable {fmt} file ({_reason(exc)}); remove it "
                           "or fix it") from None
    _check_size(name, header.data_offset + header.nbytes, size)
    shape = header.shape or (1,)
    count = shape[-1] if samples_last else shape[0]
    if samples_last and count > 1:
        raise InputError(f"{name} holds {count} samples along its last axis, as DLIO writes "
                           "them: they are interleaved, and dliobench reads a sample as a "
                           "contiguous byte range; only one-sample DLIO npy files can be read")
    if samples_last or count == 0:
        count = 1
    return count, max(1, header.nbytes // count)


def _npz_samples(backend: Backend, key: str, size: int, split: Split) -> tuple[int, int]:
    """(samples, bytes per sample) of an npz file cut as ``split`` says."""
    name = backend.describe(key)
    try:
        found = locate(name, _reader(backend, key, size), split.member)
        _check_size(name, found.data_offset + found.nbytes, size)
        count = 1 if split.axis is None else samples_along(name, found, split.axis)
    except CorruptSampleError as exc:
        raise InputError(f"{name} is not a readable npz file ({_reason(exc)}); remove it "
                           "or fix it") from None
    except DatasetError as exc:
        raise InputError(str(exc)) from None
    count = max(1, count)
    return count, max(1, found.nbytes // count)


def _check_size(name: str, end: int, size: int) -> None:
    """Refuse a file shorter than its header says."""
    if end > size:
        raise InputError(f"{name} is truncated: its header describes data up to byte "
                           f"{end:,}, the file has {size:,}; remove it or fix it")


def _tfrecord_samples(backend: Backend, key: str, size: int) -> tuple[int, int]:
    """Records of a TFRecord file: the lines of its DALI index beside it, else its records
    walked (their length fields)."""
    side = backend.size(key + ".idx")
    if side is None:
        try:
            count = len(walk_records(Stored(backend, key), size))
        except (CorruptSampleError, DatasetError) as exc:
            raise InputError(f"{backend.describe(key)} is not a readable tfrecord file "
                             f"({_reason(exc)}); remove it or fix it") from None
    else:
        text = bytes(backend.read_range(key + ".idx", 0, side)[0])
        count = len(text.split(b"\n")) - (1 if text.endswith(b"\n") else 0)
    if count < 1:
        raise InputError(f"{backend.describe(key)} holds no records; remove it")
    return count, max(1, size // count)


def _reason(exc: Exception) -> str:
    """The cause of a format error, without the path and advice around it."""
    if isinstance(exc, CorruptSampleError):
        return exc.reason
    return str(exc).split("; ", 1)[0]
