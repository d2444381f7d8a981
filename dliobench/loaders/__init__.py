"""Loaders by name (``reader.data_loader``)."""

from __future__ import annotations

from dliobench.config_schema import Config
from dliobench.errors import ConfigError
from dliobench.formats import format_for
from dliobench.layout import DataFile, train_dir
from dliobench.loaders.base import Batch, Loader, SampleReader
from dliobench.sharding import ShardSpec


def make_loader(config: Config, files: list[DataFile], sizes: list[int],
                spec: ShardSpec | None = None) -> Loader:
    """The loader the configuration names, reading ``files`` (with on-disk ``sizes``).

    ``spec`` (this rank's sharding) is for loaders that shard by themselves (DALI's readers).
    """
    reader_cfg = config.reader
    root = train_dir(config.dataset)
    reader = SampleReader(format_for(config.dataset), [root / f.relpath for f in files],
                          sizes, config.dataset.num_samples_per_file,
                          config.dataset.record_length_bytes_resize, reader_cfg.odirect)
    if reader_cfg.data_loader == "native":
        from dliobench.loaders.native import NativeLoader

        return NativeLoader(reader, reader_cfg.batch_size, reader_cfg.read_threads,
                            reader_cfg.prefetch_size, reader_cfg.drop_last)
    if reader_cfg.data_loader == "pytorch":
        from dliobench.loaders.pytorch import PyTorchLoader

        return PyTorchLoader(reader, reader_cfg.batch_size, reader_cfg.read_threads,
                             reader_cfg.prefetch_size, reader_cfg.drop_last,
                             reader_cfg.multiprocessing_context, reader_cfg.persistent_workers,
                             reader_cfg.pin_memory)
    if reader_cfg.data_loader == "dali":
        from dliobench.loaders.dali import DaliLoader

        return DaliLoader(reader, reader_cfg.batch_size, reader_cfg.read_threads,
                          reader_cfg.prefetch_size, reader_cfg.drop_last,
                          reader_cfg.multiprocessing_context,
                          native_reader=reader_cfg.dali_native_reader, spec=spec)
    raise ConfigError(f"reader.data_loader={reader_cfg.data_loader} is unknown; use native, "
                      "pytorch or dali")


__all__ = ["Batch", "Loader", "SampleReader", "make_loader"]
