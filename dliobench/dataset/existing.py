"""Existing datasets: your own files, or a dataset DLIO generated, read instead of generated.

The folder is listed and its files indexed once (``dataset.indexing``) into the manifest,
beside the data, or under ``<output.folder>/dataset-index/`` when the data folder cannot be
written; the manifest then also names the files (``names.txt``), so later runs neither list
the folder nor derive names. The run's configuration takes the format, file count, samples
per file and sample sizes from the index.

An npz file is cut into samples as ``formats.npz.Split`` says: DLIO's ``x[..., i]`` unless
``dataset.npz_member`` / ``dataset.npz_sample_axis`` say otherwise, or the member whole when
the command line sets ``dataset.num_samples_per_file=1``. The index records the split it was
built for; a run asking for another indexes the files again. Every run says the split.
"""

from __future__ import annotations

import hashlib
import logging
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from dliobench.base.errors import ConfigError, DatasetError, InputError
from dliobench.base.units import size_text
from dliobench.comm.world import Comm, World
from dliobench.config.schema import Config, DatasetConfig
from dliobench.dataset.indexing import Index, dlio_named, index
from dliobench.dataset.layout import TRAIN
from dliobench.dataset.manifest import (
    FOLDER,
    HEADER_KEY,
    IDENTITY_KEYS,
    Manifest,
    identity,
    read_whole,
    records,
)
from dliobench.formats import format_for
from dliobench.formats.npz import AXIS, MEMBER, Split
from dliobench.storage import backend_for
from dliobench.storage.backend import Backend
from dliobench.storage.location import is_url

log = logging.getLogger(__name__)
NAMES_KEY = f"{FOLDER}/names.txt"
PER_FILE = "dataset.num_samples_per_file"
# below this, an npz split's "samples" are no training data (DLRM's, the smallest shipped
# workload's, are 160 B): a split of shape (1, N) along its last axis, N samples of 1 B
MIN_SAMPLE_BYTES = 64
INDEX_ROOT = "dataset-index"  # under output.folder, for data folders we cannot write


@dataclass(frozen=True)
class Existing:
    """An indexed existing dataset: the configuration that reads it, its files' keys and the
    storage its manifest lives on."""

    config: Config
    keys: list[str]
    manifest_backend: Backend
    layout: str


def wanted(dataset: DatasetConfig) -> bool:
    """Whether the data folder holds an existing dataset to read rather than generate: said
    so, or (``layout: auto``) DLIO's first file of this configuration is there (one stat)."""
    if dataset.source == "existing" or dataset.layout == "dlio":
        return True
    if dataset.layout != "auto" or is_url(dataset.data_folder):  # object stores: generated
        return False
    try:
        return _has_dlio_names(backend_for(dataset.data_folder), dataset)
    except OSError:
        return False


def dlio_first_keys(dataset: DatasetConfig) -> list[str]:
    """The keys DLIO gives the first training file of this configuration:
    ``train/[<subfolder>/]<prefix>_<i>_of_<n>.<format>``, with i and the subfolder padded to
    the digits of n and of the subfolder count (2.0 and main), or unpadded (1.x)."""
    n, sub = dataset.num_files_train, dataset.num_subfolders_train
    out = []
    for first, folder in (("0" * len(str(n)), "0" * len(str(sub))), ("0", "0")):
        name = f"{dataset.file_prefix}_{first}_of_{n}.{dataset.format}"
        out.append(f"{TRAIN}/{folder}/{name}" if sub > 1 else f"{TRAIN}/{name}")
    return out


