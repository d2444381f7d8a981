"""Data formats by name. Each module holds one format; modules load on first use."""

from __future__ import annotations

import importlib

from dliobench.config_schema import FORMATS, DatasetConfig
from dliobench.errors import ConfigError
from dliobench.formats.base import ByteRange, Format

_MODULES = {name: f"dliobench.formats.{name}" for name in FORMATS}


def get_format(name: str) -> Format:
    """The format registered under ``name``."""
    if name not in _MODULES:
        raise ConfigError(f"dataset.format: unknown format '{name}'; known: {', '.join(_MODULES)}")
    module = importlib.import_module(_MODULES[name])
    fmt: Format = module.FORMAT
    return fmt


def format_for(dataset: DatasetConfig) -> Format:
    """The format of a dataset, with its options (HDF5 chunking and compression)."""
    hdf5_options = dataset.enable_chunking or dataset.compression != "none"
    if dataset.format == "hdf5" and hdf5_options:
        from dliobench.formats.hdf5 import Hdf5Format

        compressed = dataset.compression != "none"
        return Hdf5Format.from_options(
            enable_chunking=dataset.enable_chunking, chunk_size=dataset.chunk_size,
            compression=dataset.compression, compression_level=dataset.compression_level,
            chunk_samples=1 if compressed and not dataset.enable_chunking else 0)
    if hdf5_options:
        raise ConfigError("dataset.enable_chunking and dataset.compression apply to the hdf5 "
                          f"format only, not {dataset.format}")
    return get_format(dataset.format)


__all__ = ["ByteRange", "Format", "format_for", "get_format"]
