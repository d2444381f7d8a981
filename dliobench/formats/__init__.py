"""Data formats by name: the registry owns the names. Each module holds one format and
exposes it as ``FORMAT``; modules load on first use.

A new format is one module here plus one line in ``REGISTRY`` and its name in
``dliobench.config.names`` (checked at import): the configuration's choices,
``dliobench keys`` and the contract test suites all read their list of formats from it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from dliobench.base.errors import ConfigError
from dliobench.config.names import FORMAT_NAMES, check_registry
from dliobench.formats.base import ByteRange, Format

if TYPE_CHECKING:
    from dliobench.config.schema import DatasetConfig

REGISTRY: dict[str, str] = {
    "npz": "dliobench.formats.npz",
    "npy": "dliobench.formats.npy",
    "hdf5": "dliobench.formats.hdf5",
    "tfrecord": "dliobench.formats.tfrecord",
    "jpeg": "dliobench.formats.jpeg",
    "png": "dliobench.formats.png",
    "indexed_binary": "dliobench.formats.indexed_binary",
    "parquet": "dliobench.formats.parquet",
}
FORMATS: tuple[str, ...] = tuple(REGISTRY)
check_registry("format", FORMAT_NAMES, REGISTRY)


def get_format(name: str) -> Format:
    """The format registered under ``name``, with its default options."""
    if name not in REGISTRY:
        raise ConfigError(f"dataset.format: unknown format '{name}'; known: {', '.join(REGISTRY)}")
    fmt: Format = importlib.import_module(REGISTRY[name]).FORMAT
    return fmt


def format_for(dataset: DatasetConfig, decoder: str = "pil") -> Format:
    """The format of a dataset, with the options its configuration sets (HDF5 chunking and
    compression, and ``reader.decoder`` for jpeg); the run's ``Plan`` is the one caller."""
    fmt = get_format(dataset.format).configured(dataset)
    with_decoder = getattr(fmt, "with_decoder", None)
    if decoder != "pil" and with_decoder is not None:  # config.rules: jpeg only
        fmt = with_decoder(decoder)
    return fmt


__all__ = ["FORMATS", "REGISTRY", "ByteRange", "Format", "format_for", "get_format"]