def adopt(config: Config, world: World, comm: Comm) -> Existing | None:
    """The existing dataset the configuration points at, indexed (once) by rank 0; None when
    the dataset is to be generated."""
    if not wanted(config.dataset):
        if (config.dataset.npz_member, config.dataset.npz_sample_axis) != (MEMBER, AXIS):
            raise ConfigError("dataset.npz_member and dataset.npz_sample_axis say how an "
                              "existing npz dataset is split into samples; this run generates "
                              "its dataset (x, a sample per row), so leave them out or read "
                              "existing files (dataset.source=existing)")
        return None
    found = _open_or_index(config) if world.is_root else None
    shared: tuple[dict[str, Any], list[str], str] | None = comm.bcast(found)
    assert shared is not None
    params, keys, where = shared
    _check_asked(config, params)
    _check_split_size(config, params)
    if world.is_root:
        if params.get("split_said"):
            log.info("%s", params["split_said"])
        if params.get("samples_not_read"):
            log.warning("the files of %s hold different numbers of samples: each is read as %d "
                        "sample(s), so %d sample(s) are never read", config.dataset.data_folder,
                        params["num_samples_per_file"], params["samples_not_read"])
    dataset = replace(config.dataset, **{k: params[k] for k in IDENTITY_KEYS},
                      num_files_train=len(keys), source="existing", layout=str(params["layout"]))
    return Existing(replace(config, dataset=dataset), keys, backend_for(where),
                    str(params["layout"]))


def asked_split(config: Config) -> Split:
    """The npz split the run asks for: the member whole when the command line sets
    ``dataset.num_samples_per_file=1``, else its samples along ``dataset.npz_sample_axis``."""
    d = config.dataset
    whole = PER_FILE in config.given and d.num_samples_per_file == 1
    return Split(d.npz_member, None if whole else d.npz_sample_axis)


def _check_split_size(config: Config, params: dict[str, Any]) -> None:
    """Refuse, before any work, a default npz split whose samples are too small to be a
    training sample: a member of shape (1, N) cut along its last axis is N samples of one
    byte, whose sample order and loader indices outgrow memory (PyTorch's workers reached
    6.5 GB each). A split named on the command line is taken as asked."""
    sample = int(params.get("record_length_bytes") or 0)
    if params.get("format") != "npz" or sample >= MIN_SAMPLE_BYTES:
        return
    if {"dataset.npz_member", "dataset.npz_sample_axis"} & set(config.given):
        return  # a split the user asked for by name (labels, say) is theirs
    per_file = int(params["num_samples_per_file"])
    raise InputError(
        f"the npz files in {config.dataset.data_folder}, read as "
        f"{params.get('split_text', 'indexed')}, make {per_file:,} sample(s) of about "
        f"{sample:,} B per file, smaller than any training sample (under {MIN_SAMPLE_BYTES} B); "
        "set dataset.num_samples_per_file=1 to read each file's member whole as one sample, "
        "or dataset.npz_sample_axis (0: along the first axis) / dataset.npz_member to cut "
        "them otherwise")


def _check_asked(config: Config, params: dict[str, Any]) -> None:
    """Refuse, in one sentence, what the command line asks that the files do not hold."""
    d, per_file, fmt = config.dataset, int(params["num_samples_per_file"]), params["format"]
    if fmt != "npz" and (d.npz_member, d.npz_sample_axis) != (MEMBER, AXIS):
        raise InputError(f"dataset.npz_member and dataset.npz_sample_axis apply to npz files, "
                         f"and {d.data_folder} holds {fmt} files; leave them out")
    if PER_FILE not in config.given or d.num_samples_per_file == per_file:
        return
    if fmt == "npz" and d.num_samples_per_file == 1:
        return  # honoured: the member whole (asked_split)
    how = f"as {params.get('split_text', 'indexed')}" if fmt == "npz" else "as indexed"
    whole = ", or to 1 to read a file's member whole as one sample" if fmt == "npz" else ""
    raise InputError(f"dataset.num_samples_per_file={d.num_samples_per_file} does not match "
                     f"the files in {d.data_folder}, which hold {per_file} sample(s) each "
                     f"{how}; leave it out, set it to {per_file}{whole}")


def _open_or_index(config: Config) -> tuple[dict[str, Any], list[str], str]:
    """(manifest parameters, file keys, manifest folder): the index beside the data or in the
    output folder, or a new one (also when it was built for another npz split)."""
    d = config.dataset
    if is_url(d.data_folder):
        raise InputError(f"dataset.data_folder {d.data_folder}: existing datasets are read from "
                         "POSIX folders only (an object store's cannot be indexed yet); let "
                         "dliobench generate it there (dataset.source=generate)")
    folder = Path(d.data_folder)
    if not folder.is_dir():
        raise InputError(f"dataset.data_folder {folder} is not a folder; give the folder "
                         "holding your dataset")
    split = asked_split(config)
    for place in (str(folder), str(fallback_folder(config))):
        backend = backend_for(place)
        manifest = Manifest.load(backend) if os.path.isdir(place) else None
        if manifest is None:
            continue
        if manifest.params.get("source") != "existing":
            raise DatasetError(f"{folder} holds a dataset dliobench generated (its manifest "
                               "is there), not files to index; run the workload on it as "
                               f"generated, with dataset.data_folder={folder} instead of "
                               "--dataset")
        if manifest.params.get("format") == "npz" and not _built_for(manifest.params, split):
            log.info("the index in %s was built for another npz split (%s); indexing the "
                     "files again for %s", backend.describe(FOLDER),
                     manifest.params.get("split_text", "not recorded"), split_text(split))
            _drop(manifest)
            continue
        names = read_whole(backend, NAMES_KEY)
        if names is None:
            raise DatasetError(f"the index in {backend.describe(FOLDER)} lacks its list of "
                               "files; delete that folder to index the dataset again")
        return manifest.params, bytes(names).decode().split("\n"), place
    return _new_index(config, split)


def _built_for(params: dict[str, Any], split: Split) -> bool:
    """Whether an npz index serves ``split``: built for it, or (the member whole asked) built
    for one sample along an axis of that member in every file, which is the member whole."""
    built = params.get("npz_split")
    if built == split.to_json():
        return True
    return split.axis is None and isinstance(built, dict) and \
        built.get("member") == split.member and params.get("num_samples_per_file") == 1 \
        and not params.get("samples_not_read")


def _drop(manifest: Manifest) -> None:
    """Remove an index (its header first: without it nothing trusts the rest); one that
    cannot be removed (a read-only folder) stays, passed over the same way by later runs."""
    backend = manifest.backend
    try:
        for key in (HEADER_KEY, NAMES_KEY,
                    *(manifest.column_key(n) for n in manifest.to_json()["columns"])):
            backend.delete(key)
    except OSError:
        pass


def split_text(split: Split) -> str:
    """The split in numpy's indexing, e.g. ``x[..., i] along axis -1``."""
    if split.axis is None:
        return f"{split.member} whole"
    axis = split.axis
    where = ":, " * axis + "i" if axis >= 0 else "..., i" + ", :" * (-axis - 1)
    return f"{split.member}[{where}] along axis {axis}"


def fallback_folder(config: Config) -> Path:
    """Where the index of a data folder we cannot write goes: one folder per data folder."""
    path = os.path.abspath(config.dataset.data_folder)
    slug = path.strip("/").replace("/", "_")[-60:] or "root"
    digest = hashlib.sha1(path.encode()).hexdigest()[:8]
    return Path(config.output.folder) / INDEX_ROOT / f"{slug}-{digest}"


def _new_index(config: Config, split: Split) -> tuple[dict[str, Any], list[str], str]:
    """List and index the folder; write the manifest where it can go."""
    d = config.dataset
    data = backend_for(d.data_folder)
    layout = "dlio" if d.layout == "dlio" or _has_dlio_names(data, d) else "own"
    prefix = TRAIN if layout == "dlio" or os.path.isdir(os.path.join(d.data_folder, TRAIN)) \
        else ""
    found = index(data, prefix, split, samples_last=layout == "dlio",
                  checksums=d.index_checksums)
    if d.layout == "auto" and dlio_named(found.keys):  # whatever num_files_train says
        layout = "dlio"
    params = _params(d, found, layout, split)
    place = d.data_folder if writable(data) else str(fallback_folder(config))
    _write(backend_for(place), params, found)
    log.info("indexed %d %s files in %s (%s, %d sample(s) per file, %s bytes per sample on "
             "average); the index is in %s", len(found.keys), found.format, d.data_folder,
             size_text(int(found.sizes.sum())), params["num_samples_per_file"],
             f"{params['record_length_bytes']:,}", backend_for(place).describe(FOLDER))
    return params, found.keys, place


def _has_dlio_names(data: Backend, dataset: DatasetConfig) -> bool:
    """DLIO's first file of this configuration is in the data folder."""
    return any(data.size(key) is not None for key in dlio_first_keys(dataset))


def _params(dataset: DatasetConfig, found: Index, layout: str,
            split: Split) -> dict[str, Any]:
    """The manifest's parameters: the identity of the configuration that reads the files,
    and for npz the split they were indexed for."""
    per_file = int(found.samples.min())
    sample = found.sample_bytes.astype(np.float64)
    derived = replace(dataset, format=found.format, num_samples_per_file=per_file,
                      record_length_bytes=max(1, round(float(sample.mean()))),
                      record_length_bytes_stdev=round(float(sample.std())),
                      num_subfolders_train=0)
    unread = int((found.samples - per_file).sum())
    out = {**identity(derived), "source": "existing", "layout": layout,
           "data_folder": os.path.abspath(dataset.data_folder), "files": len(found.keys),
           "samples_not_read": unread, "checksums": found.crcs is not None}
    if found.format == "npz":
        out.update(npz_split=split.to_json(), split_text=split_text(split),
                   split_said=_said(split, per_file, derived.record_length_bytes, found))
    return out


def _said(split: Split, per_file: int, sample_bytes: int, found: Index) -> str:
    """The sentence every run prints (and the index keeps): how the npz files are cut."""
    left = [m for m in found.members if m != split.member]
    unread = f"; {', '.join(left)} {'is' if len(left) == 1 else 'are'} not read" if left else ""
    if split.axis is None:
        return (f"npz: each file is one sample, {split.member} whole ({sample_bytes:,} B on "
                f"average), as dataset.num_samples_per_file=1 asks{unread}")
    whose = "as DLIO writes them" if (split.member, split.axis) == (MEMBER, AXIS) \
        else f"not DLIO's {MEMBER}[..., i]"
    return (f"npz: samples are {split_text(split)}, {per_file} per file of {sample_bytes:,} B "
            f"on average, {whose}{unread}; set dataset.npz_sample_axis / dataset.npz_member "
            "to change")


def _write(backend: Backend, params: dict[str, Any], found: Index) -> None:
    """Commit the names, then the manifest (its header last: it is the commit)."""
    sides = format_for(replace(DatasetConfig(), format=found.format,
                               source="existing")).side_suffixes
    manifest = Manifest(backend, dict(params), list(sides))
    backend.make_room(FOLDER)
    backend.put(NAMES_KEY, "\n".join(found.keys).encode())
    crcs = found.crcs if found.crcs is not None else np.zeros(len(found.keys), np.uint32)
    entries = {i: (int(size), int(crc), ()) for i, (size, crc) in
               enumerate(zip(found.sizes, crcs, strict=True))}
    manifest.compact(min_files=len(found.keys), extra=records(entries, len(sides)))


def writable(backend: Backend) -> bool:
    """Whether we can write into the folder (a read-only mount or permissions say no)."""
    probe = f".dliobench-probe-{os.getpid()}"
    try:
        backend.put(probe, b"")
        backend.delete(probe)
    except OSError:
        return False
    return True
